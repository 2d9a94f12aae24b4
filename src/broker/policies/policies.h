// PolicyRegistry: tenants and per-namespace policies set through the admin API (Pulsar's
// TenantInfo and Policies: retention, deduplication, backlog quotas, message TTL, permissions).
// In memory, and in the metadata store once attachStore() is called (they survive restarts).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_POLICIES)
#error "broker/policies is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "metadata/cache.h"
#include "metadata/store.h"
#include "net/executor.h"

namespace magnetar::broker {

class SharedConfig;

// Pulsar's TenantInfo.
struct TenantInfo {
  std::vector<std::string> adminRoles;
  std::vector<std::string> allowedClusters;
};

// Pulsar's RetentionPolicies: -1 means unlimited, 0 means none.
struct RetentionPolicy {
  int32_t retentionTimeInMinutes = 0;
  int64_t retentionSizeInMB = 0;
};

// Pulsar's BacklogQuota. policy: producer_request_hold | producer_exception |
// consumer_backlog_eviction.
struct BacklogQuota {
  int64_t limitSize = -1;  // bytes, -1: none
  int32_t limitTime = -1;  // seconds, -1: none
  std::string policy = "producer_request_hold";
};

// Pulsar's AutoTopicCreationOverride: replaces allowAutoTopicCreation, allowAutoTopicCreationType
// and defaultNumPartitions for the topics of one namespace.
struct AutoTopicCreationOverride {
  bool allowAutoTopicCreation = true;
  std::string topicType = "non-partitioned";    // "partitioned" | "non-partitioned"
  std::optional<int32_t> defaultNumPartitions;  // set (>= 1) only with "partitioned"
};

// Pulsar's DelayedDeliveryPolicies (namespace delayed-delivery, topic delayedDelivery).
struct DelayedDeliveryPolicies {
  bool active = true;
  int64_t tickTime = 1000;               // ms
  int64_t maxDeliveryDelayInMillis = 0;  // ms, 0: no limit
};

// Pulsar's InactiveTopicPolicies (namespace inactive_topic_policies, topic
// inactiveTopicPolicies). mode: delete_when_no_subscriptions |
// delete_when_subscriptions_caught_up.
struct InactiveTopicPolicies {
  std::string inactiveTopicDeleteMode = "delete_when_no_subscriptions";
  int32_t maxInactiveDurationSeconds = 0;
  bool deleteWhileInactive = false;
};

// The policies of one namespace; unset optionals fall back to the broker's defaults.
struct NamespacePolicies {
  std::optional<RetentionPolicy> retention;
  std::optional<bool> deduplicationEnabled;
  std::optional<int32_t> messageTtlSeconds;
  // Key: Pulsar's BacklogQuotaType, "destination_storage" or "message_age".
  std::map<std::string, BacklogQuota> backlogQuotas;
  // role -> actions ("produce", "consume", "functions", ...).
  std::map<std::string, std::set<std::string>> permissions;
  // Grants on single topics (Pulsar's destination_auth): full topic name (a partitioned topic's
  // own name, not its partitions') -> role -> actions.
  std::map<std::string, std::map<std::string, std::set<std::string>>> topicPermissions;
  // Pulsar's auth_policies.subscription_auth_roles: subscription name -> the roles that may use
  // it (a role with consume permission and not listed is refused; an empty or absent list: any).
  std::map<std::string, std::set<std::string>> subscriptionAuthRoles;
  // Minutes without consumers after which a subscription is deleted.
  std::optional<int32_t> subscriptionExpirationTimeMinutes;
  std::optional<InactiveTopicPolicies> inactiveTopicPolicies;
  std::optional<AutoTopicCreationOverride> autoTopicCreation;
  // Per-topic limits of the namespace's topics (Pulsar's Policies max_* fields), keyed by
  // kNamespaceLimits' names; 0: no limit. Absent: the broker setting of the same name applies.
  std::map<std::string, int32_t> limits;
  // Schema policies (Pulsar's schema_compatibility_strategy, is_allow_auto_update_schema,
  // schema_validation_enforced); unset: the broker setting applies.
  std::optional<std::string> schemaCompatibilityStrategy;  // a strategy name, not UNDEFINED
  std::optional<bool> isAllowAutoUpdateSchema;
  std::optional<bool> schemaValidationEnforced;
  std::optional<DelayedDeliveryPolicies> delayedDelivery;
  // Pulsar's compaction_threshold: bytes; 0 disables automatic compaction.
  std::optional<int64_t> compactionThreshold;
  // The Policies' replication_clusters (nullopt when absent: the local cluster): as given at
  // creation, then as stored (written back as read).
  std::optional<std::vector<std::string>> replicationClusters;
  // Policies fields Magnetar keeps as given at creation (then as stored) but does not act on
  // (kKeptPolicyFields, bundles): field name -> its JSON text, shown by GET namespaces/{t}/{ns} as
  // Pulsar stores them.
  std::map<std::string, std::string> keptFields;
};

// Policies fields Magnetar keeps as given (NamespacePolicies::keptFields; besides these,
// standalone's bundles), sorted by name; of these only the rate maps publishMaxMessageRate,
// topicDispatchRate, subscriptionDispatchRate and clusterSubscribeRate are acted on
// (rate_policies.h),
// with the Java type Jackson reads each as ("" for an object or array, kept as it came; "map" a map
// of strings).
struct KeptPolicyField {
  const char* name;
  const char* javaType;
};
inline constexpr KeptPolicyField kKeptPolicyFields[] = {
    {"autoSubscriptionCreationOverride", ""},
    {"clusterDispatchRate", ""},
    {"clusterSubscribeRate", ""},
    {"deduplicationSnapshotIntervalSeconds", "int"},
    {"encryption_required", "boolean"},
    {"latency_stats_sample_rate", ""},
    {"max_topics_per_namespace", "int"},
    {"offload_deletion_lag_ms", "long"},
    {"offload_policies", ""},
    {"offload_threshold", "long"},
    {"persistence", ""},
    {"properties", "map"},
    {"publishMaxMessageRate", ""},
    {"replicatorDispatchRate", ""},
    {"resource_group_name", "String"},
    {"subscriptionDispatchRate", ""},
    {"subscription_auth_mode", "String"},
    {"subscription_types_enabled", ""},
    {"topicDispatchRate", ""},
};

// The namespace limits: admin path segment (also the broker setting's name) and the field of
// Pulsar's Policies JSON.
struct NamespaceLimitName {
  const char* name;
  const char* policiesField;
};
inline constexpr NamespaceLimitName kNamespaceLimits[] = {
    {"maxProducersPerTopic", "max_producers_per_topic"},
    {"maxConsumersPerTopic", "max_consumers_per_topic"},
    {"maxConsumersPerSubscription", "max_consumers_per_subscription"},
    {"maxSubscriptionsPerTopic", "max_subscriptions_per_topic"},
    {"maxUnackedMessagesPerConsumer", "max_unacked_messages_per_consumer"},
    {"maxUnackedMessagesPerSubscription", "max_unacked_messages_per_subscription"},
};

// Topic-level policies (Pulsar's TopicPolicies, topicLevelPoliciesEnabled): Pulsar's policy name
// (the REST path segment, e.g. "maxProducers", "retention") -> its value as the JSON text the
// admin API accepted. The broker reads the numeric and boolean ones it enforces through
// PolicyRegistry::topicPolicyInt / topicPolicyBool.
using TopicPolicies = std::map<std::string, std::string>;
// The TopicPolicies entry holding a topic's properties (a JSON object of strings, given when it
// was created); no Pulsar policy has this name.
inline constexpr const char* kTopicPropertiesKey = "__properties";

// The node under which topic policies are stored, one child per topic (its full name escaped by
// storage::escapePathComponent); docs/broker-metadata-format.md.
inline constexpr const char* kTopicPoliciesRoot = "/admin/magnetar/topic-policies";

// The namespace's resource group (Policies' resource_group_name); nullopt when unset.
std::optional<std::string> resourceGroupOf(const NamespacePolicies& p);

// Thread-safe (one mutex); any thread.
class PolicyRegistry {
 public:
  // Starts with tenant "public" (allowed cluster `clusterName`), as Pulsar standalone.
  explicit PolicyRegistry(std::string clusterName = "standalone");

