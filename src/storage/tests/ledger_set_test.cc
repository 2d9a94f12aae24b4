#include "storage/ledger_set.h"

#include <gtest/gtest.h>

#include "storage/tests/test_executor.h"

namespace magnetar::storage {
namespace {

// Ledgers 1 (3 entries), 2 (empty), 3 (2 entries, current).
LedgerSet threeLedgers() {
  LedgerSet s;
  s.addLedger(1, 0);
  for (int i = 0; i < 3; i++) s.addEntry(10);
  s.addLedger(2, 0);
  s.addLedger(3, 0);
  for (int i = 0; i < 2; i++) s.addEntry(5);
  return s;
}

TEST(LedgerSetTest, NextSkipsEmptyLedgersAndEndsAfterLast) {
  LedgerSet s = threeLedgers();
  EXPECT_EQ(s.next(Position{1, 0}), (Position{1, 1}));
  EXPECT_EQ(s.next(Position{1, 2}), (Position{3, 0}));
  EXPECT_EQ(s.next(Position{3, 1}), (Position{3, 2}));
  EXPECT_EQ(s.next(Position{1, -1}), (Position{1, 0}));
  EXPECT_EQ(s.first(), (Position{1, 0}));
  EXPECT_EQ(s.lastConfirmed(), (Position{3, 1}));
}

TEST(LedgerSetTest, CountsAcrossLedgers) {
  LedgerSet s = threeLedgers();
  EXPECT_EQ(s.count(Position{1, -1}, Position{3, 1}), 5);
  EXPECT_EQ(s.count(Position{1, 0}, Position{3, 0}), 3);
  EXPECT_EQ(s.count(Position{3, 1}, Position{3, 1}), 0);
  EXPECT_EQ(s.count(Position{-1, -1}, Position{2, -1}), 3);
  EXPECT_EQ(s.totalEntries(), 5);
  EXPECT_EQ(s.totalBytes(), 40);
}

TEST(LedgerSetTest, RemoveLedgerMovesFirst) {
  LedgerSet s = threeLedgers();
  s.removeLedger(1);
  EXPECT_EQ(s.first(), (Position{3, 0}));
  EXPECT_FALSE(s.contains(Position{1, 0}));
  EXPECT_EQ(s.totalEntries(), 2);
  EXPECT_EQ(s.ceil(Position{1, 1}), (Position{3, 0}));
}

TEST(LedgerSetTest, EmptyCurrentLedger) {
  LedgerSet s;
  s.addLedger(7, 0);
  EXPECT_EQ(s.lastConfirmed(), (Position{7, -1}));
  EXPECT_EQ(s.first(), (Position{7, 0}));
  EXPECT_EQ(s.count(Position{7, -1}, s.lastConfirmed()), 0);
}

}  // namespace
}  // namespace magnetar::storage
