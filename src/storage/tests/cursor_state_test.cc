#include "storage/cursor_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "storage/tests/test_executor.h"

namespace magnetar::storage {
namespace {

std::vector<std::pair<Position, CursorState::Range>> rangesOf(const CursorState& c) {
  std::vector<std::pair<Position, CursorState::Range>> out;
  c.forEachRange([&](Position first, const CursorState::Range& r) { out.emplace_back(first, r); });
  return out;
}

class CursorStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ledgers_.addLedger(1, 0);
    for (int i = 0; i < 5; i++) ledgers_.addEntry(1);
    ledgers_.addLedger(2, 0);
    for (int i = 0; i < 5; i++) ledgers_.addEntry(1);
  }
  LedgerSet ledgers_;
  CursorState c_{Position{1, -1}};
};

TEST_F(CursorStateTest, IndividualAcksMergeAndCollapse) {
  EXPECT_EQ(c_.backlog(ledgers_), 10);
  EXPECT_TRUE(c_.ack(Position{1, 2}, ledgers_));
  EXPECT_TRUE(c_.ack(Position{1, 4}, ledgers_));
  EXPECT_EQ(c_.rangeCount(), 2u);
  EXPECT_TRUE(c_.ack(Position{1, 3}, ledgers_));
  EXPECT_EQ(c_.rangeCount(), 1u);  // [1:2, 1:4]
  EXPECT_EQ(c_.backlog(ledgers_), 7);
  EXPECT_TRUE(c_.ack(Position{2, 0}, ledgers_));  // adjacent across the ledger boundary
  EXPECT_EQ(c_.rangeCount(), 1u);
  EXPECT_EQ(rangesOf(c_).front().second.last, (Position{2, 0}));
  EXPECT_TRUE(c_.ack(Position{1, 0}, ledgers_));
  EXPECT_EQ(c_.markDelete(), (Position{1, 0}));
  EXPECT_TRUE(c_.ack(Position{1, 1}, ledgers_));
  EXPECT_EQ(c_.markDelete(), (Position{2, 0}));
  EXPECT_EQ(c_.rangeCount(), 0u);
  EXPECT_TRUE(rangesOf(c_).empty());
  EXPECT_EQ(c_.individuallyAcked(), 0);
  EXPECT_EQ(c_.backlog(ledgers_), 4);
}

// Random ack orders against a plain set of acked positions: the ranges must be exactly the maximal
// runs of acked entries after mark-delete (across ledger boundaries), with the right counts.
TEST(CursorStateModelTest, RandomAckOrdersMatchASetModel) {
  LedgerSet ledgers;
  std::vector<Position> all;
  for (int64_t l = 1; l <= 3; ++l) {
    ledgers.addLedger(l, 0);
    for (int64_t e = 0; e < 40; ++e) {
      ledgers.addEntry(1);
      all.push_back(Position{l, e});
    }
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    CursorState c{Position{1, -1}};
    std::vector<Position> order = all;
    std::shuffle(order.begin(), order.end(), rng);
    std::set<Position> acked;
    for (size_t i = 0; i < order.size() / 2 + round % 40; ++i) {
      ASSERT_TRUE(c.ack(order[i], ledgers));
      ASSERT_FALSE(c.ack(order[i], ledgers));  // twice: ignored
      acked.insert(order[i]);
      // Model: mark-delete is the end of the acked prefix; ranges the acked runs after it.
      size_t k = 0;
      while (k < all.size() && acked.count(all[k])) ++k;
      Position md = k == 0 ? Position{1, -1} : all[k - 1];
      ASSERT_EQ(c.markDelete(), md);
      std::vector<std::pair<Position, CursorState::Range>> runs;
      for (size_t j = k; j < all.size(); ++j) {
        if (!acked.count(all[j])) continue;
        if (!runs.empty() && runs.back().second.last == all[j - 1]) {
          runs.back().second.last = all[j];
          runs.back().second.count++;
        } else {
          runs.push_back({all[j], CursorState::Range{all[j], 1}});
        }
      }
      ASSERT_EQ(c.rangeCount(), runs.size());
      const auto ranges = rangesOf(c);
      ASSERT_EQ(ranges.size(), runs.size());
      auto it = ranges.begin();
      for (auto& [first, r] : runs) {
        ASSERT_EQ(it->first, first);
        ASSERT_EQ(it->second.last, r.last);
        ASSERT_EQ(it->second.count, r.count);
        ++it;
      }
      for (const Position& p : all) ASSERT_EQ(c.isAcked(p), acked.count(p) > 0);
    }
  }
}

