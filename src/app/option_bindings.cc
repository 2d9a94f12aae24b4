#include "app/option_bindings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <utility>

#include "base/clock.h"
#include "base/dynamic_setting.h"
#include "base/logging.h"
#include "config/host_usage.h"

namespace magnetar::app {
namespace {

// Conversions from a setting's value to its field's.
template <class T>
T same(T v) {
  return v;
}
int64_t mebibytesToBytes(int64_t mb) { return mb << 20; }
int32_t secondsToMs(int32_t s) { return s * 1000; }
// journalBufferedWritesThreshold 0: no byte threshold; a group still holds 4 MiB at most.
int64_t groupBytes(int64_t b) { return b > 0 ? b : int64_t{4} << 20; }
// advertisedAddress empty: this host, given to clients as "localhost".
std::string orLocalhost(const std::string& a) { return a.empty() ? std::string("localhost") : a; }
// An unset OptInt as -1.
int32_t orMinusOne(std::optional<int32_t> v) { return v.value_or(-1); }

template <class F, class V>
void setField(F& field, V v) {
  field = static_cast<F>(std::move(v));
}
template <class T, class V>
void setField(DynamicSetting<T>& field, V v) {
  field.store(static_cast<T>(std::move(v)));
}
template <class F, class V>
bool fieldIs(const F& field, const V& v) {
  return field == static_cast<F>(v);
}
template <class T, class V>
bool fieldIs(const DynamicSetting<T>& field, const V& v) {
  return field.load() == static_cast<T>(v);
}

// A binding of setting `key` to field `field` of the table's struct `O`, through `convert`.
// config_test's enforced check counts MAGNETAR_BIND(key, ...) as reading `key`.
#define MAGNETAR_BIND_AS(key, field, convert)                                                     \
  SettingBinding<O> {                                                                             \
    config::SettingId::key,                                                                       \
        [](const config::ServiceConfiguration& c, O& o) { setField(o.field, convert(c.key())); }, \
        [](const config::ServiceConfiguration& c, const O& o) {                                   \
          return fieldIs(o.field, convert(c.key()));                                              \
        }                                                                                         \
  }
#define MAGNETAR_BIND(key, field) MAGNETAR_BIND_AS(key, field, same)

bool isZooKeeperUrl(const std::string& url) { return url.rfind("zk:", 0) == 0; }

// Where the embedded store keeps its metadata. Errors: kInvalidArgument for a metadataStoreUrl
// this build cannot serve (only the embedded rocksdb: store and ZooKeeper so far).
Result<std::string> metadataDirectoryFrom(const config::ServiceConfiguration& cfg) {
  std::string url = cfg.metadataStoreUrl();
  if (isZooKeeperUrl(url)) {
    // Cluster mode: ZooKeeper holds the cluster's metadata; the embedded ledgers' own keys
    // (cursors, ledger lists) stay local, next to the journal (docs/cluster-mode.md).
    auto parent = std::filesystem::path(cfg.journalDirectory()).parent_path();
    return ((parent.empty() ? std::filesystem::path(".") : parent) / "metadata").string();
  }
  constexpr std::string_view kRocks = "rocksdb:";
  if (url.rfind(kRocks, 0) != 0) {
    return Status::invalidArgument(
        "metadataStoreUrl '" + url +
        "': accepted forms are rocksdb:<directory> (the embedded store) and "
        "zk:host:port[,host:port...][/chroot] (ZooKeeper, cluster mode: `magnetar broker`)");
  }
  std::string dir = url.substr(kRocks.size());
  if (dir.rfind("//", 0) == 0) dir = dir.substr(2);
  return dir;
}

// Test hook (docs/memory-limits.md): slowed storage for the flood tests.
int64_t testJournalDelayMicros() {
  const char* delay = std::getenv("MAGNETAR_TEST_STORAGE_DELAY_MICROS");
  if (!delay) return 0;
  int64_t micros = std::strtoll(delay, nullptr, 10);
  if (micros > 0) {
    MLOG_WARN(
        "test hook: every journal group commit sleeps {} us "
        "(MAGNETAR_TEST_STORAGE_DELAY_MICROS)",
        micros);
  }
  return micros;
}

}  // namespace

// The ManagedLedgerConfig fields, which both backends' options (StorageOptions,
// BkStorageOptions) extend, followed by `own`: the backend's own fields.
template <class O>
SettingBindings<O> withManagedLedgerBindings(std::initializer_list<SettingBinding<O>> own) {
  SettingBindings<O> b{
      MAGNETAR_BIND(managedLedgerMaxEntriesPerLedger, managedLedgerMaxEntriesPerLedger),
      MAGNETAR_BIND(managedLedgerMaxSizePerLedgerMbytes, managedLedgerMaxSizePerLedgerMbytes),
      MAGNETAR_BIND(managedLedgerMinLedgerRolloverTimeMinutes,
                    managedLedgerMinLedgerRolloverTimeMinutes),
      MAGNETAR_BIND(managedLedgerMaxLedgerRolloverTimeMinutes,
                    managedLedgerMaxLedgerRolloverTimeMinutes),
      MAGNETAR_BIND(managedLedgerMaxUnackedRangesToPersist, managedLedgerMaxUnackedRangesToPersist),
      MAGNETAR_BIND(managedLedgerMaxBatchDeletedIndexToPersist,
                    managedLedgerMaxBatchDeletedIndexToPersist),
      MAGNETAR_BIND(managedLedgerDefaultMarkDeleteRateLimit,
                    managedLedgerDefaultMarkDeleteRateLimit),
      MAGNETAR_BIND(managedLedgerCacheSizeMB, managedLedgerCacheSizeMB),
      MAGNETAR_BIND(defaultRetentionTimeInMinutes, defaultRetentionTimeInMinutes),
      MAGNETAR_BIND(defaultRetentionSizeInMB, defaultRetentionSizeInMB),
      MAGNETAR_BIND(retentionCheckIntervalInSeconds, retentionCheckIntervalInSeconds),
  };
  b.insert(b.end(), own);
  return b;
}

const SettingBindings<storage::StorageOptions>& storageOptionBindings() {
  using O = storage::StorageOptions;
  static const SettingBindings<O> kBindings = withManagedLedgerBindings<O>({
      MAGNETAR_BIND(journalDirectory, journalDirectory),
      MAGNETAR_BIND(journalSyncData, journalSyncData),
      MAGNETAR_BIND(journalMaxGroupWaitMSec, journalMaxGroupWaitMSec),
      MAGNETAR_BIND_AS(journalBufferedWritesThreshold, journalMaxGroupBytes, groupBytes),
      MAGNETAR_BIND_AS(journalMaxSizeMB, journalSegmentSizeBytes, mebibytesToBytes),
      MAGNETAR_BIND(minorCompactionThreshold, minorCompactionThreshold),
      MAGNETAR_BIND(minorCompactionInterval, minorCompactionInterval),
      MAGNETAR_BIND(majorCompactionThreshold, majorCompactionThreshold),
      MAGNETAR_BIND(majorCompactionInterval, majorCompactionInterval),
      MAGNETAR_BIND(compactionRateByBytes, compactionRateByBytes),
      MAGNETAR_BIND(diskUsageThreshold, diskUsageThreshold),
      MAGNETAR_BIND(diskUsageLwmThreshold, diskUsageLwmThreshold),
      MAGNETAR_BIND(diskCheckInterval, diskCheckInterval),
      MAGNETAR_BIND(numReadWorkerThreads, numReadThreads),
  });
  return kBindings;
}

const SettingBindings<storage::bk::BkStorageOptions>& bkStorageOptionBindings() {
  using O = storage::bk::BkStorageOptions;
  static const SettingBindings<O> kBindings = withManagedLedgerBindings<O>({
      MAGNETAR_BIND(managedLedgerDefaultEnsembleSize, managedLedgerDefaultEnsembleSize),
      MAGNETAR_BIND(managedLedgerDefaultWriteQuorum, managedLedgerDefaultWriteQuorum),
      MAGNETAR_BIND(managedLedgerDefaultAckQuorum, managedLedgerDefaultAckQuorum),
      MAGNETAR_BIND(managedLedgerMaxUnackedRangesToPersistInMetadataStore,
                    managedLedgerMaxUnackedRangesToPersistInMetadataStore),
      MAGNETAR_BIND(managedLedgerCursorMaxEntriesPerLedger, managedLedgerCursorMaxEntriesPerLedger),
      MAGNETAR_BIND(managedLedgerCursorRolloverTimeInSeconds,
                    managedLedgerCursorRolloverTimeInSeconds),
  });
  return kBindings;
}

namespace {

// The transaction settings of BrokerOptions (docs/transactions.md).
SettingBindings<broker::BrokerOptions> transactionOptionBindings() {
  using O = broker::BrokerOptions;
  return {
      MAGNETAR_BIND(transactionCoordinatorEnabled, transactionCoordinatorEnabled),
      MAGNETAR_BIND(maxActiveTransactionsPerCoordinator, maxActiveTransactionsPerCoordinator),
      MAGNETAR_BIND(transactionBufferClientOperationTimeoutInMills,
                    transactionBufferClientOperationTimeoutInMills),
      MAGNETAR_BIND(transactionBufferSnapshotMaxTransactionCount,
                    transactionBufferSnapshotMaxTransactionCount),
      MAGNETAR_BIND(transactionBufferSnapshotMinTimeInMillis,
                    transactionBufferSnapshotMinTimeInMillis),
      MAGNETAR_BIND(transactionPendingAckLogIndexMinLag, transactionPendingAckLogIndexMinLag),
  };
}

// Geo-replication's (src/broker/replication).
SettingBindings<broker::BrokerOptions> replicationOptionBindings() {
  using O = broker::BrokerOptions;
  return {
      MAGNETAR_BIND(replicationStartAt, replicationStartAt),
      MAGNETAR_BIND(replicationProducerQueueSize, replicationProducerQueueSize),
      MAGNETAR_BIND(enableReplicatedSubscriptions, enableReplicatedSubscriptions),
      MAGNETAR_BIND(replicatedSubscriptionsSnapshotFrequencyMillis,
                    replicatedSubscriptionsSnapshotFrequencyMillis),
      MAGNETAR_BIND(replicatedSubscriptionsSnapshotTimeoutSeconds,
                    replicatedSubscriptionsSnapshotTimeoutSeconds),
      MAGNETAR_BIND(replicatedSubscriptionsSnapshotMaxCachedPerSubscription,
                    replicatedSubscriptionsSnapshotMaxCachedPerSubscription),
  };
}

// The non-persistent publish limit (issue 49).
SettingBindings<broker::BrokerOptions> nonPersistentOptionBindings() {
  using O = broker::BrokerOptions;
  return {
      MAGNETAR_BIND(maxConcurrentNonPersistentMessagePerConnection,
                    maxConcurrentNonPersistentMessagePerConnection),
  };
}

// The groups above, appended to brokerOptionBindings().
std::vector<SettingBindings<broker::BrokerOptions>> moreOptionBindings() {
  return {transactionOptionBindings(), nonPersistentOptionBindings(), replicationOptionBindings()};
}

}  // namespace

const SettingBindings<broker::BrokerOptions>& brokerOptionBindings() {
  using O = broker::BrokerOptions;
  static const SettingBindings<O> kBindings = [] {
    SettingBindings<O> b{
        MAGNETAR_BIND(bindAddress, bindAddress),
        MAGNETAR_BIND_AS(advertisedAddress, advertisedAddress, orLocalhost),
        MAGNETAR_BIND(clusterName, clusterName),
        MAGNETAR_BIND(brokerServicePort, brokerServicePort),
        MAGNETAR_BIND(brokerServicePortTls, brokerServicePortTls),
        MAGNETAR_BIND(webServicePort, webServicePort),
        MAGNETAR_BIND(numIOThreads, numIOThreads),
        MAGNETAR_BIND(managedLedgerNumWorkerThreads, managedLedgerNumWorkerThreads),
        MAGNETAR_BIND(maxMessageSize, maxMessageSize),
        MAGNETAR_BIND(keepAliveIntervalSeconds, keepAliveIntervalSeconds),
        MAGNETAR_BIND(enableBrokerSideSubscriptionPatternEvaluation,
                      enableBrokerSideSubscriptionPatternEvaluation),
        MAGNETAR_BIND(subscriptionPatternMaxLength, subscriptionPatternMaxLength),
        MAGNETAR_BIND(enableBrokerTopicListWatcher, enableBrokerTopicListWatcher),
        MAGNETAR_BIND(maxUnackedMessagesPerConsumer, maxUnackedMessagesPerConsumer),
        MAGNETAR_BIND(maxUnackedMessagesPerSubscription, maxUnackedMessagesPerSubscription),
        MAGNETAR_BIND(maxPendingPublishRequestsPerConnection,
                      maxPendingPublishRequestsPerConnection),
        MAGNETAR_BIND(pulsarChannelWriteBufferHighWaterMark, pulsarChannelWriteBufferHighWaterMark),
        MAGNETAR_BIND(pulsarChannelWriteBufferLowWaterMark, pulsarChannelWriteBufferLowWaterMark),
        MAGNETAR_BIND(activeConsumerFailoverDelayTimeMillis, activeConsumerFailoverDelayTimeMillis),
        MAGNETAR_BIND(delayedDeliveryEnabled, delayedDeliveryEnabled),
        MAGNETAR_BIND(delayedDeliveryTickTimeMillis, delayedDeliveryTickTimeMillis),
        MAGNETAR_BIND(isDelayedDeliveryDeliverAtTimeStrict, isDelayedDeliveryDeliverAtTimeStrict),
        MAGNETAR_BIND(delayedDeliveryMaxDelayInMillis, delayedDeliveryMaxDelayInMillis),
        MAGNETAR_BIND(authenticationRefreshCheckSeconds, authenticationRefreshCheckSeconds),
        MAGNETAR_BIND(maxMessagePublishBufferSizeInMB, maxMessagePublishBufferSizeInMB),
        MAGNETAR_BIND(maxProducersPerTopic, maxProducersPerTopic),
        MAGNETAR_BIND(maxConsumersPerTopic, maxConsumersPerTopic),
        MAGNETAR_BIND(maxConsumersPerSubscription, maxConsumersPerSubscription),
        MAGNETAR_BIND(maxSubscriptionsPerTopic, maxSubscriptionsPerTopic),
        MAGNETAR_BIND(ttlDurationDefaultInSeconds, ttlDurationDefaultInSeconds),
        MAGNETAR_BIND(messageExpiryCheckIntervalInMinutes, messageExpiryCheckIntervalInMinutes),
        MAGNETAR_BIND(brokerServiceCompactionThresholdInBytes,
                      brokerServiceCompactionThresholdInBytes),
        MAGNETAR_BIND(brokerServiceCompactionMonitorIntervalInSeconds,
                      brokerServiceCompactionMonitorIntervalInSeconds),
        MAGNETAR_BIND(defaultRetentionTimeInMinutes, defaultRetentionTimeInMinutes),
        MAGNETAR_BIND(defaultRetentionSizeInMB, defaultRetentionSizeInMB),
        MAGNETAR_BIND(backlogQuotaCheckEnabled, backlogQuotaCheckEnabled),
        MAGNETAR_BIND(backlogQuotaCheckIntervalInSeconds, backlogQuotaCheckIntervalInSeconds),
        MAGNETAR_BIND(backlogQuotaDefaultLimitBytes, backlogQuotaDefaultLimitBytes),
        MAGNETAR_BIND(backlogQuotaDefaultRetentionPolicy, backlogQuotaDefaultRetentionPolicy),
        MAGNETAR_BIND(backlogQuotaDefaultLimitSecond, backlogQuotaDefaultLimitSecond),
        MAGNETAR_BIND(brokerDeleteInactiveTopicsFrequencySeconds,
                      brokerDeleteInactiveTopicsFrequencySeconds),
        MAGNETAR_BIND(subscriptionExpirationTimeMinutes, subscriptionExpirationTimeMinutes),
        MAGNETAR_BIND(subscriptionExpiryCheckIntervalInMinutes,
                      subscriptionExpiryCheckIntervalInMinutes),
        MAGNETAR_BIND(brokerDeduplicationEnabled, brokerDeduplicationEnabled),
        MAGNETAR_BIND(brokerDeduplicationMaxNumberOfProducers,
                      brokerDeduplicationMaxNumberOfProducers),
        MAGNETAR_BIND(brokerDeduplicationEntriesInterval, brokerDeduplicationEntriesInterval),
        MAGNETAR_BIND(managedLedgerDefaultMarkDeleteRateLimit,
                      managedLedgerDefaultMarkDeleteRateLimit),
        MAGNETAR_BIND(brokerDeduplicationSnapshotIntervalSeconds,
                      brokerDeduplicationSnapshotIntervalSeconds),
        MAGNETAR_BIND(brokerDeduplicationSnapshotFrequencyInSeconds,
                      brokerDeduplicationSnapshotFrequencyInSeconds),
        MAGNETAR_BIND(brokerDeduplicationProducerInactivityTimeoutMinutes,
                      brokerDeduplicationProducerInactivityTimeoutMinutes),
        MAGNETAR_BIND(acknowledgmentAtBatchIndexLevelEnabled,
                      acknowledgmentAtBatchIndexLevelEnabled),
        MAGNETAR_BIND(subscriptionKeySharedUseConsistentHashing,
                      subscriptionKeySharedUseConsistentHashing),
        MAGNETAR_BIND(subscriptionKeySharedConsistentHashingReplicaPoints,
                      subscriptionKeySharedConsistentHashingReplicaPoints),
        MAGNETAR_BIND(schemaCompatibilityStrategy, schemaCompatibilityStrategy),
        MAGNETAR_BIND(isSchemaValidationEnforced, isSchemaValidationEnforced),
    };
    for (const auto& more : moreOptionBindings()) b.insert(b.end(), more.begin(), more.end());
    return b;
  }();
  return kBindings;
}

const SettingBindings<broker::BrokerDynamicOptions>& brokerDynamicOptionBindings() {
  using O = broker::BrokerDynamicOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(allowAutoTopicCreation, allowAutoTopicCreation),
      MAGNETAR_BIND(allowAutoTopicCreationType, allowAutoTopicCreationType),
      MAGNETAR_BIND(defaultNumPartitions, defaultNumPartitions),
      MAGNETAR_BIND(allowAutoSubscriptionCreation, allowAutoSubscriptionCreation),
      MAGNETAR_BIND(dispatcherMaxReadBatchSize, dispatcherMaxReadBatchSize),
      MAGNETAR_BIND(dispatcherMaxReadSizeBytes, dispatcherMaxReadSizeBytes),
      MAGNETAR_BIND(keySharedLookAheadMsgInReplayThresholdPerConsumer,
                    keySharedLookAheadMsgInReplayThresholdPerConsumer),
      MAGNETAR_BIND(keySharedLookAheadMsgInReplayThresholdPerSubscription,
                    keySharedLookAheadMsgInReplayThresholdPerSubscription),
      MAGNETAR_BIND(keySharedParkedEntriesMaxBytes, keySharedParkedEntriesMaxBytes),
      MAGNETAR_BIND(isAllowAutoUpdateSchemaEnabled, isAllowAutoUpdateSchemaEnabled),
      MAGNETAR_BIND(brokerDeleteInactiveTopicsEnabled, brokerDeleteInactiveTopicsEnabled),
      MAGNETAR_BIND(brokerDeleteInactiveTopicsMode, brokerDeleteInactiveTopicsMode),
      MAGNETAR_BIND_AS(brokerDeleteInactiveTopicsMaxInactiveDurationSeconds,
                       brokerDeleteInactiveTopicsMaxInactiveDurationSeconds, orMinusOne),
      MAGNETAR_BIND(brokerDeleteInactivePartitionedTopicMetadataEnabled,
                    brokerDeleteInactivePartitionedTopicMetadataEnabled),
      MAGNETAR_BIND(brokerPublisherThrottlingMaxMessageRate,
                    brokerPublisherThrottlingMaxMessageRate),
      MAGNETAR_BIND(brokerPublisherThrottlingMaxByteRate, brokerPublisherThrottlingMaxByteRate),
      MAGNETAR_BIND(maxPublishRatePerTopicInMessages, maxPublishRatePerTopicInMessages),
      MAGNETAR_BIND(maxPublishRatePerTopicInBytes, maxPublishRatePerTopicInBytes),
      MAGNETAR_BIND(dispatchThrottlingRateInMsg, dispatchThrottlingRateInMsg),
      MAGNETAR_BIND(dispatchThrottlingRateInByte, dispatchThrottlingRateInByte),
      MAGNETAR_BIND(dispatchThrottlingRatePerTopicInMsg, dispatchThrottlingRatePerTopicInMsg),
      MAGNETAR_BIND(dispatchThrottlingRatePerTopicInByte, dispatchThrottlingRatePerTopicInByte),
      MAGNETAR_BIND(dispatchThrottlingRatePerSubscriptionInMsg,
                    dispatchThrottlingRatePerSubscriptionInMsg),
      MAGNETAR_BIND(dispatchThrottlingRatePerSubscriptionInByte,
                    dispatchThrottlingRatePerSubscriptionInByte),
      MAGNETAR_BIND(dispatchThrottlingRateRelativeToPublishRate,
                    dispatchThrottlingRateRelativeToPublishRate),
      MAGNETAR_BIND(dispatchThrottlingOnNonBacklogConsumerEnabled,
                    dispatchThrottlingOnNonBacklogConsumerEnabled),
      MAGNETAR_BIND(dispatchThrottlingOnBatchMessageEnabled,
                    dispatchThrottlingOnBatchMessageEnabled),
      MAGNETAR_BIND(subscribeThrottlingRatePerConsumer, subscribeThrottlingRatePerConsumer),
      MAGNETAR_BIND(subscribeRatePeriodPerConsumerInSecond, subscribeRatePeriodPerConsumerInSecond),
  };
  return kBindings;
}

