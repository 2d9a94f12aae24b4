// Bundle splits (Pulsar's NamespaceBundleSplitAlgorithm and its implementations, the cut of
// NamespaceBundleFactory.splitBundles, and the modular load manager's BundleSplitterTask).
// Pure functions: the callers (the admin split route, the auto-split check) gather the topics
// and figures; ownership and the stores are NamespaceService's.
//
// Thread: any (no state).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace magnetar::broker::cluster {

// Pulsar's split algorithm names (NamespaceBundleSplitAlgorithm's constants).
enum class SplitAlgorithm {
  kRangeEquallyDivide,        // "range_equally_divide": the middle of the range
  kTopicCountEquallyDivide,   // "topic_count_equally_divide": half the topics on each side
  kSpecifiedPositionsDivide,  // "specified_positions_divide": the positions given
  kFlowOrQpsEquallyDivide,    // "flow_or_qps_equally_divide": cut where msg rate / bytes pile up
};
std::optional<SplitAlgorithm> splitAlgorithmByName(std::string_view name);
const char* splitAlgorithmName(SplitAlgorithm a);

// One topic of the bundle being split: its bundle hash (topicHash of its full name) and, for
// flow_or_qps_equally_divide, its rates in + out (msg/s, bytes/s).
struct SplitTopic {
  uint32_t hash = 0;
  double msgRate = 0;
  double throughput = 0;
};

struct SplitRequest {
  uint64_t lower = 0;  // the bundle's range [lower, upper)
  uint64_t upper = 0;
  // The bundle's topics (Pulsar's getOwnedTopicListForNamespaceBundle: stored persistent topics,
  // every partition of its partitioned topics, loaded non-persistent ones, in the bundle).
  std::vector<SplitTopic> topics;
  // specified_positions_divide: the positions asked for (the request body's splitBoundaries).
  std::vector<int64_t> positions;
  // flow_or_qps_equally_divide: loadBalancerNamespaceBundleMaxMsgRate (msg/s),
  // loadBalancerNamespaceBundleMaxBandwidthMbytes (MiB/s) and
  // flowOrQpsDifferenceThresholdPercentage.
  int64_t maxMsgRate = 30000;
  int64_t maxBandwidthMbytes = 100;
  int64_t diffThresholdPercentage = 10;
};

// The split points the algorithm picks (Pulsar's getSplitBoundary), ascending. Empty: no valid
// boundary, the split does nothing (Pulsar answers success and logs "No valid boundary found"):
// topic_count, specified_positions and flow_or_qps with fewer than 2 topics; no position inside
// the range; flow_or_qps under its thresholds (1 + diff) or with fewer than 2 busy topics.
// kInvalidArgument: specified_positions_divide without positions ("SplitBoundaries can't be
// empty").
Result<std::vector<uint64_t>> splitBoundaries(SplitAlgorithm a, const SplitRequest& r);

// The namespace's cut after splitting bundle `index` of `cut` at `at` (Pulsar's
// NamespaceBundleFactory.splitBundles with splitBoundaries). kInvalidArgument: a range of 1
// ("... bundle can't be split further") or a point not strictly inside the bundle ("The given
// fixed keys must between the key range of the ... bundle"); duplicates in `at` are dropped.
Result<std::vector<uint64_t>> cutAfterSplit(const std::vector<uint64_t>& cut, size_t index,
                                            const std::vector<uint64_t>& at);

// One bundle's figures, as the load report's NamespaceBundleStats carries them (a struct any
// source fills: this broker's topic stats now, the leader's aggregated load data later).
struct BundleLoad {
  int64_t topics = 0;
  int64_t producers = 0;
  int64_t consumers = 0;
  double msgRate = 0;     // in + out, msg/s
  double throughput = 0;  // in + out, bytes/s
};

struct SplitThresholds {
  int64_t maxTopics = 1000;              // loadBalancerNamespaceBundleMaxTopics
  int64_t maxSessions = 1000;            // loadBalancerNamespaceBundleMaxSessions (<= 0: off)
  int64_t maxMsgRate = 30000;            // loadBalancerNamespaceBundleMaxMsgRate
  int64_t maxBandwidthMbytes = 100;      // loadBalancerNamespaceBundleMaxBandwidthMbytes
  int64_t maxBundlesPerNamespace = 128;  // loadBalancerNamespaceMaximumBundles
};

// Pulsar's BundleSplitterTask.findBundlesToSplit: the bundles ("tenant/ns/0x..._0x...") past a
// threshold (topics > max, sessions > max when max > 0, msg rate > max, bytes/s > max MiB),
// skipping bundles of fewer than 2 topics, and no more per namespace than keeps its bundle count
// (bundleCount, from its current cut) below maxBundlesPerNamespace. Sorted by key.
std::vector<std::string> findBundlesToSplit(const std::map<std::string, BundleLoad>& bundles,
                                            const std::map<std::string, int>& bundleCount,
                                            const SplitThresholds& t);

}  // namespace magnetar::broker::cluster
