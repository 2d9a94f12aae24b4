// The modular load manager's data (Pulsar's org.apache.pulsar.policies.data.loadbalancer): what a
// broker reports of itself (LocalBrokerData, with per-bundle NamespaceBundleStats and the host's
// ResourceUsage) and what the leader derives from the reports (BundleData with its short and
// long term TimeAverageMessageData, TimeAverageBrokerData). Plain values with Pulsar's update
// arithmetic; JSON with Pulsar 4.2.4's field names and order (Jackson, nulls left out), as in
// docs/load-balance-format.md. Thread: none (values); callers own their copies.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "base/status.h"
#include "broker/cluster/cluster_metadata.h"

namespace magnetar::broker::cluster {

// Samples of BundleData's windows (ModularLoadManagerImpl.NUM_SHORT_SAMPLES / NUM_LONG_SAMPLES;
// constants in Pulsar, not settings).
inline constexpr int kNumShortSamples = 10;
inline constexpr int kNumLongSamples = 1000;
// What the leader assumes of a bundle never sampled (ModularLoadManagerImpl.DEFAULT_MESSAGE_RATE
// and DEFAULT_MESSAGE_THROUGHPUT): 50 msg/s and 50000 bytes/s each way.
inline constexpr double kDefaultMessageRate = 50;
inline constexpr double kDefaultMessageThroughput = 50000;

// One resource: usage and limit in the resource's unit (cpu: percent of one CPU, limit 100 per
// CPU; memory and directMemory: MiB; bandwidth: Kbit/s).
struct ResourceUsage {
  double usage = 0;
  double limit = 0;
  // usage / limit in percent, 0 when limit <= 0 (Pulsar computes it in float).
  double percentUsage() const;
  bool operator==(const ResourceUsage&) const = default;
};

// The host's figures (SystemResourceUsage).
struct SystemResourceUsage {
  ResourceUsage cpu;
  ResourceUsage memory;
  ResourceUsage directMemory;
  ResourceUsage bandwidthIn;
  ResourceUsage bandwidthOut;
  bool operator==(const SystemResourceUsage&) const = default;
};

// One bundle's traffic on its owner (rates per second, throughput in bytes per second).
struct NamespaceBundleStats {
  double msgRateIn = 0;
  double msgThroughputIn = 0;
  double msgRateOut = 0;
  double msgThroughputOut = 0;
  int32_t consumerCount = 0;
  int32_t producerCount = 0;
  int64_t topics = 0;
  int64_t cacheSize = 0;  // bytes in the entry cache
  bool operator==(const NamespaceBundleStats&) const = default;
};
// By bundle name "tenant/ns/0x..._0x...".
using BundleStatsMap = std::map<std::string, NamespaceBundleStats>;

// The report at /loadbalance/brokers/{brokerId}.
struct LocalBrokerData {
  BrokerUrls urls;  // brokerId is the znode's name, not in the JSON
  bool persistentTopicsEnabled = true;
  bool nonPersistentTopicsEnabled = false;
  SystemResourceUsage usage;  // JSON: cpu, memory, directMemory, bandwidthIn, bandwidthOut
  double msgThroughputIn = 0;
  double msgThroughputOut = 0;
  double msgRateIn = 0;
  double msgRateOut = 0;
  int64_t lastUpdate = 0;  // ms since the epoch of the last write
  BundleStatsMap lastStats;
  int64_t numTopics = 0;
  int32_t numBundles = 0;
  int32_t numConsumers = 0;
  int32_t numProducers = 0;
  std::set<std::string> bundles;
  std::set<std::string> lastBundleGains;  // since the last write
  std::set<std::string> lastBundleLosses;
  std::string brokerVersionString;
  std::map<std::string, std::string> protocols;
  std::string loadManagerClassName;
  int64_t startTimestamp = 0;  // ms since the epoch

