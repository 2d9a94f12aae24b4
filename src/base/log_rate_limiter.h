// One log line per interval for a repeated event, with a count of the lines held back.
#pragma once

#include <chrono>
#include <cstdint>

namespace magnetar {

// Not thread-safe: each owner keeps its own (e.g. a topic, on its executor).
class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogRateLimiter(Clock::duration interval) : interval_(interval) {}

  // True when a line may be written now (the first call, then at most once per interval); then
  // *suppressed is the number of calls refused since the last line, and that count restarts.
  // False: the call is counted as suppressed.
  bool allow(int64_t* suppressed, Clock::time_point now = Clock::now()) {
    if (logged_ && now - last_ < interval_) {
      ++suppressed_;
      return false;
    }
    logged_ = true;
    last_ = now;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  Clock::duration interval_;
  bool logged_ = false;
  Clock::time_point last_{};
  int64_t suppressed_ = 0;
};

}  // namespace magnetar
