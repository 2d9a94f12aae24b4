// Transaction pending acks (PendingAckHandle through its Subscription): Pulsar's conflicts, commit
// acking in the cursor, abort redelivering, held entries kept from other consumers, the
// PendingAckMetadataEntry log format and recovery from the log after a reopen.
#include "broker/topic/pending_ack_handle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "broker/topic/subscription.h"
#include "broker/topic/tests/dispatch_test_util.h"
#include "protocol/commands.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

using proto::CommandSubscribe;
using storage::Position;

constexpr const char* kTopic = "persistent://public/default/t";
const TxnID kTxn1{0, 1};
const TxnID kTxn2{0, 2};

// A subscription cursor whose individual-ack writes complete only when the test says so (a
// cursor write in flight when the broker is killed).
class HeldWritesCursor final : public storage::ManagedCursor {
 public:
  explicit HeldWritesCursor(storage::ManagedCursor& real) : real_(real) {}
  const std::string& name() const override { return real_.name(); }
  Position markDeletedPosition() const override { return real_.markDeletedPosition(); }
  void asyncMarkDelete(Position pos, storage::StatusCallback cb) override {
    real_.asyncMarkDelete(pos, std::move(cb));
  }
  void asyncMarkDelete(Position pos, storage::CursorProperties props,
                       storage::StatusCallback cb) override {
    real_.asyncMarkDelete(pos, std::move(props), std::move(cb));
  }
  void asyncMarkDeleteWithAckSet(Position pos, const storage::AckSet& set,
                                 storage::StatusCallback cb) override {
    real_.asyncMarkDeleteWithAckSet(pos, set, std::move(cb));
  }
  const storage::CursorProperties& properties() const override { return real_.properties(); }
  void asyncDelete(const std::vector<Position>& positions, storage::StatusCallback cb) override {
    real_.asyncDelete(positions, [this, cb = std::move(cb)](const Status&) mutable {
      held_.push_back(std::move(cb));
    });
  }
  void asyncDeleteBatchIndexes(const std::vector<std::pair<Position, storage::AckSet>>& acks,
                               storage::StatusCallback cb) override {
    real_.asyncDeleteBatchIndexes(acks, std::move(cb));
  }
  const storage::AckSet* batchDeletedIndexes(Position pos) const override {
    return real_.batchDeletedIndexes(pos);
  }
  bool isAcknowledged(Position pos) const override { return real_.isAcknowledged(pos); }
  int64_t numberOfEntriesInBacklog() const override { return real_.numberOfEntriesInBacklog(); }
  void asyncResetCursor(Position pos, storage::StatusCallback cb) override {
    real_.asyncResetCursor(pos, std::move(cb));
  }
  // Completes the held writes with `s`; returns how many there were.
  size_t complete(const Status& s) {
    auto held = std::move(held_);
    held_.clear();
    for (auto& cb : held) cb(s);
    return held.size();
  }

 private:
  storage::ManagedCursor& real_;
  std::vector<storage::StatusCallback> held_;
};

class PendingAckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.transactionCoordinatorEnabled = true;
    sub_ =
        openSubscription(factory_, ex_, "public/default/persistent/t", "s", kTopic, options_, &ml_);
    ASSERT_TRUE(sub_);
    logName_ = pendingAckLedgerName("public/default/persistent/t", "s");
    sub_->enablePendingAck(logName_, opener(), true);
    ex_.drain();
  }
  void TearDown() override {
    sub_.reset();
    ex_.drain();
  }

  // The embedded factory's ledgers: a log that does not exist is not created unless asked.
  PendingAckStoreOpener opener() {
    PendingAckStoreOpener o;
    o.open = [this](const std::string& name, bool create, PendingAckStoreOpener::Opened opened) {
      auto names = factory_.ledgerNames();
      if (!create && std::find(names.begin(), names.end(), name) == names.end()) {
        return opened(Status::notFound("no log"));
      }
      factory_.asyncOpen(name, &ex_, std::move(opened));
    };
    return o;
  }

  std::vector<Position> publish(int n) {
    std::vector<Position> out;
    for (int i = 0; i < n; ++i) {
      proto::MessageMetadata md;
      md.set_producer_name("p");
      md.set_sequence_id(static_cast<uint64_t>(seq_++));
      md.set_publish_time(1);
      ml_->asyncAddEntry(protocol::Commands::newEntry(md, "x"),
                         [&out](Status, Position p) { out.push_back(p); });
    }
    ex_.drain();
    return out;
  }

  Status ack(const TxnID& txn, Position p, storage::AckSet set = {}, int32_t batchSize = 0,
             Consumer* c = nullptr) {
    Status result = Status::internal("no answer");
    sub_->transactionIndividualAcknowledge(c, txn, {{p, std::move(set), batchSize}},
                                           [&](const Status& s) { result = s; });
    ex_.drain();
    return result;
  }
  Status cumulative(const TxnID& txn, Position p) {
    Status result = Status::internal("no answer");
    sub_->transactionCumulativeAcknowledge(txn, p, {}, [&](const Status& s) { result = s; });
    ex_.drain();
    return result;
  }
  Status end(const TxnID& txn, bool commit) {
    Status result = Status::internal("no answer");
    sub_->endTxn(txn, commit, 0, [&](const Status& s) { result = s; });
    ex_.drain();
    return result;
  }
  static std::string pos(Position p) {
    return std::to_string(p.ledgerId) + ":" + std::to_string(p.entryId);
  }

  StepExecutor ex_;
  storage::MemoryManagedLedgerFactory factory_;
  std::shared_ptr<storage::ManagedLedger> ml_;
  BrokerOptions options_;
  std::unique_ptr<Subscription> sub_;
  std::string logName_;
  int seq_ = 0;
};

