#include "broker/cluster/bundle_split.h"

#include <algorithm>
#include <set>

#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace {

constexpr struct {
  SplitAlgorithm algorithm;
  const char* name;
} kAlgorithms[] = {
    {SplitAlgorithm::kRangeEquallyDivide, "range_equally_divide"},
    {SplitAlgorithm::kTopicCountEquallyDivide, "topic_count_equally_divide"},
    {SplitAlgorithm::kSpecifiedPositionsDivide, "specified_positions_divide"},
    {SplitAlgorithm::kFlowOrQpsEquallyDivide, "flow_or_qps_equally_divide"},
};

constexpr double kMiB = 1024.0 * 1024.0;

// TopicCountEquallyDivideBundleSplitAlgorithm: between the two middle hashes.
std::vector<uint64_t> topicCountBoundary(const SplitRequest& r) {
  if (r.topics.size() <= 1) return {};
  std::vector<uint64_t> hashes;
  hashes.reserve(r.topics.size());
  for (const auto& t : r.topics) hashes.push_back(t.hash);
  std::sort(hashes.begin(), hashes.end());
  size_t half = hashes.size() / 2;
  uint64_t start = hashes[half >= 1 ? half - 1 : 0];
  uint64_t end = hashes[half];
  return {start + (end - start) / 2};
}

// SpecifiedPositionsBundleSplitAlgorithm: the positions strictly inside the range.
std::vector<uint64_t> specifiedBoundaries(const SplitRequest& r) {
  if (r.topics.size() <= 1) return {};
  std::vector<int64_t> p = r.positions;
  std::sort(p.begin(), p.end());
  std::vector<uint64_t> out;
  for (int64_t v : p) {
    if (v > static_cast<int64_t>(r.lower) && v < static_cast<int64_t>(r.upper)) {
      out.push_back(static_cast<uint64_t>(v));
    }
  }
  return out;
}

// FlowOrQpsEquallyDivideBundleSplitAlgorithm (Pulsar 4.2): topics by hash, a cut before the
// topic that would take the running sum past a threshold, one above the middle of the two hashes.
// As Pulsar, topics are keyed by hash (the last of equal hashes wins), the list keeps them all.
std::vector<uint64_t> flowOrQpsBoundaries(const SplitRequest& r) {
  if (r.topics.size() <= 1) return {};
  const double maxRate = static_cast<double>(r.maxMsgRate);
  const double maxBytes = static_cast<double>(r.maxBandwidthMbytes) * kMiB;
  const double diff = static_cast<double>(r.diffThresholdPercentage) / 100.0;
  std::map<uint64_t, const SplitTopic*> byHash;
  std::vector<uint64_t> hashes;
  double rate = 0, bytes = 0;
  for (const auto& t : r.topics) {
    if (t.msgRate <= 0 && t.throughput <= 0) continue;  // an idle topic
    hashes.push_back(t.hash);
    byHash[t.hash] = &t;
    rate += t.msgRate;
    bytes += t.throughput;
  }
  if (byHash.size() < 2 || (rate < maxRate * (1 + diff) && bytes < maxBytes * (1 + diff))) {
    return {};
  }
  std::sort(hashes.begin(), hashes.end());
  std::vector<uint64_t> out;
  double runRate = byHash[hashes[0]]->msgRate;
  double runBytes = byHash[hashes[0]]->throughput;
  for (size_t i = 1; i < hashes.size(); ++i) {
    const SplitTopic& t = *byHash[hashes[i]];
    if (runRate > maxRate || runBytes > maxBytes || runRate + t.msgRate > maxRate ||
        runBytes + t.throughput > maxBytes) {
      uint64_t start = hashes[i - 1];
      out.push_back(start + (hashes[i] - start) / 2 + 1);
      runRate = t.msgRate;
      runBytes = t.throughput;
    } else {
      runRate += t.msgRate;
      runBytes += t.throughput;
    }
  }
  return out;
}

}  // namespace

std::optional<SplitAlgorithm> splitAlgorithmByName(std::string_view name) {
  for (const auto& a : kAlgorithms) {
    if (name == a.name) return a.algorithm;
  }
  return std::nullopt;
}

const char* splitAlgorithmName(SplitAlgorithm a) {
  for (const auto& k : kAlgorithms) {
    if (k.algorithm == a) return k.name;
  }
  return "";
}

Result<std::vector<uint64_t>> splitBoundaries(SplitAlgorithm a, const SplitRequest& r) {
  switch (a) {
    case SplitAlgorithm::kRangeEquallyDivide:
      return std::vector<uint64_t>{r.lower + (r.upper - r.lower) / 2};
    case SplitAlgorithm::kTopicCountEquallyDivide:
      return topicCountBoundary(r);
    case SplitAlgorithm::kSpecifiedPositionsDivide:
      if (r.positions.empty()) return Status::invalidArgument("SplitBoundaries can't be empty");
      return specifiedBoundaries(r);
    case SplitAlgorithm::kFlowOrQpsEquallyDivide:
      return flowOrQpsBoundaries(r);
  }
  return Status::invalidArgument("unknown split algorithm");
}

Result<std::vector<uint64_t>> cutAfterSplit(const std::vector<uint64_t>& cut, size_t index,
                                            const std::vector<uint64_t>& at) {
  if (index + 1 >= cut.size()) return Status::invalidArgument("no such bundle in the cut");
  uint64_t lo = cut[index];
  uint64_t hi = cut[index + 1];
  std::string name = bundleName(lo, hi);
  if (hi - lo <= 1) return Status::invalidArgument(name + " bundle can't be split further");
  std::set<uint64_t> points(at.begin(), at.end());
  if (points.empty()) return Status::invalidArgument("no split boundary for " + name);
  for (uint64_t p : points) {
    if (p <= lo || p >= hi) {
      return Status::invalidArgument("The given fixed keys must between the key range of the " +
                                     name + " bundle");
    }
  }
  std::vector<uint64_t> out(cut.begin(), cut.begin() + static_cast<std::ptrdiff_t>(index) + 1);
  out.insert(out.end(), points.begin(), points.end());
  out.insert(out.end(), cut.begin() + static_cast<std::ptrdiff_t>(index) + 1, cut.end());
  return out;
}

std::vector<std::string> findBundlesToSplit(const std::map<std::string, BundleLoad>& bundles,
                                            const std::map<std::string, int>& bundleCount,
                                            const SplitThresholds& t) {
  const double maxBytes = static_cast<double>(t.maxBandwidthMbytes) * kMiB;
  std::map<std::string, int> planned;  // per namespace, this round
  std::vector<std::string> out;
  for (const auto& [key, s] : bundles) {
    if (s.topics < 2) continue;
    bool hot = s.topics > t.maxTopics ||
               (t.maxSessions > 0 && s.consumers + s.producers > t.maxSessions) ||
               s.msgRate > static_cast<double>(t.maxMsgRate) || s.throughput > maxBytes;
    if (!hot) continue;
    size_t slash = key.rfind('/');
    if (slash == std::string::npos) continue;
    std::string ns = key.substr(0, slash);
    auto c = bundleCount.find(ns);
    int count = c == bundleCount.end() ? 1 : c->second;
    if (count + planned[ns] >= t.maxBundlesPerNamespace) continue;
    ++planned[ns];
    out.push_back(key);
  }
  return out;
}

}  // namespace magnetar::broker::cluster
