#include "storage/cursor_state.h"

#include <algorithm>
#include <bit>
#include <cstdint>

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
  // Ranges ending at or before p go; the rest of one straddling p starts right after p and is
  // folded in by collapse(), so the mark jumps to its end.
  int64_t runs = 0;
  acked_ -= clearThrough(p, &runs);
  rangeCount_ -= static_cast<size_t>(runs);
  markDelete_ = p;
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
  if (p <= markDelete_) return false;
  const LedgerInfo* info = ledgers.find(p.ledgerId);
  if (info == nullptr || p.entryId < 0 || p.entryId >= info->entries) return false;
  // Nothing after mark-delete is ever acked right after it (collapse() folds it in; ledgers go
  // only when consumed or empty), so only an ack of that entry moves the mark.
  const bool nextToMark = p.ledgerId == markDelete_.ledgerId
                              ? p.entryId == markDelete_.entryId + 1
                              : p.entryId == 0 && ledgers.next(markDelete_) == p;
  if (nextToMark) {
    markDelete_ = p;
    if (acked_ > 0) {
      collapse(ledgers);
    } else {
      pruneBatchDeleted();
    }
    return true;
  }
  LedgerAcks& acks = ledgerAcks(p.ledgerId, ledgers);
  if (acks.setRange(p.entryId, p.entryId, spares_) == 0) return false;  // already acked
  // Merges: the ranges ending right before p and starting right after it become one.
  const bool joinsBefore = p.entryId > 0 ? acks.test(p.entryId - 1) : testBit(acks.prevLast);
  const bool joinsAfter =
      p.entryId + 1 < info->entries ? acks.test(p.entryId + 1) : testBit(ledgers.next(p));
  rangeCount_ = rangeCount_ + 1 - (joinsBefore ? 1 : 0) - (joinsAfter ? 1 : 0);
  acked_++;
  if (!batchDeleted_.empty()) batchDeleted_.erase(p);
  return true;
}

void CursorState::collapse(const LedgerSet& ledgers) {
  for (;;) {
    Position next = ledgers.next(markDelete_);
    const LedgerAcks* acks = findLedger(next.ledgerId);
    if (acks == nullptr || !acks->test(next.entryId)) break;
    int64_t count = 0;
    size_t lastLedger = 0;
    const Position end =
        runEnd(static_cast<size_t>(acks - ledgerAcks_.data()), next.entryId, &count, &lastLedger);
    int64_t runs = 0;
    acked_ -= clearThrough(end, &runs);
    rangeCount_ -= static_cast<size_t>(runs);
    markDelete_ = end;
  }
  pruneBatchDeleted();
}

bool CursorState::isAcked(Position p) const { return p <= markDelete_ || testBit(p); }

void CursorState::reset(Position markDelete) {
  markDelete_ = markDelete;
  for (auto& acks : ledgerAcks_) {
    int64_t ends = 0;
    acks.clearThrough(INT64_MAX, &ends, spares_);
  }
  ledgerAcks_.clear();
  rangeCount_ = 0;
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
    const Position f = first <= markDelete_ ? ledgers.next(markDelete_) : first;
    for (auto it = ledgers.ledgers().lower_bound(f.ledgerId);
         it != ledgers.ledgers().end() && it->first <= last.ledgerId; ++it) {
      const int64_t lo = std::max<int64_t>(it->first == f.ledgerId ? f.entryId : 0, 0);
      const int64_t hi = std::min<int64_t>(it->first == last.ledgerId ? last.entryId : INT64_MAX,
                                           it->second.entries - 1);
      if (lo > hi) continue;
      acked_ += ledgerAcks(it->first, ledgers).setRange(lo, hi, spares_);
    }
  }
  rangeCount_ = 0;
  forEachRange([this](Position, const Range&) { ++rangeCount_; });
  collapse(ledgers);
}

