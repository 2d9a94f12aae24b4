// LedgerSet: the ordered list of a topic's ledgers (id, entry count, bytes) and the position
// arithmetic over them (next valid position, counts between positions). Shared by the in-memory and
// the durable managed ledger. Thread: the owning ledger's executor only (no locking).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "storage/managed_ledger.h"

namespace magnetar::storage {

struct LedgerInfo {
  int64_t ledgerId = -1;
  int64_t entries = 0;    // entry ids 0 .. entries-1 exist
  int64_t sizeBytes = 0;  // sum of entry sizes
  int64_t createdMs = 0;  // wall clock (ms since epoch) when the ledger was opened
};

class LedgerSet {
 public:
  // Appends a new (empty) ledger; it becomes the current one. REQUIRES: id > every existing id.
  void addLedger(int64_t ledgerId, int64_t createdMs);
  // Restores a ledger (recovery). REQUIRES: id > every existing id.
  void addLedger(const LedgerInfo& info);
  // Counts one more entry of `bytes` in the current ledger; returns its position.
  Position addEntry(int64_t bytes);
  // Forgets a ledger (trim or delete). The current ledger is never removed this way.
  void removeLedger(int64_t ledgerId);

  bool empty() const { return ledgers_.empty(); }
  int64_t currentLedgerId() const { return ledgers_.empty() ? -1 : ledgers_.rbegin()->first; }
  const LedgerInfo* current() const;
  const LedgerInfo* find(int64_t ledgerId) const;
  const std::map<int64_t, LedgerInfo>& ledgers() const { return ledgers_; }

  // Last stored entry of the current ledger; {currentLedger, -1} when it is empty.
  Position lastConfirmed() const;
  // True if the entry exists (its ledger is present and entryId < entries).
  bool contains(Position p) const;
  // First existing position strictly after p; the position after the last entry
  // ({current, entries}) when there is none.
  Position next(Position p) const;
  // First existing position >= p, or the end position as in next().
  Position ceil(Position p) const;
  // First stored position, or the end position when the log holds no entries.
  Position first() const { return ceil(Position{-1, -1}); }
  // Existing entries in (fromExclusive, toInclusive]; 0 when to <= from.
  int64_t count(Position fromExclusive, Position toInclusive) const;
  // Every ledger, oldest first (admin internalStats).
  std::vector<LedgerStats> stats() const;
  int64_t totalEntries() const { return totalEntries_; }
  int64_t totalBytes() const { return totalBytes_; }

 private:
  std::map<int64_t, LedgerInfo> ledgers_;
  int64_t totalEntries_ = 0;
  int64_t totalBytes_ = 0;
};

}  // namespace magnetar::storage
