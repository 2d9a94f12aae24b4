#include "broker/topic/delayed_delivery_tracker.h"

namespace magnetar::broker {

namespace {

void putVarint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t getVarint(const std::vector<uint8_t>& in, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t b = in[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

// Decodes one run at *pos after prevEnd; returns {start, length}.
std::pair<int64_t, int64_t> decodeRun(const std::vector<uint8_t>& in, size_t* pos,
                                      int64_t prevEnd) {
  uint64_t v = getVarint(in, pos);
  int64_t start = prevEnd + 1 + static_cast<int64_t>(v >> 1);
  int64_t len = (v & 1) ? static_cast<int64_t>(getVarint(in, pos)) + 2 : 1;
  return {start, len};
}

}  // namespace

bool EntryIdRuns::add(int64_t id) {
  // Empty: start over, so gaps never refer to ids taken before.
  if (count_ == 0) *this = EntryIdRuns();
  if (tailLen_ > 0 && id == tailStart_ + tailLen_) {
    ++tailLen_;
    ++count_;
    return true;
  }
  // The largest id held: the open run's end; else, with nothing left in bytes_, the head's end.
  std::optional<int64_t> last;
  if (tailLen_ > 0) {
    last = tailStart_ + tailLen_ - 1;
  } else if (headLen_ > 0) {
    last = headStart_ + headLen_ - 1;
  }
  if (!last || id > *last) {
    if (tailLen_ > 0) flushTail();
    tailStart_ = id;
    tailLen_ = 1;
    ++count_;
    return true;
  }
  std::vector<int64_t> ids = toVector();
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it != ids.end() && *it == id) return false;
  ids.insert(it, id);
  rebuild(ids);
  return true;
}

void EntryIdRuns::flushTail() {
  uint64_t gap = static_cast<uint64_t>(tailStart_ - (encPrevEnd_ + 1));
  if (tailLen_ == 1) {
    putVarint(bytes_, gap << 1);
  } else {
    putVarint(bytes_, (gap << 1) | 1);
    putVarint(bytes_, static_cast<uint64_t>(tailLen_ - 2));
  }
  encPrevEnd_ = tailStart_ + tailLen_ - 1;
  tailLen_ = 0;
}

bool EntryIdRuns::nextRun() {
  if (readPos_ < bytes_.size()) {
    auto [start, len] = decodeRun(bytes_, &readPos_, decPrevEnd_);
    headStart_ = start;
    headLen_ = len;
    decPrevEnd_ = start + len - 1;
    return true;
  }
  if (tailLen_ > 0) {
    headStart_ = tailStart_;
    headLen_ = tailLen_;
    tailLen_ = 0;
    // The tail was never encoded: later runs are written and read relative to its end.
    encPrevEnd_ = decPrevEnd_ = headStart_ + headLen_ - 1;
    return true;
  }
  return false;
}

void EntryIdRuns::compact() {
  if (readPos_ == 0) return;
  if (readPos_ == bytes_.size()) {
    bytes_.clear();
    readPos_ = 0;
    if (count_ == 0) bytes_.shrink_to_fit();
  } else if (readPos_ >= 4096 && readPos_ * 2 >= bytes_.size()) {
    bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(readPos_));
    readPos_ = 0;
  }
}

std::vector<int64_t> EntryIdRuns::toVector() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count_));
  for (int64_t i = 0; i < headLen_; ++i) out.push_back(headStart_ + i);
  size_t pos = readPos_;
  int64_t prevEnd = decPrevEnd_;
  while (pos < bytes_.size()) {
    auto [start, len] = decodeRun(bytes_, &pos, prevEnd);
    for (int64_t i = 0; i < len; ++i) out.push_back(start + i);
    prevEnd = start + len - 1;
  }
  for (int64_t i = 0; i < tailLen_; ++i) out.push_back(tailStart_ + i);
  return out;
}

void EntryIdRuns::rebuild(const std::vector<int64_t>& ids) {
  *this = EntryIdRuns();
  for (int64_t id : ids) add(id);
}

DelayedDeliveryTracker::DelayedDeliveryTracker(int64_t precisionTickMs, bool strict)
    : tickTimeMs_(std::max<int64_t>(0, precisionTickMs)), strict_(strict), bucketBits_(0) {
  while ((int64_t{2} << bucketBits_) <= precisionTickMs) ++bucketBits_;
}

