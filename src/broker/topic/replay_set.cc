#include "broker/topic/replay_set.h"

#include <algorithm>

#include "base/dcheck.h"

namespace magnetar::broker {

using storage::Position;

namespace {
// Empty HashEntries kept at most: this many, or 4 per hash waiting, whichever is more.
constexpr size_t kEmptyHashesKept = 4096;
}  // namespace

bool ReplaySet::add(Position p, int32_t hash, Group group) {
  // A position waits once, whatever the hash it came with (each check is O(1) for a position
  // after the last of its run, the usual case).
  if (any_.contains(p)) return false;
  if (hash < 0) {
    for (const auto& g : groups_) {
      if (g.second.contains(p)) return false;
    }
    any_.insert(Item{p, hash});
    ++size_;
    return true;
  }
  HashEntries& h = byHash_[hash];
  if (h.positions.empty()) {
    h.group = group;
    ++hashesWaiting_;
  } else if (h.positions.contains(p)) {
    return false;
  }
  // The entries of one hash share a group: a newcomer joins the others (regroupHash moves all).
  h.positions.insert(p);
  groups_[h.group].insert(Item{p, hash});
  ++size_;
  return true;
}

Position ReplaySet::first() const {
  MAGNETAR_DCHECK(size_ > 0);
  const Position* best = any_.empty() ? nullptr : &any_.front().first;
  for (const auto& [group, entries] : groups_) {
    if (!entries.empty() && (!best || entries.front().first < *best)) best = &entries.front().first;
  }
  return *best;
}

void ReplaySet::clear() {
  any_.clear();
  groups_.clear();
  byHash_.clear();
  size_ = 0;
  hashesWaiting_ = 0;
}

bool ReplaySet::hasOlder(int32_t hash, Position p) const {
  if (size_ == 0) return false;
  auto h = byHash_.find(hash);
  return h != byHash_.end() && !h->second.positions.empty() && h->second.positions.front() < p;
}

size_t ReplaySet::countOf(int32_t hash) const {
  if (size_ == 0) return 0;
  auto h = byHash_.find(hash);
  return h == byHash_.end() ? 0 : h->second.positions.size();
}

void ReplaySet::regroupHash(int32_t hash, Group group) {
  auto h = byHash_.find(hash);
  if (h == byHash_.end() || h->second.positions.empty() || h->second.group == group) return;
  // References into groups_ stay valid when it rehashes; iterators would not.
  Run& from = groups_[h->second.group];
  Run& to = groups_[group];
  from.removeIf([hash](const Item& item) { return item.second == hash; });
  std::vector<Item> moved;
  moved.reserve(h->second.positions.size());
  for (const Position& p : h->second.positions) moved.emplace_back(p, hash);
  to.merge(moved);
  if (from.empty()) groups_.erase(h->second.group);
  h->second.group = group;
}

void ReplaySet::rebuildGroups(bool moved) {
  if (moved) {
    std::vector<Item> keyed;
    keyed.reserve(size_ - any_.size());
    for (const auto& g : groups_) keyed.insert(keyed.end(), g.second.begin(), g.second.end());
    std::sort(keyed.begin(), keyed.end());
    groups_.clear();
    for (const Item& item : keyed) groups_[byHash_.find(item.second)->second.group].insert(item);
  }
  std::erase_if(groups_, [](const auto& g) { return g.second.empty(); });
  sweepEmptyHashes();
}

void ReplaySet::sweepEmptyHashes() {
  if (byHash_.size() - hashesWaiting_ <= std::max(kEmptyHashesKept, 4 * hashesWaiting_)) return;
  std::erase_if(byHash_, [](const auto& h) { return h.second.positions.empty(); });
}

void ReplaySet::eraseFront(Run& run) {
  const auto [p, hash] = run.front();
  run.popFront();
  --size_;
  if (hash < 0) return;
  auto& positions = byHash_.find(hash)->second.positions;
  // A hash's entries are all in one group, so the group's oldest of it is the hash's oldest.
  MAGNETAR_DCHECK(positions.front() == p);
  positions.popFront();
  if (positions.empty()) --hashesWaiting_;
}

void ReplaySet::takeFrom(std::vector<Source>& open, int64_t max, std::vector<Item>* out) {
  // A k-way merge over the open groups (a few consumers): the oldest head each time.
  for (int64_t n = 0; n < max; ++n) {
    Source* best = nullptr;
    for (Source& s : open) {
      if (s.quota <= 0 || s.entries->empty()) continue;
      if (!best || s.entries->front().first < best->entries->front().first) best = &s;
    }
    if (!best) break;
    ++visited_;
    out->push_back(best->entries->front());
    eraseFront(*best->entries);
    --best->quota;
  }
  sweepEmptyHashes();
}

}  // namespace magnetar::broker
