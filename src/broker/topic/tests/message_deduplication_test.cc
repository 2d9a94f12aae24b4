#include "broker/topic/message_deduplication.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "broker/topic/tests/cursor_write_counter.h"
#include "protocol/commands.h"
#include "storage/durable_storage.h"
#include "storage/memory_managed_ledger.h"
#include "storage/metadata_codec.h"
#include "storage/tests/durable_test_fixture.h"
#include "storage/tests/test_executor.h"

namespace magnetar::broker {
namespace {

using storage::Position;

class MessageDeduplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    factory_.asyncOpen("t", &ex_, [this](Result<std::shared_ptr<storage::ManagedLedger>> r) {
      ASSERT_TRUE(r.isOk());
      ledger_ = *r;
    });
    ex_.runPending();
    ASSERT_NE(ledger_, nullptr);
    options_.entriesInterval = 3;
  }

  Status recover(MessageDeduplication& d) {
    Status out = Status::internal("not done");
    d.recover(*ledger_, [&](Status s) { out = s; });
    ex_.runPending();
    return out;
  }

  // Publishes one entry of `producer` with sequence id seq through d, as the topic does.
  Position publish(MessageDeduplication& d, const std::string& producer, int64_t seq) {
    EXPECT_EQ(d.check(producer, seq, seq), MessageDeduplication::Verdict::kNew);
    proto::MessageMetadata md;
    md.set_producer_name(producer);
    md.set_sequence_id(static_cast<uint64_t>(seq));
    md.set_publish_time(1);
    Position at;
    ledger_->asyncAddEntry(protocol::Commands::newEntry(md, "x"), [&](Status s, Position pos) {
      d.completed(producer, seq, s, pos);
      at = pos;
    });
    ex_.runPending();
    return at;
  }

  storage::ManagedCursor* dedupCursor() {
    for (auto* c : ledger_->cursors()) {
      if (c->name() == kDedupCursorName) return c;
    }
    return nullptr;
  }

  storage::testing::ManualExecutor ex_;
  storage::MemoryManagedLedgerFactory factory_;
  std::shared_ptr<storage::ManagedLedger> ledger_;
  DedupOptions options_;
};

TEST_F(MessageDeduplicationTest, SnapshotEveryIntervalAndRecoveryReplaysOnlyTheTail) {
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  EXPECT_EQ(d.entriesReplayed(), 0);
  std::vector<Position> pos;
  for (int64_t i = 0; i < 8; i++) pos.push_back(publish(d, i % 2 ? "b" : "a", i));
  // Snapshots after entries 3 and 6: the cursor sits at the 6th with the ids persisted by then.
  auto* c = dedupCursor();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->markDeletedPosition(), pos[5]);
  EXPECT_EQ(c->properties(), (storage::CursorProperties{{"a", 4}, {"b", 5}}));

  MessageDeduplication again(true, options_);
  ASSERT_TRUE(recover(again).isOk());
  EXPECT_EQ(again.entriesReplayed(), 2);
  EXPECT_EQ(again.lastSequenceId("a"), 6);
  EXPECT_EQ(again.lastSequenceId("b"), 7);
  EXPECT_EQ(again.check("a", 6, 6), MessageDeduplication::Verdict::kDuplicate);
  // The recovery saved what it replayed: the next load replays nothing.
  EXPECT_EQ(c->markDeletedPosition(), pos[7]);
  MessageDeduplication third(true, options_);
  ASSERT_TRUE(recover(third).isOk());
  EXPECT_EQ(third.entriesReplayed(), 0);
  EXPECT_EQ(third.lastSequenceId("b"), 7);
}

TEST_F(MessageDeduplicationTest, SnapshotHoldsAtMostMaxProducers) {
  options_.maxProducers = 2;
  options_.entriesInterval = 4;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  publish(d, "a", 1);
  publish(d, "b", 1);
  publish(d, "c", 1);  // over the limit: idle producers are forgotten
  publish(d, "c", 2);
  ASSERT_NE(dedupCursor(), nullptr);
  EXPECT_LE(dedupCursor()->properties().size(), 2u);
  EXPECT_EQ(dedupCursor()->properties().at("c"), 2);
}