TEST_F(PendingAckTest, ConflictsAnswerPulsarsTransactionConflictTexts) {
  auto p = publish(4);
  const std::string prefix = std::string("[") + kTopic + "][s] Transaction:";
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  Status s = ack(kTxn2, p[0]);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), prefix + "(0,2) try to ack message:" + pos(p[0]) +
                             " (ackSet is null) in pending ack status.");

  sub_->acknowledge(nullptr, {p[1]}, nullptr);
  s = ack(kTxn1, p[1]);
  EXPECT_EQ(s.message(), prefix + "(0,1) try to ack message:" + pos(p[1]) +
                             " (ackSet is null) already acked before.");

  // Batch indexes: index 0 held by txn1; txn2 may take index 1, not index 0.
  ASSERT_TRUE(ack(kTxn1, p[2], {0xFE}, 8).isOk());
  s = ack(kTxn2, p[2], {0xFE}, 8);
  EXPECT_EQ(s.message(), prefix + "(0,2) try to ack batch message:" + pos(p[2]) +
                             " (ackSet with long[] size of 1) in pending ack status.");
  EXPECT_TRUE(ack(kTxn2, p[2], {0xFD}, 8).isOk());

  // Cumulative: another txn's held cumulative ack, and positions the cursor passed.
  ASSERT_TRUE(cumulative(kTxn1, p[3]).isOk());
  s = cumulative(kTxn2, p[3]);
  EXPECT_EQ(s.message(), prefix + "(0,2) try to cumulative batch ack position: " + pos(p[3]) +
                             " within range of current currentPosition: " + pos(p[3]));
  sub_->acknowledgeCumulative(nullptr, p[0], nullptr);
  s = cumulative(kTxn2, p[0]);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), prefix + "(0,2) try to cumulative ack position: " + pos(p[0]) +
                             " within range of cursor's markDeletePosition: " + pos(p[1]));
}

TEST_F(PendingAckTest, CommitAcksInTheCursorAndAbortReleases) {
  auto p = publish(3);
  ASSERT_TRUE(ack(kTxn1, p[1]).isOk());
  ASSERT_TRUE(ack(kTxn2, p[2]).isOk());
  EXPECT_FALSE(sub_->cursor().isAcknowledged(p[1])) << "held, not acked, before the commit";
  ASSERT_TRUE(end(kTxn1, true).isOk());
  EXPECT_TRUE(sub_->cursor().isAcknowledged(p[1]));
  ASSERT_TRUE(end(kTxn2, false).isOk());
  EXPECT_FALSE(sub_->cursor().isAcknowledged(p[2]));
  EXPECT_TRUE(ack(kTxn1, p[2]).isOk()) << "an aborted txn's ack is released";
  EXPECT_TRUE(end(TxnID{0, 9}, true).isOk()) << "a txn with nothing held ends at once";
  EXPECT_EQ(sub_->pendingAck()->stats().committedCount, 1u);
  EXPECT_EQ(sub_->pendingAck()->stats().abortedCount, 1u);
}

