#include "broker/topic/internal/key_shared_selector.h"

#include <algorithm>

#include "base/murmur3.h"
#include "broker/topic/consumer.h"

namespace magnetar::broker {

namespace {
// Pulsar's ConsistentHashingStickyKeyConsumerSelector hashes into Range.of(1, 65535).
constexpr uint32_t kConsistentStart = 1;
constexpr uint32_t kConsistentSize = kKeySharedRangeSize - 1;
}  // namespace

Status KeySharedSelector::addConsumer(Consumer* c) {
  if (ring_.empty() && sticky_.empty()) sticky_mode_ = !c->stickyRanges.empty();
  if (sticky_mode_) {
    if (c->stickyRanges.empty()) {
      return Status::invalidArgument("Ranges for KeyShared policy must not be empty.");
    }
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
  if (!consistentHashing_) return addSplitConsumer(c);
  // Name index: the lowest free slot among consumers with this name.
  auto& slots = nameIndexes_[c->name()];
  int index = static_cast<int>(std::find(slots.begin(), slots.end(), false) - slots.begin());
  if (index == static_cast<int>(slots.size())) slots.push_back(false);
  slots[index] = true;
  indexOf_[c] = index;
  // Ring point i: hash of name + '\0' + nameIndex + '\0' + i, as Pulsar.
  for (int i = 0; i < replicaPoints_; ++i) {
    std::string key = c->name();
    key += '\0';
    key += std::to_string(index);
    key += '\0';
    key += std::to_string(i);
    int32_t point = static_cast<int32_t>(stickyKeyHash(key, kConsistentStart, kConsistentSize));
    ring_[point].push_back(c);
  }
  rebuildPoints();
  return Status::ok();
}

Status KeySharedSelector::addSplitConsumer(Consumer* c) {
  if (splitRanges_.empty()) {
    splitRanges_[kKeySharedRangeSize] = c;
    splitEndOf_[c] = kKeySharedRangeSize;
    return Status::ok();
  }
  // The biggest range (the first of equal ones, in key order) is split; its upper half goes to
  // the new consumer.
  int32_t biggest = kKeySharedRangeSize;
  int32_t slots = 0;
  int32_t lower = 0;
  int32_t biggestLower = 0;
  for (auto& [end, owner] : splitRanges_) {
    if (end - lower > slots) {
      slots = end - lower;
      biggest = end;
      biggestLower = lower;
    }
    lower = end;
  }
  if (biggest - biggestLower <= 1) {
    return Status::invalidArgument("No more range can assigned to new consumer, assigned consumers " +
                                   std::to_string(splitRanges_.size()));
  }
  int32_t split = biggest - ((biggest - biggestLower) >> 1);
  splitRanges_[split] = c;
  splitEndOf_[c] = split;
  return Status::ok();
}

void KeySharedSelector::removeSplitConsumer(Consumer* c) {
  auto it = splitEndOf_.find(c);
  if (it == splitEndOf_.end()) return;
  int32_t end = it->second;
  splitEndOf_.erase(it);
  if (end == kKeySharedRangeSize && splitRanges_.size() > 1) {
    // The top range goes to the consumer just below it, which gives up its own end.
    auto below = std::prev(splitRanges_.find(end));
    Consumer* heir = below->second;
    splitRanges_.erase(below);
    splitRanges_[end] = heir;
    splitEndOf_[heir] = end;
  } else {
    splitRanges_.erase(end);
  }
}

void KeySharedSelector::removeConsumer(Consumer* c) {
  if (!consistentHashing_ && !sticky_mode_) {
    removeSplitConsumer(c);
    return;
  }
  for (auto it = ring_.begin(); it != ring_.end();) {
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), c), v.end());
    it = v.empty() ? ring_.erase(it) : std::next(it);
  }
  for (auto it = sticky_.begin(); it != sticky_.end();) {
    it = it->second.second == c ? sticky_.erase(it) : std::next(it);
  }
  if (auto it = indexOf_.find(c); it != indexOf_.end()) {
    auto slots = nameIndexes_.find(c->name());
    if (slots != nameIndexes_.end()) {
      slots->second[it->second] = false;
      if (std::find(slots->second.begin(), slots->second.end(), true) == slots->second.end()) {
        nameIndexes_.erase(slots);
      }
    }
    indexOf_.erase(it);
  }
  rebuildPoints();
}

void KeySharedSelector::rebuildPoints() {
  points_.clear();
  owners_.clear();
  for (auto& [p, v] : ring_) {
    points_.push_back(p);
    owners_.push_back(v.front());
  }
  bucketStart_.assign(kBuckets, 0);
  size_t i = 0;
  for (int32_t b = 0; b < kBuckets; ++b) {
    while (i < points_.size() && points_[i] < b * kBucketHashes) ++i;
    bucketStart_[b] = static_cast<uint32_t>(i);
  }
}

int32_t KeySharedSelector::hashOf(std::string_view key) const {
  if (sticky_mode_ || !consistentHashing_) return static_cast<int32_t>(stickyKeyHash(key));
  return static_cast<int32_t>(stickyKeyHash(key, kConsistentStart, kConsistentSize));
}

Consumer* KeySharedSelector::select(int32_t hash) const {
  if (sticky_mode_) {
    auto it = sticky_.upper_bound(hash);
    if (it == sticky_.begin()) return nullptr;
    --it;
    return hash <= it->second.first ? it->second.second : nullptr;
  }
  if (!consistentHashing_) {
    if (splitRanges_.empty()) return nullptr;
    // The range whose end is the first at or above hash % 65536 (Pulsar's ceilingEntry).
    return splitRanges_.lower_bound(hash % kKeySharedRangeSize)->second;
  }
  if (points_.empty() || hash < 0 || hash >= kKeySharedRangeSize) {
    if (points_.empty()) return nullptr;
    auto it = std::lower_bound(points_.begin(), points_.end(), hash);
    return owners_[it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin())];
  }
  // The first point at or after the hash (Pulsar's ceilingEntry), wrapping to the first point;
  // the search starts at the first point of the hash's bucket (bucketStart_).
  size_t i = bucketStart_[hash / kBucketHashes];
  while (i < points_.size() && points_[i] < hash) ++i;
  return owners_[i == points_.size() ? 0 : i];
}

std::vector<std::pair<int32_t, int32_t>> KeySharedSelector::rangesOf(const Consumer* c) const {
  std::vector<std::pair<int32_t, int32_t>> out;
  if (sticky_mode_) {
    for (auto& [s, e] : sticky_) {
      if (e.second == c) out.push_back({s, e.first});
    }
    return out;
  }
  if (!consistentHashing_) {
    // As Pulsar's getConsumerKeyHashRanges: [previous end + 1, end], the first from 0.
    int32_t start = 0;
    for (auto& [end, owner] : splitRanges_) {
      if (owner == c) out.push_back({start, end});
      start = end + 1;
    }
    return out;
  }
  if (points_.empty()) return out;
  // Point i owns (point i-1, point i]; the first point also owns the hashes after the last one.
  int32_t prev = static_cast<int32_t>(kConsistentStart) - 1;
  for (size_t i = 0; i < points_.size(); ++i) {
    if (owners_[i] == c) out.push_back({prev + 1, points_[i]});
    prev = points_[i];
  }
  const int32_t last = kKeySharedRangeSize - 1;
  if (owners_[0] == c && prev < last) out.push_back({prev + 1, last});
  return out;
}

}  // namespace magnetar::broker
