// Executors for storage tests: ManualExecutor runs queued tasks when the test says so (so a test
// can check that nothing ran inline); its thread is the test's, which both calls the ledger and
// runs the tasks. ThreadExecutor runs them on its own thread (also the benchmarks' ml-worker).
#pragma once

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "net/executor.h"

namespace magnetar::storage::testing {

class ManualExecutor : public net::Executor {
 public:
  void execute(net::Task t) override {
    std::lock_guard lock(mu_);
    q_.push_back(std::move(t));
  }
  bool inExecutorThread() const override { return std::this_thread::get_id() == owner_; }
  // True while runPending() runs a task (a callback was posted, not run inline).
  bool running() const { return running_; }
  // Runs tasks (including ones they queue) until the queue is empty; returns how many ran.
  int runPending() {
    int n = 0;
    running_ = true;
    for (;;) {
      net::Task t;
      {
        std::lock_guard lock(mu_);
        if (q_.empty()) break;
        t = std::move(q_.front());
        q_.pop_front();
      }
      t();
      n++;
    }
    running_ = false;
    return n;
  }
  size_t pending() const {
    std::lock_guard lock(mu_);
    return q_.size();
  }

 private:
  const std::thread::id owner_ = std::this_thread::get_id();
  mutable std::mutex mu_;
  std::deque<net::Task> q_;
  bool running_ = false;
};

class ThreadExecutor : public net::Executor {
 public:
  ThreadExecutor() : thread_([this] { loop(); }) {}
  ~ThreadExecutor() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void execute(net::Task t) override {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(t));
    }
    cv_.notify_one();
  }
  bool inExecutorThread() const override { return std::this_thread::get_id() == thread_.get_id(); }
  // Runs f on the executor thread and waits for its result.
  template <typename F>
  auto sync(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    execute([&task] { task(); });
    return fut.get();
  }

 private:
  // Takes what is queued at once, as an event loop's pass (benchmarks stand it in for an
  // ml-worker).
  void loop() {
    for (;;) {
      std::deque<net::Task> batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        batch.swap(q_);
      }
      for (auto& t : batch) t();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<net::Task> q_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace magnetar::storage::testing

#include <ostream>

#include "storage/managed_ledger.h"

namespace magnetar::storage {
// gtest printer for positions.
inline void PrintTo(const Position& p, std::ostream* os) { *os << p.ledgerId << ":" << p.entryId; }
}  // namespace magnetar::storage
