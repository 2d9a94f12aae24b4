#include "broker/replication/replicated_subscriptions.h"

#include <algorithm>
#include <boost/uuid/uuid.hpp>
#include <boost/uuid/uuid_generators.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"
#include "protocol/frame.h"

namespace magnetar::broker {

// ---- SnapshotCache ----

SnapshotCache::SnapshotCache(int maxSnapshots, Distance distance)
    : max_(static_cast<size_t>(std::max(3, maxSnapshots))), distance_(std::move(distance)) {}

void SnapshotCache::add(Snapshot s) {
  if (!snapshots_.empty() && !(snapshots_.back().local < s.local)) snapshots_.clear();
  snapshots_.push_back(std::move(s));
  if (snapshots_.size() > max_) prune();
}

void SnapshotCache::prune() {
  // The inner snapshot with the fewest entries between its two neighbours goes.
  size_t victim = 1;
  int64_t best = INT64_MAX;
  for (size_t i = 1; i + 1 < snapshots_.size(); ++i) {
    int64_t d = distance_(snapshots_[i - 1].local, snapshots_[i + 1].local);
    if (d < best) {
      best = d;
      victim = i;
    }
  }
  snapshots_.erase(snapshots_.begin() + static_cast<std::ptrdiff_t>(victim));
}

std::optional<SnapshotCache::Snapshot> SnapshotCache::advancedMarkDeletePosition(
    storage::Position markDelete) {
  size_t n = 0;
  while (n < snapshots_.size() && !(markDelete < snapshots_[n].local)) ++n;
  if (n == 0) return std::nullopt;
  Snapshot found = std::move(snapshots_[n - 1]);
  snapshots_.erase(snapshots_.begin(), snapshots_.begin() + static_cast<std::ptrdiff_t>(n));
  return found;
}

// ---- ReplicatedSubscriptionsController ----

namespace {
std::string newSnapshotId() {
  thread_local boost::uuids::random_generator gen;
  return boost::uuids::to_string(gen());
}
}  // namespace

std::shared_ptr<ReplicatedSubscriptionsController> ReplicatedSubscriptionsController::start(
    PersistentTopic& topic, ReplicatedSubscriptionsConfig config) {
  MAGNETAR_DCHECK_ON(topic.executor());
  auto c = std::make_shared<ReplicatedSubscriptionsController>(topic, std::move(config));
  c->tick();  // Pulsar's first snapshot attempt runs at once, then at the frequency
  return c;
}

ReplicatedSubscriptionsController::ReplicatedSubscriptionsController(
    PersistentTopic& topic, ReplicatedSubscriptionsConfig config)
    : topic_(topic),
      config_(std::move(config)),
      topicName_(topic.name().toString()),
      timer_(topic.executor().context()) {}

void ReplicatedSubscriptionsController::schedule() {
  timer_.expires_after(config_.snapshotFrequency);
  timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto me = self.lock(); me && !me->closed_) me->tick();
  });
}

void ReplicatedSubscriptionsController::tick() {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.started > config_.snapshotTimeout) {
      MLOG_DEBUG("{}: snapshot {} timed out", topicName_, it->first);
      ++timedOut_;
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  startSnapshot();
  checkMarkDeletes();
  schedule();
}

uint64_t ReplicatedSubscriptionsController::dataEntries() const {
  const TopicStats& s = topic_.stats();
  return s.entriesAddedCounter - s.markerEntriesAdded;
}

void ReplicatedSubscriptionsController::startSnapshot() {
  // No data since the last completed snapshot started: nothing new to map (Pulsar's check of
  // lastDataMessagePublishedTimestamp).
  if (anyCompleted_ && dataEntries() == dataAtLastCompleted_) return;
  Pending p;
  for (const auto& [cluster, r] : topic_.replicators()) {
    if (!r->isConnected()) return;  // a remote cannot answer now: no snapshot
    p.remotes.insert(cluster);
  }
  if (p.remotes.empty()) return;
  p.missing = p.remotes;
  p.needTwoRounds = p.remotes.size() > 1;
  p.started = std::chrono::steady_clock::now();
  p.dataAtStart = dataEntries();
  std::string id = newSnapshotId();
  pending_.emplace(id, std::move(p));
  writeMarker(newSnapshotRequestMarker(id, config_.localCluster));
}