  // Pulsar's LocalBrokerData.update(SystemResourceUsage, Map): the usage replaced, the sums
  // recomputed from `stats`, bundles set to its keys; bundles that came or went are added to
  // lastBundleGains / lastBundleLosses.
  void update(const SystemResourceUsage& u, BundleStatsMap stats);
  void cleanDeltas();
  // max of the five percentUsage() / 100 (getMaxResourceUsage).
  double maxResourceUsage() const;
  // max(cpu * cpuW, directMemory * dmW, bwIn * inW, bwOut * outW) / 100 in Pulsar 4.2's
  // getMaxResourceUsageWithWeight (memory no longer counts).
  double maxResourceUsageWithWeight(double cpuW, double directMemoryW, double bandwidthInW,
                                    double bandwidthOutW) const;
  bool operator==(const LocalBrokerData&) const;
};

// TimeAverageMessageData: the running mean of up to maxSamples samples.
struct TimeAverageMessageData {
  int32_t maxSamples = 0;
  int32_t numSamples = 0;
  double msgThroughputIn = 0;
  double msgThroughputOut = 0;
  double msgRateIn = 0;
  double msgRateOut = 0;
  // Pulsar's update: numSamples = min(numSamples + 1, maxSamples), each mean
  // ((numSamples - 1) * mean + sample) / numSamples (the first sample replaces the defaults).
  void update(const NamespaceBundleStats& sample);
  bool operator==(const TimeAverageMessageData&) const = default;
};

// BundleData at /loadbalance/bundle-data/{bundle}.
struct BundleData {
  TimeAverageMessageData shortTermData;
  TimeAverageMessageData longTermData;
  int32_t topics = 0;
  // Windows of kNumShortSamples / kNumLongSamples starting from `defaults` (Pulsar's
  // BundleData(int, int, NamespaceBundleStats)).
  static BundleData withDefaults(const NamespaceBundleStats& defaults);
  void update(const NamespaceBundleStats& sample);
  // Pulsar's BundleData.compareTo: short term first, then long term; each by throughput in
  // (resolution 1e5 bytes/s), throughput out, then msg rate in+out (resolution 100). < 0: less.
  int compare(const BundleData& other) const;
  bool operator==(const BundleData&) const = default;
};

// The stats the leader assumes for an unseen bundle (kDefaultMessageRate/Throughput).
NamespaceBundleStats defaultBundleStats();

// TimeAverageBrokerData at /loadbalance/broker-time-average/{brokerId}: the sums of a broker's
// bundles' short and long term means.
struct TimeAverageBrokerData {
  double shortTermMsgThroughputIn = 0;
  double shortTermMsgThroughputOut = 0;
  double shortTermMsgRateIn = 0;
  double shortTermMsgRateOut = 0;
  double longTermMsgThroughputIn = 0;
  double longTermMsgThroughputOut = 0;
  double longTermMsgRateIn = 0;
  double longTermMsgRateOut = 0;
  // Pulsar's reset(bundles, data, defaultStats): a bundle missing from `data` counts as
  // `defaults` in both terms.
  void reset(const std::set<std::string>& bundles, const std::map<std::string, BundleData>& data,
             const NamespaceBundleStats& defaults);
  bool operator==(const TimeAverageBrokerData&) const = default;
};

// JSON in Pulsar's field order; empty strings (TLS URLs, version, class name) are left out as
// Jackson leaves out nulls; LocalBrokerData also carries Pulsar's derived "maxResourceUsage"
// and "loadReportType":"LocalBrokerData".
std::string toJson(const LocalBrokerData& d);
std::string toJson(const BundleData& d);
std::string toJson(const TimeAverageBrokerData& d);
std::string toJson(const NamespaceBundleStats& s);

// Parsers: kCorruption naming `path` when the value is not a JSON object (LocalBrokerData: also
// without pulsarServiceUrl(Tls)); a field missing or of another type keeps its default (a
// report of another Pulsar version parses).
Result<LocalBrokerData> parseLoadReport(std::string_view json, const std::string& path);
Result<BundleData> parseBundleData(std::string_view json, const std::string& path);
Result<TimeAverageBrokerData> parseTimeAverageBrokerData(std::string_view json,
                                                         const std::string& path);

// Pulsar's znode roots.
inline constexpr std::string_view kBundleDataRoot = "/loadbalance/bundle-data";
inline constexpr std::string_view kBrokerTimeAverageRoot = "/loadbalance/broker-time-average";

}  // namespace magnetar::broker::cluster
