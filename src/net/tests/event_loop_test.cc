#include "net/event_loop.h"

#include <gtest/gtest.h>

#include <future>
#include <vector>

namespace magnetar::net {

TEST(EventLoopTest, RunsTasksInOrderOnItsThread) {
  EventLoop loop("test-loop");
  loop.start();
  std::vector<int> seen;
  std::promise<void> done;
  for (int i = 0; i < 1000; ++i) {
    loop.execute([&, i] {
      EXPECT_TRUE(loop.inExecutorThread());
      seen.push_back(i);
      if (i == 999) done.set_value();
    });
  }
  done.get_future().wait();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_FALSE(loop.inExecutorThread());
  loop.stop();
}

TEST(EventLoopTest, WakeupsCoalesceWhileABurstIsPending) {
  EventLoop loop("test-loop");
  loop.start();
  // Block the loop so that a burst of hand-overs piles up behind one wake-up.
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<void> blocked;
  loop.execute([&] {
    blocked.set_value();
    released.wait();
  });
  blocked.get_future().wait();
  uint64_t wakeupsBefore = loop.stats().wakeups.load();
  std::atomic<int> ran{0};
  for (int i = 0; i < 500; ++i) loop.execute([&] { ran++; });
  // The last task is queued before the loop is released too: queued after, it could find the
  // inbox drained and rightly need a wake-up of its own.
  std::promise<void> done;
  loop.execute([&] { done.set_value(); });
  release.set_value();
  done.get_future().wait();
  EXPECT_EQ(ran.load(), 500);
  // 501 tasks were handed over while the loop was busy: at most one more wake-up for all of them.
  EXPECT_LE(loop.stats().wakeups.load() - wakeupsBefore, 1u);
  EXPECT_GE(loop.stats().tasks.load(), 502u);
  loop.stop();
}

TEST(EventLoopGroupTest, RoundRobinAndKeyed) {
  EventLoopGroup g("grp", 3);
  EXPECT_EQ(&g.next(), &g.at(0));
  EXPECT_EQ(&g.next(), &g.at(1));
  EXPECT_EQ(&g.next(), &g.at(2));
  EXPECT_EQ(&g.next(), &g.at(0));
  EXPECT_EQ(&g.forKey(7), &g.at(1));
  EXPECT_EQ(g.at(2).name(), "grp-2");
}

}  // namespace magnetar::net
