#include "base/ring_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

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
  const size_t large = q.capacity();
  EXPECT_GT(large, RingQueue<int>::kKeepSlots);
  q.clear();
  EXPECT_EQ(q.capacity(), large);  // kept: the next fill may be as large
  q.trim();                        // pushed since the previous trim: not idle yet
  EXPECT_EQ(q.capacity(), large);
  q.trim();  // idle for a whole interval: given back
  EXPECT_EQ(q.capacity(), 0u);
  q.push_back(token);
  RingQueue<std::shared_ptr<int>> moved = std::move(q);
  EXPECT_TRUE(q.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.size(), 1u);
  EXPECT_EQ(token.use_count(), 2);
}

TEST(RingQueueTest, KeepsALargeArrayWhileFillsUseItAndShrinksAfterSmallFills) {
  using Q = RingQueue<int>;
  Q q;
  auto fill = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) q.push_back(static_cast<int>(i));
    while (!q.empty()) q.pop_front();
  };
  fill(4 * Q::kKeepSlots);
  const size_t large = q.capacity();
  EXPECT_GE(large, 4 * Q::kKeepSlots);
  // Fills of more than a quarter keep the array however often the queue empties.
  for (int i = 0; i < 100; ++i) fill(large / 4 + 1);
  EXPECT_EQ(q.capacity(), large);
  // kShrinkAfter - 1 small fills, then a large one: the count starts again.
  for (uint32_t i = 0; i + 1 < Q::kShrinkAfter; ++i) fill(large / 4);
  EXPECT_EQ(q.capacity(), large);
  fill(large / 2);
  for (uint32_t i = 0; i + 1 < Q::kShrinkAfter; ++i) fill(10);
  EXPECT_EQ(q.capacity(), large);
  fill(10);  // the kShrinkAfter-th small fill in a row gives it back
  EXPECT_EQ(q.capacity(), 0u);
  fill(10);
  EXPECT_GT(q.capacity(), 0u);
  EXPECT_LE(q.capacity(), Q::kKeepSlots);
}

TEST(RingQueueTest, PushFrontInsertAndEraseIfKeepOrderAcrossTheWrap) {
  RingQueue<std::string> q;
  // Move the head into the middle of the array so that the elements wrap around its end.
  for (int i = 0; i < 12; ++i) q.push_back("x");
  for (int i = 0; i < 12; ++i) q.pop_front();
  for (int i = 10; i < 20; ++i) q.push_back(std::to_string(i));
  for (int i = 9; i >= 0; --i) q.push_front(std::to_string(i));  // grows while wrapped
  ASSERT_EQ(q.size(), 20u);
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(q[i], std::to_string(i));
  EXPECT_EQ(q.back(), "19");
  // Random access iterators: a binary search and a range for.
  std::vector<int> ints;
  RingQueue<int> n;
  for (int i = 0; i < 40; i += 2) n.push_back(i);
  auto it = std::lower_bound(n.begin(), n.end(), 13);
  ASSERT_NE(it, n.end());
  EXPECT_EQ(*it, 14);
  EXPECT_EQ(it - n.begin(), 7);
  n.insert(it, 13);
  n.insert(n.begin(), -1);
  n.insert(n.end(), 100);
  for (int v : n) ints.push_back(v);
  std::vector<int> want = {-1, 0, 2, 4, 6, 8, 10, 12, 13, 14};
  for (int i = 16; i < 40; i += 2) want.push_back(i);
  want.push_back(100);
  EXPECT_EQ(ints, want);
  n.eraseIf([](int v) { return v % 4 == 0; });
  ints.assign(n.begin(), n.end());
  want.erase(std::remove_if(want.begin(), want.end(), [](int v) { return v % 4 == 0; }),
             want.end());
  EXPECT_EQ(ints, want);
  n.eraseIf([](int) { return true; });
  EXPECT_TRUE(n.empty());
}

}  // namespace
}  // namespace magnetar
