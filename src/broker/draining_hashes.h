// DrainingHashes: the Key_Shared hashes that moved to another consumer while messages of theirs
// were still unacked at the previous one (Pulsar 4's draining hashes, PIP-379), kept for stats.
// The Dispatcher's own pending-hash table decides whether a message waits; this class only
// remembers which hashes drain, how often they held a message back, and how many finished.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "broker/key_shared_selector.h"

namespace magnetar::broker {

class Consumer;

// One draining hash as Pulsar's DrainingHash stats entry shows it, plus its holder.
struct DrainingHashInfo {
  int32_t hash = 0;
  Consumer* holder = nullptr;  // the consumer with the hash's unacked messages
  int32_t unackMsgs = 0;       // entries of the hash pending at the holder
  uint32_t blockedAttempts = 0;
};

// One slot of PendingTable: the consumer holding unacked entries of the hash, and how many.
// All-zero bytes are the empty slot (nullptr, 0).
struct PendingSlot {
  Consumer* holder;
  int count;
};

// hash -> PendingSlot, kKeySharedRangeSize (65536) slots of 16 bytes: flat, so no allocation or
// hashing per message. Zeroed by calloc (large blocks come as fresh zero pages), so only the
// pages holding the hashes in use get resident: a subscription with a few keys costs a few KiB,
// not 1 MiB (1,000 Key_Shared subscriptions held 1 GB with a zero-filled vector). Thread: its
// owner's.
class PendingTable {
 public:
  PendingTable();
  PendingSlot& operator[](size_t hash) { return slots_.get()[hash]; }
  const PendingSlot& operator[](size_t hash) const { return slots_.get()[hash]; }
  static constexpr size_t size() { return kKeySharedRangeSize; }

 private:
  struct Free {
    void operator()(PendingSlot* p) const;
  };
  std::unique_ptr<PendingSlot, Free> slots_;
};

// Thread: the topic's executor only.
class DrainingHashes {
 public:
  // After the selector changed (a consumer joined or left): a hash drains when entries of it are
  // pending at a consumer that no longer owns it (`pending`: the dispatcher's table). Keeps the
  // blocked counts of hashes that still drain. Scans the table (65536 slots, reading untouched
  // pages maps no memory), so only on consumer changes.
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