const SettingBindings<net::TlsOptions>& tlsOptionBindings() {
  using O = net::TlsOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(tlsCertificateFilePath, certificateFilePath),
      MAGNETAR_BIND(tlsKeyFilePath, keyFilePath),
      MAGNETAR_BIND(tlsTrustCertsFilePath, trustCertsFilePath),
      MAGNETAR_BIND(tlsAllowInsecureConnection, allowInsecureConnection),
      MAGNETAR_BIND(tlsRequireTrustedClientCertOnConnect, requireTrustedClientCertOnConnect),
      MAGNETAR_BIND(tlsProtocols, protocols),
      MAGNETAR_BIND(tlsCiphers, ciphers),
      MAGNETAR_BIND(tlsCertRefreshCheckDurationSec, certRefreshCheckDurationSec),
  };
  return kBindings;
}

// The broker-to-broker connection's (BrokerOptions::brokerClient), as Pulsar's getClient reads
// them (it shares tlsTrustCertsFilePath and tlsAllowInsecureConnection with the listeners).
const SettingBindings<broker::BrokerClientOptions>& brokerClientOptionBindings() {
  using O = broker::BrokerClientOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(brokerClientAuthenticationPlugin, authenticationPlugin),
      MAGNETAR_BIND(brokerClientAuthenticationParameters, authenticationParameters),
      MAGNETAR_BIND(brokerClientTlsEnabled, tlsEnabled),
      MAGNETAR_BIND(brokerClientTlsEnabledWithKeyStore, tlsEnabledWithKeyStore),
      MAGNETAR_BIND(brokerClientTrustCertsFilePath, trustCertsFilePath),
      MAGNETAR_BIND(tlsTrustCertsFilePath, tlsTrustCertsFilePath),
      MAGNETAR_BIND(brokerClientCertificateFilePath, certificateFilePath),
      MAGNETAR_BIND(brokerClientKeyFilePath, keyFilePath),
      MAGNETAR_BIND(tlsAllowInsecureConnection, allowInsecureConnection),
      MAGNETAR_BIND(tlsHostnameVerificationEnabled, hostnameVerificationEnabled),
  };
  return kBindings;
}

