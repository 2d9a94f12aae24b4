#include "broker/service/broker_service.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "base/blocking_wait.h"
#include "base/logging.h"
#include "broker/service/broker_client_settings.h"
#include "broker/service/remote_transaction_buffer_client.h"
#include "broker/service/server_cnx.h"
#include "broker/topic/entry_metadata.h"
#include "broker/topic/message_expiry.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {

BrokerService::BrokerService(BrokerOptions options,
                             std::shared_ptr<storage::ManagedLedgerFactory> factory, Deps deps)
    : ownership_(deps.ownership),
      clusterTopicLister_(std::move(deps.clusterTopicLister)),
      shared_(deps.sharedConfig),
      recordStore_(deps.recordStore),
      options_(std::move(options)),
      factory_(std::move(factory)),
      nonPersistentFactory_(std::make_shared<storage::MemoryManagedLedgerFactory>()),
      policies_(options_.clusterName),
      authentication_(std::make_unique<AuthenticationService>()),
      authorization_(
          std::make_unique<AuthorizationService>(policies_, false, std::vector<std::string>{})) {
  policies_.setShared(shared_);
  metadataLoop_.start();
}

BrokerService::BrokerService(BrokerOptions options,
                             std::shared_ptr<storage::ManagedLedgerFactory> factory)
    : BrokerService(std::move(options), std::move(factory), Deps{}) {}

void BrokerService::configureSecurity(std::unique_ptr<AuthenticationService> authentication,
                                      bool authorizationEnabled,
                                      std::vector<std::string> superUserRoles) {
  authentication_ = std::move(authentication);
  authorization_ = std::make_unique<AuthorizationService>(policies_, authorizationEnabled,
                                                          std::move(superUserRoles));
}

BrokerService::~BrokerService() {
  stop();
  schemas_.detach();
  policies_.detachTopicPolicies();
  metadataLoop_.stop();
}

void BrokerService::loadNamespacesAndStores() {
  // Pulsar standalone creates public/default at first start; the rest comes from the store, and
  // the namespace of every stored ledger (tenant/ns/persistent/local) exists.
  std::vector<std::string> initial{"public/default"};
  for (auto& n : factory_->ledgerNames()) {
    MutexLock lock(mu_);
    std::string compactedTopic;
    int64_t seq = 0;
    if (isCompactedLedgerName(n, &compactedTopic, &seq)) {
      compactedSeqs_[compactedTopic].push_back(seq);
      continue;
    }
    if (isPendingAckLedgerName(n)) {  // a subscription's pending-ack log, not a topic
      pendingAckLedgers_.insert(n);
      continue;
    }
    if (isTransactionInternalName(n)) continue;  // a coordinator log or pending-ack store
    // Shared storage: which topics exist is the storage's answer when asked (another broker may
    // delete one any time); names seen now would stay listed and "existing" after that.
    if (!factory_->sharedBetweenBrokers()) storedLedgers_[n] = true;
    auto a = n.find('/');
    auto b = a == std::string::npos ? a : n.find('/', a + 1);
    if (b != std::string::npos) initial.push_back(n.substr(0, b));
  }
  if (!shared_) {
    for (const auto& ns : initial) namespaces_.ensure(ns);
  } else if (!ownership_) {
    createStandaloneDefaults(initial);
  }
  attachRecordStore();
}

void BrokerService::createStandaloneDefaults(const std::vector<std::string>& initial) {
  if (!policies_.tenant("public")) {
    Status s = policies_.createTenant("public", TenantInfo{{}, {options_.clusterName}});
    if (!s.isOk() && s.code() != StatusCode::kAlreadyExists) {
      MLOG_WARN("cannot create tenant public: {}", s.toString());
    }
  }
  for (const auto& ns : initial) {
    if (namespaces_.exists(ns)) continue;
    Status s = addNamespace(ns, NamespacePolicies{}, 0);
    if (!s.isOk() && s.code() != StatusCode::kAlreadyExists) {
      MLOG_WARN("cannot create namespace {}: {}", ns, s.toString());
    }
  }
}

void BrokerService::attachRecordStore() {
  if (!recordStore_) return;
  // Start-up on the main thread: the first listing of both roots is waited for (bounded), so
  // the first producer sees every stored schema and policy.
  auto policiesReady = std::make_shared<std::promise<Status>>();
  auto schemasReady = std::make_shared<std::promise<Status>>();
  std::future<Status> policiesLoaded = policiesReady->get_future();
  std::future<Status> schemasLoaded = schemasReady->get_future();
  policies_.attachTopicPolicies(
      recordStore_, &metadataLoop_,
      [this](const std::string& topic) {
        auto name = TopicName::parse(topic);
        if (name.isOk()) onTopicPoliciesChanged(*name);
      },
      [policiesReady](const Status& s) { policiesReady->set_value(s); });
  schemas_.attach(recordStore_, &metadataLoop_,
                  [schemasReady](const Status& s) { schemasReady->set_value(s); });
  for (auto* loaded : {&policiesLoaded, &schemasLoaded}) {
    auto s = blockingGetFor(*loaded, std::chrono::seconds(60), "loading schemas and policies");
    if (!s || !s->isOk()) {
      MLOG_WARN("schemas or topic policies not loaded yet: {}",
                s ? s->toString() : std::string("no answer in 60 s"));
    }
  }
}