  // Tenants, clusters and namespace policies live in `shared` (the configuration store: ZooKeeper
  // in cluster mode, the persistent local store in standalone); the mutators below write there
  // first (blocking: not on an I/O loop) and this registry is its cache, kept current through
  // the apply* calls. Without one (unit tests) they stay in memory. shared outlives this.
  void setShared(SharedConfig* shared);
  // Cache updates from the configuration store (nullopt: deleted). Thread: any.
  void applyTenant(const std::string& name, const std::optional<TenantInfo>& info);
  void applyCluster(const std::string& name, const std::optional<std::string>& clusterData);
  void applyResourceGroup(const std::string& name, const std::optional<std::string>& json);
  void applyNamespacePolicies(const std::string& ns, const std::optional<NamespacePolicies>& p);
  // Forgets every tenant, cluster, resource group and namespace policy (before a full load from
  // the store).
  void clearTenantsAndPolicies();

  // Errors: kAlreadyExists; the configuration store's.
  Status createTenant(const std::string& name, TenantInfo info);
  // Errors: kNotFound; the configuration store's.
  Status updateTenant(const std::string& name, TenantInfo info);
  Status deleteTenant(const std::string& name);
  std::optional<TenantInfo> tenant(const std::string& name) const;
  std::vector<std::string> tenants() const;  // sorted

