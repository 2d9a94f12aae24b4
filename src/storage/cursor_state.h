// CursorState: a subscription's acknowledgement state, as in Pulsar's ManagedCursorImpl: a
// mark-delete position (everything <= it is acked) plus ranges of individually deleted (acked)
// positions after it. Ranges merge when adjacent and fold into the mark-delete position when they
// touch it. Adjacency follows the ledgers (the last entry of a ledger is followed by entry 0 of the
// next non-empty one). Partly acknowledged batch entries keep an ack set (Pulsar's
// batchDeletedIndexes, PIP-54), and the cursor keeps the properties of its last mark-delete that
// carried some. Thread: the owning ledger's executor only.
//
// Individually acked entries are kept as Pulsar's ConcurrentOpenLongPairRangeSet keeps them (the
// individualDeletedMessages of ManagedCursorImpl, behind RangeSetWrapper): per ledger a bitset of
// entry ids, not a tree of ranges. ack() and isAcked() are O(1) and allocate nothing once the
// ledger's chunk is there; ranges are the maximal runs of set bits, found by scanning words.
// Memory: per ledger holding an acked entry after mark-delete, one 512-byte chunk (4096 entry
// ids) per 4096-id span that holds an acked entry, and one 8-byte slot per 4096 ids between the
// ledger's first and last such chunk (an ack 10M entries ahead of mark-delete costs one chunk and
// ~20 KB of empty slots, not 10M bits). Chunks before mark-delete are freed as it advances and
// up to kSpareChunks of them are kept for reuse.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/ledger_set.h"
#include "storage/managed_ledger.h"

namespace magnetar::storage {

class CursorState {
 public:
  // A closed range [first, last] of acked positions and how many stored entries it holds.
  struct Range {
    Position last;
    int64_t count = 0;
  };

  explicit CursorState(Position markDelete = Position{-1, -1}) : markDelete_(markDelete) {}

  Position markDelete() const { return markDelete_; }
  // Number of ranges of individually acked entries after mark-delete (kept as acks come, O(1)).
  size_t rangeCount() const { return rangeCount_; }
  // Calls f(first, range) for every range, in order. f returns void, or bool: false stops.
  // O(ids between the first and the last acked entry / 64).
  template <typename F>
  void forEachRange(F&& f) const {
    RangeScan scan;
    Position first;
    Range r;
    while (nextRange(scan, &first, &r)) {
      if constexpr (std::is_same_v<std::invoke_result_t<F&, Position, const Range&>, bool>) {
        if (!f(first, r)) return;
      } else {
        f(first, r);
      }
    }
  }
  // Bytes held for the individually acked entries (chunks, slots, spare chunks); O(chunks).
  size_t memoryBytes() const;
  // Number of stored entries that are individually acked (inside ranges).
  int64_t individuallyAcked() const { return acked_; }
  // Partly acked entries after the mark-delete position and their ack sets (bit set = unacked).
  const std::map<Position, AckSet>& batchDeleted() const { return batchDeleted_; }
  const AckSet* batchAckSet(Position p) const;
  const CursorProperties& properties() const { return properties_; }
  void setProperties(CursorProperties props) { properties_ = std::move(props); }

  // Cumulative ack up to and including p; p <= markDelete is a no-op. A range straddling p is
  // wholly acked, so the mark jumps to its end. Returns true if it moved.
  bool markDeleteUpTo(Position p, const LedgerSet& ledgers);
  // Individual ack of an existing entry; ignored for positions <= markDelete, already acked, or not
  // stored. Returns true if the state changed.
  bool ack(Position p, const LedgerSet& ledgers);
  // True for positions <= markDelete and individually acked (stored) entries.
  bool isAcked(Position p) const;
  // Batch-index ack of an existing entry: ANDs ackSet into the entry's set; an empty result acks
  // the entry. Ignored for acked or missing entries. Returns true if the state changed.
  bool ackBatchIndexes(Position p, const AckSet& ackSet, const LedgerSet& ledgers);
  // Cumulative ack ending inside batch entry p: mark-delete moves to just before p and p keeps
  // the merged set (or the mark moves over p when no index is left). True if anything changed.
  bool markDeleteWithAckSet(Position p, const AckSet& ackSet, const LedgerSet& ledgers);
  // Sets the mark-delete position and clears all individual and batch-index acks and properties.
  void reset(Position markDelete);
  // Unacked stored entries in (markDelete, lastConfirmed].
  int64_t backlog(const LedgerSet& ledgers) const;
  // Restores persisted ranges (recovery): each [first, last] range; only its stored entries count
  // (the ranges read back afterwards start and end at stored entries).
  void restore(Position markDelete, const std::vector<std::pair<Position, Position>>& ranges,
               const LedgerSet& ledgers);
  // Restores persisted ack sets (after restore); sets of acked or missing entries are dropped.
  void restoreBatchDeleted(const std::vector<std::pair<Position, AckSet>>& sets,
                           const LedgerSet& ledgers);

