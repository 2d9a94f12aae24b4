// The JSON that cluster mode writes to and reads from ZooKeeper, in Pulsar's shapes (field names
// as Pulsar's Jackson mapper writes them; docs/cluster-mode.md lists each znode):
//   /namespace/{tenant}/{ns}/{bundle}   NamespaceEphemeralData (bundle ownership, ephemeral)
//   /loadbalance/brokers/{host:webport} LocalBrokerData (broker registration, ephemeral)
//   /loadbalance/leader                 LeaderBroker (leader election, ephemeral)
//   /admin/clusters/{cluster}           ClusterData
//   /admin/policies/{tenant}            TenantInfo
//   /admin/policies/{tenant}/{ns}       Policies (bundles.boundaries read for the bundle cut)
// Parsers fail with kCorruption naming the znode path for data that is not JSON or lacks a field
// that matters (foreign or damaged data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace magnetar::broker::cluster {

// How one broker is reached.
struct BrokerUrls {
  std::string brokerId;             // "advertisedAddress:webServicePort" (Pulsar's lookup address)
  std::string pulsarServiceUrl;     // pulsar://host:port
  std::string pulsarServiceUrlTls;  // pulsar+ssl://host:port or ""
  std::string webServiceUrl;        // http://host:port
  std::string webServiceUrlTls;     // https://host:port or ""
};

// NamespaceEphemeralData: nativeUrl, nativeUrlTls, httpUrl, httpUrlTls, disabled,
// advertisedListeners ({} here).
std::string namespaceEphemeralDataJson(const BrokerUrls& owner, bool disabled = false);
struct OwnerData {
  BrokerUrls urls;  // brokerId empty
  bool disabled = false;
};
Result<OwnerData> parseNamespaceEphemeralData(std::string_view json, const std::string& path);

// LocalBrokerData (the modular load manager's report): the URLs, zeroed resource usage, the
// owned bundles ("tenant/ns/0x..._0x...") and their count, lastUpdate and startTimestamp (ms).
std::string localBrokerDataJson(const BrokerUrls& self, const std::vector<std::string>& bundles,
                                int64_t startTimestampMs, int64_t lastUpdateMs);
struct BrokerReport {
  BrokerUrls urls;  // brokerId empty: it is the znode's name
  std::vector<std::string> bundles;
};
Result<BrokerReport> parseLocalBrokerData(std::string_view json, const std::string& path);

// LeaderBroker: {"brokerId":"host:webport","serviceUrl":"http://host:webport"} (older Pulsar
// writes only serviceUrl; the id is then taken from it).
std::string leaderBrokerJson(const BrokerUrls& leader);
struct LeaderData {
  std::string brokerId;
  std::string serviceUrl;
};
Result<LeaderData> parseLeaderBroker(std::string_view json, const std::string& path);

// ClusterData (serviceUrl, serviceUrlTls, brokerServiceUrl, brokerServiceUrlTls; empty ones are
// left out as Pulsar's mapper leaves out nulls).
std::string clusterDataJson(const std::string& webServiceUrl, const std::string& webServiceUrlTls,
                            const std::string& brokerServiceUrl,
                            const std::string& brokerServiceUrlTls);
// TenantInfo: {"adminRoles":[...],"allowedClusters":[...]}.
std::string tenantInfoJson(const std::vector<std::string>& adminRoles,
                           const std::vector<std::string>& allowedClusters);
// Policies of a new namespace: auth_policies, replication_clusters, bundles (boundaries and
// numBundles) and the empty maps and defaults a new Pulsar namespace has.
std::string namespacePoliciesJson(const std::vector<std::string>& replicationClusters,
                                  const std::vector<uint64_t>& boundaries);
// bundles.boundaries of a Policies value, nullopt when it has none.
Result<std::optional<std::vector<uint64_t>>> boundariesFromPolicies(std::string_view json,
                                                                    const std::string& path);

}  // namespace magnetar::broker::cluster
