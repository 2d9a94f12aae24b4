#include "storage/ledger_set.h"

#include <algorithm>
#include <cassert>

namespace magnetar::storage {

void LedgerSet::addLedger(int64_t ledgerId, int64_t createdMs) {
  addLedger(LedgerInfo{ledgerId, 0, 0, createdMs});
}

void LedgerSet::addLedger(const LedgerInfo& info) {
  assert(ledgers_.empty() || info.ledgerId > ledgers_.rbegin()->first);
  ledgers_.emplace(info.ledgerId, info);
  totalEntries_ += info.entries;
  totalBytes_ += info.sizeBytes;
}

Position LedgerSet::addEntry(int64_t bytes) {
  assert(!ledgers_.empty());
  LedgerInfo& cur = ledgers_.rbegin()->second;
  Position p{cur.ledgerId, cur.entries};
  cur.entries++;
  cur.sizeBytes += bytes;
  totalEntries_++;
  totalBytes_ += bytes;
  return p;
}

void LedgerSet::removeLedger(int64_t ledgerId) {
  auto it = ledgers_.find(ledgerId);
  if (it == ledgers_.end()) return;
  totalEntries_ -= it->second.entries;
  totalBytes_ -= it->second.sizeBytes;
  ledgers_.erase(it);
}

const LedgerInfo* LedgerSet::current() const {
  return ledgers_.empty() ? nullptr : &ledgers_.rbegin()->second;
}

const LedgerInfo* LedgerSet::find(int64_t ledgerId) const {
  auto it = ledgers_.find(ledgerId);
  return it == ledgers_.end() ? nullptr : &it->second;
}

Position LedgerSet::lastConfirmed() const {
  if (ledgers_.empty()) return Position{-1, -1};
  const LedgerInfo& cur = ledgers_.rbegin()->second;
  return Position{cur.ledgerId, cur.entries - 1};
}

bool LedgerSet::contains(Position p) const {
  const LedgerInfo* l = find(p.ledgerId);
  return l && p.entryId >= 0 && p.entryId < l->entries;
}

Position LedgerSet::ceil(Position p) const {
  if (ledgers_.empty()) return Position{-1, -1};
  for (auto it = ledgers_.lower_bound(p.ledgerId); it != ledgers_.end(); ++it) {
    const LedgerInfo& l = it->second;
    int64_t e = l.ledgerId == p.ledgerId ? std::max<int64_t>(p.entryId, 0) : 0;
    if (e < l.entries) return Position{l.ledgerId, e};
  }
  const LedgerInfo& cur = ledgers_.rbegin()->second;
  return Position{cur.ledgerId, cur.entries};
}

Position LedgerSet::next(Position p) const { return ceil(Position{p.ledgerId, p.entryId + 1}); }

std::vector<LedgerStats> LedgerSet::stats() const {
  std::vector<LedgerStats> out;
  for (const auto& [id, l] : ledgers_) out.push_back(LedgerStats{id, l.entries, l.sizeBytes});
  return out;
}

int64_t LedgerSet::count(Position fromExclusive, Position toInclusive) const {
  if (toInclusive <= fromExclusive) return 0;
  int64_t n = 0;
  for (auto it = ledgers_.lower_bound(fromExclusive.ledgerId);
       it != ledgers_.end() && it->first <= toInclusive.ledgerId; ++it) {
    const LedgerInfo& l = it->second;
    int64_t lo = l.ledgerId == fromExclusive.ledgerId ? fromExclusive.entryId + 1 : 0;
    int64_t hi = l.ledgerId == toInclusive.ledgerId ? toInclusive.entryId : l.entries - 1;
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, l.entries - 1);
    if (hi >= lo) n += hi - lo + 1;
  }
  return n;
}

}  // namespace magnetar::storage
