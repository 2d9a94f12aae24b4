#include "broker/topic/pending_acks.h"

#include <gtest/gtest.h>

#include <vector>

namespace magnetar::broker {
namespace {

using storage::Position;

std::vector<int64_t> entryIds(const PendingAcks& p) {
  std::vector<int64_t> out;
  p.forEach([&](Position pos, const PendingAck&) { out.push_back(pos.entryId); });
  return out;
}

TEST(PendingAcksTest, KeepsPositionOrderWhateverTheAddOrder) {
  PendingAcks p;
  for (int64_t e : {3, 5, 9}) p.add({1, e}, PendingAck{1, -1, 1});
  p.add({1, 4}, PendingAck{2, 7, 2});  // a redelivery older than later dispatches
  p.add({0, 8}, PendingAck{1, -1, 1});  // an older ledger
  p.add({1, 5}, PendingAck{9, 9, 9});   // already pending: unchanged
  EXPECT_EQ(p.size(), 5u);
  std::vector<Position> all;
  p.forEach([&](Position pos, const PendingAck&) { all.push_back(pos); });
  EXPECT_EQ(all, (std::vector<Position>{{0, 8}, {1, 3}, {1, 4}, {1, 5}, {1, 9}}));
  ASSERT_NE(p.find({1, 4}), nullptr);
  EXPECT_EQ(p.find({1, 4})->messages, 2);
  EXPECT_EQ(p.find({1, 5})->messages, 1);
  EXPECT_EQ(p.find({1, 6}), nullptr);
}

TEST(PendingAcksTest, TakeRemovesOnceAndFindStopsSeeingIt) {
  PendingAcks p;
  for (int64_t e = 0; e < 5; ++e) p.add({1, e}, PendingAck{1, static_cast<int32_t>(e), 1});
  PendingAck out;
  EXPECT_TRUE(p.take({1, 2}, &out));
  EXPECT_EQ(out.keyHash, 2);
  EXPECT_FALSE(p.take({1, 2}, &out));
  EXPECT_EQ(p.find({1, 2}), nullptr);
  EXPECT_EQ(entryIds(p), (std::vector<int64_t>{0, 1, 3, 4}));
  // Taken out of order, then added again (redelivered to the same consumer).
  p.add({1, 2}, PendingAck{1, 22, 1});
  ASSERT_NE(p.find({1, 2}), nullptr);
  EXPECT_EQ(p.find({1, 2})->keyHash, 22);
  EXPECT_EQ(p.size(), 5u);
}

// Lookups near the front (the usual in-order ack) and far from it give the same answers: every
// held position is found, every gap between or around them is not, and adds into gaps land in
// order.
TEST(PendingAcksTest, LookupsNearAndFarFromTheFrontAgree) {
  PendingAcks p;
  for (int64_t e = 2; e <= 40; e += 2) p.add({1, e}, PendingAck{1, static_cast<int32_t>(e), 1});
  for (int64_t e = 0; e <= 42; ++e) {
    PendingAck* a = p.find({1, e});
    if (e % 2 == 0 && e >= 2 && e <= 40) {
      ASSERT_NE(a, nullptr) << e;
      EXPECT_EQ(a->keyHash, e);
    } else {
      EXPECT_EQ(a, nullptr) << e;
    }
  }
  EXPECT_EQ(p.find({0, 99}), nullptr);
  EXPECT_EQ(p.find({2, 0}), nullptr);
  p.add({1, 5}, PendingAck{1, 5, 1});
  p.add({1, 13}, PendingAck{1, 13, 1});
  PendingAck out;
  EXPECT_TRUE(p.take({1, 2}, &out));
  EXPECT_TRUE(p.take({1, 13}, &out));
  EXPECT_EQ(out.keyHash, 13);
  EXPECT_FALSE(p.take({1, 3}, &out));
  std::vector<int64_t> want{4, 5, 6, 8, 10, 12};
  for (int64_t e = 14; e <= 40; e += 2) want.push_back(e);
  EXPECT_EQ(entryIds(p), want);
}

TEST(PendingAcksTest, TakeUpToIsCumulativeAndInOrder) {
  PendingAcks p;
  for (int64_t e = 0; e < 10; ++e) p.add({1, e}, PendingAck{});
  PendingAck out;
  ASSERT_TRUE(p.take({1, 3}, &out));
  std::vector<int64_t> seen;
  p.takeUpTo({1, 5}, [&](Position pos, const PendingAck&) { seen.push_back(pos.entryId); });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 4, 5}));
  EXPECT_EQ(entryIds(p), (std::vector<int64_t>{6, 7, 8, 9}));
  seen.clear();
  p.takeAll([&](Position pos, const PendingAck&) { seen.push_back(pos.entryId); });
  EXPECT_EQ(seen, (std::vector<int64_t>{6, 7, 8, 9}));
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.slots(), 0u);
}

// A consumer that never acks its oldest entry but acks every later one keeps O(pending) slots.
TEST(PendingAcksTest, OutOfOrderAcksDoNotAccumulate) {
  PendingAcks p;
  p.add({1, 0}, PendingAck{});
  PendingAck out;
  for (int64_t e = 1; e <= 100000; ++e) {
    p.add({1, e}, PendingAck{});
    ASSERT_TRUE(p.take({1, e}, &out));
  }
  EXPECT_EQ(p.size(), 1u);
  EXPECT_LE(p.slots(), 2048u);
  EXPECT_EQ(entryIds(p), (std::vector<int64_t>{0}));
  // Acking at the front drops the marked ones behind it at once.
  ASSERT_TRUE(p.take({1, 0}, &out));
  EXPECT_EQ(p.slots(), 0u);
}

}  // namespace
}  // namespace magnetar::broker
