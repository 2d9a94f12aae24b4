// TokenBucket and MessageRateLimiter: the rate limiters behind publish, dispatch and resource
// group quotas, as Pulsar 4's AsyncTokenBucket (PIP-322): tokens are consumed first and may go
// negative (the work already happened); the caller throttles while the balance is not positive
// and asks throttleNanos() how long until it is. Capacity = one period's rate; a new bucket
// starts full. Time is passed in (steady-clock nanoseconds), so tests drive a fake clock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace magnetar {

// Thread: any (atomics; a refill is claimed by one thread through a compare-and-swap on the
// tokens it adds). Never locks.
class TokenBucket {
 public:
  // Pulsar's AsyncTokenBucket resolution: after a throttle, wait until this long's worth of
  // tokens is back (at least one token).
  static constexpr int64_t kResolutionNanos = 16'000'000;

  // `rate` tokens per `periodNanos` (> 0); rate <= 0 turns the bucket off (always has tokens).
  // The bucket is refilled to capacity (= rate), as Pulsar builds a new bucket on a change.
  void configure(int64_t rate, int64_t periodNanos, int64_t nowNanos) {
    periodNanos_.store(std::max<int64_t>(1, periodNanos), std::memory_order_relaxed);
    tokens_.store(std::max<int64_t>(0, rate), std::memory_order_relaxed);
    baseNanos_.store(nowNanos, std::memory_order_relaxed);
    granted_.store(0, std::memory_order_relaxed);
    rate_.store(std::max<int64_t>(0, rate), std::memory_order_release);
  }
  bool enabled() const { return rate_.load(std::memory_order_relaxed) > 0; }
  int64_t rate() const { return rate_.load(std::memory_order_relaxed); }
  int64_t periodNanos() const { return periodNanos_.load(std::memory_order_relaxed); }

  // Takes `n` tokens (the balance may go negative); true while tokens remain (> 0). Off: true.
  bool consume(int64_t n, int64_t nowNanos) {
    if (!enabled()) return true;
    refill(nowNanos);
    return tokens_.fetch_sub(n, std::memory_order_relaxed) - n > 0;
  }
  // The balance after refilling to `nowNanos` (INT64_MAX when off).
  int64_t tokens(int64_t nowNanos) {
    if (!enabled()) return INT64_MAX;
    refill(nowNanos);
    return tokens_.load(std::memory_order_relaxed);
  }
  bool hasTokens(int64_t nowNanos) { return tokens(nowNanos) > 0; }
  // Nanoseconds until the balance reaches kResolutionNanos' worth of tokens (0 when it has
  // them or the bucket is off): Pulsar's calculateThrottlingDuration.
  int64_t throttleNanos(int64_t nowNanos) {
    const int64_t rate = rate_.load(std::memory_order_relaxed);
    if (rate <= 0) return 0;
    const int64_t period = periodNanos();
    const int64_t target = std::max<int64_t>(1, scale(kResolutionNanos, rate, period));
    const int64_t need = target - tokens(nowNanos);
    return need <= 0 ? 0 : scale(need, period, rate);
  }

 private:
  // a * b / c without overflow (a, b >= 0; c > 0), saturated at INT64_MAX (a rate near
  // INT64_MAX, which Pulsar takes as no limit, must not wrap to a negative balance).
  static int64_t scale(int64_t a, int64_t b, int64_t c) {
    const __int128 v = static_cast<__int128>(a) * b / c;
    return v > INT64_MAX ? INT64_MAX : static_cast<int64_t>(v);
  }
  // Tokens are granted for the time since configure(): total = elapsed * rate / period, exact
  // (no remainder is lost at low rates); a refill adds what was granted since the last one.
  void refill(int64_t nowNanos) {
    const int64_t rate = rate_.load(std::memory_order_acquire);
    const int64_t elapsed = nowNanos - baseNanos_.load(std::memory_order_relaxed);
    if (elapsed <= 0) return;
    const int64_t total = scale(elapsed, rate, periodNanos());
    int64_t granted = granted_.load(std::memory_order_relaxed);
    if (total <= granted) return;
    if (!granted_.compare_exchange_strong(granted, total, std::memory_order_relaxed)) return;
    const int64_t add = total - granted;
    int64_t cur = tokens_.load(std::memory_order_relaxed);
    // cur + add in 128 bits: both may be near INT64_MAX with a huge rate.
    while (
        !tokens_.compare_exchange_weak(cur,
                                       static_cast<int64_t>(std::min<__int128>(
                                           static_cast<__int128>(cur) + add, std::max(cur, rate))),
                                       std::memory_order_relaxed)) {
    }
  }

  std::atomic<int64_t> rate_{0};
  std::atomic<int64_t> periodNanos_{1'000'000'000};
  std::atomic<int64_t> tokens_{0};
  std::atomic<int64_t> baseNanos_{0};  // configure()'s time
  std::atomic<int64_t> granted_{0};    // tokens granted since baseNanos_
};

// A message-count bucket and a byte bucket, each optional (Pulsar's PublishRate / DispatchRate:
// both limits hold at once). Thread: any.
class MessageRateLimiter {
 public:
  // Rates per `periodNanos`; <= 0 leaves that bucket off. Refills both (a change applies at once).
  void configure(int64_t msgRate, int64_t byteRate, int64_t periodNanos, int64_t nowNanos) {
    msgs_.configure(msgRate, periodNanos, nowNanos);
    bytes_.configure(byteRate, periodNanos, nowNanos);
    enabled_.store(msgs_.enabled() || bytes_.enabled(), std::memory_order_release);
  }
  // One relaxed load: the whole cost of a limiter that is off.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // Consumes; true when either bucket ran out (the caller throttles).
  bool consume(int64_t msgs, int64_t bytes, int64_t nowNanos) {
    bool ok = msgs_.consume(msgs, nowNanos);
    ok &= bytes_.consume(bytes, nowNanos);
    return !ok;
  }
  bool hasTokens(int64_t nowNanos) {
    return msgs_.hasTokens(nowNanos) && bytes_.hasTokens(nowNanos);
  }
  int64_t throttleNanos(int64_t nowNanos) {
    return std::max(msgs_.throttleNanos(nowNanos), bytes_.throttleNanos(nowNanos));
  }
  // The balances (INT64_MAX for a bucket that is off).
  int64_t msgTokens(int64_t nowNanos) { return msgs_.tokens(nowNanos); }
  int64_t byteTokens(int64_t nowNanos) { return bytes_.tokens(nowNanos); }
  const TokenBucket& msgBucket() const { return msgs_; }
  const TokenBucket& byteBucket() const { return bytes_; }

 private:
  TokenBucket msgs_;
  TokenBucket bytes_;
  std::atomic<bool> enabled_{false};
};

}  // namespace magnetar
