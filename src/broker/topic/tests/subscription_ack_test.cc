// Subscription acks on the embedded durable storage: what reaches the cursor and how often the
// cursor is written (managedLedgerDefaultMarkDeleteRateLimit); a reset outliving its subscription.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "broker/topic/subscription.h"
#include "broker/topic/tests/cursor_write_counter.h"

namespace magnetar::broker {
namespace {

// Ledger "t" and its cursor "s" on the durable storage in dir_, driven through ex_.
class DurableCursorTest : public storage::testing::DurableFactoryTest {
 protected:
  void openCursor(const storage::StorageOptions& o) {
    f_ = open(o);
    ASSERT_TRUE(f_);
    ml_ = storage::testing::openLedger(*f_, ex_, "t");
    auto c = ml_->openCursor("s", storage::InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    c_ = *c;
  }
  void TearDown() override {
    ml_.reset();
    if (f_) close(f_);
  }

  CursorWriteCounter store_{"t", "s"};  // outlives the factory that writes to it
  std::unique_ptr<storage::DurableManagedLedgerFactory> f_;
  std::shared_ptr<storage::ManagedLedger> ml_;
  storage::ManagedCursor* c_ = nullptr;
};
using SubscriptionAckTest = DurableCursorTest;
using SubscriptionResetTest = DurableCursorTest;

// Batch-index acks with no receipt requested are held to the rate limit like whole-entry acks
// (they were written in every pass: each carried a join callback); with a receipt, the write is
// in the ack's own pass and the callback runs once both cursor updates are stored.
TEST_F(SubscriptionAckTest, BatchIndexAcksWithoutAReceiptKeepTheMarkDeleteRateLimit) {
  openCursor(rateLimitedOptions(dir_.path(), &store_));
  // A new cursor is written at once; that write opens the interval.
  ASSERT_TRUE(storage::testing::runUntil(ex_, [&] { return store_.writes.load() == 1; }));
  std::vector<storage::Position> pos = addEntries(*ml_, ex_, "batch-", 8);
  ASSERT_EQ(pos.size(), 8u);
  BrokerOptions bo;
  Subscription sub("s", *ml_, *c_, bo, "persistent://public/default/t", -1);
  const storage::AckSet firstIndexAcked{0xFE};  // indexes 1..7 still unacked
  for (int i = 0; i < 5; i++) {
    sub.acknowledge(nullptr, {}, nullptr, {{pos[i], firstIndexAcked}});
    ex_.runPending();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ex_.runPending();
  EXPECT_EQ(store_.writes.load(), 1) << "acks nobody waited for were written inside the interval";
  for (int i = 0; i < 5; i++) EXPECT_NE(c_->batchDeletedIndexes(pos[i]), nullptr);

  // With a receipt: written now, callback once.
  int called = 0;
  Status st = Status::internal("not called");
  sub.acknowledge(nullptr, {pos[7]},
                  [&](const Status& s) {
                    called++;
                    st = s;
                  },
                  {{pos[6], firstIndexAcked}});
  ASSERT_TRUE(storage::testing::runUntil(ex_, [&] { return called > 0; }));
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_GE(store_.writes.load(), 2);
  EXPECT_TRUE(c_->isAcknowledged(pos[7]));
  EXPECT_NE(c_->batchDeletedIndexes(pos[6]), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ex_.runPending();
  EXPECT_EQ(called, 1);
}

// A reset in flight when its subscription goes (an unsubscribe): the completion still answers its
// caller and touches nothing of the freed subscription (ASan: a use-after-free on the old code).
TEST_F(SubscriptionResetTest, ResetCompletingAfterTheSubscriptionWentOnlyRunsItsCallback) {
  openCursor(storage::testing::durableTestOptions(dir_.path()));
  std::vector<storage::Position> pos = addEntries(*ml_, ex_, "m-", 3);
  ASSERT_EQ(pos.size(), 3u);
  BrokerOptions bo;
  auto sub =
      std::make_unique<Subscription>("s", *ml_, *c_, bo, "persistent://public/default/t", -1);
  int called = 0;
  Status st = Status::internal("not called");
  sub->resetCursor(pos[1], [&](const Status& s) {
    called++;
    st = s;
  });
  EXPECT_EQ(called, 0) << "the reset completes in a later executor pass";
  sub.reset();
  ASSERT_TRUE(storage::testing::runUntil(ex_, [&] { return called > 0; }));
  EXPECT_EQ(called, 1);
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(c_->markDeletedPosition(), pos[0]);
}

}  // namespace
}  // namespace magnetar::broker
