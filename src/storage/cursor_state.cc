#include "storage/cursor_state.h"

#include <bit>

namespace magnetar::storage {

bool ackSetEmpty(const AckSet& s, int bits) {
  if (bits < 0) bits = static_cast<int>(s.size()) * 64;
  return ackSetCardinality(s, bits) == 0;
}

int ackSetCardinality(const AckSet& s, int bits) {
  int n = 0;
  for (size_t w = 0; w < s.size() && static_cast<int>(w) * 64 < bits; ++w) {
    uint64_t word = static_cast<uint64_t>(s[w]);
    int inWord = bits - static_cast<int>(w) * 64;
    if (inWord < 64) word &= (uint64_t{1} << inWord) - 1;
    n += std::popcount(word);
  }
  return n;
}

bool CursorState::markDeleteUpTo(Position p, const LedgerSet& ledgers) {
  if (p <= markDelete_) return false;
  markDelete_ = p;
  // Drop ranges now covered; a range straddling p is wholly acked, so the mark jumps to its end.
  while (!ranges_.empty() && ranges_.begin()->first <= markDelete_) {
    auto it = ranges_.begin();
    acked_ -= it->second.count;
    if (it->second.last > markDelete_) markDelete_ = it->second.last;
    ranges_.erase(it);
  }
  collapse(ledgers);
  return true;
}

bool CursorState::markDeleteWithAckSet(Position p, const AckSet& ackSet,
                                       const LedgerSet& ledgers) {
  if (p <= markDelete_) return false;
  if (isAcked(p)) return markDeleteUpTo(p, ledgers);
  AckSet merged = ackSet;
  if (auto it = batchDeleted_.find(p); it != batchDeleted_.end()) {
    for (size_t i = 0; i < merged.size(); ++i) {
      merged[i] &= i < it->second.size() ? it->second[i] : 0;
    }
  }
  if (ackSetEmpty(merged)) return markDeleteUpTo(p, ledgers);
  batchDeleted_[p] = std::move(merged);
  markDeleteUpTo(Position{p.ledgerId, p.entryId - 1}, ledgers);
  return true;
}

bool CursorState::ackBatchIndexes(Position p, const AckSet& ackSet, const LedgerSet& ledgers) {
  if (p <= markDelete_ || !ledgers.contains(p) || isAcked(p)) return false;
  auto [it, inserted] = batchDeleted_.emplace(p, ackSet);
  if (!inserted) {
    AckSet& cur = it->second;
    for (size_t i = 0; i < cur.size(); ++i) cur[i] &= i < ackSet.size() ? ackSet[i] : 0;
  }
  if (ackSetEmpty(it->second)) {
    batchDeleted_.erase(it);
    ack(p, ledgers);
  }
  return true;
}

const AckSet* CursorState::batchAckSet(Position p) const {
  auto it = batchDeleted_.find(p);
  return it == batchDeleted_.end() ? nullptr : &it->second;
}

void CursorState::pruneBatchDeleted() {
  while (!batchDeleted_.empty() && batchDeleted_.begin()->first <= markDelete_) {
    batchDeleted_.erase(batchDeleted_.begin());
  }
}

bool CursorState::ack(Position p, const LedgerSet& ledgers) {
  if (p <= markDelete_ || !ledgers.contains(p)) return false;
  // One lookup serves the "already acked" check and both merges; a range grows in place, so
  // acks that extend a range (the common case) allocate nothing.
  auto after = ranges_.upper_bound(p);
  auto before = after == ranges_.begin() ? ranges_.end() : std::prev(after);
  if (before != ranges_.end() && p <= before->second.last) return false;  // already acked
  const bool joinsBefore = before != ranges_.end() && ledgers.next(before->second.last) == p;
  const bool joinsAfter = after != ranges_.end() && ledgers.next(p) == after->first;
  if (joinsBefore) {
    before->second.last = p;
    before->second.count += 1;
    if (joinsAfter) {
      before->second.last = after->second.last;
      before->second.count += after->second.count;
      ranges_.erase(after);
    }
  } else if (joinsAfter) {
    // The range now starts at p: re-key its node rather than allocate a new one.
    auto node = ranges_.extract(after);
    node.key() = p;
    node.mapped().count += 1;
    ranges_.insert(std::move(node));
  } else {
    ranges_.emplace(p, Range{p, 1});
  }
  acked_++;
  if (!batchDeleted_.empty()) batchDeleted_.erase(p);
  collapse(ledgers);
  return true;
}

void CursorState::collapse(const LedgerSet& ledgers) {
  while (!ranges_.empty() && ranges_.begin()->first == ledgers.next(markDelete_)) {
    auto it = ranges_.begin();
    markDelete_ = it->second.last;
    acked_ -= it->second.count;
    ranges_.erase(it);
  }
  pruneBatchDeleted();
}

bool CursorState::isAcked(Position p) const {
  if (p <= markDelete_) return true;
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return false;
  --it;
  return p >= it->first && p <= it->second.last;
}

void CursorState::reset(Position markDelete) {
  markDelete_ = markDelete;
  ranges_.clear();
  acked_ = 0;
  batchDeleted_.clear();
  properties_.clear();
}

int64_t CursorState::backlog(const LedgerSet& ledgers) const {
  int64_t n = ledgers.count(markDelete_, ledgers.lastConfirmed()) - acked_;
  return n < 0 ? 0 : n;
}

void CursorState::restore(Position markDelete,
                          const std::vector<std::pair<Position, Position>>& ranges,
                          const LedgerSet& ledgers) {
  reset(markDelete);
  for (const auto& [first, last] : ranges) {
    if (last <= markDelete_ || last < first) continue;
    Position f = first <= markDelete_ ? ledgers.next(markDelete_) : first;
    int64_t n = ledgers.count(Position{f.ledgerId, f.entryId - 1}, last);
    if (n <= 0) continue;
    ranges_[f] = Range{last, n};
    acked_ += n;
  }
  collapse(ledgers);
}

void CursorState::restoreBatchDeleted(const std::vector<std::pair<Position, AckSet>>& sets,
                                      const LedgerSet& ledgers) {
  for (const auto& [p, s] : sets) {
    if (p <= markDelete_ || !ledgers.contains(p) || isAcked(p) || ackSetEmpty(s)) continue;
    batchDeleted_[p] = s;
  }
}

}  // namespace magnetar::storage
