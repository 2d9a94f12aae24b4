#include "net/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace magnetar::net {

namespace {

// Holds a started loop busy in one task until release(): what is handed to it meanwhile queues.
class LoopBlocker {
 public:
  explicit LoopBlocker(EventLoop& loop) {
    std::promise<void> blocked;
    loop.execute([&blocked, released = released_] {
      blocked.set_value();
      released.wait();
    });
    blocked.get_future().wait();
  }
  void release() { release_.set_value(); }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

}  // namespace

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
  LoopBlocker blocker(loop);
  uint64_t wakeupsBefore = loop.stats().wakeups.load();
  std::atomic<int> ran{0};
  for (int i = 0; i < 500; ++i) loop.execute([&] { ran++; });
  // The last task is queued before the loop is released too: queued after, it could find the
  // inbox drained and rightly need a wake-up of its own.
  std::promise<void> done;
  loop.execute([&] { done.set_value(); });
  blocker.release();
  done.get_future().wait();
  EXPECT_EQ(ran.load(), 500);
  // 501 tasks were handed over while the loop was busy: at most one more wake-up for all of them.
  EXPECT_LE(loop.stats().wakeups.load() - wakeupsBefore, 1u);
  EXPECT_GE(loop.stats().tasks.load(), 502u);
  loop.stop();
}

TEST(EventLoopTest, HeldTasksGoOutTogetherInOrderAfterThePass) {
  EventLoop a("test-a");
  EventLoop b("test-b");
  a.start();
  b.start();
  std::atomic<bool> passOver{false};
  std::atomic<int> ranEarly{0};
  std::vector<int> seen;  // b's thread only
  std::promise<void> done;
  const uint64_t wakeupsBefore = b.stats().wakeups.load();
  a.execute([&] {
    for (int i = 0; i < 100; ++i) {
      b.executeAfterPass([&, i] {
        EXPECT_TRUE(b.inExecutorThread());
        if (!passOver.load()) ranEarly++;
        seen.push_back(i);
        if (i == 99) done.set_value();
      });
    }
    // Handed over at once, b (idle) would run them during this sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    passOver = true;
  });
  done.get_future().wait();
  EXPECT_EQ(ranEarly.load(), 0);
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(b.stats().heldTasks.load(), 100u);
  EXPECT_EQ(b.stats().heldHandovers.load(), 1u);
  EXPECT_EQ(b.stats().wakeups.load() - wakeupsBefore, 1u);
  EXPECT_EQ(a.stats().heldTasks.load(), 0u);
  a.stop();
  b.stop();
}

TEST(EventLoopTest, ExecuteAfterPassOutsideAPassOrToItselfIsExecute) {
  EventLoop a("test-a");
  a.start();
  std::promise<void> fromOutside;
  a.executeAfterPass([&] { fromOutside.set_value(); });
  fromOutside.get_future().wait();
  std::promise<void> toItself;
  a.execute([&] { a.executeAfterPass([&] { toItself.set_value(); }); });
  toItself.get_future().wait();
  EXPECT_EQ(a.stats().heldTasks.load(), 0u);
  EXPECT_EQ(a.stats().heldHandovers.load(), 0u);
  a.stop();
}

TEST(EventLoopTest, ATaskThatThrowsDoesNotStopThePassOrLoseHeldTasks) {
  EventLoop a("test-a");
  EventLoop b("test-b");
  a.start();
  b.start();
  LoopBlocker blocker(a);
  // These three land in one pass of a.
  std::promise<void> heldRan;
  a.execute([&] { b.executeAfterPass([&] { heldRan.set_value(); }); });
  a.execute([] { throw std::runtime_error("task failed"); });
  std::promise<void> afterRan;
  a.execute([&] { afterRan.set_value(); });
  blocker.release();
  EXPECT_EQ(afterRan.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(heldRan.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  // The loop still takes work.
  std::promise<void> later;
  a.execute([&] { later.set_value(); });
  EXPECT_EQ(later.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  a.stop();
  b.stop();
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