// Pulsar's PendingAckHandleStatsImpl counts every end on the subscription, also one with nothing
// held, and a latency for each successful commit.
TEST_F(PendingAckTest, MetricsCountEveryEndAndEachCommitsLatency) {
  auto p = publish(2);
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  ASSERT_TRUE(ack(kTxn2, p[1]).isOk());
  ASSERT_TRUE(end(kTxn1, true).isOk());
  ASSERT_TRUE(end(kTxn2, false).isOk());
  ASSERT_TRUE(end(TxnID{0, 9}, true).isOk());
  const PendingAckMetrics m = sub_->pendingAck()->metrics();
  EXPECT_EQ(m.commitSucceeded, 2u);
  EXPECT_EQ(m.abortSucceeded, 1u);
  EXPECT_EQ(m.commitFailed + m.abortFailed, 0u);
  EXPECT_EQ(m.latencyCount, 2u);
  EXPECT_EQ(m.recentLatencyMicros.size(), 2u);
  EXPECT_GE(m.latencySumMicros, 0);
}

TEST_F(PendingAckTest, HeldEntriesAreNotRedeliveredUntilAbort) {
  auto p = publish(3);
  RecordingSink sink1, sink2;
  auto c1 = std::make_shared<Consumer>(1, "c1", &sink1, CommandSubscribe::Shared, 0);
  ASSERT_TRUE(sub_->addConsumer(c1).isOk());
  sub_->dispatcher()->flow(c1.get(), 100);
  ex_.drain();
  ASSERT_EQ(sink1.entryIds.size(), 3u);
  ASSERT_TRUE(ack(kTxn1, p[1], {}, 0, c1.get()).isOk());
  // c1 leaves: its unacked entries go to c2, the held one does not.
  auto c2 = std::make_shared<Consumer>(2, "c2", &sink2, CommandSubscribe::Shared, 0);
  ASSERT_TRUE(sub_->addConsumer(c2).isOk());
  sub_->removeConsumer(c1.get());
  sub_->dispatcher()->flow(c2.get(), 100);
  ex_.drain();
  EXPECT_EQ(sink2.entryIds,
            (std::vector<uint64_t>{uint64_t(p[0].entryId), uint64_t(p[2].entryId)}));
  ASSERT_TRUE(end(kTxn1, false).isOk());
  ex_.drain();
  EXPECT_EQ(sink2.entryIds.back(), uint64_t(p[1].entryId)) << "abort redelivers the held entry";
}

TEST_F(PendingAckTest, LogEntriesArePendingAckMetadataEntry) {
  PendingAckLogEntry e{1, 0, TxnID{3, 7}, {{Position{5, 6}, {0xFE}, 8}}};
  Buffer b = encodePendingAckEntry(e);
  // op=1 (field 1), ack_type=0 (2), txnid_least_bits=7 (3), txnid_most_bits=3 (4), one
  // pending_ack_metadata (5): ledgerId 5 (1), entryId 6 (2), ack_set 0xFE (3), batch_size 8 (4).
  const std::string want(
      "\x08\x01\x10\x00\x18\x07\x20\x03\x2a\x09\x08\x05\x10\x06\x18\xfe\x01\x20\x08", 19);
  EXPECT_EQ(std::string(b.view()), want);
  auto back = decodePendingAckEntry(b.view());
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->txn, e.txn);
  ASSERT_EQ(back->positions.size(), 1u);
  EXPECT_EQ(back->positions[0].pos, (Position{5, 6}));
  EXPECT_EQ(back->positions[0].ackSet, storage::AckSet{0xFE});
  EXPECT_EQ(back->positions[0].batchSize, 8);
  EXPECT_FALSE(decodePendingAckEntry("\x08\x09").isOk()) << "op 9 is not a PendingAckOp";
}

