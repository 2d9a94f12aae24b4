// BrokerService: the broker's wiring (Pulsar's BrokerService): I/O loops, ml-worker executors,
// the topic table, the binary-protocol listener.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/auth/authentication.h"
#include "broker/auth/authorization.h"
#include "broker/common/broker_options.h"
#include "broker/common/periodic_task.h"
#include "broker/common/topic_name.h"
#include "broker/common/topic_ownership.h"
#include "broker/policies/namespace_resources.h"
#include "broker/policies/policies.h"
#include "broker/policies/shared_config.h"
#include "broker/schema/schema_registry.h"
#include "broker/service/publish_throttle.h"
#include "broker/service/topic_list.h"
#include "broker/topic/stats.h"
#include "broker/topic/topic.h"
#include "broker/transaction/coordinator_registry.h"
#include "broker/transaction/transaction_buffer_client.h"
#include "metadata/store.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "protocol/commands.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

using TopicCallback = std::function<void(Result<std::shared_ptr<PersistentTopic>>)>;

// The name a topic's policies are kept under: a partition's are its partitioned topic's (as
// Pulsar).
std::string policyKey(const TopicName& name);

// Thread: start/stop from main; the rest from any thread unless noted.
class RemoteTransactionBufferClient;
class BrokerClientSettings;

class BrokerService final : public SharedConfigView {
 public:
  // Cluster mode on each broker's local storage: lists the topics of namespace `ns` in `domain`
  // that any broker of the cluster has (admin::clusterTopicsOfNamespace asks the others over
  // HTTP, with `authorization` as the Authorization header); cb on any thread.
  using ClusterTopicLister =
      std::function<void(BrokerService& service, const std::string& ns, TopicDomain domain,
                         const std::optional<std::string>& authorization,
                         std::function<void(Result<std::vector<std::string>>)> cb)>;

  // The service's collaborators, filled by the composition root (src/app/run_broker.cc); each
  // outlives the service. Unset (null, empty): the service's own answer, as noted per field.
  struct Deps {
    // Cluster mode: who owns which topic (LOOKUP answers, PRODUCER/SUBSCRIBE refused with
    // ServiceNotReady for a topic owned elsewhere). Null (standalone): every topic is served
    // here.
    TopicOwnership* ownership = nullptr;
    // Cluster mode on each broker's local storage. Unset (standalone, shared storage):
    // GET_TOPICS_OF_NAMESPACE answers the topics this broker knows.
    ClusterTopicLister clusterTopicLister;
    // Tenants, clusters, namespaces, their policies and partitioned-topic metadata are the
    // configuration store's (shared_config.h: ZooKeeper in cluster mode, the persistent local
    // store in standalone); the mutators below write there first. Loaded (started) before
    // start(): start() creates standalone's public tenant and the namespaces it lacks in it.
    // Null (unit tests, fuzzers): memory only.
    SharedConfig* sharedConfig = nullptr;
    // Where topic policies and schemas are kept (metadata::Store paths kTopicPoliciesRoot and
    // kSchemasRoot, docs/broker-metadata-format.md): the configuration store in cluster mode
    // (every broker sees them), the persistent local store in standalone. The registries read
    // it at start() and follow its changes; their writes are asynchronous. Null: memory only.
    metadata::Store* recordStore = nullptr;
  };

  BrokerService(BrokerOptions options, std::shared_ptr<storage::ManagedLedgerFactory> factory,
                Deps deps);
  // Without collaborators (fuzzers): memory only, every topic served here.
  BrokerService(BrokerOptions options, std::shared_ptr<storage::ManagedLedgerFactory> factory);
  ~BrokerService() override;

  // Starts numIOThreads `pulsar-io-N` loops, managedLedgerNumWorkerThreads `ml-worker-N`
  // executors, and listens on brokerServicePort (and brokerServicePortTls when set, each
  // connection's handshake on its own pulsar-io loop). Errors: kIoError when a port can't be
  // bound.
  Status start();
  // Graceful shutdown of the binary protocol: stops accepting, then every connection stops
  // reading, sends the receipts of the SENDs it read once they are persisted, CLOSE_PRODUCER
  // and CLOSE_CONSUMER for what it has open, and closes (ServerCnx::startShutdown). Returns
  // when all are closed or after `timeout` (brokerShutdownTimeoutMs; <= 0: at once), true
  // when all closed. Call before stop(), from main.
  bool drainConnections(std::chrono::milliseconds timeout);
  void stop();

