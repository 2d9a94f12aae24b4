#include "broker/topic/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "base/dcheck.h"
#include "base/logging.h"
#include "base/murmur3.h"
#include "broker/topic/internal/frame_batch_pool.h"
#include "broker/topic/internal/key_shared_state.h"
#include "broker/topic/pending_ack_handle.h"
#include "broker/topic/transaction_buffer.h"
#include "net/event_loop.h"
#include "protocol/commands.h"

namespace magnetar::broker {

using storage::Entry;
using storage::Position;

namespace {

int64_t packPosition(Position p) { return (p.ledgerId << 32) ^ p.entryId; }

bool isSingleActive(SubType t) {
  return t == proto::CommandSubscribe::Exclusive || t == proto::CommandSubscribe::Failover;
}

}  // namespace

Dispatcher::Dispatcher(SubType type, storage::ManagedLedger& ledger, storage::ManagedCursor& cursor,
                       const BrokerOptions& options, std::string topicName, int partitionIndex)
    : type_(type),
      ledger_(ledger),
      cursor_(cursor),
      options_(options),
      topicName_(std::move(topicName)),
      partitionIndex_(partitionIndex),
      maxUnackedPerConsumer_(options.maxUnackedMessagesPerConsumer),
      maxUnackedPerSubscription_(options.maxUnackedMessagesPerSubscription) {
  if (type_ == proto::CommandSubscribe::Key_Shared) {
    keyShared_ = std::make_unique<KeySharedState>(options_);
  }
  readPosition_ = ledger_.nextValidPosition(cursor_.markDeletedPosition());
  delayed_ = DelayedDeliveryPolicies{options_.delayedDeliveryEnabled,
                                     options_.delayedDeliveryTickTimeMillis,
                                     options_.delayedDeliveryMaxDelayInMillis};
}

// The timer's pending handler runs with operation_aborted and touches nothing.
Dispatcher::~Dispatcher() { *alive_ = false; }

Status Dispatcher::addConsumer(const std::shared_ptr<Consumer>& c) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (type_ == proto::CommandSubscribe::Exclusive && !consumers_.empty()) {
    return Status::busy("Exclusive consumer is already connected");
  }
  if (keyShared_) {
    Status s = keyShared_->addConsumer(c.get());
    if (!s.isOk()) return s;
  }
  consumers_.push_back(c);
  if (keyShared_) {
    unparkAll();
    rescanDraining();
    regroupReplay();
  }
  // Pulsar (AbstractDispatcherSingleActiveConsumer.addConsumer): when the active consumer stays,
  // only the newcomer is told (that it is inactive); others hear nothing.
  if (isSingleActive(type_) && !updateActiveConsumer() && active_ != c.get() &&
      type_ == proto::CommandSubscribe::Failover) {
    notifyActiveConsumerChange(c.get());
  }
  readMoreEntries();
  return Status::ok();
}

void Dispatcher::removeConsumer(Consumer* c) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  auto it = std::find_if(consumers_.begin(), consumers_.end(),
                         [c](const auto& p) { return p.get() == c; });
  if (it == consumers_.end()) return;
  std::shared_ptr<Consumer> keep = *it;
  consumers_.erase(it);
  c->closed = true;
  if (keyShared_) keyShared_->removeConsumer(c);
  if (isSingleActive(type_)) {
    bool wasActive = active_ == c;
    clearPending(c);
    if (wasActive) {
      // Rewind so the next active consumer gets everything not acked, in order.
      active_ = nullptr;
      rewind();
    }
    updateActiveConsumer();
  } else {
    // Closing is not a redelivery request: counts stay as they are (Pulsar).
    putBackForRedelivery(c, true, {}, /*countRedelivery=*/false);
  }
  // Pulsar keeps redelivery counts only while the subscription has consumers.
  if (consumers_.empty()) redeliveryCount_.clear();
  if (keyShared_) {
    unpark(c);  // no longer in consumers_
    unparkAll();
    rescanDraining();
    regroupReplay();  // before c goes: no group may name it
  }
  readMoreEntries();
}

Consumer* Dispatcher::activeConsumer() const {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  return active_;
}

bool Dispatcher::updateActiveConsumer() {
  if (consumers_.empty()) {
    bool changed = active_ != nullptr;
    active_ = nullptr;
    return changed;
  }
  // Pulsar (AbstractDispatcherSingleActiveConsumer): among the consumers of the best (lowest)
  // priority level, sorted by name, a partition picks partitionIndex % count; a non-partitioned
  // topic puts 100 points per consumer on a ring at hash(name + j) (later consumers win ties)
  // and takes the first point at or after hash(topic name), wrapping around.
  int best = consumers_.front()->priorityLevel();
  for (auto& c : consumers_) best = std::min(best, c->priorityLevel());
  std::vector<Consumer*> sorted;
  for (auto& c : consumers_) {
    if (c->priorityLevel() == best) sorted.push_back(c.get());
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](Consumer* a, Consumer* b) { return a->name() < b->name(); });
  Consumer* next;
  if (partitionIndex_ >= 0) {
    next = sorted[static_cast<size_t>(partitionIndex_) % sorted.size()];
  } else {
    std::map<uint32_t, size_t> ring;
    for (size_t i = 0; i < sorted.size(); ++i) {
      for (int j = 0; j < 100; ++j) {
        std::string key = sorted[i]->name() + std::to_string(j);
        ring[murmur3_32(key.data(), key.size(), 0) & 0x7fffffffu] = i;
      }
    }
    uint32_t h = murmur3_32(topicName_.data(), topicName_.size(), 0) & 0x7fffffffu;
    auto it = ring.lower_bound(h);
    if (it == ring.end()) it = ring.begin();
    next = sorted[it->second];
  }
  bool changed = next != active_;
  if (changed && active_ != nullptr) {
    // The old active consumer's unacked messages go to the new one, from the cursor on.
    Consumer* old = active_;
    clearPending(old);
    active_ = next;
    rewind();
  }
  active_ = next;
  // Only a change is told, to every consumer; a consumer removed or added without changing the
  // active one tells the others nothing (Pulsar).
  if (changed && type_ == proto::CommandSubscribe::Failover && !holdActivation()) {
    for (auto& c : consumers_) notifyActiveConsumerChange(c.get());
  }
  return changed;
}