TEST_F(MessageDeduplicationTest, InactiveProducersArePurgedAfterTheTimeout) {
  options_.producerInactivityTimeoutMinutes = 10;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  publish(d, "gone", 5);
  publish(d, "back", 5);
  auto t0 = MessageDeduplication::Clock::now();
  d.producerRemoved("gone", t0);
  d.producerRemoved("back", t0);
  d.producerAdded("back");  // reconnected: stays
  d.purgeInactiveProducers(t0 + std::chrono::minutes(9));
  EXPECT_EQ(d.lastSequenceId("gone"), 5);
  d.purgeInactiveProducers(t0 + std::chrono::minutes(11));
  EXPECT_EQ(d.lastSequenceId("gone"), -1);
  EXPECT_EQ(d.lastSequenceId("back"), 5);
}

TEST_F(MessageDeduplicationTest, ProducerSlotSkipsTheLookupAndGoesStaleWhenStateIsDropped) {
  using V = MessageDeduplication::Verdict;
  options_.producerInactivityTimeoutMinutes = 10;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  MessageDeduplication::ProducerSlot ref;
  // Through the ref, the same verdicts as by name.
  EXPECT_EQ(d.check("p", 1, 1, &ref), V::kNew);
  EXPECT_EQ(d.check("p", 1, 1), V::kInFlight);
  EXPECT_EQ(d.check("p", 1, 1, &ref), V::kInFlight);
  d.completed("p", 1, Status::ok(), {}, &ref);
  EXPECT_EQ(d.check("p", 1, 1, &ref), V::kDuplicate);
  EXPECT_EQ(d.lastSequenceId("p"), 1);
  // A failed write resets the pushed id, through the ref too: the resend is stored.
  EXPECT_EQ(d.check("p", 2, 2, &ref), V::kNew);
  d.completed("p", 2, Status::internal("disk"), {}, &ref);
  EXPECT_EQ(d.check("p", 2, 2, &ref), V::kNew);
  d.completed("p", 2, Status::ok(), {}, &ref);
  EXPECT_EQ(d.lastSequenceId("p"), 2);

  // The producer's state is purged: the slot must not reach the freed entry. Without the epoch
  // bump the completed() below would write into the freed entry and lastSequenceId stay -1 (ASan
  // also reports it).
  auto t0 = MessageDeduplication::Clock::now();
  d.producerRemoved("p", t0);
  d.purgeInactiveProducers(t0 + std::chrono::minutes(11));
  EXPECT_EQ(d.lastSequenceId("p"), -1);
  EXPECT_EQ(d.check("p", 1, 1, &ref), V::kNew);
  d.completed("p", 1, Status::ok(), {}, &ref);
  EXPECT_EQ(d.lastSequenceId("p"), 1);

  // A ref filled by another table is ignored there.
  MessageDeduplication other(true, options_);
  EXPECT_EQ(other.check("p", 1, 1, &ref), V::kNew);
  EXPECT_EQ(d.check("p", 1, 1, &ref), V::kDuplicate);
  EXPECT_EQ(other.check("p", 1, 1, &ref), V::kInFlight);
}