void CursorState::restoreBatchDeleted(const std::vector<std::pair<Position, AckSet>>& sets,
                                      const LedgerSet& ledgers) {
  for (const auto& [p, s] : sets) {
    if (p <= markDelete_ || !ledgers.contains(p) || isAcked(p) || ackSetEmpty(s)) continue;
    batchDeleted_[p] = s;
  }
}

// --- the per-ledger bitsets ---

namespace {

// Bits [lo, hi] of a word (0 <= lo <= hi <= 63).
uint64_t bitsBetween(int lo, int hi) {
  const uint64_t upTo = hi == 63 ? ~uint64_t{0} : (uint64_t{1} << (hi + 1)) - 1;
  return upTo & (~uint64_t{0} << lo);
}

}  // namespace

void CursorState::ChunkQueue::emplace_front() {
  if (head_ == 0) {
    // Room for as many again in front: a run of acks going backwards costs O(1) each.
    const size_t room = std::max<size_t>(slots_.size(), 4);
    std::vector<std::unique_ptr<Chunk>> slots(room + slots_.size());
    std::move(slots_.begin(), slots_.end(), slots.begin() + static_cast<std::ptrdiff_t>(room));
    slots_ = std::move(slots);
    head_ = room;
  }
  slots_[--head_].reset();
}