  const BrokerOptions& options() const { return options_; }
  // The collaborators given at construction (Deps).
  TopicOwnership* topicOwnership() const { return ownership_; }
  const ClusterTopicLister& clusterTopicLister() const { return clusterTopicLister_; }
  SharedConfig* sharedConfig() const { return shared_; }
  // Deps::recordStore (null: memory only). Thread: any.
  metadata::Store* recordStore() const { return recordStore_; }
  // The loop `metadata-records` that runs the registries' store callbacks; the executor for
  // callers without one of their own (admin handlers). Thread: any.
  net::Executor& metadataExecutor() { return metadataLoop_; }
  // SharedConfigView: the configuration store's state applied to the in-memory view
  // (cluster::ConfigurationStore, at load and on its watches; nullopt: deleted). A namespace whose
  // policies change has them re-applied to its loaded topics; partitions added or removed are
  // announced to topic-list watchers. Thread: any.
  void applySharedTenant(const std::string& name, const std::optional<TenantInfo>& info) override;
  void applySharedNamespace(const std::string& ns,
                            const std::optional<NamespacePolicies>& p) override;
  void applySharedPartitioned(const std::string& topic, std::optional<int> partitions) override;
  void applySharedCluster(const std::string& name,
                          const std::optional<std::string>& clusterData) override;
  void applySharedResourceGroup(const std::string& name,
                                const std::optional<std::string>& json) override;
  // Forgets tenants, clusters, namespaces, policies and partitioned topics (before a full load).
  void clearShared() override;
  size_t sharedTenantCount() const override;
  size_t sharedNamespaceCount() const override;
  // The settings that may change at run time; the app stores new values here. Thread: any.
  BrokerDynamicOptions& dynamicOptions() { return options_.dynamic; }
  // maxMessagePublishBufferSizeInMB changed at run time (<= 0: off): each I/O loop gets its new
  // share, pausing or resuming reads at once. No-op before start(). Thread: any; the change is
  // posted to each loop.
  void setMaxMessagePublishBufferSizeInMB(int mb);
  int brokerServicePort() const { return server_ ? server_->boundPort() : 0; }
  std::string brokerServiceUrl() const;
  // The bound TLS port, 0 without a TLS listener.
  int brokerServicePortTls() const { return tlsServer_ ? tlsServer_->boundPort() : 0; }
  // pulsar+ssl://advertisedAddress:brokerServicePortTls (or the internal listener's), "" when
  // there is no TLS listener.
  std::string brokerServiceUrlTls() const;
  net::EventLoopGroup& ioLoops() { return *ioLoops_; }
  net::EventLoopGroup& mlWorkers() { return *mlWorkers_; }

  // The transaction coordinators this broker serves (transaction_service.cc); null while
  // transactionCoordinatorEnabled is off. Thread: any.
  CoordinatorRegistry* transactionCoordinators() const { return txnCoordinators_.get(); }
  // Cluster mode (Pulsar's TransactionMetadataStoreService with the bundle ownership of
  // transaction_coordinator_assign's partitions): loads every coordinator whose assign partition
  // this broker owns and closes (unloads) every loaded one whose partition it no longer owns.
  // Called when a bundle is taken, released or lost (src/app wires the namespace service's
  // handlers to it). No-op in standalone or with transactions off. Thread: any.
  void syncTransactionCoordinators();
  // This broker's id, "advertisedAddress:webServicePort" (Pulsar's getBrokerId), for errors
  // that name it; "" until the app sets it (cluster mode: once the listeners' ports are bound, so
  // connections may already read it). Thread: any (a copy under brokerIdMu_).
  void setBrokerId(std::string id) {
    MutexLock lock(brokerIdMu_);
    brokerId_ = std::move(id);
  }
  std::string brokerId() const {
    MutexLock lock(brokerIdMu_);
    return brokerId_;
  }

