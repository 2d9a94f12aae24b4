#include "broker/cluster/load_shedding.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <regex>

#include "base/logging.h"

namespace magnetar::broker::cluster {

namespace {

constexpr double kMiB = 1024 * 1024;
// The margin below the threshold the Threshold and Overload shedders aim for
// (ADDITIONAL_THRESHOLD_PERCENT_MARGIN).
constexpr double kMargin = 0.05;
// UniformLoadShedder: a bundle a little larger than what is still wanted is taken too.
constexpr int64_t kUniformDelta = 1000;

// Java's (int) of a double: truncated, saturated, NaN 0.
int64_t javaInt(double v) {
  if (std::isnan(v)) return 0;
  return static_cast<int64_t>(
      std::clamp(std::trunc(v), static_cast<double>(INT_MIN), static_cast<double>(INT_MAX)));
}

double shortTermThroughput(const BundleData& d) {
  return d.shortTermData.msgThroughputIn + d.shortTermData.msgThroughputOut;
}

double shortTermMsgRate(const BundleData& d) {
  return d.shortTermData.msgRateIn + d.shortTermData.msgRateOut;
}

// The largest weighted signal of at most 100 % (getMaxResourceUsageWithWeightWithinLimit).
double usageWithinLimit(const LocalBrokerData& d, const SheddingSettings& s) {
  double max = 0;
  for (double v : {d.usage.cpu.percentUsage() * s.cpuWeight,
                   d.usage.directMemory.percentUsage() * s.directMemoryWeight,
                   d.usage.bandwidthIn.percentUsage() * s.bandwidthInWeight,
                   d.usage.bandwidthOut.percentUsage() * s.bandwidthOutWeight}) {
    if (v > max && v <= 100.0) max = v;
  }
  return max / 100;
}

// The broker's bundles the leader has data of, neither recently unloaded nor of a system
// namespace, with their figure (by `figure`), greatest first.
std::vector<std::pair<std::string, double>> candidates(const SheddingInput& in,
                                                       const LocalBrokerData& local,
                                                       double (*figure)(const BundleData&)) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [bundle, data] : in.bundles) {
    if (local.bundles.count(bundle) == 0 || in.recentlyUnloaded.count(bundle) > 0) continue;
    if (isSystemServiceNamespace(namespaceOfBundle(bundle))) continue;
    out.emplace_back(bundle, figure(data));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// The Threshold and Overload shedders' pick: the busiest bundles until `toOffload` bytes/s are
// covered, at least one; nothing with fewer than 2 bundles.
void pickUntilCovered(const SheddingInput& in, const std::string& broker,
                      const LocalBrokerData& local, double toOffload, BundlesToUnload* out) {
  if (local.bundles.size() <= 1) {
    if (local.bundles.size() == 1) {
      MLOG_WARN(
          "HIGH USAGE WARNING : Sole namespace bundle {} is overloading broker {}. No Load "
          "Shedding will be done on this broker",
          *local.bundles.begin(), broker);
    } else {
      MLOG_WARN("Broker {} is overloaded despite having no bundles", broker);
    }
    return;
  }
  double marked = 0;
  bool any = false;
  for (const auto& [bundle, throughput] : candidates(in, local, shortTermThroughput)) {
    if (marked < toOffload || !any) {
      out->emplace_back(broker, bundle);
      marked += throughput;
      any = true;
    }
  }
}

}  // namespace

std::optional<SheddingStrategy> sheddingStrategyByName(std::string_view className) {
  size_t dot = className.rfind('.');
  std::string_view simple = dot == std::string_view::npos ? className : className.substr(dot + 1);
  if (simple == "ThresholdShedder") return SheddingStrategy::kThreshold;
  if (simple == "OverloadShedder") return SheddingStrategy::kOverload;
  if (simple == "UniformLoadShedder") return SheddingStrategy::kUniform;
  return std::nullopt;
}

bool isSystemServiceNamespace(std::string_view ns) {
  static const std::regex kHeartbeat("pulsar/[^/]+/([^:]+:\\d+)");
  static const std::regex kHeartbeatV2("pulsar/([^:]+:\\d+)");
  static const std::regex kSla("[^/]+/[^/]+/([^:]+:\\d+)");
  std::string s(ns);
  return std::regex_match(s, kHeartbeat) || std::regex_match(s, kHeartbeatV2) ||
         std::regex_match(s, kSla);
}

std::string namespaceOfBundle(const std::string& bundle) {
  size_t slash = bundle.rfind('/');
  return slash == std::string::npos ? std::string() : bundle.substr(0, slash);
}

double ThresholdShedder::averageUsage(const std::string& broker) const {
  auto it = avgUsage_.find(broker);
  return it == avgUsage_.end() ? 0 : it->second;
}

double ThresholdShedder::updateAverages(const SheddingInput& in, const SheddingSettings& s) {
  const double h = s.historyResourcePercentage;
  double total = 0;
  for (const auto& [broker, local] : in.brokers) {
    double now = local.maxResourceUsageWithWeight(s.cpuWeight, s.directMemoryWeight,
                                                  s.bandwidthInWeight, s.bandwidthOutWeight);
    if (now > 1.0) {
      MLOG_ERROR(
          "{} broker resourceUsage is bigger than 100%. Some of the resource limits are "
          "mis-configured; the signals above 100% are skipped",
          broker);
      now = usageWithinLimit(local, s);
    }
    auto it = avgUsage_.find(broker);
    double avg = it == avgUsage_.end() ? now : it->second * h + (1 - h) * now;
    avgUsage_[broker] = avg;
    total += avg;
  }
  return in.brokers.empty() ? 0 : total / static_cast<double>(in.brokers.size());
}

void ThresholdShedder::tryLowerBoundaryShedding(const SheddingInput& in, const SheddingSettings& s,
                                                BundlesToUnload* out) {
  const double threshold = s.brokerThresholdShedderPercentage / 100.0;
  const double mean = updateAverages(in, s);
  const std::string* busiest = nullptr;
  double max = mean - threshold;
  bool anyBelow = false;
  for (const auto& [broker, local] : in.brokers) {
    const double usage = averageUsage(broker);
    if (usage > max && local.bundles.size() > 1) {
      max = usage;
      busiest = &broker;
    }
    anyBelow = anyBelow || usage < mean - threshold;
  }
  if (!anyBelow || busiest == nullptr) return;
  const LocalBrokerData& local = in.brokers.at(*busiest);
  double toOffload = (local.msgThroughputIn + local.msgThroughputOut) * threshold * 0.5;
  if (s.bundleUnloadMinThroughputThreshold * kMiB > toOffload) return;
  MLOG_INFO(
      "Lower boundary shedding on {} ({}% against a mean of {}%): offloading at least {} "
      "MByte/s of traffic",
      *busiest, 100 * max, 100 * mean, toOffload / kMiB);
  pickUntilCovered(in, *busiest, local, toOffload, out);
}

BundlesToUnload ThresholdShedder::findBundlesForUnloading(const SheddingInput& in,
                                                          const SheddingSettings& s) {
  BundlesToUnload out;
  const double threshold = s.brokerThresholdShedderPercentage / 100.0;
  const double minThroughput = s.bundleUnloadMinThroughputThreshold * kMiB;
  const double mean = updateAverages(in, s);
  if (mean == 0) {
    MLOG_WARN("average max resource usage is 0");
    return out;
  }
  for (const auto& [broker, local] : in.brokers) {
    const double usage = averageUsage(broker);
    if (usage < mean + threshold) continue;
    double share = usage - mean - threshold + kMargin;
    double throughput = local.msgThroughputIn + local.msgThroughputOut;
    double toOffload = throughput * share;
    if (toOffload < minThroughput) continue;
    MLOG_INFO(
        "Attempting to shed load on {}, which has max resource usage above avgUsage and "
        "threshold {}% > {}% + {}% -- Offloading at least {} MByte/s of traffic",
        broker, 100 * usage, 100 * mean, 100 * threshold, toOffload / kMiB);
    pickUntilCovered(in, broker, local, toOffload, &out);
  }
  if (out.empty() && s.lowerBoundarySheddingEnabled) tryLowerBoundaryShedding(in, s, &out);
  return out;
}

BundlesToUnload overloadShedder(const SheddingInput& in, const SheddingSettings& s) {
  BundlesToUnload out;
  const double threshold = s.brokerOverloadedThresholdPercentage / 100.0;
  for (const auto& [broker, local] : in.brokers) {
    const double usage = local.maxResourceUsage();
    if (usage < threshold) continue;
    double throughput = local.msgThroughputIn + local.msgThroughputOut;
    double toOffload = throughput * (usage - threshold + kMargin);
    MLOG_INFO(
        "Attempting to shed load on {}, which has resource usage {}% above threshold {}% -- "
        "Offloading at least {} MByte/s of traffic",
        broker, 100 * usage, 100 * threshold, toOffload / kMiB);
    pickUntilCovered(in, broker, local, toOffload, &out);
  }
  return out;
}

namespace {

struct Extremes {
  std::string maxRateBroker, maxThroughputBroker;
  double maxRate = -1, maxThroughput = -1;
  double minRate = INT_MAX, minThroughput = INT_MAX;
};

Extremes extremesOf(const std::map<std::string, LocalBrokerData>& brokers) {
  Extremes e;
  for (const auto& [broker, d] : brokers) {
    double rate = d.msgRateIn + d.msgRateOut;
    double throughput = d.msgThroughputIn + d.msgThroughputOut;
    if (rate > e.maxRate) {
      e.maxRateBroker = broker;
      e.maxRate = rate;
    }
    if (throughput > e.maxThroughput) {
      e.maxThroughputBroker = broker;
      e.maxThroughput = throughput;
    }
    e.minRate = std::min(e.minRate, rate);
    e.minThroughput = std::min(e.minThroughput, throughput);
  }
  constexpr double kEps = 1e-6;
  if (std::abs(e.minRate) <= kEps) e.minRate = 1.0;
  if (std::abs(e.minThroughput) <= kEps) e.minThroughput = 1.0;
  return e;
}

// The uniform shedder's pick on `broker`: bundles by `figure`, each at most what is still
// wanted + kUniformDelta (Pulsar keeps the amount in an int).
void pickUniform(const SheddingInput& in, const SheddingSettings& s, const std::string& broker,
                 int64_t wanted, int64_t minimum, double (*figure)(const BundleData&),
                 BundlesToUnload* out) {
  auto it = in.brokers.find(broker);
  if (it == in.brokers.end() || it->second.bundles.size() <= 1 || wanted < minimum) return;
  for (const auto& [bundle, value] : candidates(in, it->second, figure)) {
    if (value <= 0) continue;
    if (s.maxUnloadBundleNumPerShedding != -1 &&
        static_cast<int64_t>(out->size()) >= s.maxUnloadBundleNumPerShedding) {
      return;
    }
    if (value <= static_cast<double>(wanted + kUniformDelta)) {
      MLOG_INFO("Found bundle to unload from {} with {} {}", broker,
                figure == shortTermMsgRate ? "msgRate" : "msgThroughput", value);
      wanted -= javaInt(value);
      out->emplace_back(broker, bundle);
    }
  }
}

}  // namespace

BundlesToUnload uniformLoadShedder(const SheddingInput& in, const SheddingSettings& s) {
  BundlesToUnload out;
  if (in.brokers.empty()) return out;
  Extremes e = extremesOf(in.brokers);
  double rateDiffPercent = (e.maxRate - e.minRate) * 100 / e.minRate;
  double throughputMultiplier = e.maxThroughput / e.minThroughput;
  bool rateExceeded = s.msgRateDifferenceShedderThreshold > 0 &&
                      rateDiffPercent > s.msgRateDifferenceShedderThreshold;
  bool throughputExceeded =
      s.msgThroughputMultiplierDifferenceShedderThreshold > 0 &&
      throughputMultiplier > s.msgThroughputMultiplierDifferenceShedderThreshold;
  if (rateExceeded) {
    int64_t wanted = javaInt((e.maxRate - e.minRate) * s.maxUnloadPercentage);
    pickUniform(in, s, e.maxRateBroker, wanted, s.minUnloadMessage, shortTermMsgRate, &out);
  } else if (throughputExceeded) {
    int64_t wanted = javaInt((e.maxThroughput - e.minThroughput) * s.maxUnloadPercentage);
    pickUniform(in, s, e.maxThroughputBroker, wanted, s.minUnloadMessageThroughput,
                shortTermThroughput, &out);
  }
  return out;
}

std::map<std::string, BundleLoad> bundleLoadsForSplit(
    const std::map<std::string, LocalBrokerData>& reports,
    const std::map<std::string, BundleData>& bundles, std::map<std::string, std::string>* owners) {
  std::map<std::string, BundleLoad> out;
  for (const auto& [broker, report] : reports) {
    for (const auto& [bundle, stats] : report.lastStats) {
      BundleLoad& l = out[bundle];
      l.topics = stats.topics;
      l.producers = stats.producerCount;
      l.consumers = stats.consumerCount;
      auto it = bundles.find(bundle);
      if (it != bundles.end()) {
        const TimeAverageMessageData& t = it->second.longTermData;
        l.msgRate = t.msgRateIn + t.msgRateOut;
        l.throughput = t.msgThroughputIn + t.msgThroughputOut;
      }
      if (owners) (*owners)[bundle] = broker;
    }
  }
  return out;
}

}  // namespace magnetar::broker::cluster
