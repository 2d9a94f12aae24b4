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
  service_.setTopicLoadedHook([this](PersistentTopic& t) { reconcile(t, wantedFor(t.name())); });
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
}

std::set<std::string> ReplicationService::wantedFor(const TopicName& name) {
  std::set<std::string> wanted;
  if (!name.isPersistent() || name.localName().rfind("__", 0) == 0) return wanted;
  const std::string& local = service_.options().clusterName;
  if (auto clusters =
          service_.policies().namespacePolicies(name.namespaceName()).replicationClusters) {
    for (const auto& c : *clusters) {
      if (c != local) wanted.insert(c);
    }
  }
  return wanted;
}

void ReplicationService::check() {
  std::set<std::string> seen;
  for (auto& t : service_.topics()) {
    const TopicName& name = t->name();
    std::set<std::string> wanted = wantedFor(name);
    const std::string topic = name.toString();
    if (wanted.empty() && !replicated_.count(topic)) continue;
    if (!wanted.empty()) seen.insert(topic);
    t->executor().execute([this, t, wanted = std::move(wanted)] { reconcile(*t, wanted); });
  }
  replicated_ = std::move(seen);
}

void ReplicationService::reconcile(PersistentTopic& topic, const std::set<std::string>& wanted) {
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
  for (const auto& remote : wanted) {
    if (topic.replicators().count(remote)) continue;
    ReplicatorConfig cfg;
    cfg.localCluster = o.clusterName;
    cfg.remoteCluster = remote;
    cfg.remoteUrl = [this, remote]() -> std::optional<std::string> {
      auto data = service_.policies().cluster(remote);
      return data ? brokerServiceUrlOf(*data) : std::nullopt;
    };
    cfg.producerQueueSize = std::max(1, o.replicationProducerQueueSize);
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

void ReplicationService::reconcileReplicatedSubscriptions(PersistentTopic& topic) {
  // Pulsar's checkReplicatedSubscriptionControllerState: a controller while the topic is
  // replicated and has a replicated subscription.
  const BrokerOptions& o = service_.options();
  bool want = o.enableReplicatedSubscriptions && !topic.replicators().empty() &&
              std::any_of(topic.subscriptions().begin(), topic.subscriptions().end(),
                          [](const auto& kv) { return kv.second->isReplicated(); });
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
