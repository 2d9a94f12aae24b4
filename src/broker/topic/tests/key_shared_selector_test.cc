#include "broker/topic/internal/key_shared_selector.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/murmur3.h"
#include "broker/topic/consumer.h"

namespace magnetar::broker {

namespace {
std::shared_ptr<Consumer> makeConsumer(uint64_t id, const std::string& name) {
  return std::make_shared<Consumer>(id, name, nullptr, proto::CommandSubscribe::Key_Shared, 0);
}
}  // namespace

TEST(KeySharedSelectorTest, AutoSplitCoversEveryHashAndIsStable) {
  KeySharedSelector sel(100);
  auto a = makeConsumer(1, "a"), b = makeConsumer(2, "b"), c = makeConsumer(3, "c");
  ASSERT_TRUE(sel.addConsumer(a.get()).isOk());
  ASSERT_TRUE(sel.addConsumer(b.get()).isOk());
  std::map<int32_t, Consumer*> before;
  for (int32_t h = 0; h < kKeySharedRangeSize; h += 97) before[h] = sel.select(h);
  ASSERT_TRUE(sel.addConsumer(c.get()).isOk());
  int moved = 0, movedElsewhere = 0, counts[3] = {0, 0, 0};
  for (auto& [h, owner] : before) {
    Consumer* now = sel.select(h);
    ASSERT_NE(now, nullptr);
    counts[now->id() - 1]++;
    if (now != owner) {
      moved++;
      if (now != c.get()) movedElsewhere++;
    }
  }
  // Consistent hashing: a join only moves hashes to the new consumer.
  EXPECT_EQ(movedElsewhere, 0);
  EXPECT_GT(moved, 0);
  for (int n : counts) EXPECT_GT(n, 0);
  sel.removeConsumer(c.get());
  for (auto& [h, owner] : before) EXPECT_EQ(sel.select(h), owner);
}

// select() searches from a per-bucket start; every hash must land where the ring's ranges (as
// rangesOf reports them, from the sorted points alone) say, for small and large rings, including
// the hashes after the last point (they wrap to the first).
TEST(KeySharedSelectorTest, ConsistentHashingSelectMatchesTheRingRanges) {
  for (int replicaPoints : {1, 3, 100, 500}) {
    for (int consumers : {1, 2, 7, 20}) {
      KeySharedSelector sel(replicaPoints);
      std::vector<std::shared_ptr<Consumer>> cs;
      for (int i = 0; i < consumers; ++i) {
        cs.push_back(makeConsumer(static_cast<uint64_t>(i + 1), "pod-" + std::to_string(i)));
        ASSERT_TRUE(sel.addConsumer(cs.back().get()).isOk());
      }
      std::vector<Consumer*> owner(kKeySharedRangeSize, nullptr);
      for (auto& c : cs) {
        for (auto [start, end] : sel.rangesOf(c.get())) {
          for (int32_t h = start; h <= end; ++h) owner[h] = c.get();
        }
      }
      for (int32_t h = 1; h < kKeySharedRangeSize; ++h) {
        ASSERT_EQ(sel.select(h), owner[h])
            << "hash " << h << ", " << consumers << " consumers x " << replicaPoints << " points";
      }
      // After a leave the index is rebuilt too.
      sel.removeConsumer(cs.front().get());
      for (int32_t h = 1; h < kKeySharedRangeSize; h += 13) {
        Consumer* now = sel.select(h);
        if (consumers == 1) {
          ASSERT_EQ(now, nullptr);
        } else {
          ASSERT_NE(now, nullptr);
          ASSERT_NE(now, cs.front().get());
        }
      }
    }
  }
}

TEST(KeySharedSelectorTest, StickyRangesRejectOverlap) {
  KeySharedSelector sel(10);
  auto a = makeConsumer(1, "a"), b = makeConsumer(2, "b");
  a->stickyRanges = {{0, 32767}};
  b->stickyRanges = {{32000, 65535}};
  ASSERT_TRUE(sel.addConsumer(a.get()).isOk());
  EXPECT_FALSE(sel.addConsumer(b.get()).isOk());
  b->stickyRanges = {{32768, 65535}};
  ASSERT_TRUE(sel.addConsumer(b.get()).isOk());
  EXPECT_EQ(sel.select(0), a.get());
  EXPECT_EQ(sel.select(32767), a.get());
  EXPECT_EQ(sel.select(32768), b.get());
  EXPECT_EQ(sel.select(65535), b.get());
}

}  // namespace magnetar::broker

