#include "broker/key_shared_selector.h"

#include <gtest/gtest.h>

#include <map>

#include "broker/consumer.h"

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