const SettingBindings<broker::AuthenticationOptions>& authenticationOptionBindings() {
  using O = broker::AuthenticationOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(authenticationEnabled, authenticationEnabled),
      MAGNETAR_BIND(authenticationProviders, authenticationProviders),
      MAGNETAR_BIND(anonymousUserRole, anonymousUserRole),
      MAGNETAR_BIND(tokenSecretKey, token.tokenSecretKey),
      MAGNETAR_BIND(tokenPublicKey, token.tokenPublicKey),
      MAGNETAR_BIND(tokenAuthClaim, token.tokenAuthClaim),
      MAGNETAR_BIND(tokenAudienceClaim, token.tokenAudienceClaim),
      MAGNETAR_BIND(tokenAudience, token.tokenAudience),
      MAGNETAR_BIND(basicAuthConf, basicAuthConf),
  };
  return kBindings;
}

const SettingBindings<bookkeeper::ClientConfig>& bookKeeperClientBindings() {
  using O = bookkeeper::ClientConfig;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(bookkeeperMetadataServiceUri, metadataServiceUri),
      MAGNETAR_BIND(bookkeeperClientNumIoThreads, numIoThreads),
      // Pulsar gives its BookKeeper client zkTimeout = metadataStoreSessionTimeoutMillis.
      MAGNETAR_BIND(metadataStoreSessionTimeoutMillis, zkSessionTimeoutMs),
      MAGNETAR_BIND(managedLedgerPassword, password),
  };
  return kBindings;
}