bool Dispatcher::holdActivation() {
  if (activationHeld_) return true;  // the armed timer tells the consumer active by then
  const int64_t delayMs = options_.activeConsumerFailoverDelayTimeMillis;
  auto* loop = dynamic_cast<net::EventLoop*>(ledger_.executor());
  if (delayMs <= 0 || !loop) return false;
  if (!activationTimer_)
    activationTimer_ = std::make_unique<boost::asio::steady_timer>(loop->context());
  activationHeld_ = true;
  activationTimer_->expires_after(std::chrono::milliseconds(delayMs));
  // A handler already queued when the dispatcher goes runs without an error: the alive token.
  activationTimer_->async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;  // destroyed
    activationHeld_ = false;
    if (active_) {
      for (auto& c : consumers_) notifyActiveConsumerChange(c.get());
    }
    readMoreEntries();
  });
  return true;
}

const KeySharedSelector* Dispatcher::keySharedSelector() const {
  return keyShared_ ? &keyShared_->selector() : nullptr;
}

uint64_t Dispatcher::drainingHashesClearedTotal() const {
  return keyShared_ ? keyShared_->drainingHashesClearedTotal() : 0;
}

void Dispatcher::notifyActiveConsumerChange(Consumer* c) {
  // A connection holds it until the consumer's SUBSCRIBE is answered.
  c->sink()->sendActiveConsumerChange(c, c == active_);
}

bool Dispatcher::canTake(const Consumer* c) const {
  return c->permits > 0 && !c->blockedOnUnacked && !c->closed && !c->outboundBlocked;
}

void Dispatcher::refreshOutbound() {
  const size_t passLimit = static_cast<size_t>(options_.dynamic.dispatcherMaxReadSizeBytes.load());
  for (auto& c : consumers_) {
    if (!c->sink()->limitsOutbound() || c->closed || c->permits <= 0) continue;
    bool full = false;
    for (auto& o : outs_) {
      if (o.consumer == c.get()) full = o.batch.totalBytes() >= passLimit;
    }
    // Over the high watermark the consumer still takes what is left of one pass's bytes since
    // its connection was last seen under it (the same bound on what the connection holds), so a
    // queue the connection's loop has not yet written does not send its entries to the replay
    // set (issue 47's catch-up: a third of the entries went there and came back). isWritable()
    // arms the connection's call back when it answers false.
    if (c->sink()->isWritable()) c->bytesSinceWritable = 0;
    c->outboundBlocked = full || c->bytesSinceWritable >= passLimit;
  }
}

void Dispatcher::consumerWritable(Consumer* c) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (c->closed) return;
  readMoreEntries();
}

int64_t Dispatcher::availablePermits() const {
  if (blockedOnUnacked_) return 0;
  if (isSingleActive(type_)) return active_ && canTake(active_) ? active_->permits : 0;
  int64_t total = 0;
  for (auto& c : consumers_) {
    if (canTake(c.get())) total += c->permits;
  }
  return total;
}

void Dispatcher::flow(Consumer* c, uint32_t permits) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  c->permits += permits;
  readMoreEntries();
}

void Dispatcher::trackUnacked(Consumer* c, int64_t delta) {
  c->unackedMessages += delta;
  unackedMessages_ += delta;
  int maxC = maxUnackedPerConsumer_;
  if (maxC > 0 && type_ != proto::CommandSubscribe::Exclusive &&
      type_ != proto::CommandSubscribe::Failover) {
    if (!c->blockedOnUnacked && c->unackedMessages >= maxC) {
      c->blockedOnUnacked = true;
    } else if (c->blockedOnUnacked && c->unackedMessages <= maxC / 2) {
      c->blockedOnUnacked = false;
    }
  }
  int maxS = maxUnackedPerSubscription_;
  if (maxS > 0 && !isSingleActive(type_)) {
    if (!blockedOnUnacked_ && unackedMessages_ >= maxS) {
      blockedOnUnacked_ = true;
    } else if (blockedOnUnacked_ && unackedMessages_ <= maxS / 2) {
      blockedOnUnacked_ = false;
    }
  }
}

void Dispatcher::acked(Consumer* c, const std::vector<Position>& positions) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  bool wasBlocked = c->blockedOnUnacked || blockedOnUnacked_;
  bool hashFreed = false;
  for (auto& p : positions) {
    Consumer::PendingAck pending;
    if (c->pendingAcks.take(p, &pending)) hashFreed |= releasePending(c, pending);
    if (!redeliveryCount_.empty()) redeliveryCount_.erase(packPosition(p));
  }
  if ((wasBlocked && !(c->blockedOnUnacked || blockedOnUnacked_)) ||
      (hashFreed && !replay_.empty())) {
    readMoreEntries();
  }
}