TEST_F(MessageDeduplicationTest, ProducerSlotGoesStaleOnEvictionAndSwitchingOff) {
  using V = MessageDeduplication::Verdict;
  options_.maxProducers = 1;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  MessageDeduplication::ProducerSlot a, b;
  EXPECT_EQ(d.check("a", 5, 5, &a), V::kNew);
  d.completed("a", 5, Status::ok(), {}, &a);   // nothing in flight: evictable
  EXPECT_EQ(d.check("b", 1, 1, &b), V::kNew);  // over maxProducers: "a" is forgotten
  EXPECT_EQ(d.producerCount(), 1u);
  EXPECT_EQ(d.check("a", 1, 1, &a), V::kNew);  // a lookup again (a stale slot would insert nothing)
  EXPECT_EQ(d.producerCount(), 2u);
  EXPECT_EQ(d.lastSequenceId("b"), -1);

  // Off and on again over an empty log: all state dropped, the slot refilled by name.
  MessageDeduplication e(true, DedupOptions{});
  ASSERT_TRUE(recover(e).isOk());
  MessageDeduplication::ProducerSlot p;
  EXPECT_EQ(e.check("p", 1, 1, &p), V::kNew);
  e.completed("p", 1, Status::ok(), {}, &p);
  e.setEnabled(false, *ledger_, [](Status) {});
  e.setEnabled(true, *ledger_, [](Status) {});
  ex_.runPending();
  EXPECT_EQ(e.producerCount(), 0u);
  EXPECT_EQ(e.check("p", 1, 1, &p), V::kNew);
  EXPECT_EQ(e.producerCount(), 1u);
}

TEST_F(MessageDeduplicationTest, TimeBasedSnapshotAndSwitchingOff) {
  options_.entriesInterval = 1000;
  options_.snapshotIntervalSeconds = 60;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  Position p = publish(d, "a", 9);
  auto now = MessageDeduplication::Clock::now();
  d.checkSnapshot(now);  // not due yet
  EXPECT_NE(dedupCursor()->markDeletedPosition(), p);
  d.checkSnapshot(now + std::chrono::seconds(61));
  ex_.runPending();
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), p);
  EXPECT_EQ(dedupCursor()->properties().at("a"), 9);
  // Off: the state and the cursor (which retains entries) go away.
  Status s = Status::internal("not done");
  d.setEnabled(false, *ledger_, [&](Status st) { s = st; });
  ex_.runPending();
  EXPECT_TRUE(s.isOk());
  EXPECT_EQ(dedupCursor(), nullptr);
  EXPECT_EQ(d.check("a", 9, 9), MessageDeduplication::Verdict::kNew);
  EXPECT_EQ(d.lastSequenceId("a"), -1);
}

// Count-based snapshots are not taken more often than the cursor writes them
// (minSnapshotIntervalMs, from managedLedgerDefaultMarkDeleteRateLimit): a refused one comes at
// the next multiple of entriesInterval once the interval passed.
TEST_F(MessageDeduplicationTest, CountSnapshotsWaitForTheMinimumInterval) {
  options_.minSnapshotIntervalMs = 300;
  MessageDeduplication d(true, options_);
  ASSERT_TRUE(recover(d).isOk());
  ASSERT_NE(dedupCursor(), nullptr);
  const Position start = dedupCursor()->markDeletedPosition();
  const auto t0 = MessageDeduplication::Clock::now();
  for (int64_t seq = 0; seq < 9; seq++) publish(d, "a", seq);  // three multiples of 3, too soon
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), start);
  EXPECT_TRUE(d.snapshotDeferred());
  EXPECT_GT(d.deferredSnapshotAt(), t0);
  EXPECT_LE(d.deferredSnapshotAt(), t0 + std::chrono::milliseconds(300));
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  publish(d, "a", 9);
  publish(d, "a", 10);  // 11 entries since the last snapshot: not a multiple of 3
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), start);
  Position p = publish(d, "a", 11);
  ex_.runPending();
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), p);
  EXPECT_EQ(dedupCursor()->properties().at("a"), 11);
  EXPECT_FALSE(d.snapshotDeferred());
  Position last;
  for (int64_t seq = 12; seq < 18; seq++) last = publish(d, "a", seq);  // the interval again
  ex_.runPending();
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), p);
  // The owner's timer takes the deferred one, at the last persisted entry.
  ASSERT_TRUE(d.snapshotDeferred());
  d.takeDeferredSnapshot();
  ex_.runPending();
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), last);
  EXPECT_EQ(dedupCursor()->properties().at("a"), 17);
  EXPECT_FALSE(d.snapshotDeferred());

  // Without the minimum, every third entry.
  options_.minSnapshotIntervalMs = 0;
  MessageDeduplication e(true, options_);
  ASSERT_TRUE(recover(e).isOk());
  publish(e, "b", 0);
  publish(e, "b", 1);
  Position q = publish(e, "b", 2);
  ex_.runPending();
  EXPECT_EQ(dedupCursor()->markDeletedPosition(), q);
}