TEST_F(PendingAckTest, HeldAcksComeBackFromTheLogAfterAReopen) {
  auto p = publish(3);
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  ASSERT_TRUE(ack(kTxn2, p[1]).isOk());
  ASSERT_TRUE(end(kTxn2, false).isOk());
  auto names = factory_.ledgerNames();
  EXPECT_NE(std::find(names.begin(), names.end(), logName_), names.end());
  // The subscription goes (unload) and is loaded again from its cursor and its log.
  sub_.reset();
  ex_.drain();
  auto cursor = ml_->openCursor("s", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(cursor.isOk());
  sub_ = std::make_unique<Subscription>("s", *ml_, **cursor, options_, kTopic, -1);
  sub_->enablePendingAck(logName_, opener(), true);
  ex_.drain();
  EXPECT_EQ(sub_->pendingAck()->state(), PendingAckHandle::State::kReady);
  EXPECT_EQ(sub_->pendingAck()->stats().heldPositions, 1);
  EXPECT_EQ(ack(kTxn2, p[0]).code(), StatusCode::kAlreadyExists) << "txn1's ack is held again";
  EXPECT_TRUE(ack(kTxn2, p[1]).isOk()) << "the aborted txn's ack stays released";
  ASSERT_TRUE(end(kTxn1, true).isOk());
  EXPECT_TRUE(sub_->cursor().isAcknowledged(p[0]));
}

TEST_F(PendingAckTest, LogCursorMovesOncePerIndexMinLagEntries) {
  // transactionPendingAckLogIndexMinLag = 4: two txns of an ack and a commit each.
  PendingAckStoreOpener o = opener();
  o.logIndexMinLag = 4;
  sub_->enablePendingAck(logName_, o, true);
  ex_.drain();
  auto logMark = [&] {
    for (auto* c : sub_->pendingAck()->log()->cursors()) return c->markDeletedPosition().entryId;
    return int64_t{-2};
  };
  auto p = publish(2);
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  ASSERT_TRUE(end(kTxn1, true).isOk());
  EXPECT_EQ(logMark(), -1) << "2 entries written: below the lag";
  ASSERT_TRUE(ack(kTxn2, p[1]).isOk());
  ASSERT_TRUE(end(kTxn2, true).isOk());
  EXPECT_EQ(logMark(), 3) << "4 entries: moved to the last";
  EXPECT_EQ(sub_->pendingAck()->logAppends(), 4u);
  // Reloaded before and after a move, the replay leaves both acked and nothing held.
  sub_.reset();
  ex_.drain();
  auto cursor = ml_->openCursor("s", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(cursor.isOk());
  sub_ = std::make_unique<Subscription>("s", *ml_, **cursor, options_, kTopic, -1);
  sub_->enablePendingAck(logName_, o, true);
  ex_.drain();
  EXPECT_EQ(sub_->pendingAck()->stats().heldPositions, 0);
  EXPECT_TRUE(sub_->cursor().isAcknowledged(p[0]));
  EXPECT_TRUE(sub_->cursor().isAcknowledged(p[1]));
}

TEST_F(PendingAckTest, LogKeepsACommitUntilTheCursorWroteItsAcks) {
  // Found by test_txn_failover.py (10 kills): the log was trimmed past a COMMIT while the
  // cursor's write of its acks was still rate-limited, so a kill -9 lost the acks.
  auto real = ml_->openCursor("s2", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(real.isOk());
  HeldWritesCursor cursor(**real);
  sub_ = std::make_unique<Subscription>("s2", *ml_, cursor, options_, kTopic, -1);
  sub_->enablePendingAck(pendingAckLedgerName("public/default/persistent/t", "s2"), opener(), true);
  ex_.drain();
  auto logMark = [&] {
    for (auto* c : sub_->pendingAck()->log()->cursors()) return c->markDeletedPosition().entryId;
    return int64_t{-2};
  };
  auto p = publish(2);
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  ASSERT_TRUE(end(kTxn1, true).isOk());
  EXPECT_EQ(logMark(), -1) << "the cursor has not written the commit's acks yet";
  EXPECT_EQ(cursor.complete(Status::ioError("disk")), 1u);
  ex_.drain();
  EXPECT_EQ(logMark(), -1) << "a failed cursor write keeps the COMMIT for a replay";
  ASSERT_TRUE(ack(kTxn2, p[1]).isOk());
  ASSERT_TRUE(end(kTxn2, true).isOk());
  EXPECT_EQ(logMark(), -1);
  EXPECT_EQ(cursor.complete(Status::ok()), 1u);
  ex_.drain();
  EXPECT_EQ(logMark(), 3) << "written (with the earlier acks, the whole state): trimmed";
  sub_.reset();  // before `cursor` goes
  ex_.drain();
}

TEST_F(PendingAckTest, TransactionsOffRefuseAsPulsar) {
  auto p = publish(1);
  auto cursor = ml_->openCursor("plain", storage::InitialPosition::kEarliest);
  ASSERT_TRUE(cursor.isOk());
  Subscription plain("plain", *ml_, **cursor, options_, kTopic, -1);
  Status result;
  plain.transactionIndividualAcknowledge(nullptr, kTxn1, {{p[0], {}, 0}},
                                         [&](const Status& s) { result = s; });
  EXPECT_EQ(result.code(), StatusCode::kNotAllowed);
  EXPECT_EQ(result.message(), "Server don't support transaction ack!");
}

TEST_F(PendingAckTest, DeletingTheSubscriptionDeletesItsLog) {
  auto p = publish(1);
  ASSERT_TRUE(ack(kTxn1, p[0]).isOk());
  bool deleted = false;
  sub_->pendingAck()->deleteLog([&](const Status& s) { deleted = s.isOk(); });
  ex_.drain();
  EXPECT_TRUE(deleted);
  auto names = factory_.ledgerNames();
  EXPECT_EQ(std::find(names.begin(), names.end(), logName_), names.end());
}

}  // namespace
}  // namespace magnetar::broker