void Dispatcher::ackedCumulative(Consumer* c, Position upTo) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  bool wasBlocked = c->blockedOnUnacked || blockedOnUnacked_;
  c->pendingAcks.takeUpTo(upTo, [&](Position p, const Consumer::PendingAck& pending) {
    releasePending(c, pending);
    if (!redeliveryCount_.empty()) redeliveryCount_.erase(packPosition(p));
  });
  if (wasBlocked && !(c->blockedOnUnacked || blockedOnUnacked_)) readMoreEntries();
}

void Dispatcher::batchIndexesAcked(Consumer* c, const std::vector<Position>& positions) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  bool wasBlocked = c->blockedOnUnacked || blockedOnUnacked_;
  bool hashFreed = false;
  for (auto& p : positions) {
    Consumer::PendingAck* pending = c->pendingAcks.find(p);
    if (!pending) continue;
    if (cursor_.isAcknowledged(p)) {
      Consumer::PendingAck done;
      c->pendingAcks.take(p, &done);
      hashFreed |= releasePending(c, done);
      if (!redeliveryCount_.empty()) redeliveryCount_.erase(packPosition(p));
      continue;
    }
    const storage::AckSet* set = cursor_.batchDeletedIndexes(p);
    if (!set) continue;
    // Pulsar counts acked batch indexes off the consumer's unacked messages one by one.
    int32_t left = storage::ackSetCardinality(*set, pending->batchSize);
    if (left < pending->messages) {
      trackUnacked(c, left - pending->messages);
      pending->messages = left;
    }
  }
  if ((wasBlocked && !(c->blockedOnUnacked || blockedOnUnacked_)) ||
      (hashFreed && !replay_.empty())) {
    readMoreEntries();
  }
}

void Dispatcher::redeliver(Consumer* c, const std::vector<Position>& positions) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (nonPersistent_) return;  // nothing is kept to deliver again
  if (isSingleActive(type_)) {
    // Pulsar rewinds the cursor to the first unacked entry for Exclusive/Failover on any
    // redeliver request (nack included); the tail comes back in order, counts unchanged.
    rewind();
  } else {
    putBackForRedelivery(c, positions.empty(), positions, /*countRedelivery=*/true);
  }
  readMoreEntries();
}

void Dispatcher::redeliverReleased(const std::vector<Position>& positions) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (isSingleActive(type_)) {
    rewind();
  } else {
    for (const Position& p : positions) {
      if (!cursor_.isAcknowledged(p)) addToReplay(p, -1);
    }
  }
  readMoreEntries();
}

void Dispatcher::putBackForRedelivery(Consumer* c, bool all, const std::vector<Position>& which,
                                      bool countRedelivery) {
  auto putBack = [&](Position p, const Consumer::PendingAck& pending) {
    releasePending(c, pending);
    if (countRedelivery) redeliveryCount_[packPosition(p)]++;
    stats_.msgRedeliverCounter += pending.messages;
    // Keep the key's hash so newer messages of that key wait behind the redelivery.
    addToReplay(p, pending.keyHash);
  };
  if (all) {
    c->pendingAcks.takeAll(putBack);
  } else {
    for (auto& p : which) {
      Consumer::PendingAck pending;
      if (c->pendingAcks.take(p, &pending)) putBack(p, pending);
    }
  }
}

void Dispatcher::addToReplay(Position p, int32_t keyHash) {
  if (keyHash < 0) {
    replay_.add(p, keyHash, ReplaySet::kHeld);
    return;
  }
  replay_.add(p, keyHash, replayGroup(keyHash));
}

void Dispatcher::park(Consumer* owner, Entry&& e, int32_t hash) {
  const size_t bound = static_cast<size_t>(options_.dynamic.keySharedParkedEntriesMaxBytes.load());
  if (rateLimited() || parkedBytes_ + e.data.size() > bound) {
    // The replay set instead. Its entries of this hash are then newer than any parked one, and
    // the owner's parked entries go first (dispatchParked, at the start of each pass; the
    // replay set gives the owner nothing while it has parked entries and no permits).
    addToReplay(e.position, hash);
    return;
  }
  parkedEntries_++;
  parkedBytes_ += e.data.size();
  owner->parked.emplace_back(std::move(e), hash);
}

void Dispatcher::dispatchParked() {
  if (parkedEntries_ == 0) return;
  std::vector<Entry> batch;
  for (auto& c : consumers_) {
    if (c->parked.empty() || !canTake(c.get())) continue;
    batch.clear();
    // Up to its permits' worth of entries (a batch entry may take more; deliver allows that).
    while (!c->parked.empty() && static_cast<int64_t>(batch.size()) < c->permits) {
      auto& [entry, hash] = c->parked.front();
      parkedEntries_--;
      parkedBytes_ -= entry.data.size();
      batch.push_back(std::move(entry));
      c->parked.pop_front();
    }
    // As replayed entries: every check again; one that cannot go now (an older entry of its
    // hash waits in the replay set) goes to the replay set, where order is kept by position.
    dispatchEntries(batch, /*fromReplay=*/true);
  }
}

