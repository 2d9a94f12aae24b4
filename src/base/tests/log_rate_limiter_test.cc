#include "base/log_rate_limiter.h"

#include <gtest/gtest.h>

namespace magnetar {
namespace {

using std::chrono::seconds;

TEST(LogRateLimiterTest, OneLinePerIntervalWithTheSuppressedCount) {
  LogRateLimiter limit(seconds(10));
  auto t0 = LogRateLimiter::Clock::time_point{} + seconds(100);
  int64_t suppressed = -1;
  ASSERT_TRUE(limit.allow(&suppressed, t0));
  EXPECT_EQ(suppressed, 0);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limit.allow(&suppressed, t0 + seconds(i)));
  EXPECT_FALSE(limit.allow(&suppressed, t0 + seconds(9)));
  ASSERT_TRUE(limit.allow(&suppressed, t0 + seconds(10)));
  EXPECT_EQ(suppressed, 6);
  // The count restarts after each line.
  EXPECT_FALSE(limit.allow(&suppressed, t0 + seconds(11)));
  ASSERT_TRUE(limit.allow(&suppressed, t0 + seconds(30)));
  EXPECT_EQ(suppressed, 1);
}

}  // namespace
}  // namespace magnetar
