// KeySharedSelector: maps a sticky-key hash (0..65535) to a consumer of a Key_Shared subscription.
// AUTO_SPLIT uses consistent hashing (Pulsar's subscriptionKeySharedUseConsistentHashing, with
// subscriptionKeySharedConsistentHashingReplicaPoints points per consumer); STICKY uses the
// consumer's explicit ranges.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace magnetar::broker {

class Consumer;

// Pulsar's StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE.
inline constexpr int32_t kKeySharedRangeSize = 65536;

// Thread: the topic's executor only.
class KeySharedSelector {
 public:
  explicit KeySharedSelector(int replicaPoints) : replicaPoints_(replicaPoints) {}
  // Errors: kInvalidArgument when sticky ranges overlap another consumer's (ConsumerAssignError).
  Status addConsumer(Consumer* c);
  void removeConsumer(Consumer* c);
  // The owner of `hash` (0..65535), or null when there is no consumer.
  Consumer* select(int32_t hash) const;
  // Hash ranges [start, end] owned by c (for stats).
  std::vector<std::pair<int32_t, int32_t>> rangesOf(const Consumer* c) const;

 private:
  int replicaPoints_;
  std::map<int32_t, std::vector<Consumer*>> ring_;  // AUTO_SPLIT points -> consumers
  std::map<int32_t, std::pair<int32_t, Consumer*>> sticky_;  // range start -> (end, consumer)
};

}  // namespace magnetar::broker