void Dispatcher::unpark(Consumer* c) {
  for (auto& [entry, hash] : c->parked) {
    parkedEntries_--;
    parkedBytes_ -= entry.data.size();
    addToReplay(entry.position, hash);
  }
  c->parked.clear();
}

void Dispatcher::unparkAll() {
  if (parkedEntries_ == 0) return;
  for (auto& c : consumers_) unpark(c.get());
}

ReplaySet::Group Dispatcher::replayGroup(int32_t hash) const {
  Consumer* owner = keyShared_->owner(hash);
  if (!owner) return ReplaySet::kHeld;
  if (!owner->allowOutOfOrderDelivery && keyShared_->drainingElsewhere(hash, owner)) {
    return ReplaySet::kHeld;  // regroupHash moves it when the holder has acked the last one
  }
  return owner;
}

void Dispatcher::rescanDraining() {
  keyShared_->consumersChanged([this](auto&& f) {
    for (const auto& c : consumers_) {
      c->pendingAcks.forEach(
          [&](Position, const Consumer::PendingAck& p) { f(c.get(), p.keyHash); });
    }
  });
}

void Dispatcher::regroupReplay() {
  replay_.regroupAll([this](int32_t hash) { return replayGroup(hash); });
}

bool Dispatcher::olderInReplay(int32_t hash, Position p) const { return replay_.hasOlder(hash, p); }

void Dispatcher::onNewEntries() {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  readMoreEntries();
}

void Dispatcher::rewind() {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  ++epoch_;
  readPending_ = false;
  readAhead_ = false;
  replay_.clear();
  for (auto& c : consumers_) c->parked.clear();
  parkedEntries_ = 0;
  parkedBytes_ = 0;
  // The entries are read again from the cursor on and tracked anew.
  if (tracker_) tracker_->clear();
  for (auto& c : consumers_) clearPending(c.get());
  readPosition_ = ledger_.nextValidPosition(cursor_.markDeletedPosition());
  compactedStarted_ = false;
}

bool Dispatcher::releasePending(Consumer* c, const Consumer::PendingAck& p) {
  trackUnacked(c, -p.messages);
  if (p.keyHash < 0) return false;  // only Key_Shared entries carry a hash
  if (!keyShared_->released(p.keyHash, c)) return false;
  // The hash finished draining: its held entries may go to its owner.
  if (replay_.countOf(p.keyHash) > 0) {
    replay_.regroupHash(p.keyHash, replayGroup(p.keyHash));
  }
  return true;
}

void Dispatcher::clearPending(Consumer* c) {
  c->pendingAcks.takeAll([&](Position, const Consumer::PendingAck& p) { releasePending(c, p); });
}

std::vector<DrainingHashInfo> Dispatcher::drainingHashes() const {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (!keyShared_) return {};
  return keyShared_->drainingHashes();
}

int64_t Dispatcher::entriesBlockedByDraining(const std::vector<DrainingHashInfo>& draining) const {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  int64_t n = 0;
  for (const auto& d : draining) n += static_cast<int64_t>(replay_.countOf(d.hash));
  return n;
}

std::vector<std::shared_ptr<Consumer>> Dispatcher::takeConsumers() {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  // All are about to be removed: none may be handed the others' messages meanwhile.
  for (auto& c : consumers_) c->closed = true;
  return consumers_;
}

Consumer* Dispatcher::pickShared() {
  size_t n = consumers_.size();
  for (size_t i = 0; i < n; ++i) {
    Consumer* c = consumers_[(rrIndex_ + i) % n].get();
    if (canTake(c)) {
      rrIndex_ = (rrIndex_ + i + 1) % n;
      return c;
    }
  }
  return nullptr;
}

void Dispatcher::readMoreEntries(bool allowReplay) {
  if (activationHeld_ || nonPersistent_) return;  // holdActivation's timer reads
  refreshOutbound();
  readRounds(allowReplay);
  // One hand-over per consumer for everything this pass dispatched.
  flushOutput();
  scheduleDelayedTimer();
}

bool Dispatcher::trackDelayedDelivery(const Entry& e, int64_t deliverAtMs) {
  if (!delayed_.active || isSingleActive(type_)) return false;
  if (!tracker_) {
    // The bucket width comes from the broker's tick, the tick from the policy (Pulsar's factory
    // and resetTickTime).
    tracker_ = std::make_unique<DelayedDeliveryTracker>(
        options_.delayedDeliveryTickTimeMillis, options_.isDelayedDeliveryDeliverAtTimeStrict);
  }
  tracker_->resetTickTime(delayed_.tickTime);
  return tracker_->addMessage(e.position, deliverAtMs, wallClockMs());
}

void Dispatcher::pollDelayed(int64_t room) {
  if (!tracker_ || tracker_->getNumberOfDelayedMessages() == 0) return;
  int64_t free = room - static_cast<int64_t>(replay_.size());
  if (free <= 0) return;
  int64_t now = wallClockMs();
  if (!tracker_->hasMessageAvailable(now)) return;
  std::vector<Position> due;
  tracker_->getScheduledMessages(now, static_cast<size_t>(free), &due);
  // No key hash yet: dispatchEntries reads it from the entry (Key_Shared).
  for (auto& p : due) addToReplay(p, -1);
}

