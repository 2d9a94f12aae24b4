// The JSON that cluster mode writes to and reads from ZooKeeper, in Pulsar's shapes (field names
// as Pulsar's Jackson mapper writes them; docs/cluster-mode.md lists each znode):
//   /namespace/{tenant}/{ns}/{bundle}   NamespaceEphemeralData (bundle ownership, ephemeral)
//   /loadbalance/brokers/{host:webport} LocalBrokerData (broker registration, ephemeral)
//   /loadbalance/leader                 LeaderBroker (leader election, ephemeral)
//   /admin/clusters/{cluster}           ClusterData
//   /admin/policies/{tenant}            TenantInfo
//   /admin/policies/{tenant}/{ns}       Policies (the namespace; bundles.boundaries: its cut)
//   /admin/partitioned-topics/{tenant}/{ns}/{domain}/{encoded topic}  PartitionedTopicMetadata
// Parsers fail with kCorruption naming the znode path for data that is not JSON or lacks a field
// that matters (foreign or damaged data).
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
#include "broker/policies/policies.h"

namespace magnetar::broker::cluster {

// How one broker is reached.
// One of a broker's advertisedListeners (Pulsar's AdvertisedListener).
struct ListenerUrls {
  std::string brokerServiceUrl;     // pulsar://host:port or ""
  std::string brokerServiceUrlTls;  // pulsar+ssl://host:port or ""
  bool operator==(const ListenerUrls&) const = default;
};

struct BrokerUrls {
  std::string brokerId;             // "advertisedAddress:webServicePort" (Pulsar's lookup address)
  std::string pulsarServiceUrl;     // pulsar://host:port
  std::string pulsarServiceUrlTls;  // pulsar+ssl://host:port or ""
  std::string webServiceUrl;        // http://host:port
  std::string webServiceUrlTls;     // https://host:port or ""
  // advertisedListeners by name (empty without them); written in NamespaceEphemeralData and
  // LocalBrokerData as Pulsar's "advertisedListeners" map, so a lookup naming a listener gets
  // the owner's address on it.
  std::map<std::string, ListenerUrls> listeners;
};

// NamespaceEphemeralData: nativeUrl, nativeUrlTls, httpUrl, httpUrlTls, disabled,
// advertisedListeners ({name: {brokerServiceUrl, brokerServiceUrlTls}}).
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
// kCorruption naming the path for a value that is not a TenantInfo object.
Result<TenantInfo> parseTenantInfo(std::string_view json, const std::string& path);

// A namespace's Policies as Magnetar reads it: what the broker enforces, the bundle cut, and the
// whole JSON object (rewrites keep every field Magnetar does not model, as Pulsar's
// read-modify-write of its Policies does).
struct PoliciesDoc {
  NamespacePolicies policies;
  std::vector<uint64_t> boundaries;  // bundles.boundaries; empty when the znode has none
  std::string raw;                   // the JSON text read ("" for a new namespace)
};
// kCorruption naming the path for a value that is not a JSON object or has bad bundle
// boundaries. Fields of an unexpected type are ignored (left at their defaults).
Result<PoliciesDoc> parsePolicies(std::string_view json, const std::string& path);
// Pulsar's Policies JSON in its field order (Policies.java, Jackson with NON_NULL): the fields
// Magnetar models from `p`, bundles from `boundaries`, every other field from `base` (a
// Policies JSON read before; "" for a new namespace: Pulsar's defaults, replication_clusters
// {clusterName}). Fields `base` has that Magnetar does not know go last, unchanged.
std::string policiesJson(const NamespacePolicies& p, const std::vector<uint64_t>& boundaries,
                         const std::string& base, const std::string& clusterName);
// Policies of a new namespace with default policies (initialize-cluster-metadata).
std::string namespacePoliciesJson(const std::vector<std::string>& replicationClusters,
                                  const std::vector<uint64_t>& boundaries);
// `base` (a Policies JSON) with bundles replaced by `boundaries`, every other field kept in
// place. kCorruption when base is not a JSON object.
Result<std::string> withBundles(const std::string& base, const std::vector<uint64_t>& boundaries,
                                const std::string& path);

// LocalPolicies (/admin/local-policies/{tenant}/{ns}, local store: where Pulsar keeps a
// namespace's current bundle cut): bundles from `boundaries`, every other field from `base`
// ("" for a new one).
std::string localPoliciesJson(const std::vector<uint64_t>& boundaries, const std::string& base);

// PartitionedTopicMetadata: {"partitions":n,"deleted":false}; properties kept from `base`.
std::string partitionedTopicMetadataJson(int partitions, const std::string& base = "");
// The partition count; kCorruption naming the path for a value that is not one (no
// "partitions", or not a positive integer).
Result<int> parsePartitionedTopicMetadata(std::string_view json, const std::string& path);

// Pulsar's znode paths. A topic's local name is encoded as Java's URLEncoder does (UTF-8; "a-z
// A-Z 0-9 . - * _" kept, ' ' to '+', the rest %XX), as TopicName.getEncodedLocalName.
std::string tenantPath(const std::string& tenant);  // /admin/policies/{tenant}
std::string namespacePath(const std::string& ns);   // /admin/policies/{tenant}/{ns}
// /admin/partitioned-topics/{tenant}/{ns}/{domain}/{encoded local name} of "domain://t/ns/x".
std::string partitionedTopicPath(const std::string& fullTopicName);
std::string urlEncode(std::string_view s);
// The inverse of urlEncode ('+' to ' ', %XX); the input unchanged where malformed.
std::string urlDecode(std::string_view s);

// bundles.boundaries of a Policies value, nullopt when it has none.
Result<std::optional<std::vector<uint64_t>>> boundariesFromPolicies(std::string_view json,
                                                                    const std::string& path);

}  // namespace magnetar::broker::cluster
