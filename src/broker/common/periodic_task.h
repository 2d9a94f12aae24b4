// PeriodicTask: a named thread that runs one function at a fixed period (Pulsar's scheduled
// monitors, e.g. pulsar-msg-expiry-monitor, pulsar-backlog-quota-checker).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/event_loop.h"

namespace magnetar::broker {

// Thread: construct and stop from the owner; fn runs on the task's own thread, first one period
// after start, then every period (a run longer than the period delays the next one).
class PeriodicTask {
 public:
  PeriodicTask(std::string threadName, std::chrono::milliseconds period, std::function<void()> fn)
      : loop_(std::move(threadName)), timer_(loop_.context()), period_(period), fn_(std::move(fn)) {
    loop_.start();
    loop_.execute([this] { schedule(); });
  }
  ~PeriodicTask() { stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Joins the thread; fn does not run after this returns.
  void stop() { loop_.stop(); }

 private:
  void schedule() {
    timer_.expires_after(period_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      fn_();
      schedule();
    });
  }

  net::EventLoop loop_;
  boost::asio::steady_timer timer_;  // on loop_; destroyed before it
  std::chrono::milliseconds period_;
  std::function<void()> fn_;
};

}  // namespace magnetar::broker
