// DrainingHashes: the Key_Shared hashes that moved to another consumer while messages of theirs
// were still unacked at the previous one (Pulsar 4's draining hashes, PIP-379): while one drains,
// its new owner gets none of its messages. Also how often each held a message back and how many
// finished (stats).
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

// One entry of PendingTable: a consumer holding unacked entries of the hash, and how many.
struct PendingSlot {
  Consumer* holder = nullptr;
  int count = 0;
  int32_t hash = -1;  // the table's key; -1: an empty slot
};

// hash (0..kKeySharedRangeSize-1) -> PendingSlot: an open-addressing table with linear probing,
// sized by the hashes in use (at most 3/4 full, at least 1/8 once above the minimum), 16 bytes
// per slot (a dense 65,536-slot array cost one cache and TLB miss per lookup, docs/perf.md issue
// 26). Pointers returned stay valid until the next insert() of an absent hash or erase().
// Thread: its owner's.
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
  // Removes every entry and shrinks to the minimum capacity.
  void clear();
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

// The draining hashes themselves: hash -> (a consumer holding its unacked entries, how many
// entries of it are pending at consumers that no longer own it). Pulsar 4 (PIP-379) keeps the
// same: a hash is tracked only once it moved while unacked, so a dispatch or an ack of a hash
// that did not move touches no table (a table of every pending hash cost one cache miss per
// dispatch and per ack: 9 % of the topic's thread at max rate, docs/perf.md issue 47).
// Thread: the topic's executor only.
class DrainingHashes {
 public:
  // Re-derives the set after the selector changed (a consumer joined or left): between
  // beginRescan() and endRescan(), pendingElsewhere() once per entry pending at a consumer that
  // does not own its hash now. Blocked counts of hashes that still drain are kept.
  void beginRescan();
  void pendingElsewhere(int32_t hash, Consumer* holder);
  void endRescan();
  bool empty() const { return table_.size() == 0; }
  // The hash's record (holder, entries pending elsewhere), or nullptr when it does not drain.
  const PendingSlot* find(int32_t hash) const { return empty() ? nullptr : table_.find(hash); }
  // A message of `hash` was held back because the hash drains.
  void blocked(int32_t hash) {
    if (auto it = blocked_.find(hash); it != blocked_.end()) ++it->second;
  }
  // One entry of draining `hash` pending at a consumer not owning it was acked or put back; true
  // when it was the last (the hash finished draining; its holder's cleared count goes up).
  bool released(int32_t hash);
  // The hashes draining now, sorted by hash.
  std::vector<DrainingHashInfo> snapshot() const;
  // Draining hashes that finished, over the subscription's life.
  uint64_t clearedTotal() const { return clearedTotal_; }

 private:
  PendingTable table_;
  std::unordered_map<int32_t, uint32_t> blocked_;  // draining hash -> blocked attempts
  std::unordered_map<int32_t, uint32_t> previous_;  // blocked_ before the rescan
  uint64_t clearedTotal_ = 0;
};

}  // namespace magnetar::broker
