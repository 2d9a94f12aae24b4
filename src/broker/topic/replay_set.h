// ReplaySet: a dispatcher's entries waiting for redelivery (Pulsar's redeliveryMessages), in
// position order and grouped by who may take them: entries without a key hash (any consumer),
// Key_Shared entries by the consumer owning their hash, and held entries (no owner, or the hash
// drains at another consumer). A read takes entries, oldest first, only from the groups of
// consumers with permits, so it visits what it takes, not the entries held for consumers that
// take nothing (Pulsar 4.2's getMessagesToReplayNow walks the whole set through a filter; a
// slow Key_Shared consumer made that O(replay set) per read here, docs/perf.md issue 45).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/managed_ledger.h"

namespace magnetar::broker {

class Consumer;

// A run of entries in position order, taken from the front: a vector and the index of its head,
// so adding and taking allocate nothing once the vector has grown (positions mostly arrive in
// increasing order: an add is then a push_back). T is storage::Position or a (Position, hash) pair.
template <typename T>
class SortedRun {
 public:
  static const storage::Position& posOf(const storage::Position& p) { return p; }
  template <typename U>
  static const storage::Position& posOf(const U& item) {
    return item.first;
  }
  bool empty() const { return head_ == v_.size(); }
  size_t size() const { return v_.size() - head_; }
  const T& front() const { return v_[head_]; }
  auto begin() const { return v_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return v_.end(); }
  // O(1) for a position after the last (or before the first), else O(size).
  void insert(const T& t) {
    if (empty() || posOf(v_.back()) < posOf(t)) {
      v_.push_back(t);
    } else if (head_ > 0 && posOf(t) < posOf(v_[head_])) {
      v_[--head_] = t;
    } else {
      v_.insert(lowerBound(posOf(t)), t);
    }
  }
  // O(1) for a position after the last, else O(log size).
  bool contains(const storage::Position& p) const {
    if (empty() || posOf(v_.back()) < p) return false;
    auto it = lowerBound(p);
    return it != v_.end() && posOf(*it) == p;
  }
  void popFront() {
    if (++head_ == v_.size()) {
      clear();
    } else if (head_ >= 64 && head_ * 2 >= v_.size()) {
      v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Keeps the capacity (the next fill reuses it).
  void clear() {
    v_.clear();
    head_ = 0;
  }
  // O(size).
  template <typename F>
  void removeIf(F&& f) {
    v_.erase(std::remove_if(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.end(), f),
             v_.end());
    if (empty()) clear();
  }
  // Adds `sorted` (in position order, none present): O(size + sorted.size()).
  void merge(const std::vector<T>& sorted) {
    auto mid = static_cast<std::ptrdiff_t>(v_.size());
    v_.insert(v_.end(), sorted.begin(), sorted.end());
    std::inplace_merge(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.begin() + mid, v_.end(),
                       [](const T& a, const T& b) { return posOf(a) < posOf(b); });
  }

 private:
  typename std::vector<T>::iterator lowerBound(const storage::Position& p) {
    return std::lower_bound(v_.begin() + static_cast<std::ptrdiff_t>(head_), v_.end(), p,
                            [](const T& a, const storage::Position& b) { return posOf(a) < b; });
  }
  typename std::vector<T>::const_iterator lowerBound(const storage::Position& p) const {
    return std::lower_bound(begin(), end(), p,
                            [](const T& a, const storage::Position& b) { return posOf(a) < b; });
  }

  std::vector<T> v_;
  size_t head_ = 0;
};

// Thread: the topic's executor only (owned by its Dispatcher).
class ReplaySet {
 public:
  // Who may take a keyed entry: its hash's owner, or kHeld (nobody now).
  using Group = const Consumer*;
  static constexpr Group kHeld = nullptr;
  // One taken entry and its key hash (-1: none).
  using Item = std::pair<storage::Position, int32_t>;

  // Adds p with its key hash (-1: none, any consumer may take it; else `group` may). Nothing
  // changes when p waits already (as std::map::emplace); false then. O(1) for a position after
  // the last of its group and hash (the usual case), else O(n).
  bool add(storage::Position p, int32_t hash, Group group);
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The oldest position waiting. REQUIRES: !empty(). O(groups).
  storage::Position first() const;
  void clear();
  // An entry of `hash` (>= 0) older than p waits. O(1).
  bool hasOlder(int32_t hash, storage::Position p) const;
  // Entries of `hash` waiting. O(1).
  size_t countOf(int32_t hash) const;
  // Moves the entries of `hash` to `group` (its owner changed or its draining ended). O(1) when
  // the group is unchanged, else O(size of both groups).
  void regroupHash(int32_t hash, Group group);
  // Moves every keyed entry to groupOf(hash) (consumers joined or left). O(n log n).
  template <typename F>
  void regroupAll(F&& groupOf) {
    bool moved = false;
    for (auto& [hash, entries] : byHash_) {
      if (entries.positions.empty()) continue;
      Group g = groupOf(hash);
      moved = moved || g != entries.group;
      entries.group = g;
    }
    rebuildGroups(moved);
  }
  // Takes up to `max` entries, oldest first, into *out (appended): those without a hash, and
  // from each consumer group at most quota(consumer) entries (0: none); held entries stay.
  // Visits only what it takes, plus one look per group: O(taken * groups).
  template <typename Q>
  void take(int64_t max, Q&& quota, std::vector<Item>* out) {
    std::vector<Source> open;
    if (!any_.empty()) open.push_back(Source{&any_, max});
    for (auto& [group, entries] : groups_) {
      if (group == kHeld || entries.empty()) continue;
      int64_t q = quota(group);
      if (q > 0) open.push_back(Source{&entries, q});
    }
    takeFrom(open, max, out);
  }
  // Entries take() visited over this set's life (tests and benchmarks count the work).
  uint64_t visited() const { return visited_; }

 private:
  using Run = SortedRun<Item>;
  struct Source {
    Run* entries;
    int64_t quota;
  };
  // A hash's waiting entries; kept when empty (no allocation when the hash waits again) until
  // empty ones are many (sweepEmptyHashes).
  struct HashEntries {
    SortedRun<storage::Position> positions;
    Group group = kHeld;
  };
  void takeFrom(std::vector<Source>& open, int64_t max, std::vector<Item>* out);
  void eraseFront(Run& run);
  // Refills the groups from byHash_'s groups when `moved`; drops empty groups.
  void rebuildGroups(bool moved);
  void sweepEmptyHashes();

  size_t size_ = 0;
  size_t hashesWaiting_ = 0;  // byHash_ entries with positions
  Run any_;                   // entries without a hash
  std::unordered_map<Group, Run> groups_;
  std::unordered_map<int32_t, HashEntries> byHash_;
  uint64_t visited_ = 0;
};

}  // namespace magnetar::broker