void ReplicatedSubscriptionsController::remoteMarker(storage::Position pos, int markerType,
                                                     std::string_view payload) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (closed_) return;
  Status s;
  switch (markerType) {
    case markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST: {
      markers::ReplicatedSubscriptionsSnapshotRequest r;
      if ((s = parseMarker(payload, &r)).isOk()) onRequest(r);
      break;
    }
    case markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE: {
      markers::ReplicatedSubscriptionsSnapshotResponse r;
      if ((s = parseMarker(payload, &r)).isOk()) onResponse(pos, r);
      break;
    }
    case markers::REPLICATED_SUBSCRIPTION_UPDATE: {
      markers::ReplicatedSubscriptionsUpdate u;
      if ((s = parseMarker(payload, &u)).isOk()) onUpdate(u);
      break;
    }
    default:
      break;  // other markers are not the controller's
  }
  if (!s.isOk()) {
    MLOG_WARN("{}: marker at {}:{} ignored: {}", topicName_, pos.ledgerId, pos.entryId,
              s.toString());
  }
}

void ReplicatedSubscriptionsController::onRequest(
    const markers::ReplicatedSubscriptionsSnapshotRequest& r) {
  // The answer carries the last position written here; the response itself lands after it.
  storage::Position last = topic_.ledger().lastConfirmedEntry();
  writeMarker(
      newSnapshotResponseMarker(r.snapshot_id(), r.source_cluster(), config_.localCluster, last));
}

void ReplicatedSubscriptionsController::onResponse(
    storage::Position pos, const markers::ReplicatedSubscriptionsSnapshotResponse& r) {
  auto it = pending_.find(r.snapshot_id());
  if (it == pending_.end()) return;  // a late answer to a timed-out snapshot, or not ours
  Pending& p = it->second;
  const std::string& cluster = r.cluster().cluster();
  p.responses.emplace(cluster, positionOf(r.cluster().message_id()));
  p.missing.erase(cluster);
  if (!p.missing.empty()) return;
  if (p.needTwoRounds && !p.firstRoundDone) {
    // With more than one remote, a second round catches what the remotes exchanged meanwhile.
    p.firstRoundDone = true;
    p.missing = p.remotes;
    writeMarker(newSnapshotRequestMarker(it->first, config_.localCluster));
    return;
  }
  if (p.finalWriting) return;
  p.finalWriting = true;
  std::string id = it->first;
  writeMarker(newSnapshotMarker(id, config_.localCluster, pos, p.responses),
              [self = weak_from_this(), id](const Status& s, storage::Position) {
                auto me = self.lock();
                if (!me || me->closed_) return;
                auto pit = me->pending_.find(id);
                if (!s.isOk()) {
                  if (pit != me->pending_.end()) pit->second.finalWriting = false;
                  return;
                }
                me->snapshotCompleted(id);
              });
}

void ReplicatedSubscriptionsController::snapshotCompleted(const std::string& id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  anyCompleted_ = true;
  dataAtLastCompleted_ = it->second.dataAtStart;
  lastCompletedId_ = id;
  pending_.erase(it);
}

