// EventLoop: one thread running one Boost.Asio io_context, plus an inbox for tasks handed over
// from other threads. Used for the broker's `pulsar-io-N` loops and `ml-worker-N` executors.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_annotations.h"
#include "net/executor.h"

namespace magnetar::net {

// Counters of one loop; plain atomics bumped on the hot path, summed at scrape time.
struct LoopStats {
  std::atomic<uint64_t> tasks{0};    // tasks handed over through execute()
  std::atomic<uint64_t> wakeups{0};  // inbox drains scheduled (one eventfd write at most each)
  std::atomic<uint64_t> passes{0};   // inbox drains run
  // Of `tasks`: those held back by executeAfterPass() and handed over at the end of the caller's
  // pass, and the number of such end-of-pass hand-overs (each one lock, one wake-up at most).
  std::atomic<uint64_t> heldTasks{0};
  std::atomic<uint64_t> heldHandovers{0};
  // writev() calls of the connections on this loop (bumped by Connection through stats()).
  mutable std::atomic<uint64_t> writevCalls{0};
};

// Thread: constructed and started by the owner; execute() from any thread; everything scheduled on
// context() runs on the loop's own thread, named `name` (e.g. "pulsar-io-0").
class EventLoop final : public Executor {
 public:
  // kMayBlock: a loop for work that may wait (the admin's blocking continuations); it is not
  // marked as a broker executor, so base/blocking_wait.h lets it wait.
  enum class Kind { kExecutor, kMayBlock };
  explicit EventLoop(std::string name, Kind kind = Kind::kExecutor);
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void start();
  // Stops the io_context and joins the thread. Pending tasks are dropped.
  void stop();

  // Queues t. Wake-ups coalesce: if a drain is already pending, no new wake-up is posted, so a
  // burst of hand-overs from one source costs one eventfd write and one pass.
  void execute(Task t) override;
  // As execute(), but when called from a task of another loop's inbox pass, t is held until that
  // pass ends; then all tasks held for this loop are queued together (one lock, one wake-up at
  // most) in call order. Called outside a pass, or from this loop's own pass, it is execute().
  // Only for tasks that may run after anything else the caller hands over in the same pass
  // (e.g. a flush that reads the state it finds). Thread: any.
  void executeAfterPass(Task t);
  bool inExecutorThread() const override;

  boost::asio::io_context& context() { return ctx_; }
  const std::string& name() const { return name_; }
  const LoopStats& stats() const { return stats_; }
  // Linux thread id of the loop thread (for per-thread CPU), 0 before start.
  int tid() const { return tid_.load(); }
  // The loop's socket read buffer (kReadBufferSize bytes, allocated on first use), shared by
  // all connections of the loop: a read is consumed before the next one starts, so an idle
  // connection holds no read buffer. Loop thread only; not for use across a callback that may
  // read another socket.
  static constexpr size_t kReadBufferSize = 64 * 1024;
  uint8_t* readBuffer();

 private:
  void drain();
  // Holds t for `target` until the end of this loop's pass. Loop thread, inside drain() only.
  void hold(EventLoop& target, Task t);
  // Queues ts (moved from, left empty) with one lock and at most one wake-up.
  void executeAll(std::vector<Task>& ts);
  void releaseHeld();

  std::string name_;
  Kind kind_;
  boost::asio::io_context ctx_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::thread::id threadId_;
  std::atomic<int> tid_{0};

  Mutex mu_;
  std::vector<Task> inbox_ GUARDED_BY(mu_);
  bool drainScheduled_ GUARDED_BY(mu_) = false;
  std::vector<Task> running_;  // loop thread only
  struct Held {
    EventLoop* target;
    std::vector<Task> tasks;  // emptied at each pass end; capacity kept
  };
  std::vector<Held> held_;                 // loop thread only; one entry per target loop seen
  std::unique_ptr<uint8_t[]> readBuffer_;  // loop thread only
  LoopStats stats_;
};

// A fixed set of loops named `<prefix>-<i>`. next() hands out loops round-robin (new connections);
// forKey() picks one by hash (a topic's ordered executor). Thread: any, after start().
class EventLoopGroup {
 public:
  EventLoopGroup(const std::string& prefix, int count);
  ~EventLoopGroup();
  void start();
  void stop();
  int size() const { return static_cast<int>(loops_.size()); }
  EventLoop& at(int i) { return *loops_[i]; }
  EventLoop& next();
  EventLoop& forKey(uint64_t hash) { return *loops_[hash % loops_.size()]; }

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::atomic<uint64_t> rr_{0};
};

}  // namespace magnetar::net
