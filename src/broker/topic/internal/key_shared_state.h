// KeySharedState: what a Key_Shared subscription's Dispatcher keeps beyond the other types: the
// sticky-key selector, which consumer holds each hash's unacked messages and the draining hashes
// (the entries waiting for redelivery, per hash too, are the Dispatcher's ReplaySet).
#pragma once

#ifndef MAGNETAR_BROKER_IN_TOPIC
#error "broker/topic/internal/ is private to magnetar_broker_topic (src/broker/README.md)"
#endif

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/common/broker_options.h"
#include "broker/topic/entry_metadata.h"
#include "broker/topic/internal/draining_hashes.h"
#include "broker/topic/internal/key_shared_selector.h"

namespace magnetar::broker {

class Consumer;

// Thread: the topic's executor only (owned by its Dispatcher).
class KeySharedState {
 public:
  // Reads subscriptionKeySharedConsistentHashingReplicaPoints, ...UseConsistentHashing and the
  // keySharedLookAheadMsgInReplayThreshold settings.
  explicit KeySharedState(const BrokerOptions& options);

  const KeySharedSelector& selector() const { return selector_; }
  // The entry's sticky-key hash: ordering_key, else partition_key, else Pulsar's NONE_KEY (the
  // base64 text itself when flagged b64, as Pulsar).
  int32_t hashOf(const EntryMetadataPeek& md) const;
  // The consumer owning `hash` now (nullptr: none).
  Consumer* owner(int32_t hash) const { return selector_.select(hash); }

  // Consumers joining and leaving. Errors of addConsumer: kInvalidArgument (ConsumerAssignError)
  // for overlapping sticky ranges. consumersChanged() re-derives the draining hashes; call it
  // once the leaving consumer's messages are released.
  Status addConsumer(Consumer* c);
  void removeConsumer(Consumer* c) { selector_.removeConsumer(c); }
  void consumersChanged() { draining_.rescan(pending_, selector_); }

  // Messages of `hash` are unacked at a consumer other than `owner` (Pulsar 4's draining).
  bool drainingElsewhere(int32_t hash, const Consumer* owner) const {
    const PendingSlot* ph = pending_.find(hash);
    return ph && ph->count > 0 && ph->holder != owner;
  }
  // An entry of `hash` was held back because the hash drains (stats).
  void blocked(int32_t hash) { draining_.blocked(hash); }
  // An entry of `hash` went to `target`.
  void dispatched(int32_t hash, Consumer* target) {
    PendingSlot& ph = pending_.insert(hash);
    ph.holder = target;
    ph.count++;
  }
  // One pending entry of `hash` was acked or put back; true when the hash has none left.
  bool released(int32_t hash);

  // The replay set of `replaySize` entries is at its look-ahead threshold for `consumers`
  // consumers (no new entries are read).
  bool lookAheadLimitReached(size_t consumers, size_t replaySize) const;

  // Stats: the draining hashes now (sorted by hash) and those finished over the subscription's
  // life (the Dispatcher counts their entries waiting for redelivery).
  std::vector<DrainingHashInfo> drainingHashes() const {
    return draining_.snapshot(pending_, selector_);
  }
  uint64_t drainingHashesClearedTotal() const { return draining_.clearedTotal(); }

 private:
  const BrokerOptions& options_;
  KeySharedSelector selector_;
  // hash -> (the consumer holding its unacked messages, how many), for hashes with any.
  PendingTable pending_;
  DrainingHashes draining_;  // for stats (re-derived when consumers change)
};

}  // namespace magnetar::broker
