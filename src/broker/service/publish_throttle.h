// PublishBufferThrottle: the per-I/O-thread share of maxMessagePublishBufferSizeInMB (Pulsar's
// publish buffer limit). Each pulsar-io loop counts the bytes of publishes read on its
// connections and not yet persisted (and frames still being read, charged at their header);
// over its share it tells all of its connections (ServerCnx::setThrottled), and those with
// producers stop reading at their next frame boundary; resumes when the count falls to half.
// The total does not change with numIOThreads; each loop's share does.
//
// FrameAdmission: the same limit taken whole, for frames whose body is still to be read: such a
// frame is admitted (charged) at its header only while every loop's charges together stay within
// maxMessagePublishBufferSizeInMB, or when nothing at all is charged (a frame bigger than the
// limit). Otherwise its connection stops reading after the header and waits in one queue, in
// order; charges coming back admit the waiters. Admitted frames always complete, so their charges
// always come back. Bound: the limit plus one frame, whatever numIOThreads is.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
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

// Thread: any (a mutex guards the queue; the counters are atomic). One per broker.
class FrameAdmission {
 public:
  // The whole limit in bytes (<= 0: off, every frame admitted at once).
  explicit FrameAdmission(int64_t limitBytes) : limitBytes_(limitBytes) {}

  // Charges taken and given back by every loop (PublishBufferThrottle add/release forward here).
  void add(int64_t bytes) { pending_.fetch_add(bytes, std::memory_order_relaxed); }
  // Gives back `bytes`; admits waiters that fit now (their loops are told).
  void release(int64_t bytes);
  // A frame of `bytes` whose header `cnx` (on its loop) just read: true when admitted now, and
  // then charged here; false when queued behind others or over the limit: later
  // ServerCnx::frameAdmitted(bytes) runs on the connection's loop, already charged here.
  bool admitOrQueue(const std::shared_ptr<ServerCnx>& cnx, int64_t bytes);
  // The connection closed while it waited: it leaves the queue (an admission already on its way
  // is given back by ServerCnx::frameAdmitted).
  void cancel(const ServerCnx* cnx);
  // maxMessagePublishBufferSizeInMB changed at run time; admits what fits.
  void setLimitBytes(int64_t limitBytes);
  // Over the limit or someone waiting: connections then read one header at a time.
  bool tight() const {
    const int64_t limit = limitBytes_.load(std::memory_order_relaxed);
    return waiting_.load(std::memory_order_relaxed) > 0 ||
           (limit > 0 && pending_.load(std::memory_order_relaxed) > limit);
  }
  int64_t pendingBytes() const { return pending_.load(std::memory_order_relaxed); }
  int64_t waiting() const { return waiting_.load(std::memory_order_relaxed); }
  uint64_t waitedTotal() const { return waitedTotal_.load(std::memory_order_relaxed); }

 private:
  // Charges `bytes` when they fit (or nothing is charged); false otherwise.
  bool tryCharge(int64_t bytes);
  void drain();

  struct Waiter {
    std::weak_ptr<ServerCnx> cnx;
    const ServerCnx* id;
    int64_t bytes;
  };
  std::atomic<int64_t> limitBytes_;
  std::atomic<int64_t> pending_{0};
  std::atomic<int64_t> waiting_{0};
  std::atomic<uint64_t> waitedTotal_{0};
  std::mutex mu_;
  std::deque<Waiter> queue_;  // guarded by mu_
};

// Thread: add/registerConnection/unregisterConnection/setLimitBytes on the loop's thread;
// release() and the getters from any.
class PublishBufferThrottle {
 public:
  // limitBytes: this loop's share; <= 0 disables. `admission`: the broker's, outlives this.
  PublishBufferThrottle(net::EventLoop& loop, int64_t limitBytes, FrameAdmission& admission)
      : loop_(loop), admission_(admission), limitBytes_(limitBytes) {}

  net::EventLoop& loop() { return loop_; }
  FrameAdmission& admission() { return admission_; }
  void registerConnection(const std::shared_ptr<ServerCnx>& c);
  void unregisterConnection(ServerCnx* c);
  // The connections of this loop still open. Loop thread.
  std::vector<std::shared_ptr<ServerCnx>> connections() const;
  // A SEND of `bytes` was read (loop thread). Pauses reading when over the share. Reaches
  // admission() at flushAdmission() (one shared-counter update per read batch, not per SEND).
  void add(int64_t bytes);
  // Hands what add() counted since the last call to admission(). Loop thread: at the end of each
  // read batch and before an admission decision.
  void flushAdmission() {
    if (unflushed_ != 0) admission_.add(std::exchange(unflushed_, 0));
  }
  // A frame admitted by admission() (already charged there) now counts here too (loop thread).
  void addAdmitted(int64_t bytes);
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
  FrameAdmission& admission_;
  std::atomic<int64_t> limitBytes_;
  std::atomic<int64_t> pending_{0};  // counted also while the limit is off, for a later one
  std::atomic<bool> paused_{false};
  std::atomic<bool> resumeQueued_{false};
  std::atomic<uint64_t> pausedTotal_{0};
  std::atomic<int64_t> pausedNanos_{0};
  std::chrono::steady_clock::time_point pausedAt_;    // loop thread
  std::vector<std::weak_ptr<ServerCnx>> connections_;  // loop thread
  int64_t unflushed_ = 0;                              // loop thread: add() not yet in admission_
};

}  // namespace magnetar::broker