  // Finds or opens the topic; creates it when `create` (allowAutoTopicCreation) or when it was
  // stored before. On storage shared by the brokers (BookKeeper) a topic not loaded here is
  // opened without `create` only when the storage has it (Pulsar's getTopicIfExists: a topic
  // another broker created, or one moved here by a failover or an unload), kNotFound otherwise.
  // cb runs on the topic's executor on success; on any thread with an error (kNotFound ->
  // TopicNotFound; the storage's error when it could not be asked).
  void getOrCreateTopic(const TopicName& name, bool create, TopicCallback cb);
  // All loaded topics (snapshot).
  std::vector<std::shared_ptr<PersistentTopic>> topics() const;
  // Runs on a topic's executor once it is loaded, before any client is given it (Pulsar's
  // checkReplication at topic creation: src/broker/replication). Null: none. Thread: any.
  using TopicLoadedHook = std::function<void(PersistentTopic&)>;
  void setTopicLoadedHook(TopicLoadedHook hook) {
    MutexLock lock(mu_);
    topicLoaded_ = std::move(hook);
  }
  // Topics of "tenant/ns" in `domain` as Pulsar lists them for GET_TOPICS_OF_NAMESPACE (whose
  // modes PERSISTENT / NON_PERSISTENT / ALL these are): loaded and stored topics, plus every
  // partition of its partitioned topics ("...-partition-N"). On shared storage the stored ones
  // are not in it (this broker's view of them may be stale): add sharedStoredTopicsOf's.
  std::vector<std::string> topicsOfNamespace(const std::string& ns,
                                             TopicDomain domain = TopicDomain::kPersistent) const;
  // True when the topics' storage is shared by the brokers (cluster mode on BookKeeper): a topic
  // may exist that this broker never loaded.
  bool storageShared() const { return factory_->sharedBetweenBrokers(); }
  // Shared storage: the topics of "tenant/ns" in `domain` the storage holds, whichever broker
  // created them and loaded or not (Pulsar's TopicResources.listPersistentTopicsAsync: the
  // children of /managed-ledgers/{tenant}/{ns}/{domain}, URL-decoded), full names, sorted. cb on
  // ex. Errors: kUnsupported when the storage is not shared; the metadata store's. Thread: any.
  void sharedStoredTopicsOf(const std::string& ns, TopicDomain domain, net::Executor* ex,
                            std::function<void(Result<std::vector<std::string>>)> cb);
  // Shared storage: asks the storage whether it has the topic (another broker may have created
  // or deleted it; a partitioned topic's own name is not a stored topic) and records the answer,
  // so that topicExists() says so until the next change. cb on ex. Errors: kUnsupported when the
  // storage is not shared; the metadata store's. Thread: any.
  void checkStoredTopic(const TopicName& name, net::Executor* ex,
                        std::function<void(Result<bool>)> cb) EXCLUDES(mu_);
  // Topic created/deleted events of a namespace (topic-list watchers). Fired for a topic opened
  // for the first time, every partition of a partitioned topic created or grown, and a deleted
  // topic or partition. Thread: any.
  TopicEventListeners& topicListeners() { return topicListeners_; }

  // Partitioned-topic metadata: the partition count (0: not partitioned). With autoCreate and
  // allowAutoTopicCreationType=partitioned, a new topic becomes partitioned with
  // defaultNumPartitions.
  Result<int> partitionsOf(const TopicName& name, bool autoCreate);
  // Errors: kAlreadyExists, kInvalidArgument (partitions < 1).
  Status createPartitionedTopic(const TopicName& name, int partitions);

  // Namespaces ("tenant/ns"). public/default exists from the start; topics in other namespaces
  // need the namespace created first (admin API), else TopicNotFound as in Pulsar.
  void createNamespace(const std::string& ns);
  bool namespaceExists(const std::string& ns) const;
  // Cluster mode, Pulsar's checkLocalOrGetPeerReplicationCluster (no peer clusters here): a
  // namespace whose Policies' replication_clusters do not name clusterName is not served in this
  // cluster; kInvalidArgument with Pulsar's "Namespace missing local cluster name in clusters
  // list: ..." (lookups fail with it: binary MetadataError, HTTP 412). Ok in standalone, for a
  // namespace whose Policies have no replication_clusters field, and for an unknown namespace.
  // Thread: any.
  Status checkLocalCluster(const std::string& ns) const;

