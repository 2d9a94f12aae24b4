// Replicated subscriptions, as Pulsar's ReplicatedSubscriptionsController,
// ReplicatedSubscriptionsSnapshotBuilder and ReplicatedSubscriptionSnapshotCache
// (docs/geo-replication.md, docs/replication-markers-format.md).
//
// Each replicated topic with a replicated subscription has a controller. Every
// replicatedSubscriptionsSnapshotFrequencyMillis, when data came since the last completed
// snapshot and every replicator is connected, it writes a snapshot request marker; each remote
// cluster answers with a response marker carrying its last position; once all answered (two
// rounds with more than one remote), it writes a snapshot marker: the local position of the
// last response and each remote's position. A replicated subscription's dispatcher hands the
// snapshot markers it reads to the controller (one cache per subscription); when the
// subscription's mark-delete position passes a cached snapshot, an update marker tells the
// remote clusters where to move their copy of the subscription.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/replication/replication_markers.h"
#include "broker/topic/topic.h"
#include "broker/topic/topic_replicator.h"

namespace magnetar::broker {

struct ReplicatedSubscriptionsConfig {
  std::string localCluster;
  std::chrono::milliseconds snapshotFrequency{1000};  // ...SnapshotFrequencyMillis
  std::chrono::seconds snapshotTimeout{30};           // ...SnapshotTimeoutSeconds
  int maxCachedPerSubscription = 10;                  // ...SnapshotMaxCachedPerSubscription (>= 3)
};

// The snapshots one subscription has read and not yet passed, oldest first (Pulsar's
// ReplicatedSubscriptionSnapshotCache). Over its limit it drops the inner snapshot whose
// neighbours are closest (fewest entries between them), so the kept ones stay spread over the
// backlog; the oldest and newest are always kept. Thread: its controller's (not synchronized).
class SnapshotCache {
 public:
  struct Snapshot {
    storage::Position local;    // the snapshot's local_message_id
    ClusterPositions clusters;  // each remote cluster's position
  };
  // Entries strictly between two positions (for the spread rule).
  using Distance = std::function<int64_t(storage::Position, storage::Position)>;

  SnapshotCache(int maxSnapshots, Distance distance);
  // A snapshot not after the newest one means the subscription was reset: the cache restarts.
  void add(Snapshot s);
  // The newest snapshot at or before `markDelete`, removed with the older ones; nullopt if none.
  std::optional<Snapshot> advancedMarkDeletePosition(storage::Position markDelete);
  size_t size() const { return snapshots_.size(); }
  const std::vector<Snapshot>& snapshots() const { return snapshots_; }

 private:
  void prune();
  const size_t max_;
  Distance distance_;
  std::vector<Snapshot> snapshots_;
};

// Thread: the topic's executor for every member (its timer runs there too).
class ReplicatedSubscriptionsController final
    : public TopicReplicatedSubscriptions,
      public std::enable_shared_from_this<ReplicatedSubscriptionsController> {
 public:
  // Makes the controller and starts its timer; the caller gives it to the topic
  // (PersistentTopic::setReplicatedSubscriptions), which closes it.
  static std::shared_ptr<ReplicatedSubscriptionsController> start(
      PersistentTopic& topic, ReplicatedSubscriptionsConfig config);

  void snapshotMarkerRead(const std::string& subscription, storage::Position pos,
                          const Buffer& entry) override;
  void remoteMarker(storage::Position pos, int markerType, std::string_view payload) override;
  void close() override;

  // Snapshots started and neither completed nor timed out (pulsar_replicated_subscriptions_
  // pending_snapshots), and those that timed out since start.
  size_t pendingSnapshots() const { return pending_.size(); }
  uint64_t timedOutSnapshots() const { return timedOut_; }
  const std::string& lastCompletedSnapshotId() const { return lastCompletedId_; }

  ReplicatedSubscriptionsController(PersistentTopic& topic, ReplicatedSubscriptionsConfig config);

 private:
  struct Pending {
    std::set<std::string> remotes;  // the replicators' clusters when it started
    std::set<std::string> missing;  // not answered in this round
    ClusterPositions responses;     // first answer of each cluster
    bool needTwoRounds = false;     // more than one remote cluster
    bool firstRoundDone = false;
    bool finalWriting = false;  // the snapshot marker is being written
    std::chrono::steady_clock::time_point started;
    uint64_t dataAtStart = 0;  // data entries added when it started
  };

  void schedule();
  void tick();
  void startSnapshot();
  void onRequest(const markers::ReplicatedSubscriptionsSnapshotRequest& r);
  void onResponse(storage::Position pos, const markers::ReplicatedSubscriptionsSnapshotResponse& r);
  void onUpdate(const markers::ReplicatedSubscriptionsUpdate& u);
  void snapshotCompleted(const std::string& id);
  // For each replicated subscription whose mark-delete passed a cached snapshot: the update.
  void checkMarkDeletes();
  void writeMarker(Buffer entry, std::function<void(Status, storage::Position)> done = {});
  uint64_t dataEntries() const;

  PersistentTopic& topic_;
  const ReplicatedSubscriptionsConfig config_;
  const std::string topicName_;
  boost::asio::steady_timer timer_;
  bool closed_ = false;
  std::map<std::string, Pending> pending_;       // by snapshot id
  std::map<std::string, SnapshotCache> caches_;  // by subscription
  bool anyCompleted_ = false;
  uint64_t dataAtLastCompleted_ = 0;
  std::string lastCompletedId_;
  uint64_t timedOut_ = 0;
};

}  // namespace magnetar::broker
