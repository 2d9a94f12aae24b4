#include "storage/cursor_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "storage/tests/test_executor.h"

namespace magnetar::storage {
namespace {

using Runs = std::vector<std::pair<Position, CursorState::Range>>;

Runs rangesOf(const CursorState& c) {
  Runs out;
  c.forEachRange([&](Position first, const CursorState::Range& r) { out.emplace_back(first, r); });
  return out;
}

// The set model's ranges: the maximal runs of acked positions among all[from..] (positions in
// log order, so neighbours in `all` are neighbours in the log, across ledgers).
Runs modelRuns(const std::vector<Position>& all, size_t from, const std::set<Position>& acked) {
  Runs runs;
  for (size_t j = from; j < all.size(); ++j) {
    if (!acked.count(all[j])) continue;
    if (!runs.empty() && runs.back().second.last == all[j - 1]) {
      runs.back().second.last = all[j];
      runs.back().second.count++;
    } else {
      runs.push_back({all[j], CursorState::Range{all[j], 1}});
    }
  }
  return runs;
}

// c's ranges are the model's, first position, last and count.
void expectRuns(const CursorState& c, const Runs& runs) {
  const Runs ranges = rangesOf(c);
  ASSERT_EQ(c.rangeCount(), runs.size());
  ASSERT_EQ(ranges.size(), runs.size());
  for (size_t j = 0; j < runs.size(); ++j) {
    ASSERT_EQ(ranges[j].first, runs[j].first);
    ASSERT_EQ(ranges[j].second.last, runs[j].second.last);
    ASSERT_EQ(ranges[j].second.count, runs[j].second.count);
  }
}

// Ledgers 1.. with these entry counts (of 1 byte) in `ledgers`; their positions in log order.
std::vector<Position> fillLedgers(LedgerSet& ledgers, const std::vector<int64_t>& sizes) {
  std::vector<Position> all;
  for (size_t l = 0; l < sizes.size(); ++l) {
    const int64_t id = static_cast<int64_t>(l) + 1;
    ledgers.addLedger(id, 0);
    for (int64_t e = 0; e < sizes[l]; ++e) {
      ledgers.addEntry(1);
      all.push_back(Position{id, e});
    }
  }
  return all;
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
  const std::vector<Position> all = fillLedgers(ledgers, {40, 40, 40});
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
      ASSERT_NO_FATAL_FAILURE(expectRuns(c, modelRuns(all, k, acked)));
      for (const Position& p : all) ASSERT_EQ(c.isAcked(p), acked.count(p) > 0);
    }
  }
}

