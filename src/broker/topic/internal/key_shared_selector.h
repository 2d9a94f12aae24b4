// KeySharedSelector: maps a sticky-key hash to a consumer of a Key_Shared subscription, computing
// hashes and ring points exactly as Pulsar 4's selectors do, so a consumer's hash ranges mean the
// same on both brokers. AUTO_SPLIT uses consistent hashing (Pulsar's
// ConsistentHashingStickyKeyConsumerSelector: hashes in [1, 65535],
// subscriptionKeySharedConsistentHashingReplicaPoints points per consumer); STICKY uses the
// consumers' explicit ranges (hashes in [0, 65535], 0 read as 1). With consistent hashing off
// (subscriptionKeySharedUseConsistentHashing=false), AUTO_SPLIT uses Pulsar's
// HashRangeAutoSplitStickyKeyConsumerSelector: each new consumer takes the upper half of the
// biggest range; a leaving consumer's range goes to its neighbour.
#pragma once

#ifndef MAGNETAR_BROKER_IN_TOPIC
#error "broker/topic/internal/ is private to magnetar_broker_topic (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace magnetar::broker {

class Consumer;

// Pulsar's StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE: hashes are below it.
inline constexpr int32_t kKeySharedRangeSize = 65536;

// Thread: the topic's executor only.
class KeySharedSelector {
 public:
  // consistentHashing: subscriptionKeySharedUseConsistentHashing (false: hash-range auto-split).
  explicit KeySharedSelector(int replicaPoints, bool consistentHashing = true)
      : replicaPoints_(replicaPoints), consistentHashing_(consistentHashing) {}
  // The first consumer fixes the mode: STICKY when it brings ranges, else AUTO_SPLIT.
  // Errors: kInvalidArgument when sticky ranges are out of [0, 65535] or overlap another
  // consumer's, or no range is left to split (Pulsar's ConsumerAssignError).
  Status addConsumer(Consumer* c);
  void removeConsumer(Consumer* c);
  // The sticky-key hash of `key` in this selector's range (Pulsar's makeStickyKeyHash).
  int32_t hashOf(std::string_view key) const;
  // The owner of `hash` (from hashOf), or null when no consumer owns it.
  Consumer* select(int32_t hash) const;
  // Hash ranges [start, end] owned by c (for stats).
  std::vector<std::pair<int32_t, int32_t>> rangesOf(const Consumer* c) const;
  bool stickyMode() const { return sticky_mode_; }

 private:
  void rebuildPoints();

  int replicaPoints_;
  bool consistentHashing_;
  bool sticky_mode_ = false;
  // Auto-split ranges: range end (exclusive of the previous end, up to 65536) -> consumer, and
  // each consumer's range end (Pulsar's rangeMap / consumerRange).
  std::map<int32_t, Consumer*> splitRanges_;
  std::unordered_map<const Consumer*, int32_t> splitEndOf_;
  Status addSplitConsumer(Consumer* c);
  void removeSplitConsumer(Consumer* c);
  // AUTO_SPLIT ring: point -> consumers in the order they claimed it; the first one owns it and
  // the others take over in turn when it leaves (Pulsar's colliding consumers).
  std::map<int32_t, std::vector<Consumer*>> ring_;
  // The ring flattened for select(): sorted points and their owners.
  std::vector<int32_t> points_;
  std::vector<Consumer*> owners_;
  // select()'s index into points_: for each block of kBucketHashes hashes, the first point at or
  // after the block's start, so a lookup scans about points / kBuckets entries (a 20-consumer
  // ring of 2,000 points: 2) instead of a binary search over the whole ring.
  static constexpr int32_t kBucketHashes = 64;
  static constexpr int32_t kBuckets = kKeySharedRangeSize / kBucketHashes;
  std::vector<uint32_t> bucketStart_;
  // Per consumer name, the name indexes in use (consumers sharing a name get 0, 1, ...), and the
  // index each consumer holds, as Pulsar's ConsumerNameIndexTracker.
  std::unordered_map<std::string, std::vector<bool>> nameIndexes_;
  std::unordered_map<const Consumer*, int> indexOf_;
  std::map<int32_t, std::pair<int32_t, Consumer*>> sticky_;  // range start -> (end, consumer)
};

}  // namespace magnetar::broker