TEST_F(CursorStateTest, IgnoresDuplicatesOldAndMissing) {
  EXPECT_TRUE(c_.ack(Position{1, 3}, ledgers_));
  EXPECT_FALSE(c_.ack(Position{1, 3}, ledgers_));
  EXPECT_FALSE(c_.ack(Position{1, 9}, ledgers_));  // not stored
  EXPECT_FALSE(c_.ack(Position{3, 0}, ledgers_));
  c_.markDeleteUpTo(Position{1, 1}, ledgers_);
  EXPECT_FALSE(c_.ack(Position{1, 0}, ledgers_));
  EXPECT_EQ(c_.individuallyAcked(), 1);
  EXPECT_EQ(c_.backlog(ledgers_), 7);
}

TEST_F(CursorStateTest, MarkDeleteAbsorbsRanges) {
  c_.ack(Position{1, 2}, ledgers_);
  c_.ack(Position{1, 3}, ledgers_);
  c_.ack(Position{2, 1}, ledgers_);
  EXPECT_TRUE(c_.isAcked(Position{1, 3}));
  EXPECT_FALSE(c_.isAcked(Position{1, 4}));
  // Cumulative ack into the middle of the first range: the mark jumps to the range's end.
  c_.markDeleteUpTo(Position{1, 2}, ledgers_);
  EXPECT_EQ(c_.markDelete(), (Position{1, 3}));
  EXPECT_EQ(c_.rangeCount(), 1u);
  c_.markDeleteUpTo(Position{2, 0}, ledgers_);
  EXPECT_EQ(c_.markDelete(), (Position{2, 1}));  // 2:1 was acked, folds in
  EXPECT_EQ(c_.backlog(ledgers_), 3);
  EXPECT_FALSE(c_.markDeleteUpTo(Position{1, 0}, ledgers_));
}

TEST_F(CursorStateTest, ResetClearsAndRestoreRebuilds) {
  c_.ack(Position{1, 3}, ledgers_);
  c_.reset(Position{1, 0});
  EXPECT_FALSE(c_.isAcked(Position{1, 3}));
  EXPECT_EQ(c_.backlog(ledgers_), 9);
  c_.restore(Position{1, 0}, {{Position{1, 2}, Position{2, 1}}, {Position{2, 3}, Position{2, 3}}},
             ledgers_);
  EXPECT_EQ(c_.individuallyAcked(), 6);
  EXPECT_EQ(c_.backlog(ledgers_), 3);
  EXPECT_TRUE(c_.isAcked(Position{2, 0}));
  c_.ack(Position{1, 1}, ledgers_);
  EXPECT_EQ(c_.markDelete(), (Position{2, 1}));
}

