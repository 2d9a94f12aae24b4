// Acknowledgement bookkeeping of one consumer: batch entries (an entry is acked once every
// message in it is), grouping of acks into ACK frames, and negative acks waiting for their
// redelivery delay.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/thread_annotations.h"
#include "client/message.h"
#include "protocol/commands.h"

namespace magnetar::client {

// Groups acks like Pulsar's PersistentAcknowledgmentsGroupingTracker: individual acks collect
// (one ACK frame with many ids), a cumulative ack keeps only the highest position, and the owner
// sends takeFrames() every ackGroupTime or when add*() returns true (group full).
// Batch messages: without batch-index acks (as Pulsar clients by default), an individual ack of
// a batched message only marks it; the entry is acked when all its messages are. A cumulative ack
// of batch index i < size-1 acks up to the previous entry (Pulsar's prevBatchMessageId).
// Thread: any (internal mutex).
class AckGroupingTracker {
 public:
  // maxGroupSize: Pulsar's maxAckGroupSize, 1000.
  explicit AckGroupingTracker(uint64_t consumerId, size_t maxGroupSize = 1000)
      : consumerId_(consumerId), maxGroupSize_(maxGroupSize) {}

  // A batch entry of `size` messages arrived (again): every index becomes unacked.
  void onBatchReceived(int64_t ledgerId, int64_t entryId, int32_t size);
  // Returns true when the pending group is full and should be sent now.
  bool addIndividual(const MessageId& id);
  bool addCumulative(const MessageId& id);
  // ACK frames for everything pending (cumulative first, then one frame of individual ids), and
  // clears it. Empty when nothing is pending.
  std::vector<Buffer> takeFrames();
  // Drops batch state (after the subscription was reset, e.g. by seek).
  void clearBatches();

  size_t pendingIndividual() const;
  std::optional<protocol::WireMessageId> pendingCumulative() const;
  size_t trackedBatches() const;

 private:
  struct BatchState {
    std::vector<bool> acked;
    int32_t remaining = 0;
  };
  using EntryKey = std::pair<int64_t, int64_t>;

  bool addIndividualLocked(int64_t ledgerId, int64_t entryId) REQUIRES(mu_);

  const uint64_t consumerId_;
  const size_t maxGroupSize_;
  mutable Mutex mu_;
  std::map<EntryKey, BatchState> batches_ GUARDED_BY(mu_);
  std::vector<protocol::WireMessageId> individual_ GUARDED_BY(mu_);
  std::optional<protocol::WireMessageId> cumulative_ GUARDED_BY(mu_);
};

// Negatively acknowledged messages until their redelivery time (Pulsar's NegativeAcksTracker):
// the owner polls takeDue() (every delay/3) and sends REDELIVER_UNACKNOWLEDGED_MESSAGES with the
// returned entry ids. Thread: any (internal mutex).
class NegativeAckTracker {
 public:
  using Clock = std::chrono::steady_clock;
  explicit NegativeAckTracker(std::chrono::milliseconds delay) : delay_(delay) {}

  // The whole entry is redelivered (a batched message brings back its batch).
  void add(const MessageId& id, Clock::time_point now = Clock::now());
  // Entry ids whose delay has passed, removed from the tracker.
  std::vector<protocol::WireMessageId> takeDue(Clock::time_point now = Clock::now());
  void clear();
  size_t size() const;
  std::chrono::milliseconds delay() const { return delay_; }

 private:
  const std::chrono::milliseconds delay_;
  mutable Mutex mu_;
  std::map<std::pair<int64_t, int64_t>, Clock::time_point> pending_ GUARDED_BY(mu_);
};

}  // namespace magnetar::client
