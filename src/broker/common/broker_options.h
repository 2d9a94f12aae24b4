// BrokerOptions: the settings the broker module reads, filled by the app from the config registry
// (one binding per field: src/app/option_bindings.cc). Comments name the broker.conf key; a field's
// default is that key's default in settings.def (setting_defaults.h, generated from it).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/dynamic_setting.h"
#include "broker/common/listeners.h"
#include "net/tls.h"
#include "setting_defaults.h"

namespace magnetar::broker {

namespace sd = setting_defaults;

// The settings Pulsar lets `brokers update-dynamic-config` change that the broker reads at each
// use: the app stores a new value when the registry changes (BrokerService::dynamicOptions()),
// the next read (topic creation, subscribe, dispatcher read) sees it. Thread: any.
struct BrokerDynamicOptions {
  DynamicSetting<bool> allowAutoTopicCreation = sd::allowAutoTopicCreation;
  DynamicSetting<std::string> allowAutoTopicCreationType{
      std::string(sd::allowAutoTopicCreationType)};
  DynamicSetting<int> defaultNumPartitions = sd::defaultNumPartitions;
  DynamicSetting<bool> allowAutoSubscriptionCreation = sd::allowAutoSubscriptionCreation;
  DynamicSetting<int> dispatcherMaxReadBatchSize = sd::dispatcherMaxReadBatchSize;  // entries
  DynamicSetting<int64_t> dispatcherMaxReadSizeBytes = sd::dispatcherMaxReadSizeBytes;
  // Key_Shared look-ahead: new entries are read only while the replay set is below
  // min(perConsumer * consumers, perSubscription), a 0 dropping its term (Pulsar 4's rule).
  DynamicSetting<int> keySharedLookAheadMsgInReplayThresholdPerConsumer =
      sd::keySharedLookAheadMsgInReplayThresholdPerConsumer;
  DynamicSetting<int> keySharedLookAheadMsgInReplayThresholdPerSubscription =
      sd::keySharedLookAheadMsgInReplayThresholdPerSubscription;
  // Magnetar only: bytes of new Key_Shared entries parked at consumers out of permits per
  // subscription (Dispatcher::park; 0: none, they go to the replay set).
  DynamicSetting<int64_t> keySharedParkedEntriesMaxBytes = sd::keySharedParkedEntriesMaxBytes;
  // Whether producers may register new schema versions (a namespace policy may override).
  DynamicSetting<bool> isAllowAutoUpdateSchemaEnabled = sd::isAllowAutoUpdateSchemaEnabled;
  // Inactive topic deletion for topics without an inactiveTopicPolicies policy (Pulsar's
  // brokerDeleteInactiveTopics*); maxInactiveDurationSeconds -1: unset (then
  // brokerDeleteInactiveTopicsFrequencySeconds).
  DynamicSetting<bool> brokerDeleteInactiveTopicsEnabled = sd::brokerDeleteInactiveTopicsEnabled;
  DynamicSetting<std::string> brokerDeleteInactiveTopicsMode{
      std::string(sd::brokerDeleteInactiveTopicsMode)};
  DynamicSetting<int> brokerDeleteInactiveTopicsMaxInactiveDurationSeconds = -1;
  // When the inactive-topic check has deleted every partition of a partitioned topic, its
  // partitioned metadata (and topic policies) go too.
  DynamicSetting<bool> brokerDeleteInactivePartitionedTopicMetadataEnabled =
      sd::brokerDeleteInactivePartitionedTopicMetadataEnabled;
  // Rate limits (docs/rate-limits.md): the broker-wide limits (BrokerService reconfigures its
  // BrokerRateLimiters on a change) and the defaults behind the rate policies (the loaded topics
  // take them again on a change). Per second; 0: no limit.
  DynamicSetting<int> brokerPublisherThrottlingMaxMessageRate =
      sd::brokerPublisherThrottlingMaxMessageRate;
  DynamicSetting<int64_t> brokerPublisherThrottlingMaxByteRate =
      sd::brokerPublisherThrottlingMaxByteRate;
  DynamicSetting<int> maxPublishRatePerTopicInMessages = sd::maxPublishRatePerTopicInMessages;
  DynamicSetting<int64_t> maxPublishRatePerTopicInBytes = sd::maxPublishRatePerTopicInBytes;
  DynamicSetting<int> dispatchThrottlingRateInMsg = sd::dispatchThrottlingRateInMsg;
  DynamicSetting<int64_t> dispatchThrottlingRateInByte = sd::dispatchThrottlingRateInByte;
  DynamicSetting<int> dispatchThrottlingRatePerTopicInMsg = sd::dispatchThrottlingRatePerTopicInMsg;
  DynamicSetting<int64_t> dispatchThrottlingRatePerTopicInByte =
      sd::dispatchThrottlingRatePerTopicInByte;
  DynamicSetting<int> dispatchThrottlingRatePerSubscriptionInMsg =
      sd::dispatchThrottlingRatePerSubscriptionInMsg;
  DynamicSetting<int64_t> dispatchThrottlingRatePerSubscriptionInByte =
      sd::dispatchThrottlingRatePerSubscriptionInByte;
  DynamicSetting<bool> dispatchThrottlingRateRelativeToPublishRate =
      sd::dispatchThrottlingRateRelativeToPublishRate;
  DynamicSetting<bool> dispatchThrottlingOnNonBacklogConsumerEnabled =
      sd::dispatchThrottlingOnNonBacklogConsumerEnabled;
  DynamicSetting<bool> dispatchThrottlingOnBatchMessageEnabled =
      sd::dispatchThrottlingOnBatchMessageEnabled;
  DynamicSetting<int> subscribeThrottlingRatePerConsumer = sd::subscribeThrottlingRatePerConsumer;
  DynamicSetting<int> subscribeRatePeriodPerConsumerInSecond =
      sd::subscribeRatePeriodPerConsumerInSecond;
};

// The broker's connections to other brokers (Pulsar's PulsarService.getClient settings), read
// once at start as Pulsar builds its client once: broker/service/broker_client_settings.h.
struct BrokerClientOptions {
  std::string authenticationPlugin{sd::brokerClientAuthenticationPlugin};
  std::string authenticationParameters{sd::brokerClientAuthenticationParameters};
  bool tlsEnabled = sd::brokerClientTlsEnabled;                          // owners' pulsar+ssl URLs
  bool tlsEnabledWithKeyStore = sd::brokerClientTlsEnabledWithKeyStore;  // refused when set
  // brokerClientTrustCertsFilePath, else tlsTrustCertsFilePath ("" both: the system's CAs).
  std::string trustCertsFilePath{sd::brokerClientTrustCertsFilePath};
  std::string tlsTrustCertsFilePath{sd::tlsTrustCertsFilePath};
  std::string certificateFilePath{sd::brokerClientCertificateFilePath};
  std::string keyFilePath{sd::brokerClientKeyFilePath};
  bool allowInsecureConnection = sd::tlsAllowInsecureConnection;
  bool hostnameVerificationEnabled = sd::tlsHostnameVerificationEnabled;
};

struct BrokerOptions {
  std::string bindAddress{sd::bindAddress};  // bindAddress
  // advertisedAddress; the registry's empty value (this host) is passed as "localhost".
  std::string advertisedAddress = "localhost";
  std::string clusterName{sd::clusterName};       // clusterName
  // Geo-replication (src/broker/replication): a new replication cursor's start ("earliest" or
  // "latest"), and the entries a replicator has sent and not had acknowledged.
  std::string replicationStartAt{sd::replicationStartAt};
  int replicationProducerQueueSize = sd::replicationProducerQueueSize;
  // Replicated subscriptions (src/broker/replication/replicated_subscriptions.h).
  bool enableReplicatedSubscriptions = sd::enableReplicatedSubscriptions;
  int replicatedSubscriptionsSnapshotFrequencyMillis =
      sd::replicatedSubscriptionsSnapshotFrequencyMillis;
  int replicatedSubscriptionsSnapshotTimeoutSeconds =
      sd::replicatedSubscriptionsSnapshotTimeoutSeconds;
  int replicatedSubscriptionsSnapshotMaxCachedPerSubscription =
      sd::replicatedSubscriptionsSnapshotMaxCachedPerSubscription;
  AdvertisedListeners advertisedListeners;        // advertisedListeners, internalListenerName
  int brokerServicePort = sd::brokerServicePort;  // brokerServicePort (0: pick a free port)
  int webServicePort = sd::webServicePort;        // webServicePort, for lookup answers
  // brokerServicePortTls (unset: no TLS listener; 0: a free port), served with tlsContext (the
  // tls* settings, loaded by the app). Both or neither.
  std::optional<int> brokerServicePortTls;
  std::shared_ptr<net::TlsContext> tlsContext;
  // numIOThreads and managedLedgerNumWorkerThreads, resolved by the registry (their defaults
  // depend on the processors); these values only serve code that builds options without it.
  int numIOThreads = 8;
  int managedLedgerNumWorkerThreads = 2;
  uint32_t maxMessageSize = sd::maxMessageSize;  // maxMessageSize, bytes
  int keepAliveIntervalSeconds = sd::keepAliveIntervalSeconds;
  bool enableBrokerSideSubscriptionPatternEvaluation =
      sd::enableBrokerSideSubscriptionPatternEvaluation;
  int subscriptionPatternMaxLength = sd::subscriptionPatternMaxLength;  // characters
  bool enableBrokerTopicListWatcher = sd::enableBrokerTopicListWatcher;
  int maxUnackedMessagesPerConsumer = sd::maxUnackedMessagesPerConsumer;          // 0: off
  int maxUnackedMessagesPerSubscription = sd::maxUnackedMessagesPerSubscription;  // 0: off
  int maxPendingPublishRequestsPerConnection = sd::maxPendingPublishRequestsPerConnection;
  // Non-persistent SENDs in flight per connection above which one is dropped (Pulsar's
  // ServerCnx.handleSend); 0 drops every SEND while another is in flight.
  int maxConcurrentNonPersistentMessagePerConnection =
      sd::maxConcurrentNonPersistentMessagePerConnection;
  // Outbound watermarks per connection, bytes (see net::Connection::setWriteWatermarks).
  int pulsarChannelWriteBufferHighWaterMark = sd::pulsarChannelWriteBufferHighWaterMark;
  int pulsarChannelWriteBufferLowWaterMark = sd::pulsarChannelWriteBufferLowWaterMark;
  // Failover: ms before a newly active consumer is told and read for (Dispatcher::holdActivation).
  int64_t activeConsumerFailoverDelayTimeMillis = sd::activeConsumerFailoverDelayTimeMillis;
  bool delayedDeliveryEnabled = sd::delayedDeliveryEnabled;
  int64_t delayedDeliveryTickTimeMillis = sd::delayedDeliveryTickTimeMillis;  // ms
  bool isDelayedDeliveryDeliverAtTimeStrict = sd::isDelayedDeliveryDeliverAtTimeStrict;
  int64_t delayedDeliveryMaxDelayInMillis = sd::delayedDeliveryMaxDelayInMillis;  // ms, 0: off
  // Seconds between checks of a connection's credentials (Pulsar's auth refresh task).
  int authenticationRefreshCheckSeconds = sd::authenticationRefreshCheckSeconds;
  // maxMessagePublishBufferSizeInMB at start-up (<= 0: off); changed at run time through
  // BrokerService::setMaxMessagePublishBufferSizeInMB().
  int maxMessagePublishBufferSizeInMB = sd::maxMessagePublishBufferSizeInMB;
  // Topic limits (0: none), as Pulsar: ProducerBusy / ConsumerBusy / NotAllowedError beyond them.
  int maxProducersPerTopic = sd::maxProducersPerTopic;
  int maxConsumersPerTopic = sd::maxConsumersPerTopic;
  int maxConsumersPerSubscription = sd::maxConsumersPerSubscription;
  int maxSubscriptionsPerTopic = sd::maxSubscriptionsPerTopic;
  // Message TTL (Pulsar's): a subscription's messages older than this are expired (0: off);
  // below a namespace and a topic messageTTL policy. Checked every
  // messageExpiryCheckIntervalInMinutes on the pulsar-msg-expiry-monitor thread.
  int ttlDurationDefaultInSeconds = sd::ttlDurationDefaultInSeconds;
  int messageExpiryCheckIntervalInMinutes = sd::messageExpiryCheckIntervalInMinutes;
  // Automatic compaction: a topic is compacted when its bytes after the __compaction cursor pass
  // this (0: off; below the namespace and topic compactionThreshold), checked every
  // brokerServiceCompactionMonitorIntervalInSeconds.
  int64_t brokerServiceCompactionThresholdInBytes = sd::brokerServiceCompactionThresholdInBytes;
  int brokerServiceCompactionMonitorIntervalInSeconds =
      sd::brokerServiceCompactionMonitorIntervalInSeconds;
  // Retention of topics without a namespace or topic policy (also the managed ledger's default),
  // in minutes and MB (-1: forever / unlimited); an inactive topic is not deleted before the
  // retention time passed.
  int defaultRetentionTimeInMinutes = sd::defaultRetentionTimeInMinutes;
  int64_t defaultRetentionSizeInMB = sd::defaultRetentionSizeInMB;
  // Backlog quota (destination_storage) for topics without a namespace or topic one: bytes
  // (-1: none) and what happens beyond it; checked on producer creation and every
  // backlogQuotaCheckIntervalInSeconds.
  bool backlogQuotaCheckEnabled = sd::backlogQuotaCheckEnabled;
  int backlogQuotaCheckIntervalInSeconds = sd::backlogQuotaCheckIntervalInSeconds;
  int64_t backlogQuotaDefaultLimitBytes = sd::backlogQuotaDefaultLimitBytes;
  std::string backlogQuotaDefaultRetentionPolicy{sd::backlogQuotaDefaultRetentionPolicy};
  // message_age backlog quota for topics without one: seconds (-1: none).
  int backlogQuotaDefaultLimitSecond = sd::backlogQuotaDefaultLimitSecond;
  // The inactive-topic check (pulsar-inactivity-monitor) runs this often, in seconds.
  int brokerDeleteInactiveTopicsFrequencySeconds = sd::brokerDeleteInactiveTopicsFrequencySeconds;
  // Subscriptions without consumers for this many minutes are deleted (0: never; below the
  // namespace subscription_expiration_time_minutes), checked every
  // subscriptionExpiryCheckIntervalInMinutes.
  int subscriptionExpirationTimeMinutes = sd::subscriptionExpirationTimeMinutes;
  int subscriptionExpiryCheckIntervalInMinutes = sd::subscriptionExpiryCheckIntervalInMinutes;
  // Transactions (PIP-31): coordinators, transaction buffers and pending acks are served only
  // when on (Pulsar's transactionCoordinatorEnabled).
  bool transactionCoordinatorEnabled = sd::transactionCoordinatorEnabled;
  // Open transactions one coordinator allows, 0: no limit (NEW_TXN answered Busy beyond it).
  int64_t maxActiveTransactionsPerCoordinator = sd::maxActiveTransactionsPerCoordinator;
  // transactionBufferClientOperationTimeoutInMills: how long the coordinator waits for another
  // broker's answer to END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION (cluster mode).
  int64_t transactionBufferClientOperationTimeoutInMills =
      sd::transactionBufferClientOperationTimeoutInMills;
  // A topic's transaction buffer snapshots once this many commits/aborts changed it (0: each),
  // and, changed, at least every MinTimeInMillis (Pulsar's takeSnapshotByChangeTimes /
  // takeSnapshotByTimeout).
  int64_t transactionBufferSnapshotMaxTransactionCount =
      sd::transactionBufferSnapshotMaxTransactionCount;
  int64_t transactionBufferSnapshotMinTimeInMillis = sd::transactionBufferSnapshotMinTimeInMillis;
  // A pending-ack log's cursor is moved on (its replay shortened) at most once per this many
  // entries written (Pulsar's MLPendingAckStore index lag).
  int64_t transactionPendingAckLogIndexMinLag = sd::transactionPendingAckLogIndexMinLag;
  BrokerClientOptions brokerClient;  // the brokerClient* keys (that connection's TLS and auth)
  bool brokerDeduplicationEnabled = sd::brokerDeduplicationEnabled;
  int brokerDeduplicationMaxNumberOfProducers = sd::brokerDeduplicationMaxNumberOfProducers;
  int brokerDeduplicationEntriesInterval = sd::brokerDeduplicationEntriesInterval;
  // Cursor writes per second that storage allows (0: no limit); dedup snapshots by entry count
  // are taken no more often than that (DedupOptions::minSnapshotIntervalMs).
  double managedLedgerDefaultMarkDeleteRateLimit = sd::managedLedgerDefaultMarkDeleteRateLimit;
  int brokerDeduplicationSnapshotIntervalSeconds = sd::brokerDeduplicationSnapshotIntervalSeconds;
  int brokerDeduplicationSnapshotFrequencyInSeconds =
      sd::brokerDeduplicationSnapshotFrequencyInSeconds;
  int brokerDeduplicationProducerInactivityTimeoutMinutes =
      sd::brokerDeduplicationProducerInactivityTimeoutMinutes;
  bool acknowledgmentAtBatchIndexLevelEnabled = sd::acknowledgmentAtBatchIndexLevelEnabled;
  bool subscriptionKeySharedUseConsistentHashing = sd::subscriptionKeySharedUseConsistentHashing;
  int subscriptionKeySharedConsistentHashingReplicaPoints =
      sd::subscriptionKeySharedConsistentHashingReplicaPoints;
  // Schema registry (Pulsar's names).
  std::string schemaCompatibilityStrategy{sd::schemaCompatibilityStrategy};
  bool isSchemaValidationEnforced = sd::isSchemaValidationEnforced;
  BrokerDynamicOptions dynamic;
  std::string serverVersion = "Magnetar 0.1.0";
};

}  // namespace magnetar::broker
