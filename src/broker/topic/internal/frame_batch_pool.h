// Spare FrameBatch storage of the calling thread, so the batches a topic fills in every pass
// (receipts per connection, MESSAGE frames per consumer) reuse their grown vector and string
// instead of growing new ones: a batch handed to a connection comes back empty with its capacity
// (net::Connection::send moves the frames out and clears it), and give() keeps it for the next
// take() on this thread. Bounded per thread (kMaxSpare batches, kMaxBytes of capacity in all),
// so a burst of large passes does not pin memory. Thread: each thread its own pool (the topics of
// an ml-worker executor share it); no locks.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "net/frame_batch.h"

namespace magnetar::broker {

class FrameBatchPool {
 public:
  // An empty batch, with the capacity of one given back earlier on this thread when there is.
  static net::FrameBatch take() {
    Spare& s = spare();
    if (s.batches.empty()) return {};
    net::FrameBatch b = std::move(s.batches.back());
    s.batches.pop_back();
    s.bytes -= capacityOf(b);
    return b;
  }
  // Keeps b's storage for a later take() (its frames, if any are left, are released now).
  static void give(net::FrameBatch&& b) {
    b.clear();
    Spare& s = spare();
    const size_t cap = capacityOf(b);
    if (cap == 0 || s.batches.size() >= kMaxSpare || s.bytes + cap > kMaxBytes) return;
    s.bytes += cap;
    s.batches.push_back(std::move(b));
  }

  static constexpr size_t kMaxSpare = 1024;
  static constexpr size_t kMaxBytes = 8u << 20;  // capacity kept per thread

 private:
  struct Spare {
    std::vector<net::FrameBatch> batches;
    size_t bytes = 0;
  };
  static Spare& spare() {
    thread_local Spare s;
    return s;
  }
  static size_t capacityOf(const net::FrameBatch& b) {
    return b.bytes().capacity() + b.segments().capacity() * sizeof(net::FrameBatch::Segment);
  }
};

}  // namespace magnetar::broker
