#include "admin/thread_cpu.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace magnetar::admin {
namespace {

TEST(ThreadCpu, ParsesStatLinesWithAwkwardNames) {
  std::string comm;
  uint64_t ticks = 0;
  // Fields 14 and 15 (utime 7, stime 5) after a comm holding spaces and parentheses.
  ASSERT_TRUE(
      parseTaskStat("123 (odd (name) x) S 1 2 3 4 5 6 7 8 9 10 7 5 0 0 20 0 1 0", &comm, &ticks));
  EXPECT_EQ(comm, "odd (name) x");
  EXPECT_EQ(ticks, 12u);
  EXPECT_FALSE(parseTaskStat("123 no-parens S 1 2", &comm, &ticks));
  EXPECT_FALSE(parseTaskStat("123 (short) S 1 2 3", &comm, &ticks));
  EXPECT_FALSE(parseTaskStat("1 (x) S 1 2 3 4 5 6 7 8 9 10 abc 5 0", &comm, &ticks));

  uint64_t ns = 0;
  ASSERT_TRUE(parseSchedstat("1466714 8960021 2", &ns));
  EXPECT_EQ(ns, 1466714u);
  EXPECT_FALSE(parseSchedstat("garbage", &ns));
}

TEST(ThreadCpu, UtilizationPerNameOverTheInterval) {
  ThreadCpuSnapshot prev;
  prev.monotonicNs = 0;
  prev.byTid[1] = {"pulsar-io-0", 1'000'000'000};
  prev.byTid[2] = {"storage-read", 0};
  ThreadCpuSnapshot cur;
  cur.monotonicNs = 2'000'000'000;                // 2 s later
  cur.byTid[1] = {"pulsar-io-0", 2'000'000'000};  // 1 s of CPU in 2 s: 0.5
  cur.byTid[2] = {"storage-read", 200'000'000};   // 0.1
  cur.byTid[3] = {"storage-read", 600'000'000};   // new since prev: counts from 0: 0.3
  cur.byTid[4] = {"spinner", 9'000'000'000};      // rounding: capped at one core
  auto u = threadUtilization(prev, cur);
  EXPECT_DOUBLE_EQ(u["pulsar-io-0"], 0.5);
  EXPECT_DOUBLE_EQ(u["storage-read"], 0.4);  // same name: summed
  EXPECT_DOUBLE_EQ(u["spinner"], 1.0);
  EXPECT_EQ(u.size(), 3u);
}

TEST(ThreadCpu, SeesABusyNamedThreadOfThisProcess) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    prctl(PR_SET_NAME, "cpu-test-busy");
    volatile uint64_t x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ThreadCpuSnapshot a = takeThreadCpuSnapshot();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ThreadCpuSnapshot b = takeThreadCpuSnapshot();
  stop = true;
  busy.join();
  auto u = threadUtilization(a, b);
  ASSERT_TRUE(u.count("cpu-test-busy"));
  EXPECT_GT(u["cpu-test-busy"], 0.2);  // a spinning thread, even on a loaded 2-core machine
  EXPECT_LE(u["cpu-test-busy"], 1.0);
}

}  // namespace
}  // namespace magnetar::admin