void BrokerService::startMonitors() {
  expiryMonitor_ = std::make_unique<PeriodicTask>(
      "pulsar-msg-expiry-monitor",
      std::chrono::minutes(std::max(1, options_.messageExpiryCheckIntervalInMinutes)),
      [this] { checkMessageExpiry(); });
  if (options_.backlogQuotaCheckEnabled) {
    backlogQuotaChecker_ = std::make_unique<PeriodicTask>(
        "pulsar-backlog-quota-checker",
        std::chrono::seconds(std::max(1, options_.backlogQuotaCheckIntervalInSeconds)),
        [this] { checkBacklogQuotas(); });
  }
  inactivityMonitor_ = std::make_unique<PeriodicTask>(
      "pulsar-inactivity-monitor",
      std::chrono::seconds(std::max(1, options_.brokerDeleteInactiveTopicsFrequencySeconds)),
      [this] { checkGC(); });
  subscriptionExpiryMonitor_ = std::make_unique<PeriodicTask>(
      "pulsar-subscription-expiry-monitor",
      std::chrono::minutes(std::max(1, options_.subscriptionExpiryCheckIntervalInMinutes)),
      [this] { checkInactiveSubscriptions(); });
  if (options_.transactionCoordinatorEnabled) {
    // Pulsar's per-topic takeSnapshotByTimeout timer, one for all topics here.
    txnSnapshotMonitor_ =
        std::make_unique<PeriodicTask>("transaction-buffer-snapshot",
                                       std::chrono::milliseconds(std::max<int64_t>(
                                           100, options_.transactionBufferSnapshotMinTimeInMillis)),
                                       [this] { snapshotTransactionBuffers(); });
  }
  compactionMonitor_ = std::make_unique<PeriodicTask>(
      "pulsar-compaction-monitor",
      std::chrono::seconds(std::max(1, options_.brokerServiceCompactionMonitorIntervalInSeconds)),
      [this] { checkCompaction(); });
}

Status BrokerService::start() {
  // The broker-to-broker connections' TLS and credentials (cluster mode: checked and loaded;
  // standalone has no such connections, only the unsupported key store is refused).
  if (ownership_ || options_.brokerClient.tlsEnabledWithKeyStore) {
    auto settings = BrokerClientSettings::create(options_.brokerClient);
    if (!settings.isOk()) return settings.status();
    brokerClientSettings_ = std::move(*settings);
  }
  onRateSettingsChanged();  // the broker-wide limiters from the start-up settings
  loadNamespacesAndStores();
  ioLoops_ = std::make_unique<net::EventLoopGroup>("pulsar-io", std::max(1, options_.numIOThreads));
  mlWorkers_ = std::make_unique<net::EventLoopGroup>(
      "ml-worker", std::max(1, options_.managedLedgerNumWorkerThreads));
  ioLoops_->start();
  mlWorkers_->start();
  startMonitors();
  startTransactions();

  // Entries of kLargeAllocationBytes or more (big messages) get their own mappings, returned to
  // the OS when freed. glibc would otherwise raise its mmap threshold to the size of the first
  // such block freed and serve later ones from its arenas, where freed space stays resident
  // (about +90 MB of RSS under 50 producers of 4.9 MB messages: docs/memory-limits.md).
  // Fixing the threshold also fixes the trim threshold (128 KiB). No effect with another malloc.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeAllocationBytes));
  memoryTrimmer_ =
      std::make_unique<PeriodicTask>("magnetar-memory-trim", kMemoryTrimPeriod, [this] {
        if (closedSinceTrim_.load(std::memory_order_relaxed) < kMemoryTrimAfterCloses) return;
        closedSinceTrim_.store(0, std::memory_order_relaxed);
        malloc_trim(0);
      });
  const int64_t share = publishBufferShare(options_.maxMessagePublishBufferSizeInMB);
  admission_.setLimitBytes(publishBufferBytes(options_.maxMessagePublishBufferSizeInMB));
  for (int i = 0; i < ioLoops_->size(); ++i) {
    throttles_.push_back(
        std::make_unique<PublishBufferThrottle>(ioLoops_->at(i), share, admission_));
  }
  // tls: the context of the TLS port (the certificates current at accept time), else null.
  auto factory = [this](const std::shared_ptr<net::TlsContext>& tls) {
    return [this, tls](net::EventLoop& loop, boost::asio::ip::tcp::socket s) {
      activeConnections_++;
      PublishBufferThrottle* throttle = nullptr;
      for (auto& t : throttles_) {
        if (&t->loop() == &loop) throttle = t.get();
      }
      auto session = tls ? std::make_unique<net::TlsSession>(tls->current()) : nullptr;
      auto cnx =
          std::make_shared<ServerCnx>(loop, std::move(s), *this, *throttle, std::move(session));
      loop.execute([throttle, cnx] {
        throttle->registerConnection(cnx);
        cnx->startKeepAlive();
      });
      return std::shared_ptr<net::Connection>(cnx);
    };
  };
  server_ = std::make_unique<net::TcpServer>(*ioLoops_, factory(nullptr));
  Status s = server_->start(options_.bindAddress, options_.brokerServicePort);
  if (!s.isOk()) return Status::ioError(s.message() + " (brokerServicePort)");
  if (options_.brokerServicePortTls) {
    if (!options_.tlsContext) {
      return Status::invalidArgument("brokerServicePortTls is set without TLS certificates");
    }
    tlsServer_ = std::make_unique<net::TcpServer>(*ioLoops_, factory(options_.tlsContext));
    s = tlsServer_->start(options_.bindAddress, *options_.brokerServicePortTls);
    if (!s.isOk()) return Status::ioError(s.message() + " (brokerServicePortTls)");
  }
  return s;
}

int64_t BrokerService::publishBufferBytes(int mb) {
  return mb > 0 ? static_cast<int64_t>(mb) << 20 : 0;
}

// maxMessagePublishBufferSizeInMB divided between the I/O threads (Pulsar's publish buffer).
int64_t BrokerService::publishBufferShare(int mb) const {
  return publishBufferBytes(mb) / ioLoops_->size();
}

void BrokerService::setMaxMessagePublishBufferSizeInMB(int mb) {
  if (!ioLoops_) return;
  admission_.setLimitBytes(publishBufferBytes(mb));
  const int64_t share = publishBufferShare(mb);
  for (auto& t : throttles_) {
    PublishBufferThrottle* throttle = t.get();
    throttle->loop().execute([throttle, share] { throttle->setLimitBytes(share); });
  }
}

