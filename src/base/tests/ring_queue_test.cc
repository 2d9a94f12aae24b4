#include "base/ring_queue.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace magnetar {
namespace {

TEST(RingQueueTest, FifoOrderAcrossWrapAndGrowth) {
  RingQueue<std::string> q;
  EXPECT_TRUE(q.empty());
  int next = 0, expect = 0;
  // Interleaved pushes and pops wrap the head around the array; pushes past the capacity grow it
  // with the order kept.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 7 + round; ++i) q.push_back(std::to_string(next++));
    for (int i = 0; i < 5 + round / 2 && !q.empty(); ++i) {
      EXPECT_EQ(q.front(), std::to_string(expect++));
      q.pop_front();
    }
    EXPECT_EQ(q.size(), static_cast<size_t>(next - expect));
    if (!q.empty()) {
      EXPECT_EQ(q[q.size() - 1], std::to_string(next - 1));
    }
  }
  while (!q.empty()) {
    EXPECT_EQ(q.front(), std::to_string(expect++));
    q.pop_front();
  }
  EXPECT_EQ(expect, next);
}

TEST(RingQueueTest, KeepsItsArrayUpToTheLimitAndReleasesElements) {
  auto token = std::make_shared<int>(1);
  RingQueue<std::shared_ptr<int>> q;
  for (int i = 0; i < 100; ++i) q.push_back(token);
  EXPECT_EQ(token.use_count(), 101);
  const size_t cap = q.capacity();
  EXPECT_GE(cap, 100u);
  q.clear();
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(q.capacity(), cap);  // reused by the next pushes: no allocation in steady state
  for (size_t i = 0; i < RingQueue<int>::kKeepSlots + 1; ++i) q.push_back(token);
  EXPECT_GT(q.capacity(), RingQueue<int>::kKeepSlots);
  q.clear();
  EXPECT_EQ(q.capacity(), 0u);  // a burst's large array is given back once empty
  q.push_back(token);
  RingQueue<std::shared_ptr<int>> moved = std::move(q);
  EXPECT_TRUE(q.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.size(), 1u);
  EXPECT_EQ(token.use_count(), 2);
}

}  // namespace
}  // namespace magnetar