void CursorState::ChunkQueue::pop_front() {
  slots_[head_++].reset();
  if (head_ == slots_.size()) {
    slots_.clear();
    head_ = 0;
  } else if (head_ >= 64 && head_ * 2 >= slots_.size()) {
    slots_.erase(slots_.begin(), slots_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

bool CursorState::LedgerAcks::test(int64_t entryId) const {
  if (entryId < 0) return false;
  const int64_t c = (entryId >> kChunkShift) - firstChunk;
  if (c < 0 || c >= static_cast<int64_t>(chunks.size())) return false;
  const Chunk* chunk = chunks[static_cast<size_t>(c)].get();
  if (chunk == nullptr) return false;
  const int64_t bit = entryId & (kChunkBits - 1);
  return (chunk->words[static_cast<size_t>(bit >> 6)] >> (bit & 63)) & 1;
}

int64_t CursorState::LedgerAcks::setRange(int64_t lo, int64_t hi, Spares& spares) {
  const int64_t firstNeeded = lo >> kChunkShift;
  const int64_t lastNeeded = hi >> kChunkShift;
  if (chunks.empty()) firstChunk = firstNeeded;
  while (firstChunk > firstNeeded) {
    chunks.emplace_front();
    --firstChunk;
  }
  while (firstChunk + static_cast<int64_t>(chunks.size()) <= lastNeeded) chunks.emplace_back();
  int64_t added = 0;
  for (int64_t e = lo; e <= hi;) {
    auto& slot = chunks[static_cast<size_t>((e >> kChunkShift) - firstChunk)];
    if (slot == nullptr) {
      if (spares.empty()) {
        slot = std::make_unique<Chunk>();
      } else {
        slot = std::move(spares.back());
        spares.pop_back();
      }
    }
    const int64_t bit = e & (kChunkBits - 1);
    const int64_t wordEnd = std::min<int64_t>(hi, e | 63);
    const uint64_t mask = bitsBetween(static_cast<int>(bit & 63),
                                      static_cast<int>(bit & 63) + static_cast<int>(wordEnd - e));
    uint64_t& word = slot->words[static_cast<size_t>(bit >> 6)];
    added += std::popcount(mask & ~word);
    word |= mask;
    e = wordEnd + 1;
  }
  return added;
}

int64_t CursorState::LedgerAcks::findSet(int64_t from) const {
  from = std::max<int64_t>({from, 0, firstChunk << kChunkShift});
  for (auto c = static_cast<size_t>((from >> kChunkShift) - firstChunk); c < chunks.size(); ++c) {
    const int64_t base = (firstChunk + static_cast<int64_t>(c)) << kChunkShift;
    const Chunk* chunk = chunks[c].get();
    if (chunk == nullptr) continue;
    int w = from > base ? static_cast<int>((from - base) >> 6) : 0;
    uint64_t word = chunk->words[static_cast<size_t>(w)];
    if (from > base) word &= ~uint64_t{0} << (from & 63);
    for (;;) {
      if (word != 0) return base + w * 64 + std::countr_zero(word);
      if (++w == kChunkWords) break;
      word = chunk->words[static_cast<size_t>(w)];
    }
  }
  return -1;
}

int64_t CursorState::LedgerAcks::findClear(int64_t from) const {
  from = std::max<int64_t>(from, 0);
  const int64_t end = (firstChunk + static_cast<int64_t>(chunks.size())) << kChunkShift;
  if (from < (firstChunk << kChunkShift) || from >= end) return from;
  for (auto c = static_cast<size_t>((from >> kChunkShift) - firstChunk); c < chunks.size(); ++c) {
    const int64_t base = (firstChunk + static_cast<int64_t>(c)) << kChunkShift;
    const Chunk* chunk = chunks[c].get();
    if (chunk == nullptr) return std::max(from, base);
    int w = from > base ? static_cast<int>((from - base) >> 6) : 0;
    uint64_t word = ~chunk->words[static_cast<size_t>(w)];
    if (from > base) word &= ~uint64_t{0} << (from & 63);
    for (;;) {
      if (word != 0) return base + w * 64 + std::countr_zero(word);
      if (++w == kChunkWords) break;
      word = ~chunk->words[static_cast<size_t>(w)];
    }
  }
  return end;
}

int64_t CursorState::LedgerAcks::clearThrough(int64_t upTo, int64_t* ends, Spares& spares) {
  int64_t cleared = 0;
  while (!chunks.empty() && (firstChunk << kChunkShift) <= upTo) {
    const int64_t base = firstChunk << kChunkShift;
    const bool whole = upTo - base >= kChunkBits - 1;
    if (Chunk* chunk = chunks.front().get(); chunk != nullptr) {
      const int words = whole ? kChunkWords : static_cast<int>((upTo - base) >> 6) + 1;
      for (int w = 0; w < words; ++w) {
        const uint64_t word = chunk->words[static_cast<size_t>(w)];
        if (word == 0) continue;
        // The bit after this word's last one: the next word's first, or the next chunk's.
        uint64_t after = 0;
        if (w + 1 < kChunkWords) {
          after = chunk->words[static_cast<size_t>(w) + 1] & 1;
        } else if (chunks.size() > 1 && chunks[1] != nullptr) {
          after = chunks[1]->words[0] & 1;
        }
        const uint64_t mask = whole || w + 1 < words
                                  ? ~uint64_t{0}
                                  : bitsBetween(0, static_cast<int>((upTo - base) & 63));
        const uint64_t runEnds = word & ~((word >> 1) | (after << 63));
        *ends += std::popcount(runEnds & mask);
        cleared += std::popcount(word & mask);
        chunk->words[static_cast<size_t>(w)] = word & ~mask;
      }
    }
    if (!whole) break;
    if (chunks.front() != nullptr && spares.size() < kSpareChunks) {
      spares.push_back(std::move(chunks.front()));  // all zero now
    }
    chunks.pop_front();
    ++firstChunk;
  }
  while (!chunks.empty() && chunks.front() == nullptr) {
    chunks.pop_front();
    ++firstChunk;
  }
  return cleared;
}

size_t CursorState::memoryBytes() const {
  size_t bytes = spares_.size() * sizeof(Chunk) + ledgerAcks_.capacity() * sizeof(LedgerAcks);
  for (const auto& acks : ledgerAcks_) {
    bytes += acks.chunks.slotBytes();
    for (size_t i = 0; i < acks.chunks.size(); ++i) {
      if (acks.chunks[i] != nullptr) bytes += sizeof(Chunk);
    }
  }
  return bytes;
}

const CursorState::LedgerAcks* CursorState::findLedger(int64_t ledgerId) const {
  auto it = std::lower_bound(ledgerAcks_.begin(), ledgerAcks_.end(), ledgerId,
                             [](const LedgerAcks& a, int64_t id) { return a.ledgerId < id; });
  return it != ledgerAcks_.end() && it->ledgerId == ledgerId ? &*it : nullptr;
}

CursorState::LedgerAcks& CursorState::ledgerAcks(int64_t ledgerId, const LedgerSet& ledgers) {
  auto it = std::lower_bound(ledgerAcks_.begin(), ledgerAcks_.end(), ledgerId,
                             [](const LedgerAcks& a, int64_t id) { return a.ledgerId < id; });
  if (it != ledgerAcks_.end() && it->ledgerId == ledgerId) return *it;
  LedgerAcks acks;
  acks.ledgerId = ledgerId;
  const auto& all = ledgers.ledgers();
  for (auto l = all.find(ledgerId); l != all.end() && l != all.begin();) {
    --l;
    if (l->second.entries > 0) {
      acks.prevLast = Position{l->first, l->second.entries - 1};
      break;
    }
  }
  return *ledgerAcks_.insert(it, std::move(acks));
}

bool CursorState::testBit(Position p) const {
  const LedgerAcks* acks = findLedger(p.ledgerId);
  return acks != nullptr && acks->test(p.entryId);
}

bool CursorState::joinsPrevious(size_t i) const {
  if (i == 0 || i >= ledgerAcks_.size()) return false;
  const LedgerAcks& acks = ledgerAcks_[i];
  const LedgerAcks& prev = ledgerAcks_[i - 1];
  return acks.prevLast.ledgerId == prev.ledgerId && prev.test(acks.prevLast.entryId) &&
         acks.test(0);
}

Position CursorState::runEnd(size_t i, int64_t entryId, int64_t* count, size_t* lastLedger) const {
  int64_t end = ledgerAcks_[i].findClear(entryId) - 1;
  *count = end - entryId + 1;
  // Across ledgers: the run went to the ledger's last entry and the next ledger's entry 0 is set.
  while (i + 1 < ledgerAcks_.size() && ledgerAcks_[i + 1].prevLast.entryId == end &&
         joinsPrevious(i + 1)) {
    ++i;
    end = ledgerAcks_[i].findClear(0) - 1;
    *count += end + 1;
  }
  *lastLedger = i;
  return Position{ledgerAcks_[i].ledgerId, end};
}

bool CursorState::nextRange(RangeScan& scan, Position* first, Range* range) const {
  for (; scan.ledger < ledgerAcks_.size(); ++scan.ledger, scan.entry = 0) {
    const int64_t start = ledgerAcks_[scan.ledger].findSet(scan.entry);
    if (start < 0) continue;
    *first = Position{ledgerAcks_[scan.ledger].ledgerId, start};
    range->last = runEnd(scan.ledger, start, &range->count, &scan.ledger);
    scan.entry = range->last.entryId + 1;
    return true;
  }
  return false;
}

int64_t CursorState::clearThrough(Position p, int64_t* runs) {
  int64_t cleared = 0;
  int64_t ends = 0;
  size_t i = 0;
  for (; i < ledgerAcks_.size() && ledgerAcks_[i].ledgerId <= p.ledgerId; ++i) {
    const int64_t upTo = ledgerAcks_[i].ledgerId < p.ledgerId ? INT64_MAX : p.entryId;
    // A run going on into the next ledger does not end at this ledger's last entry.
    if (joinsPrevious(i + 1) && ledgerAcks_[i + 1].prevLast.entryId <= upTo) --ends;
    cleared += ledgerAcks_[i].clearThrough(upTo, &ends, spares_);
  }
  // Only the last ledger cleared can keep bits (those after p).
  if (i > 0 && !ledgerAcks_[i - 1].chunks.empty()) --i;
  ledgerAcks_.erase(ledgerAcks_.begin(), ledgerAcks_.begin() + static_cast<std::ptrdiff_t>(i));
  *runs = ends;
  return cleared;
}

}  // namespace magnetar::storage
