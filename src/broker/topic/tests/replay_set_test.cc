// ReplaySet: entries taken oldest first from the groups that may take them, each at most its
// quota; held entries and closed groups are never visited.
#include "broker/topic/replay_set.h"

#include <gtest/gtest.h>

#include <vector>

namespace magnetar::broker {
namespace {

using storage::Position;

// Stand-ins for consumers: ReplaySet only compares their addresses.
const Consumer* group(const int& tag) { return reinterpret_cast<const Consumer*>(&tag); }

std::vector<int64_t> idsOf(const std::vector<ReplaySet::Item>& items) {
  std::vector<int64_t> ids;
  for (const auto& [p, hash] : items) ids.push_back(p.entryId);
  return ids;
}

TEST(ReplaySetTest, TakesOldestFirstFromOpenGroupsWithinTheirQuotas) {
  const int a = 0, b = 0;
  ReplaySet set;
  EXPECT_TRUE(set.add({1, 5}, 10, group(a)));
  EXPECT_TRUE(set.add({1, 2}, 20, group(b)));
  EXPECT_TRUE(set.add({1, 7}, -1, ReplaySet::kHeld));  // no hash: any consumer
  EXPECT_TRUE(set.add({1, 3}, 20, group(b)));
  EXPECT_TRUE(set.add({1, 9}, 30, ReplaySet::kHeld));
  EXPECT_FALSE(set.add({1, 3}, 20, group(b)));  // waits already
  EXPECT_EQ(set.size(), 5u);
  EXPECT_EQ(set.first(), (Position{1, 2}));
  std::vector<ReplaySet::Item> out;
  set.take(
      10, [&](const Consumer* g) { return g == group(b) ? 1 : 0; }, &out);
  EXPECT_EQ(idsOf(out), (std::vector<int64_t>{2, 7}));  // b's quota is 1, a is closed
  EXPECT_EQ(set.visited(), 2u);
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE(set.hasOlder(20, {1, 4}));
  EXPECT_FALSE(set.hasOlder(20, {1, 3}));
  EXPECT_FALSE(set.hasOlder(10, {1, 5}));
  EXPECT_EQ(set.countOf(20), 1u);
}

TEST(ReplaySetTest, HeldEntriesGoOnceTheirHashIsRegrouped) {
  const int a = 0;
  ReplaySet set;
  set.add({1, 1}, 10, ReplaySet::kHeld);
  set.add({1, 2}, 10, group(a));  // joins its hash's group: held
  std::vector<ReplaySet::Item> out;
  auto all = [](const Consumer*) { return 100; };
  set.take(10, all, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(set.visited(), 0u);
  set.regroupHash(10, group(a));
  set.take(10, all, &out);
  EXPECT_EQ(idsOf(out), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.countOf(10), 0u);
}

// The work of a take is what it takes: 100,000 entries of a consumer without permits cost nothing.
TEST(ReplaySetTest, ClosedGroupOfAHundredThousandEntriesIsNotVisited) {
  const int slow = 0, fast = 0;
  ReplaySet set;
  for (int64_t i = 0; i < 100000; ++i)
    set.add({1, 2 * i}, static_cast<int32_t>(i % 5000) + 1, group(slow));
  for (int64_t i = 0; i < 1000; ++i) set.add({1, 2 * i + 1}, 6000, group(fast));
  auto quota = [&](const Consumer* g) { return g == group(fast) ? 10 : 0; };
  std::vector<ReplaySet::Item> out;
  for (int round = 0; round < 100; ++round) set.take(100, quota, &out);
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_EQ(set.visited(), 1000u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].first.entryId, 2 * int64_t(i) + 1);
  EXPECT_EQ(set.size(), 100000u);
  set.regroupAll([&](int32_t) { return group(fast); });
  out.clear();
  set.take(
      100, [](const Consumer*) { return 1000; }, &out);
  EXPECT_EQ(out.front().first, (Position{1, 0}));
  EXPECT_EQ(out.size(), 100u);
}

// Positions put back out of order (a consumer left, older entries came back) still go oldest
// first, per group and per hash, across the vectors' compaction (more than 64 taken).
TEST(ReplaySetTest, OutOfOrderAddsAndRegroupsKeepPositionOrder) {
  const int a = 0, b = 0;
  ReplaySet set;
  for (int64_t i = 100; i < 300; ++i) set.add({1, 2 * i}, static_cast<int32_t>(i % 3), group(a));
  std::vector<ReplaySet::Item> out;
  auto all = [](const Consumer*) { return 1000; };
  set.take(150, all, &out);  // 200..498 taken; 500..598 wait
  EXPECT_EQ(out.back().first.entryId, 498);
  EXPECT_TRUE(set.add({1, 5}, 1, group(b)));     // before the head: hash 1's group is a
  EXPECT_TRUE(set.add({1, 503}, 1, group(b)));   // between
  EXPECT_FALSE(set.add({1, 503}, 1, group(a)));  // waits already
  EXPECT_FALSE(set.add({1, 5}, 1, group(a)));
  EXPECT_TRUE(set.add({1, 7}, -1, ReplaySet::kHeld));
  EXPECT_TRUE(set.add({1, 3}, -1, ReplaySet::kHeld));
  EXPECT_FALSE(set.add({1, 3}, -1, ReplaySet::kHeld));
  EXPECT_EQ(set.size(), 54u);
  EXPECT_EQ(set.first(), (Position{1, 3}));
  EXPECT_EQ(set.countOf(1), 19u);  // 2i for i % 3 == 1 (17), 5 and 503
  EXPECT_TRUE(set.hasOlder(1, {1, 6}));
  EXPECT_FALSE(set.hasOlder(1, {1, 5}));
  set.regroupHash(1, group(b));  // hash 1 moves to b, in order
  out.clear();
  set.take(
      1000, [&](const Consumer* g) { return g == group(b) ? 3 : 0; }, &out);
  EXPECT_EQ(idsOf(out), (std::vector<int64_t>{3, 5, 7, 500, 503}));
  out.clear();
  set.regroupAll([&](int32_t) { return group(b); });
  set.take(1000, all, &out);
  ASSERT_EQ(out.size(), 49u);
  for (size_t i = 1; i < out.size(); ++i) EXPECT_LT(out[i - 1].first, out[i].first);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.countOf(1), 0u);
  EXPECT_FALSE(set.hasOlder(1, {1, 1000}));
  EXPECT_TRUE(set.add({1, 1}, 1, group(a)));  // an emptied hash takes its new group
  out.clear();
  set.take(
      10, [&](const Consumer* g) { return g == group(a) ? 1 : 0; }, &out);
  EXPECT_EQ(idsOf(out), (std::vector<int64_t>{1}));
}

// A hash record stays while empty, but many empty ones are swept; counts stay right.
TEST(ReplaySetTest, ManyHashesComeAndGo) {
  const int a = 0;
  ReplaySet set;
  std::vector<ReplaySet::Item> out;
  auto all = [](const Consumer*) { return 1 << 20; };
  int64_t next = 0;
  for (int round = 0; round < 4; ++round) {
    for (int32_t h = 0; h < 20000; ++h) set.add({1, next++}, h, group(a));
    EXPECT_EQ(set.countOf(19999), 1u);
    set.take(1 << 20, all, &out);
    EXPECT_TRUE(set.empty());
    EXPECT_EQ(set.countOf(19999), 0u);
  }
  ASSERT_EQ(out.size(), 80000u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].first.entryId, int64_t(i));
}

}  // namespace
}  // namespace magnetar::broker
