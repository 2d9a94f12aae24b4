// The modular load manager's decisions on the leader's load data: which bundles to unload
// (Pulsar's LoadSheddingStrategy implementations ThresholdShedder, OverloadShedder and
// UniformLoadShedder) and which bundles pass the auto-split thresholds (BundleSplitterTask over
// LoadData). Pure functions (ThresholdShedder keeps its per-broker history, as Pulsar's object);
// the LoadManager (load_report.h) feeds them the reports and BundleData and acts on the answer.
//
// Thread: none (values); a ThresholdShedder is used from one thread (`pulsar-load-manager`).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker/cluster/bundle_split.h"
#include "broker/cluster/load_data.h"
#include "setting_defaults.h"

namespace magnetar::broker::cluster {

// Pulsar's loadBalancerLoadSheddingStrategy class names.
enum class SheddingStrategy { kThreshold, kOverload, kUniform };
// The fully qualified class name (org.apache.pulsar.broker.loadbalance.impl.X) or the simple
// name; nullopt for another strategy (AvgShedder, ... not implemented).
std::optional<SheddingStrategy> sheddingStrategyByName(std::string_view className);

// The settings the strategies read (Pulsar's names; defaults Pulsar's).
struct SheddingSettings {
  int32_t brokerThresholdShedderPercentage =
      setting_defaults::loadBalancerBrokerThresholdShedderPercentage;
  double historyResourcePercentage = setting_defaults::loadBalancerHistoryResourcePercentage;
  bool lowerBoundarySheddingEnabled = setting_defaults::lowerBoundarySheddingEnabled;
  double bundleUnloadMinThroughputThreshold =  // MiB/s
      setting_defaults::loadBalancerBundleUnloadMinThroughputThreshold;
  double cpuWeight = setting_defaults::loadBalancerCPUResourceWeight;
  double directMemoryWeight = setting_defaults::loadBalancerDirectMemoryResourceWeight;
  double bandwidthInWeight = setting_defaults::loadBalancerBandwidthInResourceWeight;
  double bandwidthOutWeight = setting_defaults::loadBalancerBandwidthOutResourceWeight;
  int32_t brokerOverloadedThresholdPercentage =
      setting_defaults::loadBalancerBrokerOverloadedThresholdPercentage;
  double msgRateDifferenceShedderThreshold =  // percent
      setting_defaults::loadBalancerMsgRateDifferenceShedderThreshold;
  double msgThroughputMultiplierDifferenceShedderThreshold =
      setting_defaults::loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold;
  double maxUnloadPercentage = setting_defaults::maxUnloadPercentage;
  int32_t maxUnloadBundleNumPerShedding = setting_defaults::maxUnloadBundleNumPerShedding;
  int32_t minUnloadMessage = setting_defaults::minUnloadMessage;                      // msg/s
  int32_t minUnloadMessageThroughput = setting_defaults::minUnloadMessageThroughput;  // bytes/s
};

// What a strategy reads (Pulsar's LoadData): every broker's last report by broker id, the
// aggregated BundleData by bundle name, and the bundles unloaded recently (bundle -> ms).
struct SheddingInput {
  std::map<std::string, LocalBrokerData> brokers;
  std::map<std::string, BundleData> bundles;
  std::map<std::string, int64_t> recentlyUnloaded;
};

// The picks: (broker id, bundle name) in the order chosen, grouped by broker (Pulsar's
// Multimap<broker, bundle>).
using BundlesToUnload = std::vector<std::pair<std::string, std::string>>;

// A heartbeat or SLA-monitor namespace ("pulsar/{cluster}/{host:port}", "pulsar/{host:port}",
// "{tenant}/{cluster}/{host:port}"), never shed (Pulsar's isSystemServiceNamespace).
bool isSystemServiceNamespace(std::string_view ns);
// "tenant/ns" of "tenant/ns/0x..._0x..." (the text before the last '/').
std::string namespaceOfBundle(const std::string& bundle);

// ThresholdShedder (Pulsar's default): each broker's usage is the weighted max resource usage
// (LocalBrokerData::maxResourceUsageWithWeight; above 100 %: the largest signal of at most
// 100 %) averaged with its history (historyResourcePercentage x old + (1 - it) x now, the first
// time now; kept in this object across calls); a broker at or above the mean +
// brokerThresholdShedderPercentage sheds its busiest bundles (short-term
// throughput in + out, not recently unloaded, not of a system namespace) until
// throughput x (usage - mean - threshold + 5 %) is covered, at least one; not when that amount is
// below bundleUnloadMinThroughputThreshold MiB/s or the broker has a single bundle.
// With lowerBoundarySheddingEnabled and nothing picked: tryLowerBoundaryShedding.
class ThresholdShedder {
 public:
  BundlesToUnload findBundlesForUnloading(const SheddingInput& in, const SheddingSettings& s);
  // The history of a broker (0 when unseen); for tests and logs.
  double averageUsage(const std::string& broker) const;

