// Placement of an unowned bundle by the leader (Pulsar 4.2's ModularLoadManagerImpl.selectBroker
// with its default strategy LeastLongTermMessageRate, and LoadManagerShared's filters): pure
// functions over the leader's view of the brokers (reports, time averages, preallocated
// bundles), the namespace isolation policies and the anti-affinity groups; no I/O. The caller
// (NamespaceService::assignAsLeader) reads the inputs. Also the isolation policies' JSON
// (NamespaceIsolationDataImpl, znode /admin/clusters/{cluster}/namespaceIsolationPolicies).
// Thread: none (values).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/cluster/load_data.h"
#include "setting_defaults.h"

namespace magnetar::broker::cluster {

// loadBalancerLoadPlacementStrategy: the only strategy Magnetar has (Pulsar's default).
inline constexpr std::string_view kLeastLongTermMessageRate =
    "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate";

// The settings placement reads (dynamic: taken at each assignment). Defaults: Pulsar's.
struct PlacementSettings {
  // loadBalancerLoadPlacementStrategy: selectBroker uses kLeastLongTermMessageRate whatever this
  // says (NamespaceService logs another class name).
  std::string strategy = std::string(kLeastLongTermMessageRate);
  int32_t overloadedThresholdPercentage =
      setting_defaults::loadBalancerBrokerOverloadedThresholdPercentage;
  int32_t brokerMaxTopics = setting_defaults::loadBalancerBrokerMaxTopics;
  bool distributeBundlesEvenly = setting_defaults::loadBalancerDistributeBundlesEvenlyEnabled;
  // loadBalancerSheddingExcludedNamespaces ("tenant/ns"): their bundles are placed round robin.
  std::set<std::string> sheddingExcludedNamespaces;
  // LeastLongTermMessageRate's overload test: Pulsar passes the five weights with the
  // deprecated "Bandwith" spelling and the memory weight.
  double cpuWeight = setting_defaults::loadBalancerCPUResourceWeight;
  double memoryWeight = setting_defaults::loadBalancerMemoryResourceWeight;
  double directMemoryWeight = setting_defaults::loadBalancerDirectMemoryResourceWeight;
  double bandwithInWeight = setting_defaults::loadBalancerBandwithInResourceWeight;
  double bandwithOutWeight = setting_defaults::loadBalancerBandwithOutResourceWeight;
  // selectBroker's final overload test (four weights, "Bandwidth" spelling, no memory).
  double bandwidthInWeight = setting_defaults::loadBalancerBandwidthInResourceWeight;
  double bandwidthOutWeight = setting_defaults::loadBalancerBandwidthOutResourceWeight;
};

// One broker as the leader sees it (Pulsar's BrokerData).
struct BrokerLoad {
  LocalBrokerData local;              // its report (/loadbalance/brokers/{id})
  TimeAverageBrokerData timeAverage;  // the leader's sums of its bundles' means
  // Bundles given to it but not in its report yet, with their BundleData.
  std::map<std::string, BundleData> preallocated;
};
using BrokerLoads = std::map<std::string, BrokerLoad>;  // by broker id "host:port"

// NamespaceIsolationDataImpl. auto_failover_policy: policy_type "min_available" with parameters
// min_limit and usage_threshold (integers as strings), the only type Pulsar has.
struct NamespaceIsolationPolicy {
  std::vector<std::string> namespaces;  // regexes over "tenant/ns" (whole match)
  std::vector<std::string> primary;     // regexes over the broker's host (whole match)
  std::vector<std::string> secondary;
  std::string policyType = "min_available";
  std::map<std::string, std::string> parameters;
  std::string unloadScope;  // Pulsar 4's unload_scope ("" when none), kept as given
  // MinAvailablePolicy.shouldFailoverToSecondary: fewer primaries than min_limit.
  bool shouldFailover(size_t primaries) const;
  bool matchesNamespace(const std::string& ns) const;
  bool isPrimary(const std::string& host) const;
  bool isSecondary(const std::string& host) const;
};
// By policy name (the znode's JSON object).
using NamespaceIsolationPolicies = std::map<std::string, NamespaceIsolationPolicy>;

// The znode of a cluster's policies in the configuration store:
// /admin/clusters/{cluster}/namespaceIsolationPolicies.
std::string isolationPoliciesPath(const std::string& cluster);

// namespaceAntiAffinityGroup of a LocalPolicies JSON (/admin/local-policies/{tenant}/{ns});
// "" when none or not JSON.
std::string antiAffinityGroupOf(std::string_view localPolicies);
// LocalPolicies `base` with namespaceAntiAffinityGroup set to `group` (nullopt: removed), in
// Pulsar's field order (bundles, bookieAffinityGroup, namespaceAntiAffinityGroup, migrated),
// other fields kept. base "" (none yet): bundles from `boundaries`, migrated false (Pulsar's
// setNamespaceAntiAffinityGroup on a namespace without LocalPolicies).
std::string localPoliciesWithAntiAffinityGroup(const std::string& base,
                                               const std::vector<uint64_t>& boundaries,
                                               const std::optional<std::string>& group);

// One policy from the admin's body or the znode. kInvalidArgument with Pulsar's reasons: not a
// JSON object, namespaces or primary missing or empty, secondary missing, no
// auto_failover_policy, an unknown policy_type, min_limit / usage_threshold missing or not
// integers, a regex that does not compile.
Result<NamespaceIsolationPolicy> parseNamespaceIsolationData(std::string_view json);
// The znode's map; kCorruption naming `path` when it does not parse.
Result<NamespaceIsolationPolicies> parseNamespaceIsolationPolicies(std::string_view json,
                                                                   const std::string& path);
// Jackson's order: namespaces, primary, secondary, auto_failover_policy {parameters,
// policy_type}, unload_scope (when set).
std::string toJson(const NamespaceIsolationPolicy& p);
std::string toJson(const NamespaceIsolationPolicies& p);
// The policy that applies to namespace `ns` (the first matching one by name), or null.
const NamespaceIsolationPolicy* policyOf(const NamespaceIsolationPolicies& p,
                                         const std::string& ns);
// NamespaceIsolationPolicies.isSharedBroker: no policy names `host` primary.
bool isSharedBroker(const NamespaceIsolationPolicies& p, const std::string& host);
// "host" of a broker id "host:port".
std::string brokerHost(const std::string& brokerId);

// LoadManagerShared.applyNamespacePolicies: with a policy for `ns`, its primaries among
// `available`, plus its secondaries when the primaries are fewer than min_limit; without one,
// the shared brokers (no policy's primary) among those with persistent topics enabled.
std::set<std::string> applyNamespacePolicies(const std::string& ns,
                                             const NamespaceIsolationPolicies& policies,
                                             const std::set<std::string>& available,
                                             const BrokerLoads& loads);
// LoadManagerShared.filterBrokersWithLargeTopicCount: drops brokers whose topics (report plus
// preallocated bundles') exceed maxTopics, unless that drops them all.
void filterBrokersWithLargeTopicCount(std::set<std::string>& candidates, const BrokerLoads& loads,
                                      int64_t maxTopics);
// broker -> namespace -> its bundles (reported in lastStats or bundles, plus preallocated).
using BrokerNamespaces = std::map<std::string, std::map<std::string, std::set<std::string>>>;
BrokerNamespaces brokerNamespaces(const BrokerLoads& loads);
// getAntiAffinityNamespaceOwnedBrokers: per broker, how many of its namespaces are in `group`
// (case-insensitive, as Pulsar's equalsIgnoreCase); groupOf: namespace -> its group.
std::map<std::string, int> antiAffinityNamespaceCounts(
    const BrokerNamespaces& owned, const std::map<std::string, std::string>& groupOf,
    const std::string& group);
// LoadManagerShared.filterAntiAffinityGroupOwnedBrokers (no failure domains): keeps the brokers
// owning the fewest namespaces of the group (a broker absent from `counts` owns none).
void filterAntiAffinityGroupOwnedBrokers(std::set<std::string>& candidates,
                                         const std::map<std::string, int>& counts);
// LoadManagerShared.removeMostServicingBrokersForNamespace: keeps the brokers with the fewest
// bundles of the namespace of `bundleKey` ("tenant/ns/0x..._0x..."). A counted bundle whose range
// overlaps bundleKey's is not counted (a split's parent its old owner still reports: Magnetar's
// addition, so that the halves of a hot bundle do not follow each other).
void removeMostServicingBrokersForNamespace(const std::string& bundleKey,
                                            std::set<std::string>& candidates,
                                            const BrokerNamespaces& owned);
// LeastLongTermMessageRate.getScore: +inf when the broker's weighted max resource usage (five
// weights) exceeds the overload threshold; else its long-term msg rate in+out plus its
// preallocated bundles' long-term rates (msg/s).
double leastLongTermMessageRateScore(const BrokerLoad& b, const PlacementSettings& s);
// LeastLongTermMessageRate.selectBroker: a candidate of least score, `pick(n)` choosing among n
// equals (Pulsar: at random); all overloaded: any candidate. nullopt without candidates.
using Pick = std::function<size_t(size_t n)>;
std::optional<std::string> leastLongTermMessageRate(const std::set<std::string>& candidates,
                                                    const BrokerLoads& loads,
                                                    const PlacementSettings& s, const Pick& pick);

// Everything ModularLoadManagerImpl.selectBroker does for `bundleKey`: the namespace policies on
// `available`, the topic-count filter, anti-affinity (antiAffinityCounts: nullopt when the
// namespace has no group), the even distribution (distributeBundlesEvenly), back to the
// policies' brokers when nothing is left, the strategy (round robin for a namespace of
// s.sheddingExcludedNamespaces), and when its choice is overloaded
// (four weights) the strategy again over the policies' brokers. nullopt: no broker qualifies.
struct PlacementInput {
  std::string bundleKey;
  std::set<std::string> available;  // registered brokers
  const BrokerLoads* loads = nullptr;
  const NamespaceIsolationPolicies* policies = nullptr;
  std::optional<std::map<std::string, int>> antiAffinityCounts;
  // The round-robin counter of the shedding-excluded namespaces' placements (Pulsar's
  // RoundRobinBrokerSelector): the candidate at *roundRobin modulo their count (ascending),
  // then *roundRobin + 1. nullptr: 0, not advanced.
  uint64_t* roundRobin = nullptr;
};
std::optional<std::string> selectBroker(const PlacementInput& in, const PlacementSettings& s,
                                        const Pick& pick);

// The leader's bundles handed out but not yet in the brokers' reports (Pulsar's
// preallocatedBundleToBroker and BrokerData.preallocatedBundleData). Loop-confined by its owner.
class Preallocations {
 public:
  // The broker a bundle was given to, if still preallocated.
  std::optional<std::string> brokerOf(const std::string& bundleKey) const;
  void add(const std::string& bundleKey, const std::string& broker, const BundleData& data,
           int64_t nowMs);
  // Drops a bundle its broker's report names, the bundles of brokers not in `reports`, and those
  // older than maxAgeMs (a client that never followed the redirect).
  void prune(const std::map<std::string, LocalBrokerData>& reports, int64_t nowMs,
             int64_t maxAgeMs);
  // broker -> its preallocated bundles' data.
  std::map<std::string, BundleData> of(const std::string& broker) const;
  std::vector<std::string> bundles() const;
  size_t size() const { return byBundle_.size(); }

 private:
  struct Entry {
    std::string broker;
    BundleData data;
    int64_t atMs = 0;
  };
  std::map<std::string, Entry> byBundle_;
};

}  // namespace magnetar::broker::cluster