  // "{clusterName}-{generatorId}-{counter}" (Pulsar's DistributedIdGenerator names). Thread: any.
  std::string generateProducerName();
  // Cluster mode: this broker's generator id from /counters/producer-name (unique among the
  // brokers of the metadata store); standalone keeps 0. Thread: any, before producers connect.
  void setProducerNameGeneratorId(int64_t id) { producerNameGeneratorId_.store(id); }
  // The publish buffer throttle of each pulsar-io loop, in loop order (metrics).
  std::vector<std::pair<std::string, PublishThrottleStats>> publishThrottleStats() const;
  // Frames admitted at their header against the whole publish buffer (metrics). Thread: any.
  const FrameAdmission& frameAdmission() const { return admission_; }
  void connectionClosed() {
    activeConnections_--;
    closedSinceTrim_.fetch_add(1, std::memory_order_relaxed);
  }
  int64_t activeConnections() const { return activeConnections_.load(); }

  // Topic executor helpers for SEEK and GET_LAST_MESSAGE_ID.
  void findPositionByPublishTime(const std::shared_ptr<PersistentTopic>& topic,
                                 uint64_t publishTimeMs, std::function<void(storage::Position)> cb);
  storage::Position clampSeekPosition(PersistentTopic& topic, storage::Position p);
  // readCompacted: with nothing after the compaction horizon, the last message of the compacted
  // view (Pulsar's answer to a read_compacted consumer; (-1, -1) when the view is empty).
  void lastMessageId(const std::shared_ptr<PersistentTopic>& topic, const std::string& sub,
                     bool readCompacted,
                     const std::function<void(protocol::WireMessageId,
                                              std::optional<protocol::WireMessageId>)>& cb);