 private:
  // Pulsar 4.2's lower-boundary shedding: the histories are averaged in once more (Pulsar's
  // second getBrokerAvgUsage); when some broker is below mean - threshold, the broker of the
  // highest history above mean - threshold with more than one bundle sheds its busiest bundles
  // until throughput x threshold x 0.5 is covered (at least one; nothing when that is under
  // bundleUnloadMinThroughputThreshold MiB/s).
  void tryLowerBoundaryShedding(const SheddingInput& in, const SheddingSettings& s,
                                BundlesToUnload* out);
  // Averages each broker's weighted max usage into its history; the mean of the histories.
  double updateAverages(const SheddingInput& in, const SheddingSettings& s);

  std::map<std::string, double> avgUsage_;
};

// OverloadShedder: a broker whose max resource usage (LocalBrokerData::maxResourceUsage) is at
// least brokerOverloadedThresholdPercentage sheds its busiest bundles (short-term throughput)
// until throughput x (usage - threshold + 5 %) is covered, at least one; not with one bundle.
BundlesToUnload overloadShedder(const SheddingInput& in, const SheddingSettings& s);

// UniformLoadShedder: between the brokers of highest and lowest msg rate (in + out) and
// throughput, when (max - min) x 100 / min (min 0 counts as 1) exceeds
// msgRateDifferenceShedderThreshold, the busiest broker's bundles by short-term msg rate each
// <= the rate still wanted + 1000 are picked while (max - min) x maxUnloadPercentage is wanted
// (at least minUnloadMessage); else, when max / min throughput exceeds
// msgThroughputMultiplierDifferenceShedderThreshold, the same by throughput (minimum
// minUnloadMessageThroughput). At most maxUnloadBundleNumPerShedding picks (-1: no limit); a
// threshold <= 0 is off; not with one bundle.
BundlesToUnload uniformLoadShedder(const SheddingInput& in, const SheddingSettings& s);

// The auto split's settings (loadBalancerAutoBundleSplitEnabled,
// loadBalancerAutoUnloadSplitBundlesEnabled, the loadBalancerNamespaceBundleMax* thresholds).
struct AutoSplitSettings {
  bool enabled = setting_defaults::loadBalancerAutoBundleSplitEnabled;
  bool unloadSplitBundles = setting_defaults::loadBalancerAutoUnloadSplitBundlesEnabled;
  SplitThresholds thresholds;
};

// BundleSplitterTask's figures from the leader's data: per bundle of every report, topics and
// sessions (consumers + producers) from the report's lastStats, msg rate and throughput from
// the bundle's long-term BundleData (0 when the leader has none yet). `owners` (optional) gets
// each bundle's reporting broker.
std::map<std::string, BundleLoad> bundleLoadsForSplit(
    const std::map<std::string, LocalBrokerData>& reports,
    const std::map<std::string, BundleData>& bundles,
    std::map<std::string, std::string>* owners = nullptr);

}  // namespace magnetar::broker::cluster
