#include "broker/topic/message_deduplication.h"

#include <algorithm>
#include <atomic>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/topic/entry_metadata.h"

namespace magnetar::broker {

namespace {

// Reads the whole log in chunks, in order, feeding each entry to `apply`.
struct ReplayScan : std::enable_shared_from_this<ReplayScan> {
  storage::ManagedLedger* ledger = nullptr;
  std::function<void(const EntryMetadataPeek&)> apply;
  std::function<void(Status)> done;

  void step(storage::Position from) {
    if (from > ledger->lastConfirmedEntry()) {
      done(Status::ok());
      return;
    }
    auto self = shared_from_this();
    ledger->asyncReadEntries(from, 1000, 16 << 20,
                             [self](const Status& s, std::vector<storage::Entry> es) {
                               if (!s.isOk()) {
                                 self->done(s);
                                 return;
                               }
                               if (es.empty()) {
                                 self->done(Status::ok());
                                 return;
                               }
                               for (auto& e : es) {
                                 EntryMetadataPeek md;
                                 if (peekEntryMetadata(e.data.view(), &md).isOk()) self->apply(md);
                               }
                               self->step(self->ledger->nextValidPosition(es.back().position));
                             });
  }
};

// Epoch ranges handed out to tables: 2^32 erasures each before two could meet.
std::atomic<uint64_t> nextEpochBase{1};

}  // namespace

MessageDeduplication::MessageDeduplication(bool enabled, DedupOptions options)
    : enabled_(enabled),
      options_(options),
      epoch_(nextEpochBase.fetch_add(uint64_t{1} << 32, std::memory_order_relaxed)) {}

MessageDeduplication::ProducerState* MessageDeduplication::find(const std::string& producer,
                                                                ProducerSlot* slot) {
  if (slot && slot->owner_ == this && slot->epoch_ == epoch_) {
#ifndef NDEBUG
    auto it = state_.find(producer);
    MAGNETAR_DCHECK(it != state_.end() && &it->second == slot->state_);
#endif
    return slot->state_;
  }
  auto it = state_.find(producer);
  if (it == state_.end()) return nullptr;
  remember(slot, &it->second);
  return &it->second;
}

void MessageDeduplication::recover(storage::ManagedLedger& ledger,
                                   std::function<void(Status)> done) {
  entriesReplayed_ = 0;
  if (!enabled_) {
    // Pulsar deletes the dedup cursor when dedup is off, so it no longer retains entries.
    for (auto* c : ledger.cursors()) {
      if (c->name() == kDedupCursorName) {
        ledger.deleteCursor(kDedupCursorName);
        break;
      }
    }
    done(Status::ok());
    return;
  }
  auto cursor = ledger.openCursor(kDedupCursorName, storage::InitialPosition::kEarliest);
  if (!cursor.isOk()) {
    done(cursor.status());
    return;
  }
  cursor_ = *cursor;
  for (const auto& [producer, seq] : cursor_->properties()) apply(producer, seq);
  lastPersisted_ = cursor_->markDeletedPosition();
  auto scan = std::make_shared<ReplayScan>();
  scan->ledger = &ledger;
  scan->apply = [this](const EntryMetadataPeek& md) {
    entriesReplayed_++;
    int64_t hi = static_cast<int64_t>(md.hasHighestSequenceId && md.highestSequenceId > md.sequenceId
                                          ? md.highestSequenceId
                                          : md.sequenceId);
    apply(std::string(md.producerName), hi);
  };
  scan->done = [this, &ledger, done = std::move(done)](const Status& s) {
    // Save what the replay found, so the next load starts after it.
    if (s.isOk() && entriesReplayed_ > 0) takeSnapshot(ledger.lastConfirmedEntry());
    done(s);
  };
  scan->step(ledger.nextValidPosition(cursor_->markDeletedPosition()));
}

void MessageDeduplication::setEnabled(bool enabled, storage::ManagedLedger& ledger,
                                      std::function<void(Status)> done) {
  if (enabled == enabled_) {
    done(Status::ok());
    return;
  }
  enabled_ = enabled;
  cursor_ = nullptr;
  inactive_.clear();
  sinceSnapshot_ = 0;
  deferred_ = false;
  for (auto it = state_.begin(); it != state_.end();) {
    it = it->second.waiters.empty() ? state_.erase(it) : std::next(it);
  }
  ++epoch_;
  recover(ledger, std::move(done));
}

void MessageDeduplication::takeSnapshot(storage::Position pos) {
  sinceSnapshot_ = 0;
  deferred_ = false;
  lastSnapshot_ = Clock::now();
  if (!cursor_ || pos.entryId < 0 || pos <= cursor_->markDeletedPosition()) return;
  storage::CursorProperties snapshot;
  for (const auto& [producer, st] : state_) {
    if (static_cast<int>(snapshot.size()) >= options_.maxProducers) break;
    if (st.persisted >= 0) snapshot.emplace(producer, st.persisted);
  }
  // No callback: like any mark-delete, the write keeps managedLedgerDefaultMarkDeleteRateLimit
  // (Pulsar completes a rate-limited mark-delete at once and writes it later). A snapshot lost
  // to a crash costs only a longer replay at the next load; a failed write is logged by storage.
  cursor_->asyncMarkDelete(pos, std::move(snapshot), nullptr);
}

bool MessageDeduplication::countSnapshotAllowed() const {
  if (options_.minSnapshotIntervalMs <= 0) return true;
  if (sinceSnapshot_ % options_.entriesInterval != 0) return false;
  return Clock::now() - lastSnapshot_ >= std::chrono::milliseconds(options_.minSnapshotIntervalMs);
}

void MessageDeduplication::takeDeferredSnapshot() {
  if (enabled_ && deferred_) takeSnapshot(lastPersisted_);
}

void MessageDeduplication::checkSnapshot(Clock::time_point now) {
  if (!enabled_ || sinceSnapshot_ == 0 || options_.snapshotIntervalSeconds <= 0) return;
  if (now - lastSnapshot_ >= std::chrono::seconds(options_.snapshotIntervalSeconds)) {
    takeSnapshot(lastPersisted_);
  }
}

void MessageDeduplication::producerAdded(const std::string& producer) {
  inactive_.erase(producer);
}

void MessageDeduplication::producerRemoved(const std::string& producer, Clock::time_point now) {
  if (enabled_) inactive_[producer] = now;
}

void MessageDeduplication::purgeInactiveProducers(Clock::time_point now) {
  auto timeout = std::chrono::minutes(options_.producerInactivityTimeoutMinutes);
  for (auto it = inactive_.begin(); it != inactive_.end();) {
    if (now - it->second < timeout) {
      ++it;
      continue;
    }
    auto st = state_.find(it->first);
    if (st != state_.end() && st->second.waiters.empty()) {
      state_.erase(st);
      ++epoch_;
    }
    it = inactive_.erase(it);
  }
}

void MessageDeduplication::apply(const std::string& producer, int64_t highest) {
  auto& st = state_[producer];
  st.pushed = std::max(st.pushed, highest);
  st.persisted = std::max(st.persisted, highest);
}

MessageDeduplication::Verdict MessageDeduplication::check(const std::string& producer,
                                                          int64_t sequenceId,
                                                          int64_t highestSequenceId,
                                                          ProducerSlot* slot) {
  if (!enabled_) return Verdict::kNew;
  ProducerState* st = find(producer, slot);
  if (!st) {
    if (options_.maxProducers > 0 && static_cast<int>(state_.size()) >= options_.maxProducers) {
      // Over brokerDeduplicationMaxNumberOfProducers: forget producers with nothing in flight.
      const size_t before = state_.size();
      for (auto i = state_.begin(); i != state_.end();) {
        i = i->second.pushed == i->second.persisted && i->second.waiters.empty() ? state_.erase(i)
                                                                                 : std::next(i);
      }
      if (state_.size() != before) ++epoch_;
    }
    st = &state_.emplace(producer, ProducerState{}).first->second;
    remember(slot, st);
  }
  if (sequenceId <= st->pushed) {
    return sequenceId <= st->persisted ? Verdict::kDuplicate : Verdict::kInFlight;
  }
  st->pushed = std::max(sequenceId, highestSequenceId);
  return Verdict::kNew;
}

void MessageDeduplication::waitFor(const std::string& producer, Waiter w) {
  state_[producer].waiters.push_back(std::move(w));
}

void MessageDeduplication::completed(const std::string& producer, int64_t highestSequenceId,
                                     const Status& status, storage::Position pos,
                                     ProducerSlot* slot) {
  if (!enabled_ && state_.empty()) return;  // off (waiters of a switch-off still get answers)
  if (enabled_ && status.isOk() && pos.entryId >= 0) {
    lastPersisted_ = pos;
    ++sinceSnapshot_;
  }
  ProducerState* st = find(producer, slot);
  if (!st) return;
  if (status.isOk()) {
    st->persisted = std::max(st->persisted, highestSequenceId);
    if (enabled_ && sinceSnapshot_ >= options_.entriesInterval) {
      if (countSnapshotAllowed()) {
        takeSnapshot(pos);
      } else {
        deferred_ = true;
      }
    }
  } else {
    st->pushed = st->persisted;
  }
  if (st->waiters.empty()) return;
  std::vector<Waiter> keep;
  auto waiters = std::move(st->waiters);
  st->waiters.clear();
  for (auto& w : waiters) {
    if (w.sequenceId <= highestSequenceId) {
      w.done(status);
    } else {
      keep.push_back(std::move(w));
    }
  }
  state_[producer].waiters = std::move(keep);
}

void MessageDeduplication::resetPushed() {
  for (auto& [name, st] : state_) st.pushed = st.persisted;
}

int64_t MessageDeduplication::lastSequenceId(const std::string& producer) const {
  auto it = state_.find(producer);
  return it == state_.end() ? -1 : it->second.persisted;
}

}  // namespace magnetar::broker