  // The configuration store's clusters (/admin/clusters/{name}: Pulsar's ClusterData JSON text;
  // standalone: those created through the admin API). Standalone's local cluster is not among
  // them unless stored (then its stored ClusterData replaces the built-in one).
  // Errors: createCluster kAlreadyExists, updateCluster/deleteCluster kNotFound; the store's.
  Status createCluster(const std::string& name, std::string clusterData);
  Status updateCluster(const std::string& name, std::string clusterData);
  Status deleteCluster(const std::string& name);
  std::optional<std::string> cluster(const std::string& name) const;
  std::vector<std::string> clusters() const;  // sorted

  // The configuration store's resource groups (/admin/resourcegroups/{name}: Pulsar's
  // ResourceGroup JSON text). putResourceGroup creates or replaces one; deleteResourceGroup
  // errors: kNotFound; both: the store's.
  Status putResourceGroup(const std::string& name, std::string json);
  Status deleteResourceGroup(const std::string& name);
  std::optional<std::string> resourceGroup(const std::string& name) const;
  std::vector<std::string> resourceGroups() const;  // sorted
  // Whether a namespace's policies name the group (Pulsar's internalCheckRgInUse).
  bool resourceGroupInUse(const std::string& name) const;

  // Policies of "tenant/ns" (defaults when never set). removeNamespace forgets them.
  NamespacePolicies namespacePolicies(const std::string& ns) const;
  // Applies `change` to the namespace's policies: a read-modify-write of the configuration
  // store's Policies (change may run more than once); errors: the store's (kNotFound when the
  // namespace is gone). Always ok without a store.
  [[nodiscard]] Status updateNamespacePolicies(
      const std::string& ns, const std::function<void(NamespacePolicies&)>& change);
  void removeNamespace(const std::string& ns);

  // The namespace's deduplication setting; nullopt when not set there (then the broker's
  // brokerDeduplicationEnabled applies). Read by the deduplication feature.
  std::optional<bool> deduplicationEnabled(const std::string& ns) const;

