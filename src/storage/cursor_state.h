// CursorState: a subscription's acknowledgement state, as in Pulsar's ManagedCursorImpl: a
// mark-delete position (everything <= it is acked) plus ranges of individually deleted (acked)
// positions after it. Ranges merge when adjacent and fold into the mark-delete position when they
// touch it. Adjacency follows the ledgers (the last entry of a ledger is followed by entry 0 of the
// next non-empty one). Thread: the owning ledger's executor only.
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

  // Cumulative ack up to and including p; p <= markDelete is a no-op. Returns true if it moved.
  bool markDeleteUpTo(Position p, const LedgerSet& ledgers);
  // Individual ack of an existing entry; ignored for positions <= markDelete, already acked, or not
  // stored. Returns true if the state changed.
  bool ack(Position p, const LedgerSet& ledgers);
  bool isAcked(Position p) const;
  // Sets the mark-delete position and clears all individual acks.
  void reset(Position markDelete);
  // Unacked stored entries in (markDelete, lastConfirmed].
  int64_t backlog(const LedgerSet& ledgers) const;
  // Restores persisted ranges (recovery): each [first, last] range; counts are recomputed.
  void restore(Position markDelete, const std::vector<std::pair<Position, Position>>& ranges,
               const LedgerSet& ledgers);

 private:
  // Folds ranges that start right after the mark-delete position into it.
  void collapse(const LedgerSet& ledgers);

  Position markDelete_;
  std::map<Position, Range> ranges_;
  int64_t acked_ = 0;
};

}  // namespace magnetar::storage
