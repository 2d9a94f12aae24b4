#include "base/blocking_wait.h"

#include <gtest/gtest.h>

#include <thread>

namespace magnetar {
namespace {

TEST(BlockingWaitTest, WaitsOffExecutors) {
  std::promise<int> p;
  std::future<int> f = p.get_future();
  std::thread t([&p] { p.set_value(7); });
  EXPECT_EQ(blockingGet(f, "test"), 7);
  t.join();
  std::promise<int> never;
  std::future<int> g = never.get_future();
  EXPECT_FALSE(blockingGetFor(g, std::chrono::milliseconds(1), "test").has_value());
  EXPECT_EQ(executorThreadName(), nullptr);
}

TEST(BlockingWaitTest, LogsOnAnExecutorThreadByDefault) {
  std::thread t([] {
    markExecutorThread("ml-worker-0");
    std::promise<int> p;
    p.set_value(1);
    std::future<int> f = p.get_future();
    EXPECT_EQ(blockingGet(f, "a test's future"), 1);
    EXPECT_STREQ(executorThreadName(), "ml-worker-0");
  });
  t.join();
}

TEST(BlockingWaitDeathTest, AbortsOnAnExecutorThreadWhenStrict) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("MAGNETAR_STRICT_BLOCKING_WAITS", "1", 1);  // read once, by the death test's child
  EXPECT_DEATH(
      {
        std::thread t([] {
          markExecutorThread("ml-worker-0");
          std::promise<int> p;
          p.set_value(1);
          std::future<int> f = p.get_future();
          (void)blockingGet(f, "a test's future");
        });
        t.join();
      },
      "blocking wait on an executor thread");
  unsetenv("MAGNETAR_STRICT_BLOCKING_WAITS");
}

}  // namespace
}  // namespace magnetar
