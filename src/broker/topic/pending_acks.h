// PendingAcks: the entries dispatched to one consumer and not yet acked, in position order.
// A consumer's entries arrive almost always in increasing position order and are mostly acked
// oldest first, so they are kept in a sorted deque: adding at the end and removing at the front
// are O(1) with no allocation per entry, a lookup is a binary search. An entry acked out of order
// is marked and dropped once it reaches the front, or when marked ones outnumber the rest.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstddef>
#include <cstdint>
#include <deque>

#include "storage/managed_ledger.h"

namespace magnetar::broker {

// One dispatched entry: messages of it not yet acked (a partly acked batch counts only the rest),
// its sticky-key hash (-1: none) and its batch size.
struct PendingAck {
  int32_t messages = 1;
  int32_t keyHash = -1;
  int32_t batchSize = 1;
};

// Thread: the topic's executor only.
class PendingAcks {
 public:
  // Adds p; nothing changes when p is already pending (as std::map::emplace). O(1) when p is
  // after every position held, O(n) otherwise (a redelivery older than later dispatches).
  void add(storage::Position p, const PendingAck& a);
  // The pending entry at p, or null. Valid until the next change.
  PendingAck* find(storage::Position p);
  // Removes p into *out; false when p is not pending.
  bool take(storage::Position p, PendingAck* out);
  // Removes every entry at or before upTo, calling f(position, ack) for each in order.
  template <typename F>
  void takeUpTo(storage::Position upTo, F&& f) {
    while (!items_.empty() && items_.front().position <= upTo) {
      Item& it = items_.front();
      if (it.live) {
        --live_;
        f(it.position, it.ack);
      } else {
        --dead_;
      }
      items_.pop_front();
    }
  }
  // Removes everything, calling f(position, ack) for each in order.
  template <typename F>
  void takeAll(F&& f) {
    for (Item& it : items_) {
      if (it.live) f(it.position, it.ack);
    }
    clear();
  }
  // Calls f(position, ack) for each pending entry in order.
  template <typename F>
  void forEach(F&& f) const {
    for (const Item& it : items_) {
      if (it.live) f(it.position, it.ack);
    }
  }
  size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }
  void clear();
  // Slots held, pending or marked (tests: the bound on marked ones).
  size_t slots() const { return items_.size(); }

 private:
  struct Item {
    storage::Position position;
    PendingAck ack;
    bool live;
  };
  std::deque<Item>::iterator lowerBound(storage::Position p);
  void dropMarked();

  std::deque<Item> items_;  // sorted by position
  size_t live_ = 0;
  size_t dead_ = 0;  // marked (acked out of order) items still in items_
};

}  // namespace magnetar::broker