  // --- Admin API support (src/admin); any thread. ---
  PolicyRegistry& policies() { return policies_; }
  // Authentication and authorization; both disabled until configureSecurity(). Call that
  // before start(); afterwards read-only (setSuperUserRoles aside). Thread: any.
  const AuthenticationService& authentication() const { return *authentication_; }
  AuthenticationService& mutableAuthentication() { return *authentication_; }
  AuthorizationService& authorization() { return *authorization_; }
  void configureSecurity(std::unique_ptr<AuthenticationService> authentication,
                         bool authorizationEnabled, std::vector<std::string> superUserRoles);
  // Topic schemas (Pulsar's schema registry service). Thread: any.
  SchemaRegistry& schemas() { return schemas_; }
  // A topic's schema policies: the namespace's schema-compatibility-strategy (when not
  // UNDEFINED) else schemaCompatibilityStrategy; is-allow-auto-update-schema else
  // isAllowAutoUpdateSchemaEnabled; schema-validation-enforce or isSchemaValidationEnforced.
  SchemaCompatibilityStrategy schemaCompatibilityStrategyOf(const TopicName& name) const;
  bool allowAutoUpdateSchema(const TopicName& name) const;
  bool schemaValidationEnforced(const TopicName& name) const;
  // Per-topic message rates, updated by the admin module's pulsar-stats thread and read by the
  // admin stats and CONSUMER_STATS. Thread: any.
  RateRegistry& rates() { return rates_; }
  // The namespace's policies changed (deduplicationEnabled, the max* limits): its loaded topics
  // take the new values on their executors, as Pulsar's onPoliciesUpdate. Thread: any.
  void onNamespacePoliciesChanged(const std::string& ns);
  // Whether a producer or consumer may auto-create `name`: the namespace's autoTopicCreation
  // override when set, else allowAutoTopicCreation. Thread: any.
  bool allowAutoTopicCreation(const TopicName& name) const;
  // The topic's policies changed (PolicyRegistry::setTopicPolicy): the loaded topic, or each
  // loaded partition of a partitioned topic, takes the new limits and deduplication setting on
  // its executor. Thread: any.
  void onTopicPoliciesChanged(const TopicName& name);
  // Effective limits and deduplication of a topic: topic policy > namespace policy > broker.
  TopicPolicyLimits policyLimitsOf(const TopicName& name) const;
  // Rate limits (rate_limits.cc, docs/rate-limits.md). The broker-wide publish and dispatch
  // limiters. Thread: any.
  BrokerRateLimiters& rateLimiters() { return rateLimiters_; }
  // A rate-limit setting changed (brokers update-dynamic-config): the broker-wide limiters are
  // rebuilt and the loaded topics take their new defaults. Thread: any.
  void onRateSettingsChanged();
  // The resource group `name` was created, changed or deleted (PolicyRegistry holds its
  // ResourceGroup JSON): its publish limiter takes the new quota at once (a changed quota starts
  // with a full bucket), and the loaded topics of the namespaces naming it attach to it.
  // Thread: any.
  void onResourceGroupChanged(const std::string& name);
  // Fills l's publishRate, dispatchRate, subscriptionDispatchRate and subscribeRate: the topic
  // policy, else the namespace's for this cluster, else the broker's defaults; and the publish
  // limiter of the namespace's resource group.
  void resolveRateLimits(const std::string& policyKey, const NamespacePolicies& ns,
                         TopicPolicyLimits* l) const;
  // Re-applies limits and deduplication to the loaded topics `which` selects. Thread: any.
  void reapplyPolicies(const std::function<bool(const TopicName&)>& which);
  bool deduplicationEnabledFor(const TopicName& name) const;
  // The message TTL of a topic in seconds: topic policy messageTTL > namespace
  // message_ttl_in_seconds > ttlDurationDefaultInSeconds (0: none). Thread: any.
  int64_t messageTtlOf(const TopicName& name) const;
  // Minutes after which a durable subscription without consumers expires: the topic's
  // subscriptionExpirationTime policy, else the namespace's subscription_expiration_time_minutes,
  // else subscriptionExpirationTimeMinutes (0: never). Thread: any.
  int64_t subscriptionExpirationMinutesOf(const TopicName& name) const;
  // The compaction threshold in bytes: topic policy compactionThreshold, else the namespace's,
  // else brokerServiceCompactionThresholdInBytes (0: no automatic compaction).
  int64_t compactionThresholdOf(const TopicName& name) const;
  // Pulsar's checkCompaction: every brokerServiceCompactionMonitorIntervalInSeconds, topics past
  // their threshold are compacted.
  void checkCompaction();
  // Every topic's snapshotTransactionBuffer on its executor.
  void snapshotTransactionBuffers();
  // One message-TTL pass (Pulsar's checkMessageExpiry): every durable subscription of every
  // loaded topic with a TTL expires its older messages, on the topic's executor. Thread: any;
  // run every messageExpiryCheckIntervalInMinutes by the pulsar-msg-expiry-monitor thread.
  void checkMessageExpiry();
  // The topic's backlog quota of `type` (destination_storage or message_age): topic policy >
  // namespace policy > backlogQuotaDefaultLimitBytes / backlogQuotaDefaultLimitSecond /
  // backlogQuotaDefaultRetentionPolicy. Thread: any.
  BacklogQuota backlogQuotaOf(const TopicName& name, const std::string& type) const;
  // One backlog quota pass (Pulsar's monitorBacklogQuota): each loaded topic reads its backlog
  // age and, over a quota, disconnects its producers (producer_request_hold,
  // producer_exception) or moves its slowest cursors forward (consumer_backlog_eviction), on the
  // topic's executor (PersistentTopic::checkBacklogQuota). Thread: any; run every
  // backlogQuotaCheckIntervalInSeconds by pulsar-backlog-quota-checker when
  // backlogQuotaCheckEnabled.
  void checkBacklogQuotas();
  // The topic's inactive-topic policy: topic inactiveTopicPolicies > namespace
  // inactive_topic_policies > brokerDeleteInactiveTopicsEnabled / ...Mode /
  // ...MaxInactiveDurationSeconds (unset: brokerDeleteInactiveTopicsFrequencySeconds).
  InactiveTopicPolicies inactiveTopicPoliciesOf(const TopicName& name) const;
  // One inactive-topic pass (Pulsar's checkGC): a loaded topic (system topics "__*" aside)
  // whose policy deletes it while inactive, inactive for its mode for maxInactiveDurationSeconds
  // and past its retention time (topic > namespace > defaultRetentionTimeInMinutes; -1 keeps
  // it), is deleted with its data (deleteTopic without force) and its topic policies. Thread:
  // any; run every brokerDeleteInactiveTopicsFrequencySeconds by pulsar-inactivity-monitor.
  void checkGC();
  // One subscription-expiration pass (Pulsar's checkInactiveSubscriptions): durable
  // subscriptions without consumers inactive for subscriptionExpirationMinutesOf(topic)
  // minutes (0: never) are deleted. Thread: any; run
  // every subscriptionExpiryCheckIntervalInMinutes.
  void checkInactiveSubscriptions();
  // After the inactive-topic check deleted `partition`: with
  // brokerDeleteInactivePartitionedTopicMetadataEnabled, once no partition of its partitioned
  // topic is loaded or stored, the partitioned metadata and its topic policies are deleted.
  // Thread: any.
  void deleteInactivePartitionedMetadata(const TopicName& partition);
  // Creates "tenant/ns" with its first policies (numBundles > 0: its bundle count in cluster
  // mode, else defaultNumberOfNamespaceBundles). Errors: kAlreadyExists; in cluster mode the
  // configuration store's (blocking: not on an I/O loop).
  Status addNamespace(const std::string& ns, const NamespacePolicies& initial = {},
                      int numBundles = 0);
  // Forgets the namespace, its partitioned-topic metadata and its policies (delete its topics
  // first). Errors: kNotFound.
  Status removeNamespace(const std::string& ns);
  std::vector<std::string> namespaces() const;  // sorted
  // Loaded, stored, or partitioned. On shared storage "stored" is what this broker opened or
  // last read from the storage (checkStoredTopic), not the names it saw at start: ask the storage
  // (checkStoredTopic) about a topic not loaded here first.
  bool topicExists(const TopicName& name) const;
  // Loaded here (or loading), or partitioned metadata says it exists (a partitioned topic, or a
  // partition of one): what topicExists knows without the storage.
  bool topicLoadedOrPartitioned(const TopicName& name) const;
  // Partitioned topics of "tenant/ns": full name -> partitions.
  std::map<std::string, int> partitionedTopicsOf(
      const std::string& ns, TopicDomain domain = TopicDomain::kPersistent) const;
  // Errors: kNotFound (not partitioned), kInvalidArgument (fewer partitions than now).
  Status updatePartitions(const TopicName& name, int partitions);
  // Forgets a partitioned topic's metadata and schema (delete its partitions first). Errors:
  // kNotFound. On success the schema's delete is under way: schemaGone (if set) runs on the
  // metadata loop once it is done (Pulsar answers the topic's DELETE after it).
  Status removePartitionedTopic(const TopicName& name, std::function<void()> schemaGone = nullptr);
  // Deletes a topic (or one partition), its data and a non-partitioned one's schema (Pulsar's).
  // Errors: kNotFound; without `force`, kBusy with clients and kNotAllowed "Delete forbidden topic
  // is replicated on clusters [c2]" when loaded before with replicators. cb on any thread.
  void deleteTopic(const TopicName& name, bool force, const std::function<void(Status)>& cb);
  // Unloads a loaded topic: the broker forgets it, its clients are closed (they look it up
  // again) and its managed ledger closed, its data kept. `release`: the broker lost the topic
  // (another broker took its storage over, kFenced, or its bundle is no longer owned here), so
  // the ledger is given up without writing (ManagedLedger::asyncRelease); otherwise (shutdown)
  // it closes cleanly. done (if given) once the ledger closed, on the topic's executor (at once
  // if the topic was gone). Thread: any.
  void unloadTopic(const std::shared_ptr<PersistentTopic>& topic, bool release,
                   std::function<void(Status)> done = {});