void Dispatcher::scheduleDelayedTimer() {
  if (!tracker_ || consumers_.empty()) return;
  std::optional<int64_t> due = tracker_->nextDueTime();
  if (!due) return;
  int64_t at = std::max(*due, lastTickMs_ + std::max<int64_t>(1, delayed_.tickTime));
  if (timerDeadlineMs_ >= 0 && timerDeadlineMs_ <= at) return;  // armed early enough
  if (!delayedTimer_) {
    auto* loop = dynamic_cast<net::EventLoop*>(ledger_.executor());
    if (!loop) return;
    delayedTimer_ = std::make_unique<boost::asio::steady_timer>(loop->context());
  }
  int64_t now = wallClockMs();
  timerDeadlineMs_ = at;
  delayedTimer_->expires_after(std::chrono::milliseconds(std::max<int64_t>(0, at - now)));
  delayedTimer_->async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;  // re-armed or destroyed (a handler queued before: the token)
    const int64_t deadline = timerDeadlineMs_;
    timerDeadlineMs_ = -1;
    // The steady clock ran ahead of the wall clock: wait out the rest rather than a whole tick.
    if (wallClockMs() < deadline) return scheduleDelayedTimer();
    lastTickMs_ = wallClockMs();
    readMoreEntries();
  });
}

void Dispatcher::flushOutput() {
  for (auto& o : outs_) {
    ConsumerSink* sink = o.consumer->sink();
    sink->send(std::move(o.batch));
    // Held back by this pass's limit: go on when the connection has written it.
    if (o.consumer->outboundBlocked) sink->notifyWhenWritable();
    FrameBatchPool::give(std::move(o.batch));  // its grown storage serves a later pass
  }
  outs_.clear();
}

void Dispatcher::readRounds(bool allowReplay) {
  // Reads the entry cache answers at once are dispatched here, round after round, so a tailing
  // subscription costs no task per read; after kInlineReadRounds (or on a cache miss) the read
  // goes through the executor, so publishes and acks queued meanwhile get their turn.
  for (int round = 0;; ++round) {
    if (readPending_ || consumers_.empty()) return;
    int64_t permits = availablePermits();
    if (permits <= 0) return;
    if (round == 0 && parkedEntries_ > 0) {
      dispatchParked();
      permits = availablePermits();
      if (permits <= 0) return;
    }
    const bool inlineAllowed = round < kInlineReadRounds;
    const int64_t maxBatch = std::max(1, options_.dynamic.dispatcherMaxReadBatchSize.load());
    int64_t batch = std::min<int64_t>(permits, maxBatch);
    // Due delayed entries join the replay set (Pulsar's getMessagesToReplayNow).
    if (allowReplay) pollDelayed(batch);
    if (allowReplay && !replay_.empty()) {
      if (rateLimited()) {
        int64_t rateBytes = INT64_MAX;
        if (!takeDispatchAllowance(&batch, &rateBytes)) return;
      }
      std::optional<bool> next = readReplay(batch, inlineAllowed);
      if (!next) return;  // reads in flight; their callback goes on
      allowReplay = *next;
      continue;
    }
    if (keyShared_ &&
        keyShared_->lookAheadLimitReached(consumers_.size(), replay_.size() + parkedEntries_)) {
      return;  // the replay set drains first
    }
    if (readCompacted(batch)) return;
    Position lac = ledger_.lastConfirmedEntry();
    if (lac.entryId < 0 && lac.ledgerId <= readPosition_.ledgerId) return;  // nothing stored yet
    if (readPosition_ > lac) return;  // tailing: wait for onNewEntries
    // An ongoing transaction holds the rest back: the commit/abort wakes the dispatcher.
    if (txnBuffer_ && txnBuffer_->ongoingCount() > 0 &&
        readPosition_ > *txnBuffer_->maxReadPosition()) {
      return;
    }
    // Read ahead of delayed entries: while the last read handed entries to the tracker, a read
    // takes a full batch even when fewer permits are left (delayed entries take none), so a run
    // of delayed entries costs one read per batch, not one per permit.
    if (readAhead_) batch = maxBatch;
    size_t maxBytes = static_cast<size_t>(options_.dynamic.dispatcherMaxReadSizeBytes.load());
    if (rateLimited()) {
      int64_t rateBytes = INT64_MAX;
      if (!takeDispatchAllowance(&batch, &rateBytes)) return;
      maxBytes = std::min(maxBytes, static_cast<size_t>(rateBytes));
    }
    std::vector<Entry> entries;
    if (inlineAllowed &&
        ledger_.readCachedEntries(readPosition_, static_cast<int>(batch), maxBytes, &entries)) {
      if (entries.empty()) return;
      readPosition_ = ledger_.nextValidPosition(entries.back().position);
      dispatchEntries(entries, false);
      allowReplay = true;
      continue;
    }
    readPending_ = true;
    uint64_t epoch = epoch_;
    ledger_.asyncReadEntries(
        readPosition_, static_cast<int>(batch), maxBytes,
        [this, alive = alive_, epoch](const Status& s, std::vector<Entry> entries) {
          if (!*alive || epoch != epoch_) return;  // gone, or rewound
          readPending_ = false;
          if (!s.isOk()) {
            MLOG_WARN("read failed on {}: {}", ledger_.name(), s.toString());
            return;
          }
          if (entries.empty()) return;
          readPosition_ = ledger_.nextValidPosition(entries.back().position);
          dispatchEntries(entries, false);
          readMoreEntries();
        });
    return;
  }
}

