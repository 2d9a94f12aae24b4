#include "app/run_broker.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include "admin/broker_admin.h"
#include "admin/broker_routes.h"
#include "admin/cluster_routes.h"
#include "admin/http_server.h"
#include "app/dynamic_settings.h"
#include "app/topic_storage.h"
#include "base/logging.h"
#include "broker/broker_service.h"
#include "broker/cluster/configuration_store.h"
#include "broker/cluster/namespace_service.h"
#include "broker/cluster/shared_records.h"
#include "metadata/zk_store.h"

namespace magnetar::app {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

bool isZooKeeperUrl(const std::string& url) { return url.rfind("zk:", 0) == 0; }

// The durable storage's settings, from the registry. Errors: kInvalidArgument for a
// metadataStoreUrl this build cannot serve (only the embedded rocksdb: store so far).
Result<storage::StorageOptions> storageOptionsFrom(const config::ServiceConfiguration& cfg) {
  storage::StorageOptions o;
  o.journalDirectory = cfg.journalDirectory();
  o.journalSyncData = cfg.journalSyncData();
  o.journalMaxGroupWaitMSec = cfg.journalMaxGroupWaitMSec();
  // 0: no byte threshold; a group still holds 4 MiB at most.
  o.journalMaxGroupBytes =
      cfg.journalBufferedWritesThreshold() > 0 ? cfg.journalBufferedWritesThreshold() : 4 << 20;
  o.journalSegmentSizeBytes = cfg.journalMaxSizeMB() << 20;
  o.managedLedgerMaxEntriesPerLedger = cfg.managedLedgerMaxEntriesPerLedger();
  o.managedLedgerMaxSizePerLedgerMbytes = cfg.managedLedgerMaxSizePerLedgerMbytes();
  o.managedLedgerMinLedgerRolloverTimeMinutes = cfg.managedLedgerMinLedgerRolloverTimeMinutes();
  o.managedLedgerMaxLedgerRolloverTimeMinutes = cfg.managedLedgerMaxLedgerRolloverTimeMinutes();
  o.managedLedgerMaxUnackedRangesToPersist = cfg.managedLedgerMaxUnackedRangesToPersist();
  o.managedLedgerMaxBatchDeletedIndexToPersist = cfg.managedLedgerMaxBatchDeletedIndexToPersist();
  o.managedLedgerCacheSizeMB = cfg.managedLedgerCacheSizeMB();
  o.managedLedgerDefaultMarkDeleteRateLimit = cfg.managedLedgerDefaultMarkDeleteRateLimit();
  o.defaultRetentionTimeInMinutes = cfg.defaultRetentionTimeInMinutes();
  o.defaultRetentionSizeInMB = cfg.defaultRetentionSizeInMB();
  o.retentionCheckIntervalInSeconds = cfg.retentionCheckIntervalInSeconds();
  o.minorCompactionThreshold = cfg.minorCompactionThreshold();
  o.minorCompactionInterval = cfg.minorCompactionInterval();
  o.majorCompactionThreshold = cfg.majorCompactionThreshold();
  o.majorCompactionInterval = cfg.majorCompactionInterval();
  o.compactionRateByBytes = cfg.compactionRateByBytes();
  o.diskUsageThreshold = cfg.diskUsageThreshold();
  o.diskUsageLwmThreshold = cfg.diskUsageLwmThreshold();
  o.diskCheckInterval = cfg.diskCheckInterval();
  o.numReadThreads = cfg.numReadWorkerThreads();
  // Test hook (docs/memory-limits.md): slowed storage for the flood tests.
  if (const char* delay = std::getenv("MAGNETAR_TEST_STORAGE_DELAY_MICROS")) {
    o.testJournalDelayMicros = std::strtoll(delay, nullptr, 10);
    if (o.testJournalDelayMicros > 0) {
      MLOG_WARN("test hook: every journal group commit sleeps {} us "
                "(MAGNETAR_TEST_STORAGE_DELAY_MICROS)", o.testJournalDelayMicros);
    }
  }
  std::string url = cfg.metadataStoreUrl();
  if (isZooKeeperUrl(url)) {
    // Cluster mode: ZooKeeper holds the cluster's metadata; the embedded ledgers' own keys
    // (cursors, ledger lists) stay local, next to the journal (docs/cluster-mode.md).
    auto parent = std::filesystem::path(cfg.journalDirectory()).parent_path();
    o.metadataDirectory = (parent.empty() ? std::filesystem::path(".") : parent) / "metadata";
    return o;
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
  o.metadataDirectory = dir;
  return o;
}

// The broker module's settings, from the registry.
broker::BrokerOptions brokerOptionsFrom(const config::ServiceConfiguration& cfg) {
  broker::BrokerOptions o;
  o.bindAddress = cfg.bindAddress();
  o.advertisedAddress = cfg.advertisedAddress().empty() ? "localhost" : cfg.advertisedAddress();
  o.defaultRetentionTimeInMinutes = cfg.defaultRetentionTimeInMinutes();
  o.defaultRetentionSizeInMB = cfg.defaultRetentionSizeInMB();
  o.clusterName = cfg.clusterName();
  o.brokerServicePort = cfg.brokerServicePort();
  o.webServicePort = cfg.webServicePort();
  o.numIOThreads = cfg.numIOThreads();
  o.managedLedgerNumWorkerThreads = cfg.managedLedgerNumWorkerThreads();
  o.maxMessageSize = static_cast<uint32_t>(cfg.maxMessageSize());
  o.keepAliveIntervalSeconds = cfg.keepAliveIntervalSeconds();
  o.schemaCompatibilityStrategy = cfg.schemaCompatibilityStrategy();
  o.isSchemaValidationEnforced = cfg.isSchemaValidationEnforced();
  o.enableBrokerSideSubscriptionPatternEvaluation =
      cfg.enableBrokerSideSubscriptionPatternEvaluation();
  o.subscriptionPatternMaxLength = cfg.subscriptionPatternMaxLength();
  o.enableBrokerTopicListWatcher = cfg.enableBrokerTopicListWatcher();
  o.maxUnackedMessagesPerConsumer = cfg.maxUnackedMessagesPerConsumer();
  o.maxUnackedMessagesPerSubscription = cfg.maxUnackedMessagesPerSubscription();
  o.activeConsumerFailoverDelayTimeMillis = cfg.activeConsumerFailoverDelayTimeMillis();
  o.delayedDeliveryEnabled = cfg.delayedDeliveryEnabled();
  o.delayedDeliveryTickTimeMillis = cfg.delayedDeliveryTickTimeMillis();
  o.isDelayedDeliveryDeliverAtTimeStrict = cfg.isDelayedDeliveryDeliverAtTimeStrict();
  o.delayedDeliveryMaxDelayInMillis = cfg.delayedDeliveryMaxDelayInMillis();
  o.maxPendingPublishRequestsPerConnection = cfg.maxPendingPublishRequestsPerConnection();
  o.pulsarChannelWriteBufferHighWaterMark = cfg.pulsarChannelWriteBufferHighWaterMark();
  o.pulsarChannelWriteBufferLowWaterMark = cfg.pulsarChannelWriteBufferLowWaterMark();
  o.authenticationRefreshCheckSeconds = cfg.authenticationRefreshCheckSeconds();
  o.maxMessagePublishBufferSizeInMB = cfg.maxMessagePublishBufferSizeInMB();
  o.brokerDeduplicationEnabled = cfg.brokerDeduplicationEnabled();
  o.maxProducersPerTopic = cfg.maxProducersPerTopic();
  o.maxConsumersPerTopic = cfg.maxConsumersPerTopic();
  o.maxConsumersPerSubscription = cfg.maxConsumersPerSubscription();
  o.maxSubscriptionsPerTopic = cfg.maxSubscriptionsPerTopic();
  o.ttlDurationDefaultInSeconds = cfg.ttlDurationDefaultInSeconds();
  o.messageExpiryCheckIntervalInMinutes = cfg.messageExpiryCheckIntervalInMinutes();
  o.brokerServiceCompactionThresholdInBytes = cfg.brokerServiceCompactionThresholdInBytes();
  o.brokerServiceCompactionMonitorIntervalInSeconds =
      cfg.brokerServiceCompactionMonitorIntervalInSeconds();
  o.backlogQuotaCheckEnabled = cfg.backlogQuotaCheckEnabled();
  o.backlogQuotaCheckIntervalInSeconds = cfg.backlogQuotaCheckIntervalInSeconds();
  o.backlogQuotaDefaultLimitBytes = cfg.backlogQuotaDefaultLimitBytes();
  o.backlogQuotaDefaultRetentionPolicy = cfg.backlogQuotaDefaultRetentionPolicy();
  o.backlogQuotaDefaultLimitSecond = cfg.backlogQuotaDefaultLimitSecond();
  o.brokerDeleteInactiveTopicsFrequencySeconds = cfg.brokerDeleteInactiveTopicsFrequencySeconds();
  o.subscriptionExpirationTimeMinutes = cfg.subscriptionExpirationTimeMinutes();
  o.subscriptionExpiryCheckIntervalInMinutes = cfg.subscriptionExpiryCheckIntervalInMinutes();
  o.brokerDeduplicationMaxNumberOfProducers = cfg.brokerDeduplicationMaxNumberOfProducers();
  o.brokerDeduplicationEntriesInterval = cfg.brokerDeduplicationEntriesInterval();
  o.managedLedgerDefaultMarkDeleteRateLimit = cfg.managedLedgerDefaultMarkDeleteRateLimit();
  o.brokerDeduplicationSnapshotIntervalSeconds = cfg.brokerDeduplicationSnapshotIntervalSeconds();
  o.brokerDeduplicationSnapshotFrequencyInSeconds =
      cfg.brokerDeduplicationSnapshotFrequencyInSeconds();
  o.brokerDeduplicationProducerInactivityTimeoutMinutes =
      cfg.brokerDeduplicationProducerInactivityTimeoutMinutes();
  o.subscriptionKeySharedUseConsistentHashing = cfg.subscriptionKeySharedUseConsistentHashing();
  o.acknowledgmentAtBatchIndexLevelEnabled = cfg.acknowledgmentAtBatchIndexLevelEnabled();
  o.subscriptionKeySharedConsistentHashingReplicaPoints =
      cfg.subscriptionKeySharedConsistentHashingReplicaPoints();
  // The dynamic ones take their start-up values here, later ones from connectDynamicSettings().
  o.dynamic.allowAutoTopicCreation.store(cfg.allowAutoTopicCreation());
  o.dynamic.brokerDeleteInactiveTopicsEnabled.store(cfg.brokerDeleteInactiveTopicsEnabled());
  o.dynamic.brokerDeleteInactiveTopicsMode.store(cfg.brokerDeleteInactiveTopicsMode());
  o.dynamic.brokerDeleteInactivePartitionedTopicMetadataEnabled.store(
      cfg.brokerDeleteInactivePartitionedTopicMetadataEnabled());
  o.dynamic.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds.store(
      cfg.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds().value_or(-1));
  o.dynamic.allowAutoTopicCreationType.store(cfg.allowAutoTopicCreationType());
  o.dynamic.defaultNumPartitions.store(cfg.defaultNumPartitions());
  o.dynamic.allowAutoSubscriptionCreation.store(cfg.allowAutoSubscriptionCreation());
  o.dynamic.dispatcherMaxReadBatchSize.store(cfg.dispatcherMaxReadBatchSize());
  o.dynamic.dispatcherMaxReadSizeBytes.store(cfg.dispatcherMaxReadSizeBytes());
  o.dynamic.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(
      cfg.keySharedLookAheadMsgInReplayThresholdPerConsumer());
  o.dynamic.keySharedLookAheadMsgInReplayThresholdPerSubscription.store(
      cfg.keySharedLookAheadMsgInReplayThresholdPerSubscription());
  return o;
}

// The tls* settings.
net::TlsOptions tlsOptionsFrom(const config::ServiceConfiguration& cfg) {
  net::TlsOptions o;
  o.certificateFilePath = cfg.tlsCertificateFilePath();
  o.keyFilePath = cfg.tlsKeyFilePath();
  o.trustCertsFilePath = cfg.tlsTrustCertsFilePath();
  o.allowInsecureConnection = cfg.tlsAllowInsecureConnection();
  o.requireTrustedClientCertOnConnect = cfg.tlsRequireTrustedClientCertOnConnect();
  o.protocols = cfg.tlsProtocols();
  o.ciphers = cfg.tlsCiphers();
  o.certRefreshCheckDurationSec = cfg.tlsCertRefreshCheckDurationSec();
  return o;
}

// The bound ports; a TLS port is written only when it listens (> 0).
struct BoundPorts {
  uint16_t broker = 0;
  uint16_t web = 0;
  int brokerTls = 0;
  int webTls = 0;
};

Status writePortsFile(const std::string& path, const BoundPorts& p) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "brokerServicePort=" << p.broker << "\nwebServicePort=" << p.web << "\n";
    if (p.brokerTls > 0) out << "brokerServicePortTls=" << p.brokerTls << "\n";
    if (p.webTls > 0) out << "webServicePortTls=" << p.webTls << "\n";
    if (!out) return Status::ioError(fmt::format("cannot write ports file '{}'", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::ioError(fmt::format("cannot rename to '{}': {}", path, ec.message()));
  return Status::ok();
}

// Opens a ZooKeeper session for `url`. While no server of the list accepts connections, logs
// "not reachable" at once and tries again every 5 s (kZkRetry), polling mainLoop for a stop
// signal every 100 ms, so SIGTERM ends the wait at once. Errors: kInvalidArgument for a bad url;
// kClosed when stopped first.
constexpr std::chrono::seconds kZkRetry{5};
Result<std::unique_ptr<metadata::Store>> openClusterStore(const std::string& url,
                                                          const config::ServiceConfiguration& cfg,
                                                          asio::io_context& mainLoop,
                                                          const int& stopSignal) {
  metadata::ZkConfig zc;
  zc.url = url;
  zc.sessionTimeoutMs = static_cast<int>(cfg.metadataStoreSessionTimeoutMillis());
  zc.connectTimeoutMs = std::max(zc.sessionTimeoutMs, 5000);
  zc.operationTimeoutMs = cfg.metadataStoreOperationTimeoutSeconds() * 1000;
  auto hosts = metadata::parseZkUrl(url);
  if (!hosts.isOk()) return hosts.status();
  auto waitRetry = [&]() -> bool {  // false: stopped
    auto until = std::chrono::steady_clock::now() + kZkRetry;
    while (std::chrono::steady_clock::now() < until) {
      mainLoop.poll();
      if (stopSignal) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    mainLoop.poll();
    return !stopSignal;
  };
  for (;;) {
    mainLoop.poll();
    if (stopSignal) return Status::closed("stopped while waiting for ZooKeeper");
    if (!anyZkServerAccepts(*hosts)) {
      MLOG_ERROR(
          "ZooKeeper at {} is not reachable (no server accepts connections); trying again "
          "in {} s",
          url, kZkRetry.count());
      if (!waitRetry()) return Status::closed("stopped while waiting for ZooKeeper");
      continue;
    }
    auto store = metadata::openZkStore(zc);
    if (store.isOk() || store.status().code() == StatusCode::kInvalidArgument) return store;
    MLOG_ERROR("ZooKeeper at {} is not reachable ({}); trying again in {} s", url,
               store.status().message(), kZkRetry.count());
    if (!waitRetry()) return Status::closed("stopped while waiting for ZooKeeper");
  }
}

// Unloads every topic and waits for their ledgers to close (at most `timeout`).
void unloadAll(broker::BrokerService& service, std::chrono::milliseconds timeout) {
  auto topics = service.topics();
  if (topics.empty()) return;
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(topics.size()));
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  for (auto& t : topics) {
    service.unloadTopic(t, /*release=*/false, [left, done](const Status&) {
      if (left->fetch_sub(1) == 1) done->set_value();
    });
  }
  if (finished.wait_for(timeout) != std::future_status::ready) {
    MLOG_WARN("{} topic(s) not closed after {} ms; stopping anyway", left->load(), timeout.count());
  }
}

}  // namespace

int runBroker(const BrokerOptions& options) {
  const config::ServiceConfiguration& cfg = *options.config;

  // Signals first, so a SIGTERM during start-up still stops cleanly.
  asio::io_context mainLoop(1);
  asio::signal_set signals(mainLoop, SIGINT, SIGTERM);
  int stopSignal = 0;
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (!ec) stopSignal = sig;
    mainLoop.stop();
  });

