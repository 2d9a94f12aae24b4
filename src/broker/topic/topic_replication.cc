// PersistentTopic's side of geo-replication (topic_replicator.h, docs/geo-replication.md): the
// replicators attached to the topic, and the publishes of a remote cluster's replicator.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/topic/entry_metadata.h"
#include "broker/topic/topic.h"
#include "protocol/commands.h"

namespace magnetar::broker {

bool PersistentTopic::addReplicator(const std::string& cluster,
                                    std::shared_ptr<TopicReplicator> r) {
  MAGNETAR_DCHECK_ON(executor_);
  if (closing_ || replicators_.count(cluster)) return false;
  replicators_.emplace(cluster, std::move(r));
  return true;
}

void PersistentTopic::removeReplicator(const std::string& cluster, bool deleteCursor) {
  MAGNETAR_DCHECK_ON(executor_);
  auto it = replicators_.find(cluster);
  if (it == replicators_.end()) return;
  it->second->close();
  replicators_.erase(it);
  if (deleteCursor && !closing_) {
    // Pulsar's removeReplicator: the cursor goes, so it holds no data back.
    if (Status s = ledger_->deleteCursor(replicationCursorName(cluster)); !s.isOk()) {
      MLOG_WARN("{}: cannot delete the replication cursor of {}: {}", name_.toString(), cluster,
                s.toString());
    }
  }
}

void PersistentTopic::closeReplicators() {
  MAGNETAR_DCHECK_ON(executor_);
  closing_ = true;
  auto all = std::move(replicators_);
  replicators_.clear();
  for (auto& [cluster, r] : all) r->close();
  setReplicatedSubscriptions(nullptr);
}

void PersistentTopic::setReplicatedSubscriptions(std::shared_ptr<TopicReplicatedSubscriptions> c) {
  MAGNETAR_DCHECK_ON(executor_);
  if (c && closing_) {
    c->close();
    return;
  }
  auto old = std::exchange(replSubs_, std::move(c));
  if (old) old->close();
}

void PersistentTopic::publishMarker(Buffer entry,
                                    std::function<void(Status, storage::Position)> done) {
  MAGNETAR_DCHECK_ON(executor_);
  ledger_->asyncAddEntry(std::move(entry), [this, alive = alive_, done = std::move(done)](
                                               const Status& st, storage::Position pos) {
    if (!*alive) return done(Status::closed("topic closed"), pos);
    if (st.isOk()) {
      stats_.entriesAddedCounter++;
      stats_.markerEntriesAdded++;
      newEntries_ = true;
      if (!flushQueued_) {  // flushPass tells the dispatchers and replicators
        flushQueued_ = true;
        executor_.execute([self = shared_from_this()] { self->flushPass(); });
      }
    }
    done(st, pos);
  });
}

namespace {
// What a replicated publish needs when its add completes (one pointer in the add callback).
struct ReplicatedAdd {
  std::shared_ptr<Producer> producer;
  uint64_t seq;
  uint64_t highest;
  int32_t numMessages;
  size_t bytes;
  std::string dedupName;  // the original producer's name
  int64_t dedupHighest;
  bool marker;  // a server-only marker: never deduplicated (Pulsar's isMarkerMessage)
};
}  // namespace

// Pulsar's MessageDeduplication.isDuplicate for a producer named with replicatorPrefix: the
// producer name and sequence ids of the message's metadata count, so the original producer's
// messages are kept once however many times the link resends them.
void PersistentTopic::publishReplicated(const std::shared_ptr<Producer>& producer, PendingSend& s,
                                        size_t bytes) {
  EntryMetadataPeek md;
  auto add = std::make_unique<ReplicatedAdd>(
      ReplicatedAdd{producer, s.sequenceId, s.highestSequenceId, s.numMessages, bytes,
                    producer->name(), static_cast<int64_t>(s.highestSequenceId), false});
  int64_t first = static_cast<int64_t>(s.sequenceId);
  const bool peeked = peekEntryMetadata(s.entry.view(), &md).isOk();
  add->marker = peeked && md.hasMarkerType;
  if (peeked && !md.producerName.empty()) {
    add->dedupName = std::string(md.producerName);
    first = static_cast<int64_t>(md.sequenceId);
    add->dedupHighest = static_cast<int64_t>(
        md.hasHighestSequenceId ? std::max(md.highestSequenceId, md.sequenceId) : md.sequenceId);
  }
  auto verdict = add->marker ? MessageDeduplication::Verdict::kNew
                             : dedup_.check(add->dedupName, first, add->dedupHighest);
  const uint64_t seq = add->seq;
  const uint64_t highest = add->highest;
  if (verdict == MessageDeduplication::Verdict::kDuplicate) {
    queueReceipt(producer, {}, seq, {-1, -1}, highest, bytes);
    return;
  }
  if (verdict == MessageDeduplication::Verdict::kInFlight) {
    dedup_.waitFor(
        add->dedupName,
        {first, [this, producer, seq, highest, bytes](const Status& st) {
           queueReceipt(producer,
                        st.isOk() ? Buffer{}
                                  : protocol::Commands::newSendError(
                                        producer->id(), seq, proto::PersistenceError, st.message()),
                        seq, st.isOk() ? storage::Position{-1, -1} : storage::Position{}, highest,
                        bytes);
         }});
    return;
  }
  pendingWrites_++;
  ledger_->asyncAddEntry(std::move(s.entry), [this, alive = alive_, add = std::move(add)](
                                                 const Status& st, storage::Position pos) {
    if (!*alive) {
      answeredAfterTopic(*add->producer, add->bytes);
      return;
    }
    pendingWrites_--;
    if (!add->marker) dedup_.completed(add->dedupName, add->dedupHighest, st, pos);
    if (dedup_.snapshotDeferred() && !dedupSnapshotArmed_) armDeferredDedupSnapshot();
    if (st.isOk()) {
      stats_.msgInCounter += add->numMessages;
      stats_.bytesInCounter += add->bytes;
      stats_.entriesAddedCounter++;
      if (add->marker) stats_.markerEntriesAdded++;
      add->producer->msgInCounter += add->numMessages;
      add->producer->bytesInCounter += add->bytes;
      newEntries_ = true;
      queueReceipt(add->producer, {}, add->seq, pos, add->highest, add->bytes);
    } else {
      writeFailed(add->producer, add->seq, pos, add->highest, add->bytes, st);
    }
    if (pendingWrites_ == 0) unfenceWhenDrained();
  });
}

}  // namespace magnetar::broker