void ReplicatedSubscriptionsController::onUpdate(const markers::ReplicatedSubscriptionsUpdate& u) {
  std::optional<storage::Position> pos;
  for (const auto& c : u.clusters()) {
    if (c.cluster() == config_.localCluster) pos = positionOf(c.message_id());
  }
  if (!pos) return;  // nothing for this cluster
  const std::string& name = u.subscription_name();
  Subscription* sub = topic_.subscription(name);
  if (!sub) {
    // As Pulsar's receiveSubscriptionUpdated: the missing subscription is created at Earliest,
    // replicated, then acknowledged cumulatively up to the update's position (below).
    MLOG_INFO(
        "{}: creating replicated subscription {} at {}:{} after an update from a remote "
        "cluster",
        topicName_, name, pos->ledgerId, pos->entryId);
    if (Status s = topic_.createSubscription(name, storage::InitialPosition::kEarliest);
        !s.isOk()) {
      MLOG_WARN("{}: cannot create subscription {}: {}", topicName_, name, s.toString());
      return;
    }
    if (!(sub = topic_.subscription(name))) return;
    sub->setReplicated(true, nullptr);
  }
  storage::ManagedCursor& cursor = sub->cursor();
  if (!(cursor.markDeletedPosition() < *pos)) return;  // already there
  if (topic_.ledger().lastConfirmedEntry() < *pos) {
    MLOG_WARN("{}: update of {} to {}:{} is past the last entry; ignored", topicName_, name,
              pos->ledgerId, pos->entryId);
    return;
  }
  cursor.asyncMarkDelete(*pos, [topic = topic_.name().toString(), name](const Status& s) {
    if (!s.isOk())
      MLOG_WARN("{}: {}: replicated mark-delete failed: {}", topic, name, s.toString());
  });
}

void ReplicatedSubscriptionsController::snapshotMarkerRead(const std::string& subscription,
                                                           storage::Position pos,
                                                           const Buffer& entry) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (closed_) return;
  Subscription* sub = topic_.subscription(subscription);
  if (!sub || !sub->isReplicated()) return;
  markers::ReplicatedSubscriptionsSnapshot snap;
  auto payload = protocol::payloadOf(entry);
  Status s = payload.isOk() ? parseMarker(*payload, &snap) : payload.status();
  if (!s.isOk()) {
    MLOG_WARN("{}: snapshot marker at {}:{} ignored: {}", topicName_, pos.ledgerId, pos.entryId,
              s.toString());
    return;
  }
  auto it = caches_.find(subscription);
  if (it == caches_.end()) {
    storage::ManagedLedger& ml = topic_.ledger();
    it = caches_
             .emplace(subscription, SnapshotCache(config_.maxCachedPerSubscription,
                                                  [&ml](storage::Position a, storage::Position b) {
                                                    return a < b ? ml.numberOfEntriesBetween(a, b)
                                                                 : 0;
                                                  }))
             .first;
  }
  SnapshotCache::Snapshot cached{positionOf(snap.local_message_id()), {}};
  for (const auto& c : snap.clusters()) cached.clusters[c.cluster()] = positionOf(c.message_id());
  it->second.add(std::move(cached));
  checkMarkDeletes();
}

void ReplicatedSubscriptionsController::checkMarkDeletes() {
  for (auto it = caches_.begin(); it != caches_.end();) {
    Subscription* sub = topic_.subscription(it->first);
    if (!sub || !sub->isReplicated()) {
      it = caches_.erase(it);
      continue;
    }
    if (auto snap = it->second.advancedMarkDeletePosition(sub->cursor().markDeletedPosition())) {
      MLOG_DEBUG("{}: {} passed the snapshot at {}:{}", topicName_, it->first, snap->local.ledgerId,
                 snap->local.entryId);
      writeMarker(newSubscriptionUpdateMarker(it->first, snap->clusters));
    }
    ++it;
  }
}

void ReplicatedSubscriptionsController::writeMarker(
    Buffer entry, std::function<void(Status, storage::Position)> done) {
  topic_.publishMarker(std::move(entry), [topic = topicName_, done = std::move(done)](
                                             const Status& s, storage::Position pos) {
    if (!s.isOk()) MLOG_WARN("{}: marker not written: {}", topic, s.toString());
    if (done) done(s, pos);
  });
}

void ReplicatedSubscriptionsController::close() {
  MAGNETAR_DCHECK_ON(topic_.executor());
  closed_ = true;
  timer_.cancel();
  pending_.clear();
  caches_.clear();
}

}  // namespace magnetar::broker