const SettingBindings<metadata::ZkConfig>& zkConfigBindings() {
  using O = metadata::ZkConfig;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(metadataStoreSessionTimeoutMillis, sessionTimeoutMs),
      MAGNETAR_BIND_AS(metadataStoreOperationTimeoutSeconds, operationTimeoutMs, secondsToMs),
  };
  return kBindings;
}

const SettingBindings<broker::cluster::NamespaceServiceOptions>& namespaceServiceBindings() {
  using O = broker::cluster::NamespaceServiceOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(clusterName, clusterName),
      MAGNETAR_BIND(metadataStoreSessionTimeoutMillis, sessionTimeoutMs),
      MAGNETAR_BIND(defaultNumberOfNamespaceBundles, defaultNumberOfNamespaceBundles),
  };
  return kBindings;
}

const SettingBindings<broker::cluster::ConfigurationStoreOptions>& configurationStoreBindings() {
  using O = broker::cluster::ConfigurationStoreOptions;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(clusterName, clusterName),
      MAGNETAR_BIND(defaultNumberOfNamespaceBundles, defaultNumberOfNamespaceBundles),
      MAGNETAR_BIND_AS(metadataStoreOperationTimeoutSeconds, operationTimeoutMs, secondsToMs),
  };
  return kBindings;
}