namespace magnetar::broker {

// Ring points and message hashes as Pulsar 4.2.4 computes them (values printed by
// tools/pulsar-reference/hash-vectors/PinHashes.java). A message hash is owned by the first point
// at or after it, wrapping around.
TEST(KeySharedSelectorTest, RingPointsMatchPulsar) {
  KeySharedSelector sel(3);
  auto c1 = makeConsumer(1, "c1"), a = makeConsumer(2, "consumer-a");
  ASSERT_TRUE(sel.addConsumer(c1.get()).isOk());
  ASSERT_TRUE(sel.addConsumer(a.get()).isOk());
  // c1: 23534, 34662, 61273. consumer-a: 10473, 29366, 34096.
  EXPECT_EQ(sel.select(1), a.get());         // up to 10473
  EXPECT_EQ(sel.select(10473), a.get());
  EXPECT_EQ(sel.select(10474), c1.get());    // (10473, 23534]
  EXPECT_EQ(sel.select(23535), a.get());     // (23534, 29366]
  EXPECT_EQ(sel.select(34096), a.get());     // (29366, 34096]
  EXPECT_EQ(sel.select(34097), c1.get());    // (34096, 34662]
  EXPECT_EQ(sel.select(61273), c1.get());    // (34662, 61273]
  EXPECT_EQ(sel.select(61274), a.get());     // wraps to 10473
  // Message hashes use Pulsar's consistent range [1, 65535]: "key-0" -> 23544, "a" -> 42456.
  EXPECT_EQ(sel.hashOf("key-0"), 23544);
  EXPECT_EQ(sel.hashOf("a"), 42456);
  EXPECT_EQ(sel.select(sel.hashOf("key-0")), a.get());
  EXPECT_EQ(sel.select(sel.hashOf("a")), c1.get());
  // Ranges tile [1, 65535] with no gap.
  auto ra = sel.rangesOf(a.get()), rc = sel.rangesOf(c1.get());
  int64_t covered = 0;
  for (auto [s, e] : ra) covered += e - s + 1;
  for (auto [s, e] : rc) covered += e - s + 1;
  EXPECT_EQ(covered, 65535);
  EXPECT_EQ(ra.front(), (std::pair<int32_t, int32_t>{1, 10473}));
  EXPECT_EQ(ra.back(), (std::pair<int32_t, int32_t>{61274, 65535}));
}

// A second consumer with the same name takes name index 1: c1's index-1 points are 6275, 35253,
// 50223 (Pulsar's ConsumerNameIndexTracker); the index is freed when it leaves.
TEST(KeySharedSelectorTest, SameNameUsesNextNameIndex) {
  KeySharedSelector sel(3);
  auto first = makeConsumer(1, "c1"), second = makeConsumer(2, "c1");
  ASSERT_TRUE(sel.addConsumer(first.get()).isOk());
  ASSERT_TRUE(sel.addConsumer(second.get()).isOk());
  EXPECT_EQ(sel.select(6275), second.get());
  EXPECT_EQ(sel.select(23534), first.get());
  EXPECT_EQ(sel.select(50223), second.get());
  sel.removeConsumer(second.get());
  auto third = makeConsumer(3, "c1");
  ASSERT_TRUE(sel.addConsumer(third.get()).isOk());
  EXPECT_EQ(sel.select(6275), third.get());
}

TEST(KeySharedSelectorTest, StickyModeRejectsConsumerWithoutRanges) {
  KeySharedSelector sel(10);
  auto a = makeConsumer(1, "a"), b = makeConsumer(2, "b");
  a->stickyRanges = {{0, 100}};
  ASSERT_TRUE(sel.addConsumer(a.get()).isOk());
  EXPECT_TRUE(sel.stickyMode());
  EXPECT_FALSE(sel.addConsumer(b.get()).isOk());
  EXPECT_EQ(sel.hashOf(""), 1);  // 0 reads as 1, as Pulsar
}

}  // namespace magnetar::broker

namespace magnetar::broker {

// Pulsar's HashRangeAutoSplitStickyKeyConsumerSelector, with its own documented example:
// 0 -> 65536 (c1); then 0 -> 32768 (c2) -> 65536 (c1); c2 removed: 0 -> 65536 (c1).
TEST(KeySharedSelectorTest, HashRangeAutoSplitHalvesTheBiggestRange) {
  KeySharedSelector sel(100, /*consistentHashing=*/false);
  auto c1 = makeConsumer(1, "c1"), c2 = makeConsumer(2, "c2"), c3 = makeConsumer(3, "c3");
  ASSERT_TRUE(sel.addConsumer(c1.get()).isOk());
  EXPECT_EQ(sel.rangesOf(c1.get()), (std::vector<std::pair<int32_t, int32_t>>{{0, 65536}}));
  ASSERT_TRUE(sel.addConsumer(c2.get()).isOk());
  EXPECT_EQ(sel.rangesOf(c2.get()), (std::vector<std::pair<int32_t, int32_t>>{{0, 32768}}));
  EXPECT_EQ(sel.rangesOf(c1.get()), (std::vector<std::pair<int32_t, int32_t>>{{32769, 65536}}));
  EXPECT_EQ(sel.select(100), c2.get());
  EXPECT_EQ(sel.select(32768), c2.get());
  EXPECT_EQ(sel.select(32769), c1.get());
  // The third takes the upper half of the first biggest range, (0, 32768] -> (16384, 32768].
  ASSERT_TRUE(sel.addConsumer(c3.get()).isOk());
  EXPECT_EQ(sel.rangesOf(c3.get()), (std::vector<std::pair<int32_t, int32_t>>{{0, 16384}}));
  EXPECT_EQ(sel.rangesOf(c2.get()), (std::vector<std::pair<int32_t, int32_t>>{{16385, 32768}}));
  // The top range's owner leaves: the consumer below takes the top end.
  sel.removeConsumer(c1.get());
  EXPECT_EQ(sel.rangesOf(c2.get()), (std::vector<std::pair<int32_t, int32_t>>{{16385, 65536}}));
  EXPECT_EQ(sel.select(65535), c2.get());
  sel.removeConsumer(c3.get());
  EXPECT_EQ(sel.select(0), c2.get());
  sel.removeConsumer(c2.get());
  EXPECT_EQ(sel.select(5), nullptr);
  // Hashes of the range selectors are in [0, 65535] (Pulsar's default range).
  EXPECT_EQ(sel.hashOf("key-1"), static_cast<int32_t>(stickyKeyHash("key-1")));
}

}  // namespace magnetar::broker