 private:
  // Standalone: tenant pulsar and namespace pulsar/system (always, as PulsarStandalone);
  // transactionCoordinatorEnabled: the registry, standalone's assign topic and its coordinators
  // (after the ml-workers started); closes them (before they stop).
  void startTransactions();
  // Creates tenant pulsar and namespace pulsar/system when missing. Thread: start's.
  void ensureStandaloneSystemNamespace();
  void stopTransactions();
  // start's first step: the namespaces (standalone: public/default and those of the stored
  // ledgers), the compacted ledgers found, the policy and schema stores.
  void loadNamespacesAndStores() EXCLUDES(mu_);
  // Standalone (no topic ownership), as Pulsar's PulsarStandalone at start: tenant "public" and
  // the namespaces `initial` are created in the configuration store unless there (blocking:
  // main thread). Errors are logged.
  void createStandaloneDefaults(const std::vector<std::string>& initial);
  // Attaches the schema and topic-policy registries to recordStore_ (main thread, at start).
  void attachRecordStore();
  // A deleted topic's schemas go (forced delete; errors logged); then done(), if set, on the
  // metadata loop.
  void forgetSchema(const TopicName& name, std::function<void()> done = nullptr);
  // start's periodic checks: message expiry, backlog quota, inactive topics and subscriptions,
  // compaction. REQUIRES: the loops started.
  void startMonitors();
  struct TopicSlot {
    std::shared_ptr<PersistentTopic> topic;
    std::vector<TopicCallback> waiters;
  };

