#include "broker/replication/replication_service.h"

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cctype>
#include <future>
#include <utility>
#include <vector>

#include "base/blocking_wait.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/replication/replicated_subscriptions.h"
#include "broker/replication/replicator.h"

namespace magnetar::broker {

namespace json = boost::json;

std::optional<std::string> brokerServiceUrlOf(const std::string& clusterDataJson) {
  boost::system::error_code ec;
  json::value v = json::parse(clusterDataJson, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::value* url = v.as_object().if_contains("brokerServiceUrl");
  if (!url || !url->is_string() || url->as_string().empty()) return std::nullopt;
  return std::string(url->as_string());
}

namespace {
// A string field of a ClusterData object: nullopt when absent, null or not a string.
std::optional<std::string> stringField(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}
bool boolField(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_bool() && v->as_bool();
}
std::string nonBlank(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (a && !a->empty()) return *a;
  return b ? *b : std::string();
}
}  // namespace

Result<RemoteClusterClient> remoteClusterClient(const std::string& clusterDataJson,
                                                const BrokerClientOptions& broker) {
  boost::system::error_code ec;
  json::value v = json::parse(clusterDataJson, ec);
  if (ec || !v.is_object()) return Status::invalidArgument("ClusterData is not a JSON object");
  const json::object& o = v.as_object();
  RemoteClusterClient c;
  c.options = broker;
  const bool ownTls = boolField(o, "brokerClientTlsEnabled");
  c.tls = ownTls || broker.tlsEnabled;
  if (c.tls) {
    c.serviceUrl = nonBlank(stringField(o, "brokerServiceUrlTls"), stringField(o, "serviceUrlTls"));
  } else {
    c.serviceUrl = nonBlank(stringField(o, "brokerServiceUrl"), stringField(o, "serviceUrl"));
  }
  if (c.serviceUrl.rfind("pulsar://", 0) != 0 && c.serviceUrl.rfind("pulsar+ssl://", 0) != 0) {
    return Status::invalidArgument(std::string(c.tls ? "no pulsar+ssl:// brokerServiceUrlTls"
                                                     : "no pulsar:// brokerServiceUrl") +
                                   " in the ClusterData" +
                                   (c.serviceUrl.empty() ? "" : " (" + c.serviceUrl + ")"));
  }
  if (ownTls) {
    c.ownSettings = true;
    c.options.tlsEnabled = true;
    c.options.tlsEnabledWithKeyStore = boolField(o, "brokerClientTlsEnabledWithKeyStore");
    c.options.trustCertsFilePath = stringField(o, "brokerClientTrustCertsFilePath").value_or("");
    c.options.tlsTrustCertsFilePath.clear();  // no fallback to the broker's trust file
    c.options.certificateFilePath = stringField(o, "brokerClientCertificateFilePath").value_or("");
    c.options.keyFilePath = stringField(o, "brokerClientKeyFilePath").value_or("");
    c.options.allowInsecureConnection = boolField(o, "tlsAllowInsecureConnection");
  }
  auto plugin = stringField(o, "authenticationPlugin");
  auto params = stringField(o, "authenticationParameters");
  if (plugin && params) {
    c.ownSettings = true;
    c.options.authenticationPlugin = *plugin;
    c.options.authenticationParameters = *params;
  }
  return c;
}

ReplicationService::ReplicationService(BrokerService& service, std::chrono::milliseconds period)
    : service_(service), period_(period) {}

ReplicationService::~ReplicationService() { stop(); }

Status ReplicationService::start() {
  auto settings = BrokerClientSettings::create(service_.options().brokerClient);
  if (!settings.isOk()) return settings.status();
  peers_ = std::make_unique<PeerPool>(service_.ioLoops(), std::chrono::seconds(10),
                                      std::move(*settings));
  // A topic loaded from now on gets its replicators (and their cursors) before any client
  // publishes; the check below covers those loaded before, and policy changes.
  service_.setTopicLoadedHook(
      [this](PersistentTopic& t) { reconcile(t, wantedFor(t.name()), dispatchRateFor(t.name())); });
  monitor_ =
      std::make_unique<PeriodicTask>("pulsar-replication-monitor", period_, [this] { check(); });
  return Status::ok();
}

void ReplicationService::stop(std::chrono::milliseconds timeout) {
  if (!monitor_) return;
  service_.setTopicLoadedHook(nullptr);
  monitor_.reset();  // joins: no check runs from here on
  auto topics = service_.topics();
  auto left = std::make_shared<std::atomic<size_t>>(topics.size() + 1);
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  auto countDown = [left, done] {
    if (left->fetch_sub(1) == 1) done->set_value();
  };
  for (auto& t : topics) {
    t->executor().execute([t, countDown] {
      std::vector<std::string> clusters;
      for (auto& [c, r] : t->replicators()) clusters.push_back(c);
      for (auto& c : clusters) t->removeReplicator(c, /*deleteCursor=*/false);
      countDown();
    });
  }
  countDown();
  if (!blockingReady(finished, timeout, "closing replicators")) {
    MLOG_WARN("replicators not all closed after {} ms", timeout.count());
  }
  peers_->closeAll();
  std::vector<std::shared_ptr<PeerPool>> pools;
  {
    MutexLock lock(mu_);
    for (auto& [name, c] : clients_) {
      if (c.peers) pools.push_back(c.peers);
    }
    pools.insert(pools.end(), retired_.begin(), retired_.end());
  }
  for (auto& p : pools) p->closeAll();
}

std::optional<RemoteEndpoint> ReplicationService::endpointOf(const std::string& cluster) {
  auto data = service_.policies().cluster(cluster);
  if (!data) return std::nullopt;
  MutexLock lock(mu_);
  auto it = clients_.find(cluster);
  if (it == clients_.end() || it->second.clusterData != *data) {
    auto client = remoteClusterClient(*data, service_.options().brokerClient);
    if (!client.isOk()) {
      MLOG_WARN("replication to {}: {}", cluster, client.status().toString());
      return std::nullopt;
    }
    std::shared_ptr<PeerPool> pool;
    if (client->ownSettings) {
      auto settings = BrokerClientSettings::create(client->options);
      if (!settings.isOk()) {
        MLOG_WARN("replication to {}: the ClusterData's TLS or authentication: {}", cluster,
                  settings.status().toString());
        return std::nullopt;
      }
      pool = std::make_shared<PeerPool>(service_.ioLoops(), std::chrono::seconds(10),
                                        std::move(*settings));
    }
    if (it != clients_.end() && it->second.peers) retired_.push_back(it->second.peers);
    it = clients_.insert_or_assign(cluster, ClusterClient{*data, pool, std::move(*client)}).first;
  }
  return RemoteEndpoint{it->second.client.serviceUrl, it->second.client.tls, it->second.peers};
}

std::optional<std::vector<std::string>> clusterListOf(const std::string& jsonText) {
  boost::system::error_code ec;
  json::value v = json::parse(jsonText, ec);
  if (ec || !v.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& c : v.as_array()) {
    if (!c.is_string()) return std::nullopt;
    out.emplace_back(c.as_string());
  }
  return out;
}

std::set<std::string> ReplicationService::wantedFor(const TopicName& name) {
  std::set<std::string> wanted;
  if (!name.isPersistent() || name.localName().rfind("__", 0) == 0) return wanted;
  const std::string& local = service_.options().clusterName;
  auto& reg = service_.policies();
  // The topic's own list (a partition: its partitioned topic's) over the namespace's.
  auto topicPolicies = reg.topicPolicies(name.partitionedTopicName());
  auto own = topicPolicies.find(kTopicReplicationKey);
  std::optional<std::vector<std::string>> clusters;
  if (own != topicPolicies.end()) clusters = clusterListOf(own->second);
  if (!clusters) clusters = reg.namespacePolicies(name.namespaceName()).replicationClusters;
  if (clusters) {
    for (const auto& c : *clusters) {
      if (c != local) wanted.insert(c);
    }
  }
  return wanted;
}

void ReplicationService::setDefaultDispatchRate(std::function<DispatchRate()> defaults) {
  defaultRate_ = std::move(defaults);
}

DispatchRate ReplicationService::dispatchRateFor(const TopicName& name) {
  const char* kPolicy = "replicatorDispatchRate";  // topic policy and Policies map field
  auto topic = service_.policies().topicPolicies(policyKey(name));
  std::optional<DispatchRate> r;
  if (auto it = topic.find(kPolicy); it != topic.end()) {
    r = parseDispatchRate(it->second);
  } else {
    auto ns = service_.policies().namespacePolicies(name.namespaceName());
    if (auto f = ns.keptFields.find(kPolicy); f != ns.keptFields.end()) {
      if (auto entry = clusterEntry(f->second, service_.options().clusterName)) {
        r = parseDispatchRate(*entry);
      }
    }
  }
  if (r) return *r;
  return defaultRate_ ? defaultRate_() : DispatchRate{};
}

void ReplicationService::check() {
  std::set<std::string> seen;
  for (auto& t : service_.topics()) {
    const TopicName& name = t->name();
    std::set<std::string> wanted = wantedFor(name);
    const std::string topic = name.toString();
    if (wanted.empty() && !replicated_.count(topic)) continue;
    if (!wanted.empty()) seen.insert(topic);
    DispatchRate rate = wanted.empty() ? DispatchRate{} : dispatchRateFor(name);
    t->executor().execute(
        [this, t, wanted = std::move(wanted), rate] { reconcile(*t, wanted, rate); });
  }
  replicated_ = std::move(seen);
}

void ReplicationService::reconcile(PersistentTopic& topic, const std::set<std::string>& wanted,
                                   const DispatchRate& rate) {
  MAGNETAR_DCHECK_ON(topic.executor());
  if (topic.closing()) return;
  std::vector<std::string> gone;
  for (auto& [c, r] : topic.replicators()) {
    if (!wanted.count(c)) gone.push_back(c);
  }
  for (auto& c : gone) {
    MLOG_INFO("{}: cluster {} no longer replicated: replicator removed", topic.name().toString(),
              c);
    topic.removeReplicator(c, /*deleteCursor=*/true);
  }
  // Replication cursors of clusters taken off the list while the topic was not loaded here.
  std::vector<std::string> stale;
  for (auto* cursor : topic.ledger().cursors()) {
    const std::string& n = cursor->name();
    if (!isReplicatorName(n) || n.size() <= kReplicatorPrefix.size() + 1) continue;
    std::string cluster = n.substr(kReplicatorPrefix.size() + 1);
    if (!wanted.count(cluster) && !topic.replicators().count(cluster)) stale.push_back(n);
  }
  for (auto& n : stale) {
    MLOG_INFO("{}: replication cursor {} deleted (cluster not replicated)", topic.name().toString(),
              n);
    (void)topic.ledger().deleteCursor(n);
  }
  const BrokerOptions& o = service_.options();
  for (const auto& [c, r] : topic.replicators()) {
    if (auto* replicator = dynamic_cast<Replicator*>(r.get())) replicator->setDispatchRate(rate);
  }
  for (const auto& remote : wanted) {
    if (topic.replicators().count(remote)) continue;
    ReplicatorConfig cfg;
    cfg.localCluster = o.clusterName;
    cfg.remoteCluster = remote;
    cfg.remote = [this, remote] { return endpointOf(remote); };
    cfg.producerQueueSize = std::max(1, o.replicationProducerQueueSize);
    cfg.dispatchRate = rate;
    cfg.startReplicatedSubscriptions = [this](PersistentTopic& t) {
      reconcileReplicatedSubscriptions(t, /*force=*/true);
    };
    std::string start = o.replicationStartAt;
    std::transform(start.begin(), start.end(), start.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    cfg.startAt = start == "earliest" ? storage::InitialPosition::kEarliest
                                      : storage::InitialPosition::kLatest;
    if (Status s = Replicator::attach(topic, std::move(cfg), *peers_); !s.isOk()) {
      MLOG_WARN("{}: cannot start the replicator to {}: {}", topic.name().toString(), remote,
                s.toString());
    } else {
      MLOG_INFO("{}: replicator to {} started", topic.name().toString(), remote);
    }
  }
  reconcileReplicatedSubscriptions(topic);
}

void ReplicationService::reconcileReplicatedSubscriptions(PersistentTopic& topic, bool force) {
  // Pulsar's checkReplicatedSubscriptionControllerState: a controller while the topic is
  // replicated and has a replicated subscription.
  const BrokerOptions& o = service_.options();
  bool want = o.enableReplicatedSubscriptions && !topic.replicators().empty() &&
              (force || topic.replicatedSubscriptions() != nullptr ||
               std::any_of(topic.subscriptions().begin(), topic.subscriptions().end(),
                           [](const auto& kv) { return kv.second->isReplicated(); }));
  if (want == (topic.replicatedSubscriptions() != nullptr)) return;
  if (!want) {
    topic.setReplicatedSubscriptions(nullptr);
    return;
  }
  ReplicatedSubscriptionsConfig cfg;
  cfg.localCluster = o.clusterName;
  cfg.snapshotFrequency =
      std::chrono::milliseconds(std::max(1, o.replicatedSubscriptionsSnapshotFrequencyMillis));
  cfg.snapshotTimeout =
      std::chrono::seconds(std::max(1, o.replicatedSubscriptionsSnapshotTimeoutSeconds));
  cfg.maxCachedPerSubscription = o.replicatedSubscriptionsSnapshotMaxCachedPerSubscription;
  topic.setReplicatedSubscriptions(ReplicatedSubscriptionsController::start(topic, cfg));
  MLOG_INFO("{}: replicated subscriptions controller started", topic.name().toString());
}

}  // namespace magnetar::broker