bool Dispatcher::readCompacted(int64_t batch) {
  if (!compactor_ || !active_ || !active_->readCompacted) return false;
  std::shared_ptr<const CompactedView> view = compactor_->view();
  if (!view) return false;
  // A cursor at the start of the log reads the whole view (Pulsar's readFromEarliest), also the
  // keys whose ledgers were trimmed after the compaction: then the log may start after the
  // horizon.
  const Position first = ledger_.firstPosition();
  const bool fromStart = !compactedStarted_ && readPosition_ <= first;
  if (!fromStart && readPosition_ > view->horizon()) return false;
  compactedStarted_ = true;
  readPending_ = true;
  uint64_t epoch = epoch_;
  view->asyncReadEntries(
      fromStart ? Position{-1, -1} : readPosition_, static_cast<int>(batch),
      static_cast<size_t>(options_.dynamic.dispatcherMaxReadSizeBytes.load()),
      [this, alive = alive_, epoch, view, first, fromStart](const Status& s,
                                                            std::vector<Entry> entries) {
        if (!*alive || epoch != epoch_) return;  // gone, or rewound meanwhile
        readPending_ = false;
        if (!s.isOk()) {
          MLOG_WARN("compacted read failed on {}: {}", ledger_.name(), s.toString());
          return;
        }
        if (entries.empty()) {
          // The view is done: the live tail follows its horizon.
          readPosition_ = Position{view->horizon().ledgerId, view->horizon().entryId + 1};
        } else {
          const Position last = entries.back().position;
          readPosition_ = Position{last.ledgerId, last.entryId + 1};
          dispatchEntries(entries, false, fromStart ? first : Position{-1, -1});
        }
        readMoreEntries();
      });
  return true;
}

std::optional<bool> Dispatcher::readReplay(int64_t maxEntries, bool inlineAllowed) {
  // Take up to maxEntries positions, oldest first, and dispatch them together in position order.
  // Key_Shared takes only the entries of consumers that can take something now (at most their
  // permits each; as Pulsar 4 filters its replay reads), so a consumer holding its messages does
  // not stall the others' redeliveries, and their entries are not even visited. A key's entries
  // share one group, oldest first, so their order holds.
  std::vector<ReplaySet::Item> taken;
  const uint64_t visitedBefore = replay_.visited();
  replay_.take(
      maxEntries, [this](const Consumer* c) { return canTake(c) ? int64_t{c->permits} : 0; },
      &taken);
  stats_.replayEntriesVisited += replay_.visited() - visitedBefore;
  std::vector<Position> want;
  want.reserve(taken.size());
  for (const auto& item : taken) want.push_back(item.first);
  if (want.empty()) return false;  // nothing replayable now: read new entries
  if (inlineAllowed) return readReplayed(want);
  // Past the inline rounds: the whole batch in one task, so publishes and acks queued meanwhile
  // get their turn first (one task per position cost ~10 % of a busy ml-worker at max rate).
  readPending_ = true;
  uint64_t epoch = epoch_;
  ledger_.executor()->execute([this, alive = alive_, epoch, want = std::move(want)] {
    if (!*alive || epoch != epoch_) return;  // gone, or rewound meanwhile
    readPending_ = false;
    std::optional<bool> next = readReplayed(want);
    if (next) readMoreEntries(/*allowReplay=*/*next);
  });
  return std::nullopt;
}

std::optional<bool> Dispatcher::readReplayed(const std::vector<Position>& want) {
  // The entry cache answers at once, under one lock; the rest (redeliveries after a cache
  // eviction, the uncommon path) are read one by one through the ledger.
  const Position first = want.front();
  std::vector<Entry> found;
  found.reserve(want.size());
  std::vector<Position> missing;
  ledger_.readCachedPositions(want, &found, &missing);
  if (missing.empty()) return replayDispatch(found, first);
  readPending_ = true;
  uint64_t epoch = epoch_;
  auto results = std::make_shared<std::vector<Entry>>(std::move(found));
  auto remaining = std::make_shared<size_t>(missing.size());
  for (auto& p : missing) {
    ledger_.asyncReadEntries(
        p, 1, 1,
        [this, alive = alive_, epoch, p, first, results, remaining](const Status& s,
                                                                    std::vector<Entry> entries) {
          if (!*alive || epoch != epoch_) return;
          if (s.isOk() && !entries.empty() && entries.front().position == p) {
            results->push_back(std::move(entries.front()));
          }
          if (--*remaining > 0) return;
          readPending_ = false;
          std::sort(results->begin(), results->end(),
                    [](const Entry& a, const Entry& b) { return a.position < b.position; });
          readMoreEntries(/*allowReplay=*/replayDispatch(*results, first));
        });
  }
  return std::nullopt;
}

bool Dispatcher::replayDispatch(std::vector<Entry>& entries, Position first) {
  size_t before = replay_.size();
  dispatchEntries(entries, true);
  // When nothing of the replay could go out (no permits for those keys), read new entries for
  // the other consumers rather than loop on the replay.
  bool progressed = replay_.size() < before + entries.size();
  // Entries older than this batch went back for redelivery while it was read (a consumer left):
  // replay again, they come first.
  bool olderPutBack = !replay_.empty() && replay_.first() < first;
  return progressed || olderPutBack;
}

