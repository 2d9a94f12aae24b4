// Exponential back-off for reconnects and retries (Pulsar's Backoff). Internal to src/client.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace magnetar::client {

// next() returns initial, then doubles up to max, with up to 10% random reduction (jitter, as
// Pulsar's Backoff) so that many clients do not retry in lock-step. Thread: not synchronized.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max)
      : initial_(std::max<int64_t>(1, initial.count())), max_(std::max(max.count(), initial_)),
        next_(initial_) {}

  std::chrono::milliseconds next() {
    int64_t current = next_;
    next_ = std::min(max_, next_ * 2);
    int64_t jitter = current / 10;
    if (jitter > 0) current -= std::uniform_int_distribution<int64_t>(0, jitter)(rng_);
    return std::chrono::milliseconds(current);
  }
  void reset() { next_ = initial_; }

 private:
  int64_t initial_;
  int64_t max_;
  int64_t next_;
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace magnetar::client
