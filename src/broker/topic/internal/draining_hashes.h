// DrainingHashes: the Key_Shared hashes that moved to another consumer while messages of theirs
// were still unacked at the previous one (Pulsar 4's draining hashes, PIP-379), kept for stats.
// The Dispatcher's own pending-hash table decides whether a message waits; this class only
// remembers which hashes drain, how often they held a message back, and how many finished.
#pragma once

#ifndef MAGNETAR_BROKER_IN_TOPIC
#error "broker/topic/internal/ is private to magnetar_broker_topic (src/broker/README.md)"
#endif

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "broker/topic/internal/key_shared_selector.h"

namespace magnetar::broker {

class Consumer;

// One draining hash as Pulsar's DrainingHash stats entry shows it, plus its holder.
struct DrainingHashInfo {
  int32_t hash = 0;
  Consumer* holder = nullptr;  // the consumer with the hash's unacked messages
  int32_t unackMsgs = 0;       // entries of the hash pending at the holder
  uint32_t blockedAttempts = 0;
};

// One entry of PendingTable: the consumer holding unacked entries of the hash, and how many.
struct PendingSlot {
  Consumer* holder = nullptr;
  int count = 0;
  int32_t hash = -1;  // the table's key; -1: an empty slot
};

// hash (0..kKeySharedRangeSize-1) -> PendingSlot for the hashes with entries pending: an
// open-addressing table with linear probing, sized by the hashes in use (at most 3/4 full, at
// least 1/8 once above the minimum), 16 bytes per slot. A subscription with a few hundred
// messages in flight keeps its table in a few KiB of cache; a dense 65,536-slot array cost one
// cache and TLB miss per dispatch and per ack (docs/perf.md, issue 26). Pointers returned stay
// valid until the next insert() of an absent hash or erase(). Thread: its owner's.
class PendingTable {
 public:
  PendingTable() { rehash(kMinCapacity); }
  PendingTable(const PendingTable&) = delete;
  PendingTable& operator=(const PendingTable&) = delete;
  // The hash's entry, or nullptr when none of its entries is pending.
  PendingSlot* find(int32_t hash) {
    return const_cast<PendingSlot*>(std::as_const(*this).find(hash));
  }
  const PendingSlot* find(int32_t hash) const;
  // The hash's entry, added as (nullptr, 0) when absent. hash must be in [0, 65536).
  PendingSlot& insert(int32_t hash);
  // Removes the hash's entry (no-op when absent).
  void erase(int32_t hash);
  // Hashes with an entry; capacity() slots allocated.
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  // Calls f(hash, const PendingSlot&) for every entry, in no particular order.
  template <typename F>
  void forEach(F&& f) const {
    for (const PendingSlot& s : slots_) {
      if (s.hash != kEmpty) f(s.hash, s);
    }
  }

 private:
  static constexpr int32_t kEmpty = -1;
  static constexpr size_t kMinCapacity = 16;
  size_t home(int32_t hash) const {
    // Fibonacci hashing: Key_Shared hashes are uniform, but a sticky range need not be.
    return (static_cast<uint32_t>(hash) * 2654435769u) >> shift_;
  }
  void rehash(size_t capacity);

  std::vector<PendingSlot> slots_;
  size_t size_ = 0;
  size_t mask_ = kMinCapacity - 1;
  int shift_ = 28;  // 32 - log2(capacity); set by rehash()
};

// Thread: the topic's executor only.
class DrainingHashes {
 public:
  // After the selector changed (a consumer joined or left): a hash drains when entries of it are
  // pending at a consumer that no longer owns it (`pending`: the dispatcher's table). Keeps the
  // blocked counts of hashes that still drain. Scans the whole table, so only on consumer
  // changes.
  void rescan(const PendingTable& pending, const KeySharedSelector& selector);
  // A message of `hash` was held back because the hash drains.
  void blocked(int32_t hash) {
    if (auto it = hashes_.find(hash); it != hashes_.end()) ++it->second;
  }
  // The last pending entry of `hash` at `holder` was acked or went back for redelivery.
  void released(int32_t hash, Consumer* holder);
  bool empty() const { return hashes_.empty(); }
  // The hashes draining now (holder still set and not the owner), sorted by hash.
  std::vector<DrainingHashInfo> snapshot(const PendingTable& pending,
                                         const KeySharedSelector& selector) const;
  // Draining hashes that finished, over the subscription's life.
  uint64_t clearedTotal() const { return clearedTotal_; }

 private:
  std::unordered_map<int32_t, uint32_t> hashes_;  // draining hash -> blocked attempts
  uint64_t clearedTotal_ = 0;
};

}  // namespace magnetar::broker