Consumer* Dispatcher::keySharedTarget(const EntryMetadataPeek& md, Position pos, bool fromReplay,
                                      int32_t& hash, Consumer** parkAt) {
  hash = keyShared_->hashOf(md);
  Consumer* owner = keyShared_->owner(hash);
  // Draining (Pulsar 4): while messages of this hash are unacked at another consumer (the
  // hash moved on a join/leave), new ones wait, so a key is outstanding at one consumer.
  bool draining =
      owner && !owner->allowOutOfOrderDelivery && keyShared_->drainingElsewhere(hash, owner);
  if (draining) {
    stats_.blockedByDraining++;
    keyShared_->blocked(hash);
  }
  bool ready = owner && canTake(owner) && !draining && !blockedOnUnacked_;
  // An older entry of the hash waits for redelivery: this one must not overtake it. For a
  // replayed entry, that is one put back while its read was in flight (a consumer left) or
  // one held earlier in this pass.
  bool keyWaiting = fromReplay ? ready && olderInReplay(hash, pos) : replay_.countOf(hash) > 0;
  // Parked: only new entries, held back by nothing but the owner's permits (or behind its parked
  // ones), and never with an older entry of the hash in the replay set (keyWaiting).
  if (!fromReplay && !keyWaiting && owner && !draining && !blockedOnUnacked_ && !owner->closed &&
      (!owner->parked.empty() || (owner->permits <= 0 && !owner->blockedOnUnacked))) {
    *parkAt = owner;
    return nullptr;
  }
  return ready && !keyWaiting ? owner : nullptr;
}

void Dispatcher::deliver(Consumer* target, const Entry& e, int32_t n, int32_t hash,
                         int32_t batchSize, const storage::AckSet* ackSet) {
  target->permits -= n;
  target->pendingAcks.add(e.position, Consumer::PendingAck{n, hash, batchSize});
  trackUnacked(target, n);
  target->msgOutCounter += n;
  target->bytesOutCounter += e.data.size();
  stats_.msgOutCounter += n;
  stats_.bytesOutCounter += e.data.size();
  uint32_t redeliveries = 0;
  if (!redeliveryCount_.empty()) {
    auto rc = redeliveryCount_.find(packPosition(e.position));
    if (rc != redeliveryCount_.end()) redeliveries = static_cast<uint32_t>(rc->second);
  }
  net::FrameBatch& b = batchFor(target);
  std::span<const int64_t> ackWords;
  if (ackSet) ackWords = std::span<const int64_t>(ackSet->data(), ackSet->size());
  const size_t maxHeader = protocol::maxMessageHeaderSize(ackWords.size());
  uint8_t* dst = b.appendSpace(maxHeader);
  size_t used = protocol::Commands::writeMessageHeader(
      dst, target->id(), static_cast<uint64_t>(e.position.ledgerId),
      static_cast<uint64_t>(e.position.entryId), redeliveries, e.data.size(), ackWords,
      std::nullopt, partitionIndex_);
  b.trimBytes(maxHeader - used);
  b.appendBuffer(e.data);
  // One pass, and all passes since its connection was last seen under the high watermark, give
  // a consumer at most dispatcherMaxReadSizeBytes (at least one entry): with the watermark this
  // bounds what one connection holds queued.
  target->bytesSinceWritable += e.data.size();
  const size_t passLimit = static_cast<size_t>(options_.dynamic.dispatcherMaxReadSizeBytes.load());
  if (target->sink()->limitsOutbound() &&
      (b.totalBytes() >= passLimit || target->bytesSinceWritable >= passLimit)) {
    target->outboundBlocked = true;
  }
}

bool Dispatcher::availableNow(Consumer* c) const {
  if (c->permits <= 0 || c->closed) return false;
  // isWritable() arms the connection's consumerWritable call, which reads nothing here.
  return !c->sink()->limitsOutbound() || c->sink()->isWritable();
}

void Dispatcher::sendNonPersistent(const std::vector<Buffer>& entries) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  for (const Buffer& data : entries) {
    EntryMetadataPeek md;
    if (!peekEntryMetadata(data.view(), &md).isOk()) continue;
    const int32_t n = std::max(1, md.numMessagesInBatch);
    Consumer* target = nullptr;
    if (isSingleActive(type_)) {
      // Not held by activeConsumerFailoverDelayTimeMillis: Pulsar's non-persistent dispatcher
      // schedules no read on activation, the active consumer takes messages at once.
      target = active_ && availableNow(active_) ? active_ : nullptr;
    } else if (keyShared_) {
      Consumer* owner = keyShared_->owner(keyShared_->hashOf(md));
      target = owner && availableNow(owner) ? owner : nullptr;
    } else {
      for (size_t i = 0; i < consumers_.size() && !target; ++i) {
        Consumer* c = consumers_[(rrIndex_ + i) % consumers_.size()].get();
        if (availableNow(c)) {
          target = c;
          rrIndex_ = (rrIndex_ + i + 1) % consumers_.size();
        }
      }
    }
    if (!target) {
      stats_.msgDropCounter += static_cast<uint64_t>(n);
      continue;
    }
    target->permits -= n;
    target->msgOutCounter += n;
    target->bytesOutCounter += data.size();
    stats_.msgOutCounter += n;
    stats_.bytesOutCounter += data.size();
    net::FrameBatch& b = batchFor(target);
    const size_t maxHeader = protocol::maxMessageHeaderSize(0);
    uint8_t* dst = b.appendSpace(maxHeader);
    size_t used = protocol::Commands::writeMessageHeader(dst, target->id(), 0, 0, 0, data.size(),
                                                         {}, std::nullopt, partitionIndex_);
    b.trimBytes(maxHeader - used);
    b.appendBuffer(data);
  }
  flushOutput();
}

