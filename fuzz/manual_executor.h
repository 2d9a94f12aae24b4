// ManualExecutor: a net::Executor whose tasks the fuzz thread runs itself (runUntil), standing in
// for a ledger's ml-worker in fuzz_journal and the seed generator.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "fuzz_util.h"
#include "net/executor.h"

namespace magnetar::fuzz {

// Thread: execute() from any thread; runUntil() on the creating thread.
class ManualExecutor final : public net::Executor {
 public:
  void execute(net::Task t) override {
    std::lock_guard lock(mu_);
    q_.push_back(std::move(t));
    cv_.notify_one();
  }
  bool inExecutorThread() const override { return std::this_thread::get_id() == owner_; }

  // Runs tasks until done() holds; fails after 20 s (a callback that never comes is a finding).
  template <typename P>
  void runUntil(P done, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      net::Task t;
      {
        std::unique_lock lock(mu_);
        if (!cv_.wait_until(lock, deadline, [&] { return !q_.empty(); })) {
          fail(std::string("callback never ran: ") + what);
        }
        t = std::move(q_.front());
        q_.pop_front();
      }
      t();
    }
  }

 private:
  std::thread::id owner_ = std::this_thread::get_id();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<net::Task> q_;
};

}  // namespace magnetar::fuzz