const SettingBindings<admin::HttpServer::Options>& httpServerBindings() {
  using O = admin::HttpServer::Options;
  static const SettingBindings<O> kBindings{
      MAGNETAR_BIND(bindAddress, bindAddress),
      MAGNETAR_BIND(webServicePort, port),
      MAGNETAR_BIND(numHttpServerThreads, numThreads),
  };
  return kBindings;
}

#undef MAGNETAR_BIND
#undef MAGNETAR_BIND_AS

Result<storage::StorageOptions> storageOptionsFrom(const config::ServiceConfiguration& cfg) {
  auto o = optionsFrom(storageOptionBindings(), cfg);
  auto dir = metadataDirectoryFrom(cfg);
  if (!dir.isOk()) return dir.status();
  o.metadataDirectory = std::move(*dir);
  o.testJournalDelayMicros = testJournalDelayMicros();
  return o;
}

storage::bk::BkStorageOptions bkStorageOptionsFrom(const config::ServiceConfiguration& cfg) {
  return optionsFrom(bkStorageOptionBindings(), cfg);
}

Result<broker::BrokerOptions> brokerOptionsFrom(const config::ServiceConfiguration& cfg) {
  auto o = optionsFrom(brokerOptionBindings(), cfg);
  // The dynamic ones take their start-up values here, later ones from connectDynamicSettings().
  applyBindings(brokerDynamicOptionBindings(), cfg, o.dynamic);
  o.brokerClient = optionsFrom(brokerClientOptionBindings(), cfg);
  auto listeners =
      broker::parseAdvertisedListeners(cfg.advertisedListeners(), cfg.internalListenerName());
  if (!listeners.isOk()) return listeners.status();
  o.advertisedListeners = std::move(*listeners);
  return o;
}