// Random acks and cumulative acks over ledgers wider than a bitset chunk (4096 entries), with an
// empty ledger and chunk-straddling boundaries, against a set model; restore() of what
// forEachRange() yields (what gets persisted) gives the same state back.
TEST(CursorStateModelTest, RandomAcksAndMarkDeletesAcrossChunksMatchASetModel) {
  LedgerSet ledgers;
  const std::vector<int64_t> sizes = {5000, 0, 9000, 3, 4097, 1};
  const std::vector<Position> all = fillLedgers(ledgers, sizes);
  const auto index = [&](Position p) {  // first index of `all` with a position > p
    return static_cast<size_t>(std::upper_bound(all.begin(), all.end(), p) - all.begin());
  };
  std::mt19937 rng(11);
  size_t mostRanges = 0;
  for (int round = 0; round < 12; ++round) {
    CursorState c{Position{1, -1}};
    Position md{1, -1};
    std::set<Position> acked;  // after md
    const auto collapse = [&] {
      for (size_t k = index(md); k < all.size() && acked.erase(all[k]); ++k) md = all[k];
    };
    for (int op = 0; op < 6000; ++op) {
      const size_t from = index(md);
      const uint32_t kind = rng() % 100;
      if (kind < 1) {
        // Cumulative ack: a stored position, or one past a ledger's end (not stored).
        Position p = all[std::min(all.size() - 1, from + rng() % 400)];
        if (rng() % 4 == 0) p.entryId = sizes[p.ledgerId - 1] + 5;
        const bool moves = md < p;
        ASSERT_EQ(c.markDeleteUpTo(p, ledgers), moves);
        if (moves) {
          md = p;
          acked.erase(acked.begin(), acked.upper_bound(md));
          collapse();
        }
      } else {
        const size_t span = kind < 30 ? 8 : 9000;
        const Position p = all[std::min(all.size() - 1, from + rng() % span)];
        const bool fresh = md < p && !acked.count(p);
        ASSERT_EQ(c.ack(p, ledgers), fresh) << p.ledgerId << ":" << p.entryId;
        if (fresh) {
          acked.insert(p);
          collapse();
        }
      }
      ASSERT_EQ(c.markDelete(), md);
      if (index(md) == all.size()) break;  // all acked
      if (op % 50 != 0) continue;
      const Runs runs = modelRuns(all, index(md), acked);
      ASSERT_NO_FATAL_FAILURE(expectRuns(c, runs));
      mostRanges = std::max(mostRanges, runs.size());
      ASSERT_EQ(c.individuallyAcked(), static_cast<int64_t>(acked.size()));
      ASSERT_EQ(c.backlog(ledgers), static_cast<int64_t>(all.size() - index(md) - acked.size()));
      for (size_t j = index(md); j < all.size(); j += 7) {
        ASSERT_EQ(c.isAcked(all[j]), acked.count(all[j]) > 0);
      }
      std::vector<std::pair<Position, Position>> persisted;
      for (const auto& [first, r] : runs) persisted.emplace_back(first, r.last);
      CursorState restored;
      restored.restore(md, persisted, ledgers);
      ASSERT_EQ(restored.markDelete(), md);
      ASSERT_EQ(restored.rangeCount(), runs.size());
      ASSERT_EQ(restored.individuallyAcked(), c.individuallyAcked());
    }
    EXPECT_GT(index(md), all.size() / 4) << "round " << round;
  }
  EXPECT_GT(mostRanges, 500u);  // the state got fragmented
}

// One ack far ahead of mark-delete allocates one chunk and a slot per 4096 entries, not a bit per
// entry of the gap; the memory goes when the mark passes it.
TEST(CursorStateMemoryTest, AHugeGapCostsSlotsNotBits) {
  LedgerSet ledgers;
  ledgers.addLedger(LedgerInfo{1, 20'000'000, 20'000'000, 0});
  ledgers.addLedger(LedgerInfo{2, 10, 10, 0});
  CursorState c{Position{1, -1}};
  ASSERT_TRUE(c.ack(Position{1, 10'000'000}, ledgers));
  ASSERT_TRUE(c.ack(Position{1, 19'999'999}, ledgers));
  ASSERT_TRUE(c.ack(Position{2, 0}, ledgers));  // continues the range across the ledgers
  EXPECT_LT(c.memoryBytes(), 64u * 1024);
  EXPECT_TRUE(c.isAcked(Position{1, 10'000'000}));
  EXPECT_FALSE(c.isAcked(Position{1, 9'999'999}));
  ASSERT_EQ(c.rangeCount(), 2u);
  const auto ranges = rangesOf(c);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[1].first, (Position{1, 19'999'999}));
  EXPECT_EQ(ranges[1].second.last, (Position{2, 0}));
  EXPECT_EQ(ranges[1].second.count, 2);
  EXPECT_EQ(c.backlog(ledgers), 20'000'010 - 3);
  c.markDeleteUpTo(Position{1, 19'999'998}, ledgers);
  EXPECT_EQ(c.markDelete(), (Position{2, 0}));
  EXPECT_EQ(c.rangeCount(), 0u);
  EXPECT_EQ(c.individuallyAcked(), 0);
  EXPECT_LT(c.memoryBytes(), 16u * 1024);
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