int64_t DelayedDeliveryTracker::bucketDueAt(int64_t index) const {
  if (index > (INT64_MAX >> bucketBits_)) return INT64_MAX;  // rounded up past the last ms
  const int64_t start = index << bucketBits_;
  // Not strict: due when start <= now + T - W + 1 (Pulsar's getBucketCutoffTime).
  return strict_ ? start : start - tickTimeMs_ + (int64_t{1} << bucketBits_) - 1;
}

bool DelayedDeliveryTracker::addMessage(storage::Position p, int64_t deliverAtMs, int64_t nowMs) {
  if (deliverAtMs < 0 || deliverAtMs <= cutoff(nowMs)) return false;
  // Pulsar's roundTimestamp: strict rounds up (a bucket due at its start holds nothing later),
  // else down (its due rule covers the bucket's last millisecond).
  const int64_t width = int64_t{1} << bucketBits_;
  int64_t index = strict_ ? (deliverAtMs >> bucketBits_) + ((deliverAtMs & (width - 1)) != 0)
                          : deliverAtMs >> bucketBits_;
  Bucket& b = buckets_[index];
  b.minDeliverAt = std::min(b.minDeliverAt, deliverAtMs);
  if (p.ledgerId >= 0 && p.ledgerId < kMaxPackedLedger && p.entryId >= 0 &&
      p.entryId < (int64_t{1} << kEntryBits)) {
    if (b.packed.add(p.ledgerId << kEntryBits | p.entryId)) ++count_;
    return true;
  }
  auto& w = b.wide;
  auto it = std::lower_bound(w.begin(), w.end(), p.ledgerId,
                             [](const LedgerIds& l, int64_t id) { return l.ledgerId < id; });
  if (it == w.end() || it->ledgerId != p.ledgerId) it = w.insert(it, LedgerIds{p.ledgerId, {}});
  if (it->ids.add(p.entryId)) ++count_;
  return true;
}

std::optional<int64_t> DelayedDeliveryTracker::nextDueTime() const {
  if (buckets_.empty()) return std::nullopt;
  const auto& [index, bucket] = *buckets_.begin();
  int64_t due = bucketDueAt(index);
  return strict_ ? due : std::max(due, bucket.minDeliverAt);
}

bool DelayedDeliveryTracker::hasMessageAvailable(int64_t nowMs) const {
  return !buckets_.empty() && bucketDueAt(buckets_.begin()->first) <= nowMs;
}

size_t DelayedDeliveryTracker::getScheduledMessages(int64_t nowMs, size_t maxEntries,
                                                    std::vector<storage::Position>* out) {
  size_t n = 0;
  while (n < maxEntries && hasMessageAvailable(nowMs)) {
    auto first = buckets_.begin();
    Bucket& b = first->second;
    constexpr int64_t kEntryMask = (int64_t{1} << kEntryBits) - 1;
    n += b.packed.take(maxEntries - n, [&](int64_t key) {
      out->push_back({key >> kEntryBits, key & kEntryMask});
    });
    for (auto& l : b.wide) {
      if (n >= maxEntries) break;
      int64_t ledger = l.ledgerId;
      n += l.ids.take(maxEntries - n, [&](int64_t e) { out->push_back({ledger, e}); });
    }
    std::erase_if(b.wide, [](const LedgerIds& l) { return l.ids.empty(); });
    if (b.empty()) buckets_.erase(first);
  }
  count_ -= static_cast<int64_t>(n);
  return n;
}

void DelayedDeliveryTracker::clear() {
  buckets_.clear();
  count_ = 0;
}

size_t DelayedDeliveryTracker::memoryBytes() const {
  // A std::map node: the value plus three pointers and the colour.
  constexpr size_t kMapNode = 4 * sizeof(void*);
  size_t bytes = sizeof(*this);
  for (const auto& [_, b] : buckets_) {
    bytes += kMapNode + sizeof(int64_t) + sizeof(Bucket) - sizeof(EntryIdRuns) +
             b.packed.memoryBytes() + (b.wide.capacity() - b.wide.size()) * sizeof(LedgerIds);
    for (const auto& l : b.wide) bytes += sizeof(l.ledgerId) + l.ids.memoryBytes();
  }
  return bytes;
}

}  // namespace magnetar::broker
