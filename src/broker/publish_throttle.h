// PublishBufferThrottle: the per-I/O-thread share of maxMessagePublishBufferSizeInMB (Pulsar's
// publish buffer limit). Each pulsar-io loop counts the bytes of publishes read on its
// connections and not yet persisted (and frames still being read, charged at their header);
// over its share it tells all of its connections (ServerCnx::setThrottled), and those with
// producers stop reading at their next frame boundary; resumes when the count falls to half.
// The total does not change with numIOThreads; each loop's share does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "net/event_loop.h"

namespace magnetar::broker {

class ServerCnx;

// Counters for metrics (magnetar_io_thread_publish_pending_bytes, ..._read_paused_total,
// ..._read_paused_seconds_total).
struct PublishThrottleStats {
  int64_t pendingBytes = 0;
  uint64_t pausedTotal = 0;
  double pausedSeconds = 0;
};

// Thread: add/registerConnection/unregisterConnection/setLimitBytes on the loop's thread;
// release() and the getters from any.
class PublishBufferThrottle {
 public:
  // limitBytes: this loop's share; <= 0 disables.
  PublishBufferThrottle(net::EventLoop& loop, int64_t limitBytes)
      : loop_(loop), limitBytes_(limitBytes) {}

  net::EventLoop& loop() { return loop_; }
  void registerConnection(const std::shared_ptr<ServerCnx>& c);
  void unregisterConnection(ServerCnx* c);
  // The connections of this loop still open. Loop thread.
  std::vector<std::shared_ptr<ServerCnx>> connections() const;
  // A SEND of `bytes` was read (loop thread). Pauses reading when over the share.
  void add(int64_t bytes);
  // Publishes of `bytes` were persisted or failed (any thread). Resumes at half the share.
  void release(int64_t bytes);
  // A new share (maxMessagePublishBufferSizeInMB changed at run time; <= 0 disables): pauses
  // at once when the pending bytes are over it, resumes when they are at most half of it.
  void setLimitBytes(int64_t limitBytes);
  bool paused() const { return paused_.load(std::memory_order_relaxed); }
  int64_t limitBytes() const { return limitBytes_.load(std::memory_order_relaxed); }
  PublishThrottleStats stats() const;

 private:
  void pauseAll();
  void resumeAll();

  net::EventLoop& loop_;
  std::atomic<int64_t> limitBytes_;
  std::atomic<int64_t> pending_{0};  // counted also while the limit is off, for a later one
  std::atomic<bool> paused_{false};
  std::atomic<bool> resumeQueued_{false};
  std::atomic<uint64_t> pausedTotal_{0};
  std::atomic<int64_t> pausedNanos_{0};
  std::chrono::steady_clock::time_point pausedAt_;    // loop thread
  std::vector<std::weak_ptr<ServerCnx>> connections_;  // loop thread
};

}  // namespace magnetar::broker
