#include "storage/ledger_index.h"

#include <algorithm>

namespace magnetar::storage {

int64_t LedgerIndex::dataBytes() const {
  int64_t n = 0;
  for (const auto& r : runs_) n += r.dataBytes;
  return n;
}

bool LedgerIndex::relocate(const JournalRun& from, uint64_t segment, uint64_t offset) {
  auto it = std::lower_bound(runs_.begin(), runs_.end(), from.firstEntryId,
                             [](const JournalRun& r, int64_t e) { return r.firstEntryId < e; });
  if (it == runs_.end() || it->firstEntryId != from.firstEntryId || it->segment != from.segment ||
      it->offset != from.offset) {
    return false;
  }
  it->segment = segment;
  it->offset = offset;
  return true;
}

std::vector<JournalRun> LedgerIndex::runsFrom(int64_t fromEntry, int64_t maxEntries,
                                              int64_t maxBytes) const {
  std::vector<JournalRun> out;
  auto it = std::upper_bound(runs_.begin(), runs_.end(), fromEntry,
                             [](int64_t e, const JournalRun& r) { return e < r.firstEntryId; });
  if (it == runs_.begin()) return out;
  --it;
  int64_t entries = 0, bytes = 0;
  for (; it != runs_.end(); ++it) {
    if (it->firstEntryId + it->count <= fromEntry) continue;
    out.push_back(*it);
    int64_t skipped = std::max<int64_t>(0, fromEntry - it->firstEntryId);
    entries += it->count - skipped;
    bytes += it->dataBytes;
    if (entries >= maxEntries || bytes >= maxBytes) break;
  }
  return out;
}

void LedgerIndex::truncate(int64_t count) {
  while (!runs_.empty() && runs_.back().firstEntryId >= count) runs_.pop_back();
  if (!runs_.empty() && entries() > count) {
    // Keep the record; readers skip entries beyond the ledger's count.
    runs_.back().count = static_cast<int32_t>(count - runs_.back().firstEntryId);
  }
}

}  // namespace magnetar::storage