  auto storageOptions = storageOptionsFrom(cfg);
  if (!storageOptions.isOk()) {
    MLOG_ERROR("{}", storageOptions.status().message());
    return 2;
  }
  broker::BrokerOptions brokerOptions = brokerOptionsFrom(cfg);
  auto listeners = broker::parseAdvertisedListeners(cfg.advertisedListeners(),
                                                    cfg.internalListenerName());
  if (!listeners.isOk()) {
    MLOG_ERROR("{}", listeners.status().message());
    return 2;
  }
  brokerOptions.advertisedListeners = std::move(*listeners);
  // TLS: certificates are loaded (and checked) before anything listens.
  std::shared_ptr<net::TlsContext> tls;
  if (cfg.brokerServicePortTls() || cfg.webServicePortTls()) {
    auto created = net::TlsContext::create(tlsOptionsFrom(cfg));
    if (!created.isOk()) {
      MLOG_ERROR("cannot start TLS: {}", created.status().message());
      return 2;
    }
    tls = std::move(*created);
  }
  brokerOptions.brokerServicePortTls = cfg.brokerServicePortTls();
  brokerOptions.tlsContext = tls;
  // Cluster mode: `magnetar broker` with metadataStoreUrl=zk:... (docs/cluster-mode.md).
  std::unique_ptr<metadata::Store> zk;
  std::unique_ptr<metadata::Store> zkConfig;  // configurationMetadataStoreUrl, when another one
  std::unique_ptr<broker::cluster::NamespaceService> namespaceService;
  if (isZooKeeperUrl(cfg.metadataStoreUrl())) {
    if (options.standalone) {
      MLOG_ERROR(
          "metadataStoreUrl={}: `magnetar standalone` keeps its metadata embedded; run "
          "`magnetar broker` for cluster mode",
          cfg.metadataStoreUrl());
      return 2;
    }
    auto store = openClusterStore(cfg.metadataStoreUrl(), cfg, mainLoop, stopSignal);
    if (!store.isOk()) {
      MLOG_ERROR("metadataStoreUrl={}: {}", cfg.metadataStoreUrl(), store.status().message());
      return store.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    zk = std::move(*store);
    std::string configUrl = cfg.configurationMetadataStoreUrl();
    if (!configUrl.empty() && configUrl != cfg.metadataStoreUrl()) {
      auto c = openClusterStore(configUrl, cfg, mainLoop, stopSignal);
      if (!c.isOk()) {
        MLOG_ERROR("configurationMetadataStoreUrl={}: {}", configUrl, c.status().message());
        return c.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      zkConfig = std::move(*c);
    }
    broker::cluster::NamespaceServiceOptions nso;
    nso.clusterName = cfg.clusterName();
    nso.sessionTimeoutMs = static_cast<int>(cfg.metadataStoreSessionTimeoutMillis());
    nso.defaultNumberOfNamespaceBundles = cfg.defaultNumberOfNamespaceBundles();
    nso.bundleUnloadingTimeoutMs = [config = options.config] {
      return config->namespaceBundleUnloadingTimeoutMs();
    };
    nso.distributeBundlesEvenly = [config = options.config] {
      return config->loadBalancerDistributeBundlesEvenlyEnabled();
    };
    namespaceService = std::make_unique<broker::cluster::NamespaceService>(
        zk.get(), zkConfig ? zkConfig.get() : zk.get(), nso);
  }
  std::unique_ptr<broker::cluster::ConfigurationStore> configurationStore;
  // Topic policies and schemas, shared through the configuration store (SharedRecords).
  std::unique_ptr<broker::cluster::SharedRecords> sharedRecords;
  auto stopCluster = [&] {
    if (sharedRecords) sharedRecords->stop();
    if (configurationStore) configurationStore->stop();
    if (namespaceService) namespaceService->stop();
    if (zkConfig) zkConfig->close();
    if (zk) zk->close();  // ends the session: this broker's ephemeral znodes go at once
  };
  // Topics: the embedded journal, or BookKeeper in cluster mode with bookkeeperMetadataServiceUri.
  auto opened = openTopicStorage(cfg, *storageOptions, zk.get());
  if (!opened.isOk()) {
    MLOG_ERROR(
        "cannot open storage (journalDirectory={}, metadataStoreUrl={}, "
        "bookkeeperMetadataServiceUri={}): {}",
        storageOptions->journalDirectory, cfg.metadataStoreUrl(),
        cfg.bookkeeperMetadataServiceUri(), opened.status().toString());
    stopCluster();
    return opened.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  TopicStorage topicStorage = std::move(*opened);
  broker::BrokerService service(std::move(brokerOptions), topicStorage.factory,
                                topicStorage.metadata);
  if (namespaceService) {
    // Tenants, namespaces, policies and partitioned topics: the configuration store's.
    broker::cluster::ConfigurationStoreOptions cso;
    cso.clusterName = cfg.clusterName();
    cso.defaultNumberOfNamespaceBundles = cfg.defaultNumberOfNamespaceBundles();
    cso.operationTimeoutMs = cfg.metadataStoreOperationTimeoutSeconds() * 1000;
    configurationStore = std::make_unique<broker::cluster::ConfigurationStore>(
        zkConfig ? zkConfig.get() : zk.get(), zk.get(), &service, cso);
    service.setSharedConfig(configurationStore.get());
    sharedRecords = std::make_unique<broker::cluster::SharedRecords>(
        zkConfig ? zkConfig.get() : zk.get(), cso.operationTimeoutMs);
    sharedRecords->start();
    service.setSharedRecords(sharedRecords.get());
    service.setTopicOwnership(namespaceService.get());
    if (!topicStorage.onBookKeeper) {
      // Each broker's own storage: GET_TOPICS_OF_NAMESPACE lists every broker's topics.
      service.setClusterTopicLister([&service, ns = namespaceService.get()](
                                        const std::string& nsName, broker::TopicDomain domain,
                                        const std::optional<std::string>& authorization,
                                        std::function<void(Result<std::vector<std::string>>)> cb) {
        admin::clusterTopicsOfNamespace(*ns, service, nsName, domain, authorization, std::move(cb));
      });
    }
    // Bundles lost (session expired, unloaded): the clients of their topics are closed, so they
    // look the topics up again. On BookKeeper the topics are unloaded too (ledger closed, cursors
    // written), so the next owner takes them over cleanly.
    namespaceService->setOwnershipLostHandler(
        [&service, ns = namespaceService.get(), unload = topicStorage.onBookKeeper] {
          for (auto& t : service.topics()) {
            if (ns->owns(t->name())) continue;
            if (unload) {
              // Another broker may own it already: give it up without writing.
              service.unloadTopic(t, /*release=*/true);
            } else {
              t->executor().execute([t] { t->disconnectClients(); });
            }
          }
        });
    // A voluntary release: on BookKeeper the bundle's topics close cleanly (cursors written,
    // ledgers closed) before the ownership znode goes, so the next owner starts from their last
    // state; the namespace service waits for `closed` (namespaceBundleUnloadingTimeoutMs).
    namespaceService->setBundleReleaseHandler(
        [&service, ns = namespaceService.get(), unload = topicStorage.onBookKeeper](
            const std::string& bundle, const std::function<void()>& closed) {
          std::vector<std::shared_ptr<broker::PersistentTopic>> gone;
          for (auto& t : service.topics()) {
            if (!ns->owns(t->name())) gone.push_back(t);
          }
          if (!unload || gone.empty()) {
            for (auto& t : gone) t->executor().execute([t] { t->disconnectClients(); });
            return closed();
          }
          MLOG_INFO("Unloading bundle {}: closing {} topic(s)", bundle, gone.size());
          auto left = std::make_shared<std::atomic<size_t>>(gone.size());
          for (auto& t : gone) {
            service.unloadTopic(t, /*release=*/false, [left, closed](const Status&) {
              if (left->fetch_sub(1) == 1) closed();
            });
          }
        });
  }
  broker::AuthenticationOptions authOptions;
  authOptions.authenticationEnabled = cfg.authenticationEnabled();
  authOptions.authenticationProviders = cfg.authenticationProviders();
  authOptions.anonymousUserRole = cfg.anonymousUserRole();
  authOptions.token = {cfg.tokenSecretKey(), cfg.tokenPublicKey(), cfg.tokenAuthClaim(),
                       cfg.tokenAudienceClaim(), cfg.tokenAudience()};
  authOptions.basicAuthConf = cfg.basicAuthConf();
  auto authentication = broker::AuthenticationService::create(authOptions);
  if (!authentication.isOk()) {
    MLOG_ERROR("Authentication: {}", authentication.status().message());
    return 2;
  }
  service.configureSecurity(std::move(*authentication), cfg.authorizationEnabled(),
                            cfg.superUserRoles());
  if (Status s = service.start(); !s) {
    MLOG_ERROR("{}", s.message());
    return 1;
  }
  if (configurationStore) {
    if (Status s = configurationStore->start(); !s) {
      MLOG_ERROR("cannot load the cluster's tenants and namespaces: {}", s.message());
      service.stop();
      stopCluster();
      return 1;
    }
    // Changes made through other brokers reach this one's caches (docs/cluster-mode.md).
    sharedRecords->watch(
        broker::kTopicPoliciesRoot,
        [&service](const std::string& name, const std::optional<std::string>& value) {
          service.applySharedTopicPolicies(storage::unescapePathComponent(name), value);
        });
    sharedRecords->watch(broker::kSchemasRoot, [&service](const std::string& name,
                                                          const std::optional<std::string>& value) {
      service.schemas().applyRecord(storage::unescapePathComponent(name), value);
    });
  }
  if (Status s = connectDynamicSettings(*options.config, service, topicStorage.setCacheSizeMB);
      !s) {
    MLOG_ERROR("{}", s.message());
    service.stop();
    return 1;
  }

  std::atomic<bool> serving{false};
  auto router = std::make_shared<admin::Router>();
  if (namespaceService) {
    admin::addClusterRoutes(*router, *namespaceService, service, cfg.clusterName());
    admin::installTopicOwnershipGuard(*router, *namespaceService, service);
  }
  admin::addHealthRoute(*router, [&serving] { return serving.load(); });
  admin::addBrokerConfigurationRoutes(*router, options.config);
  admin::BrokerAdmin::Options adminOptions;
  adminOptions.storageStats = topicStorage.stats;
  admin::BrokerAdmin brokerAdmin(service, options.config, adminOptions);
  brokerAdmin.addRoutes(*router);
  admin::HttpServer web(router, {cfg.bindAddress(), static_cast<uint16_t>(cfg.webServicePort()),
                                 cfg.numHttpServerThreads(), 1 << 20});
  if (Status s = web.start(); !s) {
    MLOG_ERROR("{}", s.message());
    service.stop();
    return 1;
  }
  std::unique_ptr<admin::HttpServer> webTls;
  if (auto port = cfg.webServicePortTls()) {
    webTls = std::make_unique<admin::HttpServer>(
        router,
        admin::HttpServer::Options{cfg.bindAddress(), static_cast<uint16_t>(*port),
                                   cfg.numHttpServerThreads(), 1 << 20},
        tls);
    if (Status s = webTls->start(); !s) {
      MLOG_ERROR("{}", s.message());
      web.stop();
      service.stop();
      return 1;
    }
  }
  BoundPorts bound{static_cast<uint16_t>(service.brokerServicePort()), web.port(),
                   service.brokerServicePortTls(), webTls ? webTls->port() : 0};

  MLOG_INFO("magnetar listening: brokerServicePort={} webServicePort={}{}{}", bound.broker,
            bound.web,
            bound.brokerTls ? fmt::format(" brokerServicePortTls={}", bound.brokerTls) : "",
            bound.webTls ? fmt::format(" webServicePortTls={}", bound.webTls) : "");
  if (!options.portsFile.empty()) {
    if (Status s = writePortsFile(options.portsFile, bound); !s) {
      MLOG_ERROR("{}", s.message());
      if (webTls) webTls->stop();
      web.stop();
      service.stop();
      return 1;
    }
  }
  if (namespaceService) {
    std::string host = service.options().advertisedAddress;
    broker::cluster::BrokerUrls self;
    self.brokerId = host + ":" + std::to_string(bound.web);
    self.pulsarServiceUrl = service.brokerServiceUrl();
    self.pulsarServiceUrlTls = service.brokerServiceUrlTls();
    self.webServiceUrl = "http://" + self.brokerId;
    if (bound.webTls)
      self.webServiceUrlTls = "https://" + host + ":" + std::to_string(bound.webTls);
    for (const auto& [name, l] : service.options().advertisedListeners.byName) {
      self.listeners[name] = {l.brokerServiceUrl, l.brokerServiceUrlTls};
    }
    if (Status s = namespaceService->start(self); !s) {
      MLOG_ERROR("cannot join the cluster: {}", s.message());
      if (webTls) webTls->stop();
      web.stop();
      service.stop();
      stopCluster();
      return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    service.setProducerNameGeneratorId(namespaceService->producerNameGeneratorId());
  }
  serving = true;
  MLOG_INFO("{} broker serving (cluster {})", options.standalone ? "Standalone" : "The",
            cfg.clusterName());

  mainLoop.run();

  MLOG_INFO("Stopping on signal {}", stopSignal);
  serving = false;
  // Read now: the setting is dynamic.
  service.drainConnections(std::chrono::milliseconds(cfg.brokerShutdownTimeoutMs()));
  if (topicStorage.onBookKeeper) {
    // Hand the topics over cleanly (as Pulsar unloads its bundles): ledgers closed, cursors
    // written, before the ownership znodes go with the session.
    unloadAll(service,
              std::chrono::milliseconds(std::max<int64_t>(cfg.brokerShutdownTimeoutMs(), 5000)));
  }
  if (topicStorage.durable) {
    // Acks the mark-delete rate limit held back reach the disk before the workers stop.
    if (!topicStorage.durable->flushCursors(std::chrono::milliseconds(5000))) {
      MLOG_WARN("cursor writes not finished after 5000 ms; stopping anyway");
    }
  }
  stopCluster();
  if (webTls) webTls->stop();
  web.stop();
  service.stop();
  topicStorage.shutdown();
  MLOG_INFO("Stopped");
  return 0;
}

}  // namespace magnetar::app
