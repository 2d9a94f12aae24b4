// CursorState: a subscription's acknowledgement state, as in Pulsar's ManagedCursorImpl: a
// mark-delete position (everything <= it is acked) plus ranges of individually deleted (acked)
// positions after it. Ranges merge when adjacent and fold into the mark-delete position when they
// touch it. Adjacency follows the ledgers (the last entry of a ledger is followed by entry 0 of the
// next non-empty one). Partly acknowledged batch entries keep an ack set (Pulsar's
// batchDeletedIndexes, PIP-54), and the cursor keeps the properties of its last mark-delete that
// carried some. Thread: the owning ledger's executor only.
#pragma once

#include <cstdint>
#include <map>
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
  // Ranges keyed by their first position, in order.
  const std::map<Position, Range>& ranges() const { return ranges_; }
  // Number of stored entries that are individually acked (inside ranges).
  int64_t individuallyAcked() const { return acked_; }
  // Partly acked entries after the mark-delete position and their ack sets (bit set = unacked).
  const std::map<Position, AckSet>& batchDeleted() const { return batchDeleted_; }
  const AckSet* batchAckSet(Position p) const;
  const CursorProperties& properties() const { return properties_; }
  void setProperties(CursorProperties props) { properties_ = std::move(props); }

  // Cumulative ack up to and including p; p <= markDelete is a no-op. Returns true if it moved.
  bool markDeleteUpTo(Position p, const LedgerSet& ledgers);
  // Individual ack of an existing entry; ignored for positions <= markDelete, already acked, or not
  // stored. Returns true if the state changed.
  bool ack(Position p, const LedgerSet& ledgers);
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
  // Restores persisted ranges (recovery): each [first, last] range; counts are recomputed.
  void restore(Position markDelete, const std::vector<std::pair<Position, Position>>& ranges,
               const LedgerSet& ledgers);
  // Restores persisted ack sets (after restore); sets of acked or missing entries are dropped.
  void restoreBatchDeleted(const std::vector<std::pair<Position, AckSet>>& sets,
                           const LedgerSet& ledgers);

 private:
  // Folds ranges that start right after the mark-delete position into it.
  void collapse(const LedgerSet& ledgers);
  // Drops ack sets of entries at or before the mark-delete position.
  void pruneBatchDeleted();

  Position markDelete_;
  std::map<Position, Range> ranges_;
  int64_t acked_ = 0;
  std::map<Position, AckSet> batchDeleted_;
  CursorProperties properties_;
};


}  // namespace magnetar::storage
