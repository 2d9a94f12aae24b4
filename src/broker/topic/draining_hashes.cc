#include "broker/topic/internal/draining_hashes.h"

#include <algorithm>
#include <bit>

#include "base/dcheck.h"
#include "broker/topic/consumer.h"

namespace magnetar::broker {

const PendingSlot* PendingTable::find(int32_t hash) const {
  MAGNETAR_DCHECK(hash >= 0 && static_cast<size_t>(hash) < kKeySharedRangeSize);
  for (size_t i = home(hash);; i = (i + 1) & mask_) {
    const PendingSlot& s = slots_[i];
    if (s.hash == hash) return &s;
    if (s.hash == kEmpty) return nullptr;
  }
}

PendingSlot& PendingTable::insert(int32_t hash) {
  MAGNETAR_DCHECK(hash >= 0 && static_cast<size_t>(hash) < kKeySharedRangeSize);
  if (PendingSlot* s = find(hash)) return *s;  // present: no growth, pointers stay valid
  if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
  for (size_t i = home(hash);; i = (i + 1) & mask_) {
    PendingSlot& s = slots_[i];
    if (s.hash == hash) return s;
    if (s.hash == kEmpty) {
      s.hash = hash;
      ++size_;
      return s;
    }
  }
}

void PendingTable::erase(int32_t hash) {
  MAGNETAR_DCHECK(hash >= 0 && static_cast<size_t>(hash) < kKeySharedRangeSize);
  size_t i = home(hash);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].hash == hash) break;
    if (slots_[i].hash == kEmpty) return;
  }
  // Backward-shift deletion: move up each later entry of the run that may sit at the hole.
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (slots_[j].hash == kEmpty) break;
    const size_t h = home(slots_[j].hash);
    // j's entry can move to i when its home is not in the cyclic range (i, j].
    if (((j - h) & mask_) >= ((j - i) & mask_)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = PendingSlot{};
  --size_;
  if (slots_.size() > kMinCapacity && size_ * 8 < slots_.size()) rehash(slots_.size() / 2);
}

void PendingTable::clear() {
  slots_.assign(kMinCapacity, PendingSlot{});
  mask_ = kMinCapacity - 1;
  shift_ = 32 - std::countr_zero(kMinCapacity);
  size_ = 0;
}

void PendingTable::rehash(size_t capacity) {
  std::vector<PendingSlot> old(capacity);
  old.swap(slots_);
  mask_ = capacity - 1;
  shift_ = 32 - std::countr_zero(capacity);
  size_ = 0;
  for (const PendingSlot& s : old) {
    if (s.hash == kEmpty) continue;
    size_t i = home(s.hash);
    while (slots_[i].hash != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
    ++size_;
  }
}

void DrainingHashes::beginRescan() {
  previous_ = std::move(blocked_);
  blocked_.clear();
  table_.clear();
}

void DrainingHashes::pendingElsewhere(int32_t hash, Consumer* holder) {
  PendingSlot& s = table_.insert(hash);
  s.holder = holder;
  s.count++;
}

void DrainingHashes::endRescan() {
  table_.forEach([&](int32_t hash, const PendingSlot&) {
    auto it = previous_.find(hash);
    blocked_.emplace(hash, it == previous_.end() ? 0 : it->second);
  });
  previous_.clear();
}

bool DrainingHashes::released(int32_t hash) {
  PendingSlot* s = empty() ? nullptr : table_.find(hash);
  if (!s || --s->count > 0) return false;
  Consumer* holder = s->holder;
  table_.erase(hash);
  blocked_.erase(hash);
  ++clearedTotal_;
  if (holder) ++holder->drainingHashesClearedTotal;
  return true;
}

std::vector<DrainingHashInfo> DrainingHashes::snapshot() const {
  std::vector<DrainingHashInfo> out;
  table_.forEach([&](int32_t hash, const PendingSlot& s) {
    auto it = blocked_.find(hash);
    out.push_back(DrainingHashInfo{hash, s.holder, s.count, it == blocked_.end() ? 0 : it->second});
  });
  std::sort(out.begin(), out.end(),
            [](const DrainingHashInfo& a, const DrainingHashInfo& b) { return a.hash < b.hash; });
  return out;
}

}  // namespace magnetar::broker
