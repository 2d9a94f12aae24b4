#include "admin/thread_cpu.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
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
  // The spinning thread reports its own CPU clock; the snapshots read /proc. Waiting for an
  // amount of CPU (not of wall time) keeps the test exact on a loaded machine.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> selfNs{0};
  std::atomic<pid_t> tid{0};
  std::thread busy([&] {
    prctl(PR_SET_NAME, "cpu-test-busy");
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    while (!stop.load(std::memory_order_relaxed)) {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      selfNs =
          static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
    }
  });
  while (tid.load() == 0) std::this_thread::yield();
  ThreadCpuSnapshot a = takeThreadCpuSnapshot();
  const uint64_t from = selfNs.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (selfNs.load() < from + 100'000'000u && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ThreadCpuSnapshot b = takeThreadCpuSnapshot();
  const uint64_t to = selfNs.load();
  stop = true;
  busy.join();
  ASSERT_GE(to, from + 100'000'000u) << "the spinning thread got no CPU in 30 s";
  ASSERT_TRUE(a.byTid.count(tid.load()));
  ASSERT_TRUE(b.byTid.count(tid.load()));
  EXPECT_EQ(b.byTid[tid.load()].name, "cpu-test-busy");
  // /proc saw at least the CPU the thread counted between the two snapshots' reads.
  const uint64_t seen = b.byTid[tid.load()].cpuNs - a.byTid[tid.load()].cpuNs;
  EXPECT_GE(seen + 10'000'000u, to - from);
  auto u = threadUtilization(a, b);
  ASSERT_TRUE(u.count("cpu-test-busy"));
  EXPECT_GT(u["cpu-test-busy"], 0.0);
  EXPECT_LE(u["cpu-test-busy"], 1.0);
  EXPECT_NEAR(
      u["cpu-test-busy"],
      std::min(1.0, static_cast<double>(seen) / static_cast<double>(b.monotonicNs - a.monotonicNs)),
      1e-9);
}

}  // namespace
}  // namespace magnetar::admin
