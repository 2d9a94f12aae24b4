// ReceiveQueue: messages waiting for Consumer::receive() (internal to src/client).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "client/message.h"

namespace magnetar::client {

class ConsumerImpl;

// Messages waiting for receive(), shared by the partitions of a partitioned consumer.
// Thread: any (internal mutex).
class ReceiveQueue {
 public:
  struct Item {
    Message msg;
    ConsumerImpl* from;  // partition consumer, for FLOW accounting; outlives the queue's items
    uint64_t epoch;      // its connection epoch when queued
  };
  void push(Item item);
  // Waits up to timeout (negative: forever); nullopt on timeout or when closed.
  std::optional<Item> pop(std::chrono::milliseconds timeout);
  // cb(the next item), at once when one is queued, else from the push() that brings it (on
  // that caller's thread); cb(nullopt) when the queue is or gets closed. Waiters are served in
  // order, before pop() callers.
  void popAsync(std::function<void(std::optional<Item>)> cb);
  // Removes every item of `from`; returns how many.
  size_t removeFrom(const ConsumerImpl* from);
  void close();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  std::deque<std::function<void(std::optional<Item>)>> waiters_;
  bool closed_ = false;
};

}  // namespace magnetar::client
