// LedgerIndex: where a ledger's entries are in the journal, as runs (one journal record each:
// entries [first, first+count) at segment/offset/length). Runs are contiguous and ordered. Lookups
// give the records to read for an entry range. Thread: the owning ledger's executor.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/journal_format.h"

namespace magnetar::storage {

class LedgerIndex {
 public:
  // Appends a run. REQUIRES: run.firstEntryId == entries().
  void add(const JournalRun& run) { runs_.push_back(run); }
  // Entries covered: 0 .. entries()-1.
  int64_t entries() const {
    return runs_.empty() ? 0 : runs_.back().firstEntryId + runs_.back().count;
  }
  int64_t dataBytes() const;
  const std::vector<JournalRun>& runs() const { return runs_; }
  // Runs holding entries from `fromEntry` on, until about maxBytes of entry data or maxEntries
  // entries are covered (at least one run).
  std::vector<JournalRun> runsFrom(int64_t fromEntry, int64_t maxEntries, int64_t maxBytes) const;
  // Points the run that starts at from.firstEntryId and lies at from's segment and offset to
  // (segment, offset) instead (a compaction copied it). False if there is no such run.
  bool relocate(const JournalRun& from, uint64_t segment, uint64_t offset);
  // Keeps only entries < count (a ledger closed after a failed write).
  void truncate(int64_t count);

 private:
  std::vector<JournalRun> runs_;
};

}  // namespace magnetar::storage
