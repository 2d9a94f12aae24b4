// TaskThread: one named thread running posted tasks in order, plus an optional periodic callback.
// Used for storage's background work (metadata writes, checkpoints, reclaim, ticks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/logging.h"

namespace magnetar::storage {

// Thread: post() from any thread.
class TaskThread {
 public:
  TaskThread(std::string name, int periodMs, std::function<void()> periodic)
      : name_(std::move(name)), periodMs_(periodMs), periodic_(std::move(periodic)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~TaskThread() { stop(); }

  void post(std::function<void()> t) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(t));
    }
    cv_.notify_one();
  }
  // Runs what is queued, then joins.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }
  bool inThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop() {
    setThreadName(name_);
    auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(periodMs_);
    for (;;) {
      std::function<void()> t;
      bool tick = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, next, [&] { return stop_ || !q_.empty(); });
        if (!q_.empty()) {
          t = std::move(q_.front());
          q_.pop_front();
        } else if (stop_) {
          return;
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= next) {
          tick = true;
          next = now + std::chrono::milliseconds(periodMs_);
        }
      }
      if (t) t();
      if (tick && periodic_) periodic_();
    }
  }

  std::string name_;
  int periodMs_;
  std::function<void()> periodic_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace magnetar::storage