bool BrokerService::drainConnections(std::chrono::milliseconds timeout) {
  if (server_) server_->stop();  // joins the acceptor: every registration is queued by now
  if (tlsServer_) tlsServer_->stop();
  if (!ioLoops_ || timeout.count() <= 0) return activeConnections() == 0;
  const auto start = std::chrono::steady_clock::now();
  const int64_t open = activeConnections();
  for (auto& t : throttles_) {
    PublishBufferThrottle* throttle = t.get();
    throttle->loop().execute([throttle] {
      for (const auto& c : throttle->connections()) c->startShutdown();
    });
  }
  const auto deadline = start + timeout;
  while (activeConnections() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  const int64_t left = activeConnections();
  if (left > 0) {
    MLOG_WARN(
        "Graceful shutdown: {} of {} connections still open after brokerShutdownTimeoutMs "
        "({} ms); closing them",
        left, open, timeout.count());
  } else {
    MLOG_INFO("Graceful shutdown: {} connections drained in {} ms", open, took.count());
  }
  return left == 0;
}

void BrokerService::stop() {
  memoryTrimmer_.reset();
  expiryMonitor_.reset();
  backlogQuotaChecker_.reset();
  inactivityMonitor_.reset();
  subscriptionExpiryMonitor_.reset();
  compactionMonitor_.reset();
  txnSnapshotMonitor_.reset();
  if (server_) server_->stop();
  if (tlsServer_) tlsServer_->stop();
  if (txnRemoteBufferClient_) txnRemoteBufferClient_->close();  // its connections' loops stop
  if (ioLoops_) ioLoops_->stop();
  stopTransactions();
  if (mlWorkers_) mlWorkers_->stop();
  server_.reset();
  tlsServer_.reset();
  {
    MutexLock lock(mu_);
    topics_.clear();
  }
}

std::string BrokerService::brokerServiceUrl() const {
  const auto& l = options_.advertisedListeners;
  if (!l.byName.empty()) {
    const auto& internal = l.byName.at(l.internalListenerName);
    if (!internal.brokerServiceUrl.empty()) return internal.brokerServiceUrl;
  }
  return "pulsar://" + options_.advertisedAddress + ":" + std::to_string(brokerServicePort());
}

std::string BrokerService::brokerServiceUrlTls() const {
  const auto& l = options_.advertisedListeners;
  if (!l.byName.empty()) {
    const auto& internal = l.byName.at(l.internalListenerName);
    if (!internal.brokerServiceUrlTls.empty()) return internal.brokerServiceUrlTls;
  }
  if (!tlsServer_) return "";
  return "pulsar+ssl://" + options_.advertisedAddress + ":" +
         std::to_string(brokerServicePortTls());
}

std::vector<std::pair<std::string, PublishThrottleStats>> BrokerService::publishThrottleStats()
    const {
  std::vector<std::pair<std::string, PublishThrottleStats>> out;
  for (auto& t : throttles_) out.emplace_back(t->loop().name(), t->stats());
  return out;
}

std::string BrokerService::generateProducerName() {
  return options_.clusterName + "-" + std::to_string(producerNameGeneratorId_.load()) + "-" +
         std::to_string(producerNameSeq_.fetch_add(1));
}

void BrokerService::getOrCreateTopic(const TopicName& name, bool create, TopicCallback cb) {
  loadTopic(name, create, false, std::move(cb));
}

void BrokerService::loadTopic(const TopicName& name, bool create, bool inSharedStorage,
                              TopicCallback cb) {
  // Pulsar's createPersistentTopic: the name of a coordinator log, a pending-ack store or the
  // assign topic is never a topic (its ledger is the transactions' own: a producer would write
  // into it, a consumer read it).
  if (name.isPersistent() && isTransactionInternalName(name.toString())) {
    return cb(Status::notAllowed("Can not create transaction system topic " + name.toString()));
  }
  std::shared_ptr<TopicSlot> slot;
  {
    UniqueLock lock(mu_);
    auto it = topics_.find(name.toString());
    if (it != topics_.end()) {
      if (it->second->topic) {
        auto t = it->second->topic;
        lock.unlock();
        t->executor().execute([t, cb = std::move(cb)] { cb(t); });
      } else {
        it->second->waiters.push_back(std::move(cb));
      }
      return;
    }
    // Shared storage (BookKeeper): whether a topic not loaded here exists is the storage's
    // answer, not the names seen at start (another broker may have created or deleted it since),
    // as Pulsar's BrokerService.getTopicIfExists. Never created here without `create`.
    if (!create && !inSharedStorage && name.isPersistent() && factory_->sharedBetweenBrokers() &&
        namespaces_.exists(name.namespaceName()) && !namespaces_.partitions(name.toString())) {
      lock.unlock();
      net::EventLoop& executor = mlWorkers_->forKey(std::hash<std::string>{}(name.toString()));
      checkStoredTopic(
          name, &executor, [this, name, cb = std::move(cb)](Result<bool> exists) mutable {
            if (!exists.isOk()) return cb(exists.status());
            if (!*exists)
              return cb(Status::notFound("Topic " + name.toString() + " does not exist"));
            loadTopic(name, false, true, std::move(cb));
          });
      return;
    }
    bool stored = inSharedStorage || storedLedgers_.count(name.persistenceName()) > 0;
    if (!stored) {
      Status s = canCreateLocked(name, create);
      if (!s.isOk()) {
        lock.unlock();
        cb(s);
        return;
      }
    }
    if (namespaces_.partitions(name.toString())) {
      lock.unlock();
      cb(Status::notAllowed("Topic " + name.toString() + " is partitioned: use its partitions"));
      return;
    }
    slot = std::make_shared<TopicSlot>();
    slot->waiters.push_back(std::move(cb));
    topics_[name.toString()] = slot;
  }
  net::EventLoop& executor = mlWorkers_->forKey(std::hash<std::string>{}(name.toString()));
  auto opened = [this, name, slot, &executor, existingOnly = inSharedStorage](
                    Result<std::shared_ptr<storage::ManagedLedger>> r) {
    if (!r.isOk()) {
      topicOpenFailed(name, slot, existingOnly, r.status());
      return;
    }
    startTopic(name, slot, executor, *r);
  };
  // A topic the shared storage said exists is opened without creating (Pulsar's
  // getTopicIfExists: createIfMissing=false), so a delete racing the check is not undone.
  if (!name.isPersistent()) {
    nonPersistentFactory_->asyncOpen(name.persistenceName(), &executor, std::move(opened));
  } else if (inSharedStorage) {
    factory_->asyncOpenExisting(name.persistenceName(), &executor, std::move(opened));
  } else {
    factory_->asyncOpen(name.persistenceName(), &executor, std::move(opened));
  }
}

void BrokerService::topicOpenFailed(const TopicName& name, const std::shared_ptr<TopicSlot>& slot,
                                    bool existingOnly, const Status& st) {
  std::vector<TopicCallback> waiters;
  // Deleted through another broker since the storage said it exists: not re-created.
  const bool deleted = existingOnly && st.code() == StatusCode::kNotFound;
  {
    MutexLock lock(mu_);
    waiters = std::move(slot->waiters);
    auto it = topics_.find(name.toString());
    if (it != topics_.end() && it->second == slot) topics_.erase(it);
    if (deleted) storedLedgers_.erase(name.persistenceName());
  }
  Status s = st;
  if (deleted) {
    MLOG_INFO("{}: deleted through another broker before it opened here", name.toString());
    s = Status::notFound("Topic " + name.toString() + " does not exist");
  } else {
    MLOG_WARN("cannot open topic {}: {}", name.toString(), st.toString());
  }
  for (auto& w : waiters) w(s);
}

PendingAckStoreOpener BrokerService::pendingAckStoreOpener(net::EventLoop& executor) {
  PendingAckStoreOpener o;
  o.logIndexMinLag = options_.transactionPendingAckLogIndexMinLag;
  o.open = [this, exec = &executor](const std::string& name, bool create,
                                    PendingAckStoreOpener::Opened opened) {
    if (factory_->sharedBetweenBrokers()) {
      if (create) return factory_->asyncOpen(name, exec, std::move(opened));
      return factory_->asyncOpenExisting(name, exec, std::move(opened));
    }
    {
      MutexLock lock(mu_);
      if (!create && !pendingAckLedgers_.count(name)) {
        return exec->execute([opened = std::move(opened), name] {
          opened(Status::notFound("no pending ack log " + name));
        });
      }
      pendingAckLedgers_.insert(name);
    }
    factory_->asyncOpen(name, exec, std::move(opened));
  };
  o.deleted = [this](const std::string& name) {
    MutexLock lock(mu_);
    pendingAckLedgers_.erase(name);
  };
  return o;
}

void BrokerService::startTopic(const TopicName& name, const std::shared_ptr<TopicSlot>& slot,
                               net::EventLoop& executor,
                               const std::shared_ptr<storage::ManagedLedger>& ledger) {
  auto topic = std::make_shared<PersistentTopic>(name, ledger, executor, options_,
                                                 deduplicationEnabledFor(name));
  topic->setFencedHandler([this, weak = std::weak_ptr<PersistentTopic>(topic)] {
    if (auto t = weak.lock()) {
      MLOG_WARN("{}: its storage was taken over by another broker: unloading",
                t->name().toString());
      unloadTopic(t, /*release=*/true);
    }
  });
  topic->setBrokerRateLimiters(&rateLimiters_);
  topic->setPolicyLimits(policyLimitsOf(name));
  std::vector<int64_t> seqs;
  {
    MutexLock lock(mu_);
    auto c = compactedSeqs_.find(name.persistenceName());
    if (c != compactedSeqs_.end()) {
      seqs = std::move(c->second);
      compactedSeqs_.erase(c);
    }
  }
  topic->setCompaction(
      [factory = factory_, exec = &executor](
          const std::string& ledgerName,
          std::function<void(Result<std::shared_ptr<storage::ManagedLedger>>)> opened) {
        factory->asyncOpen(ledgerName, exec, std::move(opened));
      },
      std::move(seqs), factory_->compactedLedgerStore());
  topic->setPendingAckStore(pendingAckStoreOpener(executor));
  // The topic serves once its subscriptions and dedup state are loaded; until then new
  // callers queue on the slot too.
  topic->initialize([this, name, slot, topic](const Status& s) {
    if (!s.isOk()) {
      MLOG_WARN("{}: dedup replay failed: {}", name.toString(), s.toString());
    }
    TopicLoadedHook loaded;
    {
      MutexLock lock(mu_);
      loaded = topicLoaded_;
    }
    if (loaded) loaded(*topic);  // before any client uses it (geo-replication's cursors)
    std::vector<TopicCallback> waiters;
    bool created = false;
    {
      MutexLock lock(mu_);
      waiters = std::move(slot->waiters);
      slot->topic = topic;
      created = storedLedgers_.emplace(name.persistenceName(), true).second;
      // A partition of a partitioned topic was listed (and announced) with it already.
      if (created && name.partitionIndex() >= 0) {
        auto n = namespaces_.partitions(name.partitionedTopicName());
        created = !n || name.partitionIndex() >= *n;
      }
    }
    if (created) topicListeners_.notify(name.namespaceName(), name.toString(), true);
    for (auto& w : waiters) w(topic);
  });
}

std::string policyKey(const TopicName& name) {
  return name.partitionIndex() >= 0 ? name.partitionedTopicName() : name.toString();
}

TopicPolicyLimits BrokerService::policyLimitsOf(const TopicName& name) const {
  std::string key = policyKey(name);
  NamespacePolicies ns = policies_.namespacePolicies(name.namespaceName());
  // Topic policy first, then the namespace policy (Pulsar's hierarchy).
  auto get = [&](const char* topicPolicy, const char* nsLimit) -> std::optional<int> {
    if (auto v = policies_.topicPolicyInt(key, topicPolicy)) return static_cast<int>(*v);
    auto it = ns.limits.find(nsLimit);
    if (it != ns.limits.end()) return it->second;
    return std::nullopt;
  };
  TopicPolicyLimits l;
  l.maxProducers = get("maxProducers", "maxProducersPerTopic");
  l.maxConsumers = get("maxConsumers", "maxConsumersPerTopic");
  l.maxConsumersPerSubscription = get("maxConsumersPerSubscription", "maxConsumersPerSubscription");
  l.maxSubscriptions = get("maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic");
  l.maxUnackedOnConsumer = get("maxUnackedMessagesOnConsumer", "maxUnackedMessagesPerConsumer");
  l.maxUnackedOnSubscription =
      get("maxUnackedMessagesOnSubscription", "maxUnackedMessagesPerSubscription");
  l.backlogQuota = backlogQuotaOf(name, "destination_storage");
  l.backlogQuotaTime = backlogQuotaOf(name, "message_age");
  if (auto d = policies_.topicDelayedDelivery(key)) {
    l.delayedDelivery = *d;
  } else if (ns.delayedDelivery) {
    l.delayedDelivery = *ns.delayedDelivery;
  } else {
    l.delayedDelivery = DelayedDeliveryPolicies{options_.delayedDeliveryEnabled,
                                                options_.delayedDeliveryTickTimeMillis,
                                                options_.delayedDeliveryMaxDelayInMillis};
  }
  l.retention = policies_.topicRetention(key);
  if (!l.retention) l.retention = ns.retention;
  resolveRateLimits(key, ns, &l);
  return l;
}

bool BrokerService::deduplicationEnabledFor(const TopicName& name) const {
  if (auto t = policies_.topicPolicyBool(policyKey(name), "deduplicationEnabled")) return *t;
  return policies_.deduplicationEnabled(name.namespaceName())
      .value_or(options_.brokerDeduplicationEnabled);
}

int64_t BrokerService::messageTtlOf(const TopicName& name) const {
  if (auto t = policies_.topicPolicyInt(policyKey(name), "messageTTL")) return *t;
  if (auto n = policies_.namespacePolicies(name.namespaceName()).messageTtlSeconds) return *n;
  return options_.ttlDurationDefaultInSeconds;
}

int64_t BrokerService::compactionThresholdOf(const TopicName& name) const {
  if (auto t = policies_.topicPolicyInt(policyKey(name), "compactionThreshold")) return *t;
  if (auto n = policies_.namespacePolicies(name.namespaceName()).compactionThreshold) return *n;
  return options_.brokerServiceCompactionThresholdInBytes;
}

void BrokerService::checkCompaction() {
  for (auto& t : topics()) {
    int64_t threshold = compactionThresholdOf(t->name());
    if (threshold <= 0) continue;
    t->executor().execute([t, threshold] {
      TopicCompactor& c = t->compactor();
      if (c.status() == CompactionStatus::kRunning || c.backlogBytes() < threshold) return;
      MLOG_INFO("{}: compacting ({} bytes past the compaction horizon, threshold {})",
                t->name().toString(), c.backlogBytes(), threshold);
      (void)c.trigger();
    });
  }
}

void BrokerService::onTopicPoliciesChanged(const TopicName& name) {
  std::string key = policyKey(name);
  reapplyPolicies([&](const TopicName& t) { return policyKey(t) == key; });
}

void BrokerService::onNamespacePoliciesChanged(const std::string& ns) {
  reapplyPolicies([&](const TopicName& t) { return t.namespaceName() == ns; });
}

void BrokerService::reapplyPolicies(const std::function<bool(const TopicName&)>& which) {
  for (auto& t : topics()) {
    if (!which(t->name())) continue;
    TopicPolicyLimits limits = policyLimitsOf(t->name());
    bool dedup = deduplicationEnabledFor(t->name());
    t->executor().execute([t, limits, dedup] {
      t->setPolicyLimits(limits);
      if (t->deduplication().enabled() != dedup) t->setDeduplicationEnabled(dedup);
    });
  }
}

bool BrokerService::allowAutoTopicCreation(const TopicName& name) const {
  auto o = policies_.namespacePolicies(name.namespaceName()).autoTopicCreation;
  return o ? o->allowAutoTopicCreation : options_.dynamic.allowAutoTopicCreation.load();
}

std::vector<std::shared_ptr<PersistentTopic>> BrokerService::topics() const {
  std::vector<std::shared_ptr<PersistentTopic>> out;
  MutexLock lock(mu_);
  for (auto& [n, s] : topics_) {
    if (s->topic) out.push_back(s->topic);
  }
  return out;
}

namespace {
// The URL schemes a listing of `domain` covers.
std::vector<std::string> domainsOf(TopicDomain domain) {
  switch (domain) {
    case TopicDomain::kPersistent:
      return {"persistent"};
    case TopicDomain::kNonPersistent:
      return {"non-persistent"};
    case TopicDomain::kAll:
      break;
  }
  return {"persistent", "non-persistent"};
}
}  // namespace

std::vector<std::string> BrokerService::topicsOfNamespace(const std::string& ns,
                                                          TopicDomain domain) const {
  std::vector<std::string> out;
  MutexLock lock(mu_);
  for (const std::string& d : domainsOf(domain)) {
    std::string prefix = d;
    prefix.append("://").append(ns).append("/");
    for (auto& [n, s] : topics_) {
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    }
    // persistence name: tenant/ns/<domain>/local
    std::string stored = ns;
    stored.append("/").append(d).append("/");
    // Shared storage: the storage's own list is the stored topics (sharedStoredTopicsOf); what
    // this broker once read or opened may have been deleted through another broker since.
    for (auto& [n, _] : storedLedgers_) {
      if (factory_->sharedBetweenBrokers()) break;
      if (n.rfind(stored, 0) != 0) continue;
      std::string full = prefix + n.substr(stored.size());
      if (!topics_.count(full)) out.push_back(full);
    }
    // Partitions not opened yet: Pulsar creates a persistent topic's with the partitioned topic,
    // so they list (a non-persistent partition exists once loaded).
    if (d != "persistent") continue;
    for (auto& [n, partitions] : namespaces_.partitionedWithPrefix(prefix)) {
      for (int i = 0; i < partitions; ++i) {
        std::string p = n + "-partition-" + std::to_string(i);
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
      }
    }
  }
  return out;
}

void BrokerService::checkStoredTopic(const TopicName& name, net::Executor* ex,
                                     std::function<void(Result<bool>)> cb) {
  factory_->asyncExists(name.persistenceName(), ex,
                        [this, name, cb = std::move(cb)](Result<bool> exists) {
                          if (exists.isOk()) {
                            MutexLock lock(mu_);
                            if (*exists) {
                              storedLedgers_.emplace(name.persistenceName(), true);
                            } else {
                              storedLedgers_.erase(name.persistenceName());
                            }
                          }
                          cb(std::move(exists));
                        });
}

namespace {
// The topics of `ns` stored under domains[i..] appended to `acc`, then cb(acc) (sorted).
void storedTopicsFrom(storage::ManagedLedgerFactory* factory, const std::string& ns,
                      std::vector<std::string> domains, size_t i, std::vector<std::string> acc,
                      net::Executor* ex, std::function<void(Result<std::vector<std::string>>)> cb) {
  if (i == domains.size()) {
    std::sort(acc.begin(), acc.end());
    return cb(std::move(acc));
  }
  std::string d = domains[i];
  factory->asyncLedgerNamesUnder(
      ns + "/" + d, ex,
      [factory, ns, d, domains = std::move(domains), i, acc = std::move(acc), ex,
       cb = std::move(cb)](Result<std::vector<std::string>> names) mutable {
        if (!names.isOk()) return cb(names.status());
        const std::string stored = ns + "/" + d + "/";  // tenant/ns/<domain>/local
        for (const std::string& n : *names) {
          if (n.rfind(stored, 0) == 0)
            acc.push_back(
                std::string(d).append("://").append(ns).append("/").append(n, stored.size()));
        }
        storedTopicsFrom(factory, ns, std::move(domains), i + 1, std::move(acc), ex, std::move(cb));
      });
}
}  // namespace

void BrokerService::sharedStoredTopicsOf(const std::string& ns, TopicDomain domain,
                                         net::Executor* ex,
                                         std::function<void(Result<std::vector<std::string>>)> cb) {
  if (!factory_->sharedBetweenBrokers()) {
    ex->execute([cb = std::move(cb)] { cb(Status::unsupported("storage not shared")); });
    return;
  }
  storedTopicsFrom(factory_.get(), ns, domainsOf(domain), 0, {}, ex, std::move(cb));
}

Status BrokerService::canCreateLocked(const TopicName& name, bool create) {
  if (!namespaces_.exists(name.namespaceName())) {
    return Status::notFound("Namespace " + name.namespaceName() + " does not exist");
  }
  if (!create) return Status::notFound("Topic " + name.toString() + " does not exist");
  if (name.partitionIndex() >= 0) {
    auto n = namespaces_.partitions(name.partitionedTopicName());
    if (!n || name.partitionIndex() >= *n) {
      // Pulsar refuses to auto-create a "-partition-N" topic without its partitioned topic.
      return Status::notAllowed("Topic " + name.toString() +
                                " is a partition of a topic that is not partitioned");
    }
  }
  return Status::ok();
}

void BrokerService::createNamespace(const std::string& ns) { namespaces_.ensure(ns); }

bool BrokerService::namespaceExists(const std::string& ns) const { return namespaces_.exists(ns); }

Status BrokerService::checkLocalCluster(const std::string& ns) const {
  if (!ownership_) return Status::ok();
  std::optional<std::vector<std::string>> clusters =
      policies_.namespacePolicies(ns).replicationClusters;
  if (!clusters ||
      std::find(clusters->begin(), clusters->end(), options_.clusterName) != clusters->end()) {
    return Status::ok();
  }
  // Java's Set.toString: "[a, b]".
  std::string list;
  for (const auto& c : *clusters) list += (list.empty() ? "" : ", ") + c;
  return Status::invalidArgument(fmt::format(
      "Namespace missing local cluster name in clusters list: local_cluster={} ns={} clusters=[{}]",
      options_.clusterName, ns, list));
}

Result<int> BrokerService::partitionsOf(const TopicName& name, bool autoCreate) {
  if (!namespaces_.exists(name.namespaceName())) {
    return Status::notFound("Namespace " + name.namespaceName() + " does not exist");
  }
  if (auto n = namespaces_.partitions(name.toString())) return *n;
  if (name.partitionIndex() >= 0) return 0;
  bool exists = false;
  {
    MutexLock lock(mu_);
    exists = topics_.count(name.toString()) || storedLedgers_.count(name.persistenceName());
  }
  // The namespace's autoTopicCreation override replaces the three broker settings.
  auto override = policies_.namespacePolicies(name.namespaceName()).autoTopicCreation;
  bool allow =
      override ? override->allowAutoTopicCreation : options_.dynamic.allowAutoTopicCreation.load();
  std::string type =
      override ? override->topicType : options_.dynamic.allowAutoTopicCreationType.load();
  int partitions = override && override->defaultNumPartitions
                       ? *override->defaultNumPartitions
                       : options_.dynamic.defaultNumPartitions.load();
  if (!exists && autoCreate && allow && type == "partitioned") {
    int n = std::max(1, partitions);
    if (!namespaces_.createPartitioned(name.toString(), n).isOk()) {
      return namespaces_.partitions(name.toString()).value_or(0);  // created meanwhile
    }
    // Cluster mode: stored without waiting (this may be an I/O loop); a count another broker
    // stored first replaces this one.
    if (shared_) shared_->createPartitionedAsync(name.toString(), n);
    announcePartitions(name, 0, n, true);
    return n;
  }
  return 0;
}

Status BrokerService::createPartitionedTopic(const TopicName& name, int partitions) {
  if (partitions < 1) return Status::invalidArgument("Number of partitions must be >= 1");
  {
    MutexLock lock(mu_);
    if (topics_.count(name.toString())) {
      return Status::alreadyExists("Topic " + name.toString() + " already exists");
    }
  }
  if (shared_) {
    if (Status s = shared_->createPartitioned(name.toString(), partitions); !s.isOk()) return s;
    applySharedPartitioned(name.toString(), partitions);
    return Status::ok();
  }
  if (Status s = namespaces_.createPartitioned(name.toString(), partitions); !s.isOk()) return s;
  announcePartitions(name, 0, partitions, true);
  return Status::ok();
}

void BrokerService::applySharedTenant(const std::string& name,
                                      const std::optional<TenantInfo>& info) {
  policies_.applyTenant(name, info);
}

void BrokerService::applySharedNamespace(const std::string& ns,
                                         const std::optional<NamespacePolicies>& p) {
  if (!p) {
    for (auto& [topic, n] : partitionedTopicsOf(ns, TopicDomain::kAll)) {
      applySharedPartitioned(topic, std::nullopt);
    }
  }
  namespaces_.applyNamespace(ns, p.has_value());
  policies_.applyNamespacePolicies(ns, p);
  if (p) onNamespacePoliciesChanged(ns);
}

void BrokerService::applySharedPartitioned(const std::string& topic,
                                           std::optional<int> partitions) {
  auto name = TopicName::parse(topic);
  if (!name.isOk()) return;
  std::optional<int> before = namespaces_.applyPartitioned(topic, partitions);
  int from = before.value_or(0);
  int to = partitions.value_or(0);
  if (to > from) announcePartitions(*name, from, to, true);
  if (to < from) announcePartitions(*name, to, from, false);
}

void BrokerService::applySharedCluster(const std::string& name,
                                       const std::optional<std::string>& clusterData) {
  policies_.applyCluster(name, clusterData);
}

void BrokerService::applySharedResourceGroup(const std::string& name,
                                             const std::optional<std::string>& json) {
  policies_.applyResourceGroup(name, json);
  onResourceGroupChanged(name);
}

void BrokerService::clearShared() {
  namespaces_.clear();
  policies_.clearTenantsAndPolicies();
}

storage::Position BrokerService::clampSeekPosition(PersistentTopic& topic, storage::Position p) {
  auto& ml = topic.ledger();
  if (p.ledgerId < 0 || p.entryId < 0) return ml.firstPosition();  // MessageId.earliest
  storage::Position lac = ml.lastConfirmedEntry();
  if (p > lac) return ml.nextValidPosition(lac);  // MessageId.latest or beyond the end
  return p;
}

namespace {

// Scans a topic's entries in order for the first publish time >= target (SEEK by time).
// Thread: the topic's executor. Keeps itself alive through the read callbacks.
struct PublishTimeScan : std::enable_shared_from_this<PublishTimeScan> {
  std::shared_ptr<PersistentTopic> topic;
  uint64_t target = 0;
  std::function<void(storage::Position)> done;

  void step(storage::Position from) {
    auto& ml = topic->ledger();
    storage::Position lac = ml.lastConfirmedEntry();
    if (from > lac) {
      done(ml.nextValidPosition(lac));
      return;
    }
    auto self = shared_from_this();
    ml.asyncReadEntries(
        from, 1000, 64 << 20, [self](const Status& s, std::vector<storage::Entry> es) {
          auto& ml2 = self->topic->ledger();
          if (!s.isOk() || es.empty()) {
            self->done(ml2.nextValidPosition(ml2.lastConfirmedEntry()));
            return;
          }
          for (auto& e : es) {
            EntryMetadataPeek md;
            if (peekEntryMetadata(e.data.view(), &md).isOk() && md.publishTime >= self->target) {
              self->done(e.position);
              return;
            }
          }
          self->step(ml2.nextValidPosition(es.back().position));
        });
  }
};

}  // namespace

void BrokerService::findPositionByPublishTime(const std::shared_ptr<PersistentTopic>& topic,
                                              uint64_t publishTimeMs,
                                              std::function<void(storage::Position)> cb) {
  // Linear scan from the first stored entry (entries are in publish order).
  auto scan = std::make_shared<PublishTimeScan>();
  scan->topic = topic;
  scan->target = publishTimeMs;
  scan->done = std::move(cb);
  scan->step(topic->ledger().firstPosition());
}

void BrokerService::lastMessageId(
    const std::shared_ptr<PersistentTopic>& topic, const std::string& sub, bool readCompacted,
    const std::function<void(protocol::WireMessageId, std::optional<protocol::WireMessageId>)>&
        cb) {
  // The current ledger may be empty (a restart, an unload or a rollover began a new one).
  storage::Position lac = topic->maxReadPosition();
  std::optional<protocol::WireMessageId> md;
  if (auto* s = topic->subscription(sub)) {
    auto p = s->cursor().markDeletedPosition();
    md = protocol::WireMessageId{static_cast<uint64_t>(p.ledgerId),
                                 static_cast<uint64_t>(p.entryId), -1, -1};
  }
  int32_t partition = topic->name().partitionIndex();
  auto view = readCompacted ? topic->compactor().view() : nullptr;
  // The view answers when the log holds nothing after its horizon: also when the ledgers up to
  // it were trimmed and the log is empty (lac.entryId < 0 here).
  if (view && (lac <= view->horizon() || lac.entryId < 0)) {
    protocol::WireMessageId none{static_cast<uint64_t>(-1), static_cast<uint64_t>(-1), partition,
                                 -1};
    if (view->entries() == 0) return cb(none, md);
    view->asyncReadFromIndex(
        view->entries() - 1, 1, 1,
        [cb, md, none, partition](const Status& s, std::vector<storage::Entry> es) {
          if (!s.isOk() || es.empty()) return cb(none, md);
          protocol::WireMessageId out{static_cast<uint64_t>(es.front().position.ledgerId),
                                      static_cast<uint64_t>(es.front().position.entryId), partition,
                                      -1};
          EntryMetadataPeek peek;
          if (peekEntryMetadata(es.front().data.view(), &peek).isOk() &&
              peek.numMessagesInBatch > 1) {
            out.batchIndex = peek.numMessagesInBatch - 1;
          }
          cb(out, md);
        });
    return;
  }
  protocol::WireMessageId last{static_cast<uint64_t>(lac.ledgerId),
                               static_cast<uint64_t>(lac.entryId), partition, -1};
  if (lac.entryId < 0) {
    // Nothing stored: Pulsar answers (-1, -1).
    last.ledgerId = static_cast<uint64_t>(-1);
    last.entryId = static_cast<uint64_t>(-1);
    cb(last, md);
    return;
  }
  // Past neither an ongoing transaction's first entry nor onto a txn marker or aborted entry.
  topic->lastDispatchableEntry([cb, last, md](storage::Position p, int32_t messages) {
    auto out = last;
    out.ledgerId = static_cast<uint64_t>(p.ledgerId);
    out.entryId = static_cast<uint64_t>(p.entryId);
    if (messages > 1) out.batchIndex = messages - 1;
    cb(out, md);
  });
}

Status BrokerService::addNamespace(const std::string& ns, const NamespacePolicies& initial,
                                   int numBundles) {
  if (shared_) {
    if (Status s = shared_->createNamespace(ns, initial, numBundles); !s.isOk()) return s;
    namespaces_.applyNamespace(ns, true);
    policies_.applyNamespacePolicies(ns, initial);
    return Status::ok();
  }
  if (Status s = namespaces_.create(ns); !s.isOk()) return s;
  return policies_.updateNamespacePolicies(ns, [&](NamespacePolicies& p) { p = initial; });
}

Status BrokerService::removeNamespace(const std::string& ns) {
  if (shared_) {
    if (Status s = shared_->deleteNamespace(ns); !s.isOk()) return s;
    applySharedNamespace(ns, std::nullopt);
    return Status::ok();
  }
  if (Status s = namespaces_.remove(ns); !s.isOk()) return s;
  policies_.removeNamespace(ns);
  return Status::ok();
}

std::vector<std::string> BrokerService::namespaces() const { return namespaces_.list(); }

size_t BrokerService::sharedTenantCount() const { return policies_.tenants().size(); }

size_t BrokerService::sharedNamespaceCount() const { return namespaces_.list().size(); }

bool BrokerService::topicExists(const TopicName& name) const {
  {
    MutexLock lock(mu_);
    if (storedLedgers_.count(name.persistenceName())) return true;
  }
  return topicLoadedOrPartitioned(name);
}

bool BrokerService::topicLoadedOrPartitioned(const TopicName& name) const {
  {
    MutexLock lock(mu_);
    if (topics_.count(name.toString())) return true;
  }
  if (namespaces_.partitions(name.toString())) return true;
  if (name.partitionIndex() < 0) return false;
  auto n = namespaces_.partitions(name.partitionedTopicName());
  return n && name.partitionIndex() < *n;
}

void BrokerService::announcePartitions(const TopicName& name, int from, int to, bool created) {
  for (int i = from; i < to; ++i) {
    topicListeners_.notify(name.namespaceName(), name.partition(i).toString(), created);
  }
}

std::map<std::string, int> BrokerService::partitionedTopicsOf(const std::string& ns,
                                                              TopicDomain domain) const {
  std::map<std::string, int> out;
  for (const std::string& d : domainsOf(domain)) {
    std::string prefix = d;
    prefix.append("://").append(ns).append("/");
    out.merge(namespaces_.partitionedWithPrefix(prefix));
  }
  return out;
}

Status BrokerService::updatePartitions(const TopicName& name, int partitions) {
  if (shared_) {
    Result<int> stored = shared_->updatePartitioned(name.toString(), partitions);
    if (!stored.isOk()) return stored.status();
    applySharedPartitioned(name.toString(), partitions);
    return Status::ok();
  }
  Result<int> before = namespaces_.updatePartitioned(name.toString(), partitions);
  if (!before.isOk()) return before.status();
  announcePartitions(name, *before, partitions, true);
  return Status::ok();
}

void BrokerService::forgetSchema(const TopicName& name, std::function<void()> done) {
  std::string id = schemaIdOf(name);
  schemas_.deleteSchema(
      id, true, &metadataLoop_, [id, done = std::move(done)](const Result<int64_t>& r) {
        if (!r.isOk()) {
          MLOG_WARN("cannot delete the schemas of {}: {}", id, r.status().toString());
        }
        if (done) done();
      });
}

Status BrokerService::removePartitionedTopic(const TopicName& name,
                                             std::function<void()> schemaGone) {
  if (shared_) {
    Result<int> stored = shared_->deletePartitioned(name.toString());
    if (!stored.isOk()) return stored.status();
    applySharedPartitioned(name.toString(), std::nullopt);
    forgetSchema(name, std::move(schemaGone));
    return Status::ok();
  }
  Result<int> partitions = namespaces_.removePartitioned(name.toString());
  if (!partitions.isOk()) return partitions.status();
  announcePartitions(name, 0, *partitions, false);
  forgetSchema(name, std::move(schemaGone));
  return Status::ok();
}

void BrokerService::unloadTopic(const std::shared_ptr<PersistentTopic>& topic, bool release,
                                std::function<void(Status)> done) {
  {
    MutexLock lock(mu_);
    auto it = topics_.find(topic->name().toString());
    if (it == topics_.end() || it->second->topic != topic) {  // already gone
      if (done) done(Status::ok());
      return;
    }
    topics_.erase(it);
    // A non-persistent topic exists only while loaded (Pulsar's).
    if (!topic->name().isPersistent()) storedLedgers_.erase(topic->name().persistenceName());
  }
  topic->executor().execute([topic, release, done = std::move(done)] {
    topic->closeLedger(
        [topic, done](const Status& s) {
          if (!s.isOk()) {
            MLOG_WARN("{}: closing on unload: {}", topic->name().toString(), s.toString());
          }
          if (done) done(s);
        },
        release);
  });
}

void BrokerService::deleteTopic(const TopicName& name, bool force,
                                const std::function<void(Status)>& cb) {
  bool wasLoaded = false;
  {
    MutexLock lock(mu_);
    wasLoaded = topics_.count(name.toString()) > 0;
  }
  getOrCreateTopic(
      name, false, [this, name, force, wasLoaded, cb](Result<std::shared_ptr<PersistentTopic>> r) {
        if (!r.isOk()) {
          cb(r.status().code() == StatusCode::kNotFound ? Status::notFound("Topic not found")
                                                        : r.status());
          return;
        }
        auto topic = *r;
        // Pulsar's BrokerService.deleteTopic: a loaded topic with replicators is kept unless
        // forced (a forced delete is local: the remote clusters keep theirs).
        if (wasLoaded && !force && !topic->replicators().empty()) {
          std::string clusters;
          for (const auto& [c, rep] : topic->replicators()) {
            clusters += (clusters.empty() ? "" : ", ") + c;
          }
          cb(Status::error(StatusCode::kNotAllowed,
                           "Delete forbidden topic is replicated on clusters [" + clusters + "]"));
          return;
        }
        bool busy = !topic->producers().empty();
        for (const auto& [n, sub] : topic->subscriptions()) busy = busy || sub->consumerCount() > 0;
        if (busy && !force) {
          cb(Status::busy("Topic has active producers/subscriptions"));
          return;
        }
        {
          // Forget it first: clients closed below reconnect to a fresh topic.
          MutexLock lock(mu_);
          auto it = topics_.find(name.toString());
          if (it != topics_.end() && it->second->topic == topic) topics_.erase(it);
          storedLedgers_.erase(name.persistenceName());
        }
        topicListeners_.notify(name.namespaceName(), name.toString(), false);
        // A deleted topic's schema goes with it (a partition's stays with its partitioned topic).
        if (name.partitionIndex() < 0) forgetSchema(name);
        topic->deleteLedger([topic, cb](const Status& s) { cb(s); });
      });
}

}  // namespace magnetar::broker
