// DelayedDeliveryTracker: the entries a Shared or Key_Shared subscription holds back until their
// MessageMetadata.deliver_at_time (Pulsar's DelayedDeliveryTracker). Entries are grouped by time
// bucket (deliver time rounded up to the bucket width); inside a bucket the positions, packed as
// ledgerId << 40 | entryId, are kept as delta- and run-length-encoded varints (EntryIdRuns), so a
// delayed entry costs about 2-3 bytes (random delays) or next to nothing (runs of consecutive
// entries with one delay). Positions that do not pack (ledger id >= 2^23 or entry id >= 2^40) are
// kept per ledger instead.
// Nothing is written to storage: after a restart the dispatcher reads the unacked backlog again
// and tracks its delayed entries anew.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "storage/managed_ledger.h"

namespace magnetar::broker {

// A set of ids (>= 0), appended mostly in increasing order and taken from the
// smallest. Runs of consecutive ids are stored as [varint(gap << 1 | 1)][varint(length - 2)],
// single ids as [varint(gap << 1)], gap = distance from the previous run's end. An id lower than
// the largest held re-encodes the set (O(size); the dispatcher reads entries in order, so this is
// rare). Thread: one owner.
class EntryIdRuns {
 public:
  // Adds id (>= 0); false when it was already there.
  bool add(int64_t id);
  int64_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Removes up to `max` smallest ids, calling f(id) for each in increasing order; returns how
  // many were taken.
  template <class F>
  size_t take(size_t max, F&& f) {
    size_t n = 0;
    while (n < max && (headLen_ > 0 || nextRun())) {
      int64_t k =
          static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(headLen_), max - n));
      for (int64_t i = 0; i < k; ++i) f(headStart_ + i);
      headStart_ += k;
      headLen_ -= k;
      n += static_cast<size_t>(k);
    }
    count_ -= static_cast<int64_t>(n);
    compact();
    return n;
  }
  // All ids held, in increasing order.
  std::vector<int64_t> toVector() const;
  // Heap and inline bytes used.
  size_t memoryBytes() const { return sizeof(*this) + bytes_.capacity(); }

 private:
  void flushTail();
  bool nextRun();  // loads the next run into head_; false when none is left
  void compact();  // drops consumed bytes
  void rebuild(const std::vector<int64_t>& ids);

  std::vector<uint8_t> bytes_;
  size_t readPos_ = 0;
  int64_t encPrevEnd_ = -1;  // last id of the last run written to bytes_
  int64_t decPrevEnd_ = -1;  // last id of the last run read from bytes_
  int64_t headStart_ = 0;    // the run being taken from (ids before bytes_[readPos_..])
  int64_t headLen_ = 0;
  int64_t tailStart_ = 0;  // the open run being appended to (ids after bytes_)
  int64_t tailLen_ = 0;
  int64_t count_ = 0;
};

// Thread: the dispatcher's (the topic's executor). Times are epoch milliseconds.
class DelayedDeliveryTracker {
 public:
  // tickTimeMs: delayedDeliveryTickTimeMillis (<= 0 read as 1); the bucket width is the largest
  // power of two not above it (Pulsar's timestamp precision). strict:
  // isDelayedDeliveryDeliverAtTimeStrict; when false an entry may go out up to tickTimeMs early.
  DelayedDeliveryTracker(int64_t tickTimeMs, bool strict);

  // Holds p back until deliverAtMs. False when it is due already (deliverAtMs <= cutoff): the
  // caller dispatches it now. True when held (also when it was held already; counted once).
  bool addMessage(storage::Position p, int64_t deliverAtMs, int64_t nowMs);
  // Some held entry is due at nowMs.
  bool hasMessageAvailable(int64_t nowMs) const;
  // Removes up to maxEntries due entries and appends them to out (earliest bucket first, then by
  // position); returns how many.
  size_t getScheduledMessages(int64_t nowMs, size_t maxEntries,
                              std::vector<storage::Position>* out);
  // Entries held (Pulsar's getNumberOfDelayedMessages, stats msgDelayed).
  int64_t getNumberOfDelayedMessages() const { return count_; }
  // When the earliest bucket falls due, as a time to compare with nowMs (the cutoff offset
  // already subtracted); nullopt when nothing is held.
  std::optional<int64_t> nextDueTime() const;
  void clear();
  // Bytes the tracker holds (buckets, ledgers and encoded ids), for stats and the benchmark.
  size_t memoryBytes() const;
  int64_t tickTimeMs() const { return tickTimeMs_; }

 private:
  struct LedgerIds {
    int64_t ledgerId;
    EntryIdRuns ids;
  };
  struct Bucket {
    EntryIdRuns packed;           // ledgerId << kEntryBits | entryId
    std::vector<LedgerIds> wide;  // positions that do not pack, sorted by ledger id
    bool empty() const { return packed.empty() && wide.empty(); }
  };
  static constexpr int kEntryBits = 40;
  static constexpr int64_t kMaxPackedLedger = int64_t{1} << (63 - kEntryBits);
  int64_t cutoff(int64_t nowMs) const { return strict_ ? nowMs : nowMs + tickTimeMs_; }

  int64_t tickTimeMs_;
  bool strict_;
  int bucketBits_;                     // bucket width = 1 << bucketBits_ ms
  std::map<int64_t, Bucket> buckets_;  // bucket index (deliver time rounded up) -> entries
  int64_t count_ = 0;
};

}  // namespace magnetar::broker
