#include "base/token_bucket.h"

#include <gtest/gtest.h>

namespace magnetar {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kMs = 1'000'000;

TEST(TokenBucket, OffAlwaysHasTokens) {
  TokenBucket b;
  EXPECT_FALSE(b.enabled());
  EXPECT_TRUE(b.consume(1'000'000, 0));
  EXPECT_EQ(b.throttleNanos(0), 0);
  b.configure(0, kSec, 0);
  EXPECT_FALSE(b.enabled());
}

TEST(TokenBucket, StartsFullAndGoesNegative) {
  TokenBucket b;
  b.configure(100, kSec, 5 * kSec);
  EXPECT_EQ(b.tokens(5 * kSec), 100);
  EXPECT_TRUE(b.consume(99, 5 * kSec));
  EXPECT_FALSE(b.consume(1, 5 * kSec));   // balance 0: throttle
  EXPECT_FALSE(b.consume(50, 5 * kSec));  // the work happened: -50
  EXPECT_EQ(b.tokens(5 * kSec), -50);
  // Back to 16 ms' worth (1.6 -> 1 token): 51 tokens at 100/s = 510 ms.
  EXPECT_EQ(b.throttleNanos(5 * kSec), 510 * kMs);
}

TEST(TokenBucket, RefillsAtTheRateAndCapsAtCapacity) {
  TokenBucket b;
  b.configure(1000, kSec, 0);
  EXPECT_FALSE(b.consume(1000, 0));
  EXPECT_EQ(b.tokens(250 * kMs), 250);
  EXPECT_EQ(b.tokens(500 * kMs), 500);
  EXPECT_EQ(b.tokens(10 * kSec), 1000);  // capacity: one period's rate
}

TEST(TokenBucket, CarriesTheRemainderAtLowRates) {
  // 3 tokens per second, polled every 100 ms: the fractions add up, none is lost or doubled.
  TokenBucket b;
  b.configure(3, kSec, 0);
  EXPECT_FALSE(b.consume(3, 0));
  for (int64_t t = 100 * kMs; t <= 10 * kSec; t += 100 * kMs) (void)b.tokens(t);
  EXPECT_EQ(b.tokens(10 * kSec), 3);  // capped
  TokenBucket c;
  c.configure(3, kSec, 0);
  EXPECT_FALSE(c.consume(3, 0));
  for (int64_t t = 100 * kMs; t <= 900 * kMs; t += 100 * kMs) (void)c.tokens(t);
  EXPECT_EQ(c.tokens(999 * kMs), 2);  // 2.997 tokens
  EXPECT_EQ(c.tokens(1000 * kMs), 3);
}

TEST(TokenBucket, SustainedRateMatchesTheConfiguredOne) {
  // A consumer that takes what it may each millisecond gets rate * seconds (plus the initial
  // capacity) over 10 s.
  TokenBucket b;
  b.configure(700, kSec, 0);
  int64_t taken = 0;
  for (int64_t t = 0; t <= 10 * kSec; t += kMs) {
    if (b.hasTokens(t)) {
      (void)b.consume(1, t);
      ++taken;
    }
  }
  EXPECT_EQ(taken, 700 * 11);
}

TEST(TokenBucket, PeriodLongerThanASecond) {
  TokenBucket b;
  b.configure(10, 10 * kSec, 0);
  EXPECT_FALSE(b.consume(10, 0));
  EXPECT_EQ(b.tokens(5 * kSec), 5);
  EXPECT_EQ(b.throttleNanos(5 * kSec), 0);
}

TEST(TokenBucket, ReconfigureAppliesAtOnce) {
  TokenBucket b;
  b.configure(10, kSec, 0);
  EXPECT_FALSE(b.consume(100, 0));
  b.configure(1000, kSec, 0);
  EXPECT_EQ(b.tokens(0), 1000);
  b.configure(0, kSec, 0);
  EXPECT_TRUE(b.hasTokens(0));
}

TEST(TokenBucket, LargeRatesDoNotOverflow) {
  TokenBucket b;
  b.configure(int64_t{1} << 40, 3600 * kSec, 0);
  EXPECT_FALSE(b.consume(int64_t{1} << 40, 0));
  EXPECT_EQ(b.tokens(1800 * kSec), int64_t{1} << 39);
}

// A rate of INT64_MAX (Pulsar's "no limit" written as Long.MAX_VALUE) never wraps the balance
// negative, however long the bucket runs (found by a breaker: replication stopped for good).
TEST(TokenBucket, MaxRateNeverRunsOut) {
  TokenBucket b;
  b.configure(INT64_MAX, kSec, 0);
  for (int64_t t = 0; t <= 3600 * kSec; t += 7 * kSec + 3) {
    EXPECT_TRUE(b.consume(1 << 20, t)) << t;
    EXPECT_GT(b.tokens(t), 0) << t;
    EXPECT_EQ(b.throttleNanos(t), 0) << t;
  }
}

TEST(MessageRateLimiter, BothLimitsHold) {
  MessageRateLimiter l;
  EXPECT_FALSE(l.enabled());
  l.configure(100, 1000, kSec, 0);
  EXPECT_TRUE(l.enabled());
  EXPECT_FALSE(l.consume(10, 500, 0));
  EXPECT_TRUE(l.consume(10, 500, 0));  // bytes ran out
  EXPECT_FALSE(l.hasTokens(0));
  EXPECT_EQ(l.throttleNanos(0), 16 * kMs);  // 16 bytes at 1000/s
  EXPECT_TRUE(l.hasTokens(16 * kMs));
  l.configure(100, 0, kSec, 0);  // the byte limit removed
  EXPECT_EQ(l.byteTokens(0), INT64_MAX);
  EXPECT_EQ(l.msgTokens(0), 100);
  l.configure(0, 0, kSec, 0);
  EXPECT_FALSE(l.enabled());
  EXPECT_FALSE(l.consume(1'000'000, 1'000'000, 0));
}

}  // namespace
}  // namespace magnetar