// A snapshot is a mark-delete like any other: it keeps managedLedgerDefaultMarkDeleteRateLimit
// (each one was written at once, a cursor write per brokerDeduplicationEntriesInterval entries),
// and the last one is what a restart reads.
TEST(DedupSnapshotRateTest, SnapshotsKeepTheMarkDeleteRateLimit) {
  storage::testing::TempDir dir;
  CursorWriteCounter store("t", std::string(kDedupCursorName));
  storage::StorageOptions o = rateLimitedOptions(dir.path(), &store);
  storage::testing::ManualExecutor ex;
  auto f = storage::DurableManagedLedgerFactory::open(o);
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  auto ml = storage::testing::openLedger(**f, ex, "t");
  DedupOptions opts;
  opts.entriesInterval = 3;
  MessageDeduplication d(true, opts);
  bool recovered = false;
  d.recover(*ml, [&](const Status& s) {
    EXPECT_TRUE(s.isOk()) << s.toString();
    recovered = true;
  });
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return recovered; }));
  // The new cursor is written at once; that write opens the interval.
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return store.writes.load() == 1; }));
  Position last;
  for (int64_t seq = 0; seq < 9; seq++) {
    ASSERT_EQ(d.check("gw", seq, seq), MessageDeduplication::Verdict::kNew);
    proto::MessageMetadata md;
    md.set_producer_name("gw");
    md.set_sequence_id(static_cast<uint64_t>(seq));
    md.set_publish_time(1);
    bool added = false;
    ml->asyncAddEntry(protocol::Commands::newEntry(md, "x"), [&](Status s, Position pos) {
      d.completed("gw", seq, s, pos);
      last = pos;
      added = true;
    });
    ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return added; }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ex.runPending();
  // Three snapshots taken (in memory: the cursor is at the 9th entry), none written yet.
  storage::ManagedCursor* cursor = nullptr;
  for (auto* c : ml->cursors()) {
    if (c->name() == kDedupCursorName) cursor = c;
  }
  ASSERT_NE(cursor, nullptr);
  EXPECT_EQ(cursor->markDeletedPosition(), last);
  EXPECT_EQ(cursor->properties().at("gw"), 8);
  EXPECT_EQ(store.writes.load(), 1) << "snapshots were written inside the rate-limit interval";

  // Closing writes the held-back snapshot: the next load replays nothing.
  bool closed = false;
  ml->asyncClose([&](const Status& s) {
    EXPECT_TRUE(s.isOk()) << s.toString();
    closed = true;
  });
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return closed; }));
  ml.reset();
  (*f)->shutdown();
  ex.runPending();
  f->reset();
  EXPECT_EQ(store.writes.load(), 2);
  auto g = storage::DurableManagedLedgerFactory::open(o);
  ASSERT_TRUE(g.isOk()) << g.status().toString();
  auto again = storage::testing::openLedger(**g, ex, "t");
  MessageDeduplication e(true, opts);
  recovered = false;
  e.recover(*again, [&](const Status& s) {
    EXPECT_TRUE(s.isOk()) << s.toString();
    recovered = true;
  });
  ASSERT_TRUE(storage::testing::runUntil(ex, [&] { return recovered; }));
  EXPECT_EQ(e.entriesReplayed(), 0);
  EXPECT_EQ(e.lastSequenceId("gw"), 8);
  again.reset();
  (*g)->shutdown();
  ex.runPending();
}

}  // namespace
}  // namespace magnetar::broker
