// Subscription acks on the embedded durable storage: what reaches the cursor and how often the
// cursor is written (managedLedgerDefaultMarkDeleteRateLimit); a reset outliving its subscription.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "broker/topic/subscription.h"
#include "storage/durable_storage.h"
#include "storage/metadata_codec.h"
#include "storage/tests/durable_test_fixture.h"

namespace magnetar::broker {
namespace {

using storage::testing::ManualExecutor;

// Counts the writes of cursor "s" of ledger "t".
class CursorWriteCounter : public storage::MemoryMetadataStore {
 public:
  Status write(const std::vector<storage::MetadataOp>& ops) override {
    Status s = MemoryMetadataStore::write(ops);
    for (const auto& op : ops) {
      if (op.key == storage::cursorKey("t", "s")) writes++;
    }
    return s;
  }
  std::atomic<int> writes{0};
};

// Batch-index acks with no receipt requested are held to the rate limit like whole-entry acks
// (they were written in every pass: each carried a join callback); with a receipt, the write is
// in the ack's own pass and the callback runs once both cursor updates are stored.
TEST(SubscriptionAckTest, BatchIndexAcksWithoutAReceiptKeepTheMarkDeleteRateLimit) {
  storage::testing::TempDir dir;
  storage::StorageOptions o = storage::testing::durableTestOptions(dir.path());
  o.managedLedgerDefaultMarkDeleteRateLimit = 1.0;  // one unwaited write a second
  o.tickIntervalMs = 60000;                         // no tick writes during the test
  CursorWriteCounter store;
  o.metadataStore = &store;
  ManualExecutor ex;
  auto f = storage::DurableManagedLedgerFactory::open(o);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  auto ml = storage::testing::openLedger(**f, ex, "t");
  auto c = ml->openCursor("s", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk());
  // A new cursor is written at once; that write opens the interval.
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return store.writes.load() == 1; }));
  std::vector<storage::Position> pos;
  for (int i = 0; i < 8; i++) {
    auto p = storage::testing::addOne(*ml, ex, "batch-" + std::to_string(i));
    ASSERT_TRUE(p.isOk());
    pos.push_back(*p);
  }
  BrokerOptions bo;
  Subscription sub("s", *ml, **c, bo, "persistent://public/default/t", -1);
  const storage::AckSet firstIndexAcked{0xFE};  // indexes 1..7 still unacked
  for (int i = 0; i < 5; i++) {
    sub.acknowledge(nullptr, {}, nullptr, {{pos[i], firstIndexAcked}});
    ex.runPending();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ex.runPending();
  EXPECT_EQ(store.writes.load(), 1) << "acks nobody waited for were written inside the interval";
  for (int i = 0; i < 5; i++) EXPECT_NE((*c)->batchDeletedIndexes(pos[i]), nullptr);

  // With a receipt: written now, callback once.
  int called = 0;
  Status st = Status::internal("not called");
  sub.acknowledge(nullptr, {pos[7]},
                  [&](const Status& s) {
                    called++;
                    st = s;
                  },
                  {{pos[6], firstIndexAcked}});
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return called > 0; }));
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_GE(store.writes.load(), 2);
  EXPECT_TRUE((*c)->isAcknowledged(pos[7]));
  EXPECT_NE((*c)->batchDeletedIndexes(pos[6]), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ex.runPending();
  EXPECT_EQ(called, 1);

  ml.reset();
  (*f)->shutdown();
  ex.runPending();
}

// A reset in flight when its subscription goes (an unsubscribe): the completion still answers its
// caller and touches nothing of the freed subscription (ASan: a use-after-free on the old code).
TEST(SubscriptionResetTest, ResetCompletingAfterTheSubscriptionWentOnlyRunsItsCallback) {
  storage::testing::TempDir dir;
  storage::StorageOptions o = storage::testing::durableTestOptions(dir.path());
  ManualExecutor ex;
  auto f = storage::DurableManagedLedgerFactory::open(o);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  auto ml = storage::testing::openLedger(**f, ex, "t");
  auto c = ml->openCursor("s", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk());
  std::vector<storage::Position> pos;
  for (int i = 0; i < 3; i++) {
    auto p = storage::testing::addOne(*ml, ex, "m-" + std::to_string(i));
    ASSERT_TRUE(p.isOk());
    pos.push_back(*p);
  }
  BrokerOptions bo;
  auto sub = std::make_unique<Subscription>("s", *ml, **c, bo, "persistent://public/default/t", -1);
  int called = 0;
  Status st = Status::internal("not called");
  sub->resetCursor(pos[1], [&](const Status& s) {
    called++;
    st = s;
  });
  EXPECT_EQ(called, 0) << "the reset completes in a later executor pass";
  sub.reset();
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return called > 0; }));
  EXPECT_EQ(called, 1);
  EXPECT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ((*c)->markDeletedPosition(), pos[0]);

  ml.reset();
  (*f)->shutdown();
  ex.runPending();
}

}  // namespace
}  // namespace magnetar::broker
