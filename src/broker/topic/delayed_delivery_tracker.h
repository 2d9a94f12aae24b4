// DelayedDeliveryTracker: the entries a Shared or Key_Shared subscription holds back until their
// MessageMetadata.deliver_at_time (Pulsar's InMemoryDelayedDeliveryTracker). Entries are grouped
// by time bucket (deliver time rounded to the bucket width as Pulsar rounds it: down, or up when
// strict); inside a bucket the positions, packed as
// ledgerId << 40 | entryId, are kept as delta- and run-length-encoded varints (EntryIdRuns), so a
// delayed entry costs about 2-3 bytes (random delays) or next to nothing (runs of consecutive
// entries with one delay). Positions that do not pack (ledger id >= 2^23 or entry id >= 2^40) are
// kept per ledger instead.
// Nothing is written to storage: after a restart the dispatcher reads the unacked backlog again
// and tracks its delayed entries anew.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

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
//
// Pulsar's rules (InMemoryDelayedDeliveryTracker, 4.2), with tick T and bucket width W:
// - strict (isDelayedDeliveryDeliverAtTimeStrict): an entry is held while deliverAt > now; its
//   bucket (deliverAt rounded up to W) is due when its start is <= now: never early.
// - not strict: an entry with deliverAt <= now + T is not held at all; a bucket (deliverAt
//   rounded down to W) is due when its start <= now + T - W + 1, i.e. when every entry in it has
//   deliverAt <= now + T: an entry goes out at most T early.
// nextDueTime() is when a timer should wake the dispatcher. Pulsar's timer targets the first
// bucket's start on a wheel that ticks every T, so it fires anywhere in [start, start + T); ours
// wakes at the first held entry's own deliverAt (inside that window, and the bucket is due by
// then), so the earliest entry is never early and the others in the dispatch are at most T early.
class DelayedDeliveryTracker {
 public:
  // precisionTickMs: the broker's delayedDeliveryTickTimeMillis, which fixes the bucket width W:
  // the largest power of two not above it (Pulsar's timestamp precision; <= 0 read as 1). The
  // tick T starts at the same value (resetTickTime changes it). strict:
  // isDelayedDeliveryDeliverAtTimeStrict.
  DelayedDeliveryTracker(int64_t precisionTickMs, bool strict);

  // The tick T of the policy in force (topic > namespace > broker; Pulsar's resetTickTime, called
  // before each add); <= 0 read as 0. The bucket width stays.
  void resetTickTime(int64_t tickTimeMs) { tickTimeMs_ = std::max<int64_t>(0, tickTimeMs); }

  // Holds p back until deliverAtMs. False when it is due already (deliverAtMs <= cutoff): the
  // caller dispatches it now. True when held (also when it was held already; counted once).
  bool addMessage(storage::Position p, int64_t deliverAtMs, int64_t nowMs);
  // Some held entry is due at nowMs (the first bucket, by the rules above).
  bool hasMessageAvailable(int64_t nowMs) const;
  // Removes up to maxEntries due entries and appends them to out (earliest bucket first, then by
  // position); returns how many.
  size_t getScheduledMessages(int64_t nowMs, size_t maxEntries,
                              std::vector<storage::Position>* out);
  // Entries held (Pulsar's getNumberOfDelayedMessages, stats msgDelayed).
  int64_t getNumberOfDelayedMessages() const { return count_; }
  // When to wake the dispatcher for the first bucket (epoch ms, compared with nowMs): strict, its
  // start; else the later of its first entry's deliverAt and the time it falls due. nullopt when
  // nothing is held. hasMessageAvailable(nextDueTime()) is true.
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
    int64_t minDeliverAt = INT64_MAX;  // the earliest deliverAt added (for the timer)
    EntryIdRuns packed;                // ledgerId << kEntryBits | entryId
    std::vector<LedgerIds> wide;       // positions that do not pack, sorted by ledger id
    bool empty() const { return packed.empty() && wide.empty(); }
  };
  static constexpr int kEntryBits = 40;
  static constexpr int64_t kMaxPackedLedger = int64_t{1} << (63 - kEntryBits);
  int64_t cutoff(int64_t nowMs) const { return strict_ ? nowMs : nowMs + tickTimeMs_; }
  // The earliest nowMs at which the bucket of `index` is due.
  int64_t bucketDueAt(int64_t index) const;

  int64_t tickTimeMs_;
  bool strict_;
  int bucketBits_;                     // bucket width = 1 << bucketBits_ ms
  std::map<int64_t, Bucket> buckets_;  // bucket index (deliver time rounded) -> entries
  int64_t count_ = 0;
};

}  // namespace magnetar::broker
