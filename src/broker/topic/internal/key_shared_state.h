// KeySharedState: what a Key_Shared subscription's Dispatcher keeps beyond the other types: the
// sticky-key selector and the draining hashes (the entries waiting for redelivery, per hash too,
// are the Dispatcher's ReplaySet; each consumer's unacked entries with their hashes are its
// PendingAcks).
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
  // for overlapping sticky ranges. After either, once the leaving consumer's entries are
  // released, consumersChanged() re-derives the draining hashes: forEachPending(f) calls
  // f(Consumer* holder, int32_t hash) for every entry pending at a consumer (hash -1: none).
  // O(entries pending).
  Status addConsumer(Consumer* c) { return selector_.addConsumer(c); }
  void removeConsumer(Consumer* c) { selector_.removeConsumer(c); }
  template <typename ForEachPending>
  void consumersChanged(ForEachPending&& forEachPending) {
    draining_.beginRescan();
    forEachPending([this](Consumer* holder, int32_t hash) {
      if (hash >= 0 && selector_.select(hash) != holder) draining_.pendingElsewhere(hash, holder);
    });
    draining_.endRescan();
  }

  // Messages of `hash` are unacked at a consumer other than `owner` (Pulsar 4's draining). O(1),
  // no table access while no hash drains.
  bool drainingElsewhere(int32_t hash, const Consumer* owner) const {
    const PendingSlot* s = draining_.find(hash);
    return s && s->count > 0 && s->holder != owner;
  }
  // An entry of `hash` was held back because the hash drains (stats).
  void blocked(int32_t hash) { draining_.blocked(hash); }
  // One entry of `hash` pending at `holder` was acked or put back; true when that ended the
  // hash's draining (its entries held for redelivery may go to its owner now).
  bool released(int32_t hash, const Consumer* holder) {
    if (!draining_.find(hash) || selector_.select(hash) == holder) return false;
    return draining_.released(hash);
  }

  // The replay set of `replaySize` entries is at its look-ahead threshold for `consumers`
  // consumers (no new entries are read).
  bool lookAheadLimitReached(size_t consumers, size_t replaySize) const;

  // Stats: the draining hashes now (sorted by hash) and those finished over the subscription's
  // life (the Dispatcher counts their entries waiting for redelivery).
  std::vector<DrainingHashInfo> drainingHashes() const { return draining_.snapshot(); }
  uint64_t drainingHashesClearedTotal() const { return draining_.clearedTotal(); }

 private:
  const BrokerOptions& options_;
  KeySharedSelector selector_;
  DrainingHashes draining_;  // re-derived when consumers change
};

}  // namespace magnetar::broker
