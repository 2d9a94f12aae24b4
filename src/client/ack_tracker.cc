#include "client/ack_tracker.h"

namespace magnetar::client {

using protocol::Commands;
using protocol::WireMessageId;

namespace {
WireMessageId entryId(int64_t ledgerId, int64_t entryId) {
  return WireMessageId{static_cast<uint64_t>(ledgerId), static_cast<uint64_t>(entryId), -1, -1};
}
}  // namespace

void AckGroupingTracker::onBatchReceived(int64_t ledgerId, int64_t entryId, int32_t size) {
  if (size <= 1) return;
  MutexLock lock(mu_);
  auto& b = batches_[{ledgerId, entryId}];
  b.acked.assign(static_cast<size_t>(size), false);
  b.remaining = size;
}

bool AckGroupingTracker::addIndividual(const MessageId& id) {
  MutexLock lock(mu_);
  if (id.batchIndex >= 0 && id.batchSize > 1) {
    auto it = batches_.find({id.ledgerId, id.entryId});
    if (it != batches_.end()) {
      auto& b = it->second;
      size_t i = static_cast<size_t>(id.batchIndex);
      if (i < b.acked.size() && !b.acked[i]) {
        b.acked[i] = true;
        --b.remaining;
      }
      if (b.remaining > 0) return false;
      batches_.erase(it);
    }
    // Unknown batch (state dropped): ack the entry, as Pulsar does without an acker.
  }
  return addIndividualLocked(id.ledgerId, id.entryId);
}

bool AckGroupingTracker::addIndividualLocked(int64_t ledgerId, int64_t entryId) {
  individual_.push_back(client::entryId(ledgerId, entryId));
  return individual_.size() >= maxGroupSize_;
}

bool AckGroupingTracker::addCumulative(const MessageId& id) {
  MutexLock lock(mu_);
  int64_t ledger = id.ledgerId;
  int64_t entry = id.entryId;
  if (id.batchIndex >= 0 && id.batchSize > 1 && id.batchIndex < id.batchSize - 1) {
    // Not the batch's last message: mark up to it, ack up to the previous entry.
    auto it = batches_.find({ledger, entry});
    if (it != batches_.end()) {
      auto& b = it->second;
      for (int32_t i = 0; i <= id.batchIndex && i < static_cast<int32_t>(b.acked.size()); ++i) {
        if (!b.acked[i]) {
          b.acked[i] = true;
          --b.remaining;
        }
      }
    }
    if (entry == 0) return false;  // nothing before it in this ledger to ack
    entry -= 1;
  }
  // Batches at or before the acked position are done.
  auto end = batches_.upper_bound({ledger, entry});
  batches_.erase(batches_.begin(), end);
  WireMessageId w = client::entryId(ledger, entry);
  if (!cumulative_ || std::make_pair(w.ledgerId, w.entryId) >
                          std::make_pair(cumulative_->ledgerId, cumulative_->entryId)) {
    cumulative_ = w;
  }
  return false;
}

std::vector<Buffer> AckGroupingTracker::takeFrames() {
  std::vector<Buffer> frames;
  MutexLock lock(mu_);
  if (cumulative_) {
    WireMessageId ids[1] = {*cumulative_};
    frames.push_back(Commands::newAck(consumerId_, proto::CommandAck::Cumulative, ids));
    cumulative_.reset();
  }
  if (!individual_.empty()) {
    frames.push_back(Commands::newAck(consumerId_, proto::CommandAck::Individual, individual_));
    individual_.clear();
  }
  return frames;
}

void AckGroupingTracker::clearBatches() {
  MutexLock lock(mu_);
  batches_.clear();
}

size_t AckGroupingTracker::pendingIndividual() const {
  MutexLock lock(mu_);
  return individual_.size();
}

std::optional<WireMessageId> AckGroupingTracker::pendingCumulative() const {
  MutexLock lock(mu_);
  return cumulative_;
}

size_t AckGroupingTracker::trackedBatches() const {
  MutexLock lock(mu_);
  return batches_.size();
}

void NegativeAckTracker::add(const MessageId& id, Clock::time_point now) {
  MutexLock lock(mu_);
  pending_[{id.ledgerId, id.entryId}] = now + delay_;
}

std::vector<WireMessageId> NegativeAckTracker::takeDue(Clock::time_point now) {
  std::vector<WireMessageId> due;
  MutexLock lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second <= now) {
      due.push_back(entryId(it->first.first, it->first.second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

void NegativeAckTracker::clear() {
  MutexLock lock(mu_);
  pending_.clear();
}

size_t NegativeAckTracker::size() const {
  MutexLock lock(mu_);
  return pending_.size();
}

}  // namespace magnetar::client