  // Removes a partitioned topic's metadata and policies once no partition is left.
  void removeInactivePartitionedMetadata(const TopicName& parent);
  // getOrCreateTopic; inSharedStorage: the shared storage was asked and has the topic (it is
  // then opened without creating: kNotFound if deleted meanwhile).
  void loadTopic(const TopicName& name, bool create, bool inSharedStorage, TopicCallback cb)
      EXCLUDES(mu_);
  // loadTopic's ledger failed to open: the slot goes and its waiters get the error (kNotFound
  // when existingOnly and the ledger was deleted meanwhile through another broker).
  void topicOpenFailed(const TopicName& name, const std::shared_ptr<TopicSlot>& slot,
                       bool existingOnly, const Status& st) EXCLUDES(mu_);
  // loadTopic's ledger opened: makes the topic on `executor` (fencing handler, policy limits,
  // compacted views) and hands it to the slot's waiters once initialized.
  void startTopic(const TopicName& name, const std::shared_ptr<TopicSlot>& slot,
                  net::EventLoop& executor, const std::shared_ptr<storage::ManagedLedger>& ledger)
      EXCLUDES(mu_);
  // kNotFound (no namespace, or !create), kNotAllowed (a partition of a non-partitioned topic).
  Status canCreateLocked(const TopicName& name, bool create) REQUIRES(mu_);
  // Reports partitions [from, to) of a partitioned topic created or deleted.
  void announcePartitions(const TopicName& name, int from, int to, bool created) EXCLUDES(mu_);
  // Bytes of maxMessagePublishBufferSizeInMB=mb for each I/O loop (0: off). REQUIRES: started.
  int64_t publishBufferShare(int mb) const;
  // maxMessagePublishBufferSizeInMB=mb in bytes (0: off).
  static int64_t publishBufferBytes(int mb);
  TopicOwnership* ownership_ = nullptr;
  ClusterTopicLister clusterTopicLister_;
  SharedConfig* shared_ = nullptr;
  metadata::Store* recordStore_ = nullptr;
  // The registries' store callbacks (started by the constructor, stopped by the destructor after
  // the registries stopped following the store).
  net::EventLoop metadataLoop_{"metadata-records"};