// Ack sets as Pulsar's BitSet words: bit i set = batch index i not acked yet.
TEST_F(CursorStateTest, BatchIndexAcksMergeUntilTheEntryIsDone) {
  // A 4-message batch at 1:1: ack index 1, then 0 and 3, then 2.
  EXPECT_TRUE(c_.ackBatchIndexes(Position{1, 1}, AckSet{0b1101}, ledgers_));
  ASSERT_NE(c_.batchAckSet(Position{1, 1}), nullptr);
  EXPECT_EQ(ackSetCardinality(*c_.batchAckSet(Position{1, 1}), 4), 3);
  EXPECT_FALSE(c_.isAcked(Position{1, 1}));
  EXPECT_TRUE(c_.ackBatchIndexes(Position{1, 1}, AckSet{0b0110}, ledgers_));  // ANDed: {2}
  EXPECT_EQ(*c_.batchAckSet(Position{1, 1}), AckSet{0b0100});
  EXPECT_EQ(c_.backlog(ledgers_), 10);  // still an unacked entry
  EXPECT_TRUE(c_.ackBatchIndexes(Position{1, 1}, AckSet{0b1011}, ledgers_));
  EXPECT_TRUE(c_.isAcked(Position{1, 1}));
  EXPECT_EQ(c_.batchAckSet(Position{1, 1}), nullptr);
  EXPECT_EQ(c_.backlog(ledgers_), 9);
  // Acked entries, old and missing ones are ignored.
  EXPECT_FALSE(c_.ackBatchIndexes(Position{1, 1}, AckSet{1}, ledgers_));
  EXPECT_FALSE(c_.ackBatchIndexes(Position{3, 0}, AckSet{1}, ledgers_));
  // A whole-entry ack or a mark-delete past an entry drops its set.
  EXPECT_TRUE(c_.ackBatchIndexes(Position{1, 3}, AckSet{1}, ledgers_));
  EXPECT_TRUE(c_.ack(Position{1, 3}, ledgers_));
  EXPECT_EQ(c_.batchAckSet(Position{1, 3}), nullptr);
  EXPECT_TRUE(c_.ackBatchIndexes(Position{2, 1}, AckSet{1}, ledgers_));
  c_.markDeleteUpTo(Position{2, 1}, ledgers_);
  EXPECT_TRUE(c_.batchDeleted().empty());
  // Words beyond 64 messages.
  EXPECT_TRUE(c_.ackBatchIndexes(Position{2, 3}, AckSet{0, 1}, ledgers_));
  EXPECT_EQ(ackSetCardinality(*c_.batchAckSet(Position{2, 3}), 65), 1);
  EXPECT_EQ(ackSetCardinality(*c_.batchAckSet(Position{2, 3}), 64), 0);
}

TEST_F(CursorStateTest, CumulativeAckInsideABatch) {
  // Indexes 0..1 of a 4-message batch at 2:0 acked cumulatively: the mark stops before it.
  EXPECT_TRUE(c_.markDeleteWithAckSet(Position{2, 0}, AckSet{0b1100}, ledgers_));
  EXPECT_TRUE(c_.isAcked(Position{1, 4}));
  EXPECT_FALSE(c_.isAcked(Position{2, 0}));
  EXPECT_EQ(c_.backlog(ledgers_), 5);
  EXPECT_EQ(*c_.batchAckSet(Position{2, 0}), AckSet{0b1100});
  // Up to index 2, then the last one: the mark moves over the entry.
  EXPECT_TRUE(c_.markDeleteWithAckSet(Position{2, 0}, AckSet{0b1000}, ledgers_));
  EXPECT_EQ(*c_.batchAckSet(Position{2, 0}), AckSet{0b1000});
  EXPECT_TRUE(c_.markDeleteWithAckSet(Position{2, 0}, AckSet{0}, ledgers_));
  EXPECT_EQ(c_.markDelete(), (Position{2, 0}));
  EXPECT_TRUE(c_.batchDeleted().empty());
  // Properties go with a reset.
  c_.setProperties({{"p", 7}});
  c_.reset(Position{1, -1});
  EXPECT_TRUE(c_.properties().empty());
}

TEST_F(CursorStateTest, RestoreKeepsAckSetsOfUnackedEntriesOnly) {
  c_.restore(Position{1, 1}, {{Position{1, 3}, Position{1, 3}}}, ledgers_);
  c_.restoreBatchDeleted({{Position{1, 0}, AckSet{1}},
                          {Position{1, 2}, AckSet{2}},
                          {Position{1, 3}, AckSet{2}},
                          {Position{1, 4}, AckSet{0}}},
                         ledgers_);
  ASSERT_EQ(c_.batchDeleted().size(), 1u);
  EXPECT_EQ(*c_.batchAckSet(Position{1, 2}), AckSet{2});
}

}  // namespace
}  // namespace magnetar::storage
