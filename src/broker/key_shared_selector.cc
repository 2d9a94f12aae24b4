#include "broker/key_shared_selector.h"

#include <algorithm>

#include "base/murmur3.h"
#include "broker/consumer.h"

namespace magnetar::broker {

Status KeySharedSelector::addConsumer(Consumer* c) {
  if (!c->stickyRanges.empty()) {
    for (auto [s, e] : c->stickyRanges) {
      if (s < 0 || e >= kKeySharedRangeSize || s > e) {
        return Status::invalidArgument("Ranges for KeyShared policy must be in [0, 65535]");
      }
      for (auto& [os, oe] : sticky_) {
        if (s <= oe.first && os <= e) {
          return Status::invalidArgument("Range conflict with consumer " + oe.second->name());
        }
      }
    }
    for (auto [s, e] : c->stickyRanges) sticky_[s] = {e, c};
    return Status::ok();
  }
  // Points on the ring from the consumer's name and id, as Pulsar's consistent-hashing selector.
  for (int i = 0; i < replicaPoints_; ++i) {
    std::string key = c->name() + std::to_string(c->id()) + std::to_string(i);
    int32_t point = static_cast<int32_t>(stickyKeyHash(key));
    ring_[point].push_back(c);
  }
  return Status::ok();
}

void KeySharedSelector::removeConsumer(Consumer* c) {
  for (auto it = ring_.begin(); it != ring_.end();) {
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c), v.end());
    it = v.empty() ? ring_.erase(it) : std::next(it);
  }
  for (auto it = sticky_.begin(); it != sticky_.end();) {
    it = it->second.second == c ? sticky_.erase(it) : std::next(it);
  }
}

Consumer* KeySharedSelector::select(int32_t hash) const {
  if (!sticky_.empty()) {
    auto it = sticky_.upper_bound(hash);
    if (it == sticky_.begin()) return nullptr;
    --it;
    return hash <= it->second.first ? it->second.second : nullptr;
  }
  if (ring_.empty()) return nullptr;
  auto it = ring_.lower_bound(hash);
  if (it == ring_.end()) it = ring_.begin();
  const auto& v = it->second;
  // Several consumers on one point: pick deterministically by hash.
  return v[static_cast<size_t>(hash) % v.size()];
}

std::vector<std::pair<int32_t, int32_t>> KeySharedSelector::rangesOf(const Consumer* c) const {
  std::vector<std::pair<int32_t, int32_t>> out;
  if (!sticky_.empty()) {
    for (auto& [s, e] : sticky_) {
      if (e.second == c) out.push_back({s, e.first});
    }
    return out;
  }
  // A ring point p owns (previous point, p].
  int32_t prev = ring_.empty() ? 0 : ring_.rbegin()->first - kKeySharedRangeSize;
  for (auto& [p, v] : ring_) {
    if (std::find(v.begin(), v.end(), c) != v.end()) {
      int32_t start = prev + 1;
      if (start < 0) {
        out.push_back({start + kKeySharedRangeSize, kKeySharedRangeSize - 1});
        start = 0;
      }
      out.push_back({start, p});
    }
    prev = p;
  }
  return out;
}

}  // namespace magnetar::broker