  // Topic policies of a topic ("persistent://t/ns/x"; a partition uses its partitioned topic's).
  // Empty when none is set. removeTopicPolicies forgets all of them (topic deleted).
  TopicPolicies topicPolicies(const std::string& topic) const;
  // Sets (value non-empty) or removes (nullopt) one policy: in memory at once (readers see it when
  // this returns), then in the topic-policy store (attachTopicPolicies) as a read-modify-write of
  // the topic's record, merged with what other brokers wrote. done (optional) gets the store's
  // answer on the registry's loop; without a store it runs inline with ok. Errors: the store's
  // (the change then stays in memory only, logged).
  void setTopicPolicy(const std::string& topic, const std::string& policy,
                      const std::optional<std::string>& jsonValue,
                      std::function<void(Status)> done = nullptr);
  // Topic policies live in `store` under kTopicPoliciesRoot (standalone: the persistent local
  // store; cluster mode: the configuration store, shared by every broker): every record is read,
  // and changes made through any session are followed; changed(topic) runs on `loop` after one
  // was applied to memory. ready(status of the first listing) runs on loop once loaded. store
  // and loop outlive this (detachTopicPolicies() first). Thread: any, once.
  void attachTopicPolicies(metadata::Store* store, net::Executor* loop,
                           std::function<void(const std::string& topic)> changed,
                           std::function<void(Status)> ready);
  void detachTopicPolicies();
  // Forgets the topic's policies (memory at once, the store's record then; errors logged). done
  // (optional) as setTopicPolicy's.
  void removeTopicPolicies(const std::string& topic, std::function<void(Status)> done = nullptr);
  // A policy stored as a JSON integer / boolean; nullopt when unset or of another type.
  std::optional<int64_t> topicPolicyInt(const std::string& topic, const std::string& policy) const;
  std::optional<bool> topicPolicyBool(const std::string& topic, const std::string& policy) const;
  // The topic's backlogQuota/<type> policy (the JSON object the admin API stored); nullopt when
  // unset or unreadable.
  std::optional<BacklogQuota> topicBacklogQuota(const std::string& topic,
                                                const std::string& type) const;
  // The topic's inactiveTopicPolicies policy; nullopt when unset or unreadable.
  std::optional<InactiveTopicPolicies> topicInactiveTopicPolicies(const std::string& topic) const;
  // The topic's delayedDelivery policy; nullopt when unset or unreadable.
  std::optional<DelayedDeliveryPolicies> topicDelayedDelivery(const std::string& topic) const;
  // The topic's retention policy (retentionTimeInMinutes, retentionSizeInMB); nullopt when unset
  // or unreadable.
  std::optional<RetentionPolicy> topicRetention(const std::string& topic) const;

 private:
  // A copy of one stored topic policy's text; nullopt when the topic or the policy is unset.
  std::optional<std::string> topicPolicyText(const std::string& topic,
                                             const std::string& policy) const;
  // Writes the topic's record: `change` applied to the stored one (see setTopicPolicy).
  void persistTopicPolicies(const std::string& topic,
                            const std::function<void(TopicPolicies&)>& change,
                            std::function<void(Status)> done);
  // Sets (non-empty) or forgets a topic's policies in memory and reports the change.
  void applyTopicPolicies(const std::string& topic, TopicPolicies p);

  mutable Mutex mu_;
  std::map<std::string, TenantInfo> tenants_ GUARDED_BY(mu_);
  std::map<std::string, std::string> clusters_ GUARDED_BY(mu_);  // name -> ClusterData JSON
  std::map<std::string, std::string> resourceGroups_ GUARDED_BY(mu_);  // name -> its JSON
  std::map<std::string, NamespacePolicies> policies_ GUARDED_BY(mu_);
  std::map<std::string, TopicPolicies> topicPolicies_ GUARDED_BY(mu_);
  // Set by attachTopicPolicies(), then read-only.
  std::shared_ptr<metadata::MetadataCache<TopicPolicies>> topicCache_;
  std::shared_ptr<metadata::ChildrenMirror<TopicPolicies>> topicMirror_;
  net::Executor* loop_ = nullptr;
  std::function<void(const std::string&)> topicChanged_;
  SharedConfig* shared_ = nullptr;  // set before use, then read-only
};

// The text form of a tenant / of namespace policies that standalone stored before it kept them
// under Pulsar's paths (read once to migrate a data directory: cluster/local_records.h; the
// encoders for tests). Lines of "key=field,field"; fields escape '%', ',', '=' and newlines as
// %XX. Topic policies are still stored in this form.
std::string encodeTenant(const TenantInfo& t);
TenantInfo decodeTenant(const std::string& text);
std::string encodePolicies(const NamespacePolicies& p);
NamespacePolicies decodePolicies(const std::string& text);
std::string encodeTopicPolicies(const TopicPolicies& p);
TopicPolicies decodeTopicPolicies(const std::string& text);

}  // namespace magnetar::broker
