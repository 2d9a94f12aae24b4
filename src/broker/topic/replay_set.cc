#include "broker/topic/replay_set.h"

#include <algorithm>

namespace magnetar::broker {

using storage::Position;

bool ReplaySet::add(Position p, int32_t hash, Group group) {
  auto [it, inserted] = all_.emplace(p, hash);
  if (!inserted) return false;
  if (hash < 0) {
    any_.emplace(p, hash);
    return true;
  }
  auto [h, fresh] = byHash_.try_emplace(hash);
  if (fresh) {
    h->second.group = group;
    recordAdded(hash);
  }
  // The entries of one hash share a group: a newcomer joins the others (regroupHash moves all).
  h->second.positions.insert(p);
  groups_[h->second.group].emplace(p, hash);
  return true;
}

void ReplaySet::clear() {
  all_.clear();
  any_.clear();
  groups_.clear();
  byHash_.clear();
  std::fill(bits_.begin(), bits_.end(), 0);
  bucketShared_.clear();
}

void ReplaySet::recordAdded(int32_t hash) {
  const auto b = static_cast<uint32_t>(hash) % kBuckets;
  if (mayHave(hash)) {
    ++bucketShared_[b];
    return;
  }
  bits_[b / 64] |= uint64_t{1} << (b % 64);
}

void ReplaySet::recordErased(int32_t hash) {
  const auto b = static_cast<uint32_t>(hash) % kBuckets;
  if (auto s = bucketShared_.find(b); s != bucketShared_.end()) {
    if (--s->second == 0) bucketShared_.erase(s);
    return;
  }
  bits_[b / 64] &= ~(uint64_t{1} << (b % 64));
}

bool ReplaySet::hasOlder(int32_t hash, Position p) const {
  if (!mayHave(hash)) return false;
  auto h = byHash_.find(hash);
  return h != byHash_.end() && *h->second.positions.begin() < p;
}

size_t ReplaySet::countOf(int32_t hash) const {
  if (!mayHave(hash)) return 0;
  auto h = byHash_.find(hash);
  return h == byHash_.end() ? 0 : h->second.positions.size();
}

void ReplaySet::regroupHash(int32_t hash, Group group) {
  auto h = byHash_.find(hash);
  if (h == byHash_.end() || h->second.group == group) return;
  // References into groups_ stay valid when it rehashes; iterators would not.
  auto& from = groups_[h->second.group];
  auto& to = groups_[group];
  for (const Position& p : h->second.positions) {
    from.erase(p);
    to.emplace(p, hash);
  }
  if (from.empty()) groups_.erase(h->second.group);
  h->second.group = group;
}

void ReplaySet::erase(Position p, int32_t hash) {
  all_.erase(p);
  if (hash < 0) return;
  auto h = byHash_.find(hash);
  h->second.positions.erase(p);
  if (h->second.positions.empty()) {
    byHash_.erase(h);
    recordErased(hash);
  }
}

void ReplaySet::takeFrom(std::vector<Source>& open, int64_t max, std::vector<Item>* out) {
  // A k-way merge over the open groups (a few consumers): the oldest head each time.
  for (int64_t n = 0; n < max; ++n) {
    Source* best = nullptr;
    for (Source& s : open) {
      if (s.quota <= 0 || s.entries->empty()) continue;
      if (!best || s.entries->begin()->first < best->entries->begin()->first) best = &s;
    }
    if (!best) return;
    auto it = best->entries->begin();
    ++visited_;
    out->emplace_back(it->first, it->second);
    erase(it->first, it->second);
    best->entries->erase(it);
    --best->quota;
  }
}

}  // namespace magnetar::broker