net::TlsOptions tlsOptionsFrom(const config::ServiceConfiguration& cfg) {
  return optionsFrom(tlsOptionBindings(), cfg);
}

broker::AuthenticationOptions authenticationOptionsFrom(const config::ServiceConfiguration& cfg) {
  return optionsFrom(authenticationOptionBindings(), cfg);
}

bookkeeper::ClientConfig bookKeeperClientConfigFrom(const config::ServiceConfiguration& cfg) {
  return optionsFrom(bookKeeperClientBindings(), cfg);
}

metadata::ZkConfig zkConfigFrom(const config::ServiceConfiguration& cfg, const std::string& url) {
  auto o = optionsFrom(zkConfigBindings(), cfg);
  o.url = url;
  o.connectTimeoutMs = std::max(o.sessionTimeoutMs, 5000);
  return o;
}

broker::cluster::NamespaceServiceOptions namespaceServiceOptionsFrom(
    const std::shared_ptr<const config::ServiceConfiguration>& cfg) {
  auto o = optionsFrom(namespaceServiceBindings(), *cfg);
  o.bundleUnloadingTimeoutMs = [cfg] { return cfg->namespaceBundleUnloadingTimeoutMs(); };
  o.placementSettings = [cfg] {
    broker::cluster::PlacementSettings s;
    s.strategy = cfg->loadBalancerLoadPlacementStrategy();
    s.overloadedThresholdPercentage = cfg->loadBalancerBrokerOverloadedThresholdPercentage();
    s.brokerMaxTopics = cfg->loadBalancerBrokerMaxTopics();
    s.distributeBundlesEvenly = cfg->loadBalancerDistributeBundlesEvenlyEnabled();
    for (const auto& ns : cfg->loadBalancerSheddingExcludedNamespaces()) {
      s.sheddingExcludedNamespaces.insert(ns);
    }
    s.cpuWeight = cfg->loadBalancerCPUResourceWeight();
    s.memoryWeight = cfg->loadBalancerMemoryResourceWeight();
    s.directMemoryWeight = cfg->loadBalancerDirectMemoryResourceWeight();
    s.bandwithInWeight = cfg->loadBalancerBandwithInResourceWeight();
    s.bandwithOutWeight = cfg->loadBalancerBandwithOutResourceWeight();
    s.bandwidthInWeight = cfg->loadBalancerBandwidthInResourceWeight();
    s.bandwidthOutWeight = cfg->loadBalancerBandwidthOutResourceWeight();
    return s;
  };
  return o;
}