 private:
  static constexpr int kChunkShift = 12;  // 4096 entry ids per chunk
  static constexpr int64_t kChunkBits = int64_t{1} << kChunkShift;
  static constexpr int kChunkWords = static_cast<int>(kChunkBits / 64);
  static constexpr size_t kSpareChunks = 16;
  struct Chunk {
    std::array<uint64_t, kChunkWords> words{};
  };
  using Spares = std::vector<std::unique_ptr<Chunk>>;
  // A deque of chunk slots over one vector (cheap to move, unlike std::deque): popped slots stay
  // in front of head_ until they are half of the vector.
  class ChunkQueue {
   public:
    size_t size() const { return slots_.size() - head_; }
    bool empty() const { return size() == 0; }
    std::unique_ptr<Chunk>& operator[](size_t i) { return slots_[head_ + i]; }
    const std::unique_ptr<Chunk>& operator[](size_t i) const { return slots_[head_ + i]; }
    std::unique_ptr<Chunk>& front() { return slots_[head_]; }
    void emplace_back() { slots_.emplace_back(); }
    void emplace_front();
    void pop_front();
    size_t slotBytes() const { return slots_.capacity() * sizeof(slots_[0]); }

   private:
    std::vector<std::unique_ptr<Chunk>> slots_;
    size_t head_ = 0;
  };

  // The acked entry ids of one ledger, all after mark-delete: chunks[i] covers ids
  // [(firstChunk + i) * 4096, +4096); null when none of them is acked.
  struct LedgerAcks {
    int64_t ledgerId = -1;
    // The stored position before entry 0 (last entry of the previous non-empty ledger, fixed
    // once this ledger has entries), or {-1, -1}: entry 0 continues a range ending there.
    Position prevLast{-1, -1};
    int64_t firstChunk = 0;
    ChunkQueue chunks;

    bool test(int64_t entryId) const;
    // Sets bits [lo, hi]; returns how many were not set.
    int64_t setRange(int64_t lo, int64_t hi, Spares& spares);
    // First set id >= from, or -1.
    int64_t findSet(int64_t from) const;
    // First clear id >= from.
    int64_t findClear(int64_t from) const;
    // Clears ids <= upTo and frees the chunks before it; returns how many bits were set. Adds to
    // *ends the cleared ids whose next id is not set (ends of runs inside this ledger).
    int64_t clearThrough(int64_t upTo, int64_t* ends, Spares& spares);
  };
  struct RangeScan {
    size_t ledger = 0;
    int64_t entry = 0;
  };

  bool nextRange(RangeScan& scan, Position* first, Range* range) const;
  const LedgerAcks* findLedger(int64_t ledgerId) const;
  LedgerAcks& ledgerAcks(int64_t ledgerId, const LedgerSet& ledgers);
  bool testBit(Position p) const;
  // True if entry 0 of ledgerAcks_[i] is acked and continues the run ending at its prevLast.
  bool joinsPrevious(size_t i) const;
  // Last position of the run that starts at set bit {ledgerAcks_[i], entryId}; *count its size.
  Position runEnd(size_t i, int64_t entryId, int64_t* count, size_t* lastLedger) const;
  // Clears every acked position <= p; returns how many, and in *runs how many runs ended there.
  int64_t clearThrough(Position p, int64_t* runs);
  // Folds ranges that start right after the mark-delete position into it.
  void collapse(const LedgerSet& ledgers);
  // Drops ack sets of entries at or before the mark-delete position.
  void pruneBatchDeleted();

  Position markDelete_;
  std::vector<LedgerAcks> ledgerAcks_;  // by ledger id
  Spares spares_;
  size_t rangeCount_ = 0;
  int64_t acked_ = 0;
  std::map<Position, AckSet> batchDeleted_;
  CursorProperties properties_;
};

}  // namespace magnetar::storage
