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

// countOf/hasOlder answer a hash with nothing waiting from a bitmap (hash mod 65,536); hashes
// sharing a bucket (outside [0, 65536), as sticky or non-consistent hashing may give) must not
// hide each other when one of them leaves.
TEST(ReplaySetTest, CountsStayRightForHashesSharingABitmapBucket) {
  const int a = 0;
  ReplaySet set;
  const int32_t h1 = 7, h2 = 7 + 65536, h3 = 7 + 2 * 65536;
  set.add({1, 1}, h1, group(a));
  set.add({1, 2}, h2, group(a));
  set.add({1, 3}, h2, group(a));
  set.add({1, 4}, h3, group(a));
  EXPECT_EQ(set.countOf(h1), 1u);
  EXPECT_EQ(set.countOf(h2), 2u);
  EXPECT_EQ(set.countOf(8), 0u);
  std::vector<ReplaySet::Item> out;
  set.take(
      1, [](const Consumer*) { return 100; }, &out);  // h1's only entry leaves
  EXPECT_EQ(idsOf(out), (std::vector<int64_t>{1}));
  EXPECT_EQ(set.countOf(h1), 0u);
  EXPECT_EQ(set.countOf(h2), 2u);  // still found: its bucket is shared
  EXPECT_TRUE(set.hasOlder(h2, {1, 3}));
  EXPECT_EQ(set.countOf(h3), 1u);
  set.take(
      2, [](const Consumer*) { return 100; }, &out);  // h2 leaves
  EXPECT_EQ(set.countOf(h2), 0u);
  EXPECT_EQ(set.countOf(h3), 1u);
  EXPECT_TRUE(set.hasOlder(h3, {1, 5}));
  set.take(
      1, [](const Consumer*) { return 100; }, &out);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.countOf(h3), 0u);
  EXPECT_FALSE(set.hasOlder(h3, {1, 5}));
  set.add({1, 6}, h1, group(a));  // a bucket emptied and used again
  EXPECT_EQ(set.countOf(h1), 1u);
  set.clear();
  EXPECT_EQ(set.countOf(h1), 0u);
  set.add({1, 7}, h2, group(a));
  EXPECT_EQ(set.countOf(h2), 1u);
  EXPECT_EQ(set.countOf(h1), 0u);
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

}  // namespace
}  // namespace magnetar::broker