  BrokerOptions options_;
  std::shared_ptr<storage::ManagedLedgerFactory> factory_;
  // Non-persistent topics' ledgers: in memory, never written (only their subscriptions' cursors;
  // nothing is appended: PersistentTopic::publishNonPersistent).
  std::shared_ptr<storage::ManagedLedgerFactory> nonPersistentFactory_;
  std::unique_ptr<net::EventLoopGroup> ioLoops_;
  std::unique_ptr<net::EventLoopGroup> mlWorkers_;
  std::unique_ptr<net::TcpServer> server_;
  std::unique_ptr<net::TcpServer> tlsServer_;  // brokerServicePortTls
  // The periodic message TTL and backlog quota checks (Pulsar's thread names).
  std::unique_ptr<PeriodicTask> expiryMonitor_;
  std::unique_ptr<PeriodicTask> backlogQuotaChecker_;
  std::unique_ptr<PeriodicTask> inactivityMonitor_;
  std::unique_ptr<PeriodicTask> subscriptionExpiryMonitor_;
  std::unique_ptr<PeriodicTask> compactionMonitor_;
  std::unique_ptr<PeriodicTask> txnSnapshotMonitor_;
  // Every kMemoryTrimPeriod, once kMemoryTrimAfterCloses or more connections closed since the
  // last time: gives the heap's free pages back to the OS (malloc_trim), which glibc does not
  // do by itself for memory freed below the top of its arenas.
  std::unique_ptr<PeriodicTask> memoryTrimmer_;
  // The transactions' buffer client (service/local_transaction_buffer_client.cc: the topics this
  // broker serves) and the coordinators.
  std::unique_ptr<TransactionBufferClient> txnBufferClient_;
  // Cluster mode: the coordinators' client, ending txns on other brokers' topics over
  // txnBufferClient_ (the local one) for this broker's.
  std::unique_ptr<RemoteTransactionBufferClient> txnRemoteBufferClient_;
  // Cluster mode: the brokerClient* settings (checked at start).
  std::shared_ptr<const BrokerClientSettings> brokerClientSettings_;
  std::unique_ptr<CoordinatorRegistry> txnCoordinators_;
  mutable Mutex brokerIdMu_;
  std::string brokerId_ GUARDED_BY(brokerIdMu_);
  std::atomic<int64_t> closedSinceTrim_{0};
  // Compacted ledgers found at start-up, by topic ledger name: their seqs (compactedLedgerName);
  // handed to the topic when it loads. Guarded by mu_.
  std::map<std::string, std::vector<int64_t>> compactedSeqs_;
  // Pending-ack logs (Pulsar's "{topic}-{sub}__transaction_pending_ack" managed ledgers) that
  // exist in the embedded storage: found at start-up or created since; never topics. Guarded by
  // mu_. pendingAckStoreOpener: how a topic on `executor` opens and forgets them.
  std::set<std::string> pendingAckLedgers_;
  PendingAckStoreOpener pendingAckStoreOpener(net::EventLoop& executor);
  // maxMessagePublishBufferSizeInMB whole, for frames admitted at their header.
  FrameAdmission admission_{0};
  std::vector<std::unique_ptr<PublishBufferThrottle>> throttles_;  // one per pulsar-io loop

  mutable Mutex mu_;
  TopicLoadedHook topicLoaded_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<TopicSlot>> topics_ GUARDED_BY(mu_);
  std::map<std::string, bool> storedLedgers_ GUARDED_BY(mu_);
  NamespaceResources namespaces_;  // lock order: mu_ before its own
  PolicyRegistry policies_;
  std::unique_ptr<AuthenticationService> authentication_;
  std::unique_ptr<AuthorizationService> authorization_;
  SchemaRegistry schemas_;
  TopicEventListeners topicListeners_;
  RateRegistry rates_;
  BrokerRateLimiters rateLimiters_;
  // Guards rebuilding rateLimiters_ (a settings change from pulsar-web).
  std::mutex rateSettingsMu_;
  // The resource groups' publish limiters by group name (Pulsar's ResourceGroupPublishLimiter,
  // one per group on each broker) and the quota each was configured with. A deleted group's
  // limiter is turned off, not freed: topics and connections may still point at it.
  mutable std::mutex groupLimitersMu_;
  std::map<std::string, std::unique_ptr<MessageRateLimiter>> groupLimiters_;
  std::map<std::string, ResourceGroupQuota> groupQuotas_;
  std::atomic<uint64_t> producerNameSeq_{0};
  std::atomic<int64_t> producerNameGeneratorId_{0};
  std::atomic<int64_t> activeConnections_{0};
  static constexpr std::chrono::seconds kMemoryTrimPeriod{5};
  static constexpr int64_t kMemoryTrimAfterCloses = 100;
  // Heap blocks from this size on are mmapped on their own (mallopt M_MMAP_THRESHOLD, glibc).
  static constexpr size_t kLargeAllocationBytes = 1024 * 1024;
};

}  // namespace magnetar::broker