net::FrameBatch& Dispatcher::batchFor(Consumer* c) {
  for (auto& o : outs_) {
    if (o.consumer == c) return o.batch;
  }
  outs_.push_back(Out{c, FrameBatchPool::take()});
  return outs_.back().batch;
}

void Dispatcher::dispatchEntries(std::vector<Entry>& entries, bool fromReplay,
                                 Position ackCheckFrom) {
  bool singleActive = isSingleActive(type_);
  if (!fromReplay) readAhead_ = false;
  const uint64_t msgsBefore = stats_.msgOutCounter;
  const uint64_t bytesBefore = stats_.bytesOutCounter;
  int64_t entriesOut = 0;  // for dispatchThrottlingOnBatchMessageEnabled
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    if (e.position >= ackCheckFrom && cursor_.isAcknowledged(e.position)) continue;
    EntryMetadataPeek md;
    if (!peekEntryMetadata(e.data.view(), &md).isOk()) {
      MLOG_WARN("{}: skipping unreadable entry {}:{}", ledger_.name(), e.position.ledgerId,
                e.position.entryId);
      continue;
    }
    if (txnBuffer_ && (md.hasTxnid || txnBuffer_->ongoingCount() > 0)) {
      bool stop = false;
      if (heldByTxn(e, md, fromReplay, &stop)) {
        if (stop) break;
        continue;
      }
    }
    if (md.hasMarkerType && skipMarker(e, md)) continue;
    const int32_t batchSize = std::max(1, md.numMessagesInBatch);
    if (pendingAck_ && !pendingAck_->empty() && pendingAck_->isWhollyHeld(e.position, batchSize)) {
      continue;  // acked by an open transaction
    }
    int32_t n = batchSize;
    const storage::AckSet* ackSet = nullptr;
    if (!unackedPart(e.position, batchSize, &n, &ackSet)) continue;
    // Held back until its deliver_at_time; a replayed entry was due (or dispatched) already.
    if (!fromReplay && md.hasDeliverAtTime && trackDelayedDelivery(e, md.deliverAtTime)) {
      readAhead_ = true;
      continue;
    }
    Consumer* target = nullptr;
    int32_t hash = -1;
    if (singleActive) {
      target = active_ && canTake(active_) && !blockedOnUnacked_ ? active_ : nullptr;
      if (!target) {
        if (!fromReplay) {
          // Re-read from here later, keeping order.
          readPosition_ = e.position;
        } else {
          addToReplay(e.position, -1);
        }
        if (!fromReplay) break;
        continue;
      }
    } else if (keyShared_ && !md.hasOrderingKey && !md.hasPartitionKey) {
      // Messages without a key carry no ordering promise: Pulsar 4 spreads them over the
      // consumers rather than pinning them to the owner of one hash.
      target = blockedOnUnacked_ ? nullptr : pickShared();
    } else if (keyShared_) {
      Consumer* parkAt = nullptr;
      target = keySharedTarget(md, e.position, fromReplay, hash, &parkAt);
      if (parkAt) {
        park(parkAt, std::move(e), hash);
        continue;
      }
    } else {
      target = blockedOnUnacked_ ? nullptr : pickShared();
    }
    if (!target) {
      addToReplay(e.position, hash);
      continue;
    }
    deliver(target, e, n, hash, batchSize, ackSet);
    ++entriesOut;
  }
  if (rateLimited()) chargeDispatchRate(msgsBefore, bytesBefore, entriesOut);
}

bool Dispatcher::unackedPart(Position p, int32_t batchSize, int32_t* n,
                             const storage::AckSet** ackSet) {
  // A partly acked batch goes out with its ack set so the client skips the acked indexes;
  // permits and unacked counts cover only the rest (Pulsar's EntryBatchIndexesAcks).
  if (!options_.acknowledgmentAtBatchIndexLevelEnabled) return true;
  *ackSet = cursor_.batchDeletedIndexes(p);
  if (!*ackSet) return true;
  *n = storage::ackSetCardinality(**ackSet, batchSize);
  if (*n > 0) return true;
  // Only bits past the batch's end were left: every message is acked.
  cursor_.asyncDelete({p}, nullptr);
  return false;
}

bool Dispatcher::skipMarker(const Entry& e, const EntryMetadataPeek& md) {
  // Server-only: acked through, never dispatched (Pulsar's filterEntriesForConsumer).
  if (md.markerType == kReplicatedSubscriptionSnapshotMarker && snapshotMarkerHook_) {
    snapshotMarkerHook_(e);
  }
  cursor_.asyncDelete({e.position}, nullptr);
  return true;
}

bool Dispatcher::heldByTxn(const Entry& e, const EntryMetadataPeek& md, bool fromReplay,
                           bool* stop) {
  std::optional<Position> maxRead = txnBuffer_->maxReadPosition();
  if (!fromReplay && maxRead && e.position > *maxRead) {
    // A read batch may run past the max read position: read from here again once it moves.
    readPosition_ = e.position;
    *stop = true;
    return true;
  }
  if (!txnBuffer_->hides(md)) return false;
  // Markers and aborted entries are never dispatched; the subscription acks them (Pulsar's
  // individualAcknowledgeMessageIfNeeded), so the backlog drains past them.
  cursor_.asyncDelete({e.position}, nullptr);
  return true;
}

}  // namespace magnetar::broker
