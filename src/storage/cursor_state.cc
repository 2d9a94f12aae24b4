#include "storage/cursor_state.h"

namespace magnetar::storage {

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

bool CursorState::ack(Position p, const LedgerSet& ledgers) {
  if (p <= markDelete_ || !ledgers.contains(p) || isAcked(p)) return false;
  Position first = p;
  Range r{p, 1};
  // Merge with the range that ends right before p.
  auto after = ranges_.upper_bound(p);
  if (after != ranges_.begin()) {
    auto before = std::prev(after);
    if (ledgers.next(before->second.last) == p) {
      first = before->first;
      r.count += before->second.count;
      ranges_.erase(before);
    }
  }
  // Merge with the range that starts right after p.
  if (after != ranges_.end() && ledgers.next(p) == after->first) {
    r.last = after->second.last;
    r.count += after->second.count;
    ranges_.erase(after);
  }
  ranges_[first] = r;
  acked_++;
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

}  // namespace magnetar::storage