broker::cluster::ConfigurationStoreOptions configurationStoreOptionsFrom(
    const config::ServiceConfiguration& cfg) {
  return optionsFrom(configurationStoreBindings(), cfg);
}

broker::cluster::LoadManager::Options loadManagerOptionsFrom(
    const std::shared_ptr<const config::ServiceConfiguration>& cfg,
    std::function<storage::StorageStats()> storageStats, const std::string& brokerVersion) {
  broker::cluster::LoadManager::Options o;
  o.enabled = cfg->loadBalancerEnabled();
  o.brokerVersion = brokerVersion;
  o.loadManagerClassName = cfg->loadManagerClassName();
  o.settings = [cfg] {
    broker::cluster::LoadReportSettings s;
    s.reportUpdateMinIntervalMillis = cfg->loadBalancerReportUpdateMinIntervalMillis();
    s.reportUpdateThresholdPercentage = cfg->loadBalancerReportUpdateThresholdPercentage();
    s.reportUpdateMaxIntervalMinutes = cfg->loadBalancerReportUpdateMaxIntervalMinutes();
    s.hostUsageCheckIntervalMinutes = cfg->loadBalancerHostUsageCheckIntervalMinutes();
    s.resourceQuotaUpdateIntervalMinutes = cfg->loadBalancerResourceQuotaUpdateIntervalMinutes();
    s.maxNumberOfBundlesInBundleLoadReport =
        cfg->loadBalancerMaxNumberOfBundlesInBundleLoadReport();
    s.cpuWeight = cfg->loadBalancerCPUResourceWeight();
    s.directMemoryWeight = cfg->loadBalancerDirectMemoryResourceWeight();
    s.bandwidthInWeight = cfg->loadBalancerBandwidthInResourceWeight();
    s.bandwidthOutWeight = cfg->loadBalancerBandwidthOutResourceWeight();
    return s;
  };
  o.balanceSettings = [cfg] {
    broker::cluster::LoadBalanceSettings b;
    b.sheddingEnabled = cfg->loadBalancerSheddingEnabled();
    b.sheddingStrategy = cfg->loadBalancerLoadSheddingStrategy();
    b.sheddingIntervalMinutes = cfg->loadBalancerSheddingIntervalMinutes();
    b.sheddingIntervalMillisForTesting = cfg->loadBalancerSheddingIntervalMillisForTesting();
    b.sheddingGracePeriodMinutes = cfg->loadBalancerSheddingGracePeriodMinutes();
    for (const auto& ns : cfg->loadBalancerSheddingExcludedNamespaces()) {
      b.sheddingExcludedNamespaces.insert(ns);
    }
    broker::cluster::SheddingSettings& s = b.shedding;
    s.brokerThresholdShedderPercentage = cfg->loadBalancerBrokerThresholdShedderPercentage();
    s.historyResourcePercentage = cfg->loadBalancerHistoryResourcePercentage();
    s.lowerBoundarySheddingEnabled = cfg->lowerBoundarySheddingEnabled();
    s.bundleUnloadMinThroughputThreshold = cfg->loadBalancerBundleUnloadMinThroughputThreshold();
    s.cpuWeight = cfg->loadBalancerCPUResourceWeight();
    s.directMemoryWeight = cfg->loadBalancerDirectMemoryResourceWeight();
    s.bandwidthInWeight = cfg->loadBalancerBandwidthInResourceWeight();
    s.bandwidthOutWeight = cfg->loadBalancerBandwidthOutResourceWeight();
    s.brokerOverloadedThresholdPercentage = cfg->loadBalancerBrokerOverloadedThresholdPercentage();
    s.msgRateDifferenceShedderThreshold = cfg->loadBalancerMsgRateDifferenceShedderThreshold();
    s.msgThroughputMultiplierDifferenceShedderThreshold =
        cfg->loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold();
    s.maxUnloadPercentage = cfg->maxUnloadPercentage();
    s.maxUnloadBundleNumPerShedding = cfg->maxUnloadBundleNumPerShedding();
    s.minUnloadMessage = cfg->minUnloadMessage();
    s.minUnloadMessageThroughput = cfg->minUnloadMessageThroughput();
    b.split.enabled = cfg->loadBalancerAutoBundleSplitEnabled();
    b.split.unloadSplitBundles = cfg->loadBalancerAutoUnloadSplitBundlesEnabled();
    broker::cluster::SplitThresholds& t = b.split.thresholds;
    t.maxTopics = cfg->loadBalancerNamespaceBundleMaxTopics();
    t.maxSessions = cfg->loadBalancerNamespaceBundleMaxSessions();
    t.maxMsgRate = cfg->loadBalancerNamespaceBundleMaxMsgRate();
    t.maxBandwidthMbytes = cfg->loadBalancerNamespaceBundleMaxBandwidthMbytes();
    t.maxBundlesPerNamespace = cfg->loadBalancerNamespaceMaximumBundles();
    return b;
  };
  auto sampler = std::make_shared<config::HostUsageSampler>(config::HostUsageSampler::Paths{},
                                                            cfg->availableProcessors());
  o.hostUsage = [sampler, cfg, storageStats = std::move(storageStats)] {
    config::HostFigures f = sampler->sample(steadyNowNs() / 1000000);
    broker::cluster::SystemResourceUsage u;
    u.cpu = {f.cpuUsage, f.cpuLimit};
    u.memory = {f.memoryUsedMb, f.memoryLimitMb};
    double cacheMb = storageStats ? static_cast<double>(storageStats().cacheBytes) / 1048576 : 0;
    u.directMemory = {cacheMb, static_cast<double>(cfg->managedLedgerCacheSizeMB())};
    u.bandwidthIn = {f.nicRxKbps, f.nicLimitKbps};
    u.bandwidthOut = {f.nicTxKbps, f.nicLimitKbps};
    return u;
  };
  return o;
}

admin::HttpServer::Options httpServerOptionsFrom(const config::ServiceConfiguration& cfg) {
  return optionsFrom(httpServerBindings(), cfg);
}

}  // namespace magnetar::app
