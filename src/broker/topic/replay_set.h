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

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/managed_ledger.h"

namespace magnetar::broker {

class Consumer;

// Thread: the topic's executor only (owned by its Dispatcher).
class ReplaySet {
 public:
  // Who may take a keyed entry: its hash's owner, or kHeld (nobody now).
  using Group = const Consumer*;
  static constexpr Group kHeld = nullptr;
  // One taken entry and its key hash (-1: none).
  using Item = std::pair<storage::Position, int32_t>;

  // Adds p with its key hash (-1: none, any consumer may take it; else `group` may). Nothing
  // changes when p waits already (as std::map::emplace); false then. O(log n).
  bool add(storage::Position p, int32_t hash, Group group);
  size_t size() const { return all_.size(); }
  bool empty() const { return all_.empty(); }
  // The oldest position waiting. REQUIRES: !empty().
  storage::Position first() const { return all_.begin()->first; }
  void clear();
  // An entry of `hash` (>= 0) older than p waits. O(1).
  bool hasOlder(int32_t hash, storage::Position p) const;
  // Entries of `hash` waiting. O(1); a hash with none waiting is answered from an 8 KiB bitmap
  // (one bit per hash mod 65,536) without the hash table's lookup.
  size_t countOf(int32_t hash) const;
  // Moves the entries of `hash` to `group` (its owner changed or its draining ended). O(1) when
  // the group is unchanged, else O(k log n) for its k entries.
  void regroupHash(int32_t hash, Group group);
  // Moves every keyed entry to groupOf(hash) (consumers joined or left). O(n log n).
  template <typename F>
  void regroupAll(F&& groupOf) {
    for (auto& [hash, entries] : byHash_) regroupHash(hash, groupOf(hash));
  }
  // Takes up to `max` entries, oldest first, into *out (appended): those without a hash, and
  // from each consumer group at most quota(consumer) entries (0: none); held entries stay.
  // Visits only what it takes, plus one look per group: O((taken + groups) log n).
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
  struct Source {
    std::map<storage::Position, int32_t>* entries;
    int64_t quota;
  };
  struct HashEntries {
    std::set<storage::Position> positions;
    Group group = kHeld;
  };
  void takeFrom(std::vector<Source>& open, int64_t max, std::vector<Item>* out);
  void erase(storage::Position p, int32_t hash);
  // The bitmap of hashes (mod kBuckets) with a byHash_ record: a clear bit means none waits, so
  // the per-dispatch lookups (countOf, hasOlder) skip byHash_, whose misses cost 4-7 % of the
  // topic's thread at max rate (docs/perf.md, issue 47). Hashes outside [0, kBuckets) may share
  // a bucket: bucketShared_ counts a bucket's records beyond its first.
  static constexpr size_t kBuckets = 65536;
  bool mayHave(int32_t hash) const {
    const auto b = static_cast<uint32_t>(hash) % kBuckets;
    return (bits_[b / 64] >> (b % 64)) & 1U;
  }
  void recordAdded(int32_t hash);
  void recordErased(int32_t hash);

  std::map<storage::Position, int32_t> all_;  // position -> hash
  std::map<storage::Position, int32_t> any_;  // entries without a hash
  std::unordered_map<Group, std::map<storage::Position, int32_t>> groups_;
  std::unordered_map<int32_t, HashEntries> byHash_;
  std::vector<uint64_t> bits_ = std::vector<uint64_t>(kBuckets / 64);
  std::unordered_map<uint32_t, uint32_t> bucketShared_;  // bucket -> records beyond the first
  uint64_t visited_ = 0;
};

}  // namespace magnetar::broker
