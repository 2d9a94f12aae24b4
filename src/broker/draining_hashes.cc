#include "broker/draining_hashes.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "broker/consumer.h"

namespace magnetar::broker {

PendingTable::PendingTable()
    : slots_(static_cast<PendingSlot*>(std::calloc(kKeySharedRangeSize, sizeof(PendingSlot)))) {
  if (!slots_) throw std::bad_alloc();
}

void PendingTable::Free::operator()(PendingSlot* p) const { std::free(p); }

void DrainingHashes::rescan(const PendingTable& pending, const KeySharedSelector& selector) {
  std::unordered_map<int32_t, uint32_t> next;
  for (size_t h = 0; h < pending.size(); ++h) {
    const auto& [holder, count] = pending[h];
    if (count <= 0 || holder == nullptr) continue;
    int32_t hash = static_cast<int32_t>(h);
    if (selector.select(hash) == holder) continue;
    auto it = hashes_.find(hash);
    next.emplace(hash, it == hashes_.end() ? 0 : it->second);
  }
  hashes_ = std::move(next);
}

void DrainingHashes::released(int32_t hash, Consumer* holder) {
  auto it = hashes_.find(hash);
  if (it == hashes_.end()) return;
  hashes_.erase(it);
  ++clearedTotal_;
  if (holder) ++holder->drainingHashesClearedTotal;
}

std::vector<DrainingHashInfo> DrainingHashes::snapshot(const PendingTable& pending,
                                                       const KeySharedSelector& selector) const {
  std::vector<DrainingHashInfo> out;
  for (const auto& [hash, blocked] : hashes_) {
    const auto& [holder, count] = pending[static_cast<size_t>(hash)];
    if (count <= 0 || holder == nullptr || selector.select(hash) == holder) continue;
    out.push_back(DrainingHashInfo{hash, holder, count, blocked});
  }
  std::sort(out.begin(), out.end(),
            [](const DrainingHashInfo& a, const DrainingHashInfo& b) { return a.hash < b.hash; });
  return out;
}

}  // namespace magnetar::broker
