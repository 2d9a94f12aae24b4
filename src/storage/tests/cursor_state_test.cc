#include "storage/cursor_state.h"

#include <gtest/gtest.h>

#include "storage/tests/test_executor.h"

namespace magnetar::storage {
namespace {

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
  EXPECT_EQ(c_.ranges().size(), 2u);
  EXPECT_TRUE(c_.ack(Position{1, 3}, ledgers_));
  EXPECT_EQ(c_.ranges().size(), 1u);  // [1:2, 1:4]
  EXPECT_EQ(c_.backlog(ledgers_), 7);
  EXPECT_TRUE(c_.ack(Position{2, 0}, ledgers_));  // adjacent across the ledger boundary
  EXPECT_EQ(c_.ranges().size(), 1u);
  EXPECT_EQ(c_.ranges().begin()->second.last, (Position{2, 0}));
  EXPECT_TRUE(c_.ack(Position{1, 0}, ledgers_));
  EXPECT_EQ(c_.markDelete(), (Position{1, 0}));
  EXPECT_TRUE(c_.ack(Position{1, 1}, ledgers_));
  EXPECT_EQ(c_.markDelete(), (Position{2, 0}));
  EXPECT_TRUE(c_.ranges().empty());
  EXPECT_EQ(c_.individuallyAcked(), 0);
  EXPECT_EQ(c_.backlog(ledgers_), 4);
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
  EXPECT_EQ(c_.ranges().size(), 1u);
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

}  // namespace
}  // namespace magnetar::storage
