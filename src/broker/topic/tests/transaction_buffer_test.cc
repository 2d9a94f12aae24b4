// The transaction buffer through a PersistentTopic over the in-memory storage: transactional
// entries are stored at once but dispatched only after their commit (in order), never after an
// abort (acked through, markers too), a restart keeps open txns invisible and aborted ones
// skipped, and SENDs are refused as Pulsar refuses them.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/topic/entry_metadata.h"
#include "broker/topic/tests/dispatch_test_util.h"
#include "broker/topic/tests/topic_fixture.h"
#include "protocol/commands.h"

namespace magnetar::broker {
namespace {

using storage::Position;

// Records the SEND_RECEIPT / SEND_ERROR answers a producer's connection is sent.
class ReceiptSink : public ProducerSink {
 public:
  void send(net::FrameBatch&& frames) override {
    std::string bytes = net::flatten(frames);
    Status s = decoder_.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                             [this](const proto::BaseCommand& cmd, Buffer) {
                               if (cmd.type() == proto::BaseCommand::SEND_ERROR) {
                                 errors.push_back(cmd.send_error());
                               } else if (cmd.type() == proto::BaseCommand::SEND_RECEIPT) {
                                 receipts.push_back(cmd.send_receipt());
                               }
                             });
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  void sendFrame(const Buffer&) override {}
  void publishCompleted(uint32_t, uint64_t) override {}
  void closeProducerFromBroker(uint64_t) override {}
  const std::string& peerAddress() const override { return peer_; }
  const std::string& clientVersion() const override { return peer_; }
  std::vector<proto::CommandSendError> errors;
  std::vector<proto::CommandSendReceipt> receipts;

 private:
  std::string peer_ = "test";
  protocol::FrameDecoder decoder_;
};

class TransactionBufferTest : public LoopTopicTest<> {
 protected:
  void SetUp() override {
    options_.transactionCoordinatorEnabled = true;
    start();
  }
  void start() {
    openTopic("txn");
    initialize();
  }
  void initialize() {
    std::promise<Status> ready;
    runOnLoop([&] { topic_->initialize([&](Status s) { ready.set_value(s); }); });
    ASSERT_TRUE(ready.get_future().get().isOk());
  }
  // Closes the topic and its ledger and loads it again from the same storage. crash: no
  // snapshot at the close (a release, as a broker killed after its last write).
  void restart(bool crash = false) {
    std::promise<Status> closed;
    runOnLoop([&] { topic_->closeLedger([&](const Status& s) { closed.set_value(s); }, crash); });
    ASSERT_TRUE(closed.get_future().get().isOk());
    runOnLoop([&] {
      topic_.reset();
      ledger_.reset();
    });
    consumer_.reset();
    std::promise<std::shared_ptr<storage::ManagedLedger>> opened;
    factory_.asyncOpen("public/default/persistent/txn", &loop_,
                       [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
                         opened.set_value(r.isOk() ? r.value() : nullptr);
                       });
    ledger_ = opened.get_future().get();
    ASSERT_TRUE(ledger_);
    auto name = TopicName::parse("persistent://public/default/txn");
    topic_ = std::make_shared<PersistentTopic>(name.value(), ledger_, loop_, options_);
    initialize();
  }
  // Publishes one message with payload `value`, in txn when given; waits for the answer.
  void publish(const std::string& value, std::optional<TxnID> txn = std::nullopt) {
    proto::MessageMetadata md;
    md.set_producer_name("p");
    md.set_sequence_id(seq_);
    md.set_publish_time(1);
    if (txn) {
      md.set_txnid_most_bits(txn->mostBits);
      md.set_txnid_least_bits(txn->leastBits);
    }
    runOnLoop([&] {
      std::vector<PendingSend> sends(1);
      sends[0].producer = producer_;
      sends[0].sequenceId = seq_;
      sends[0].highestSequenceId = seq_;
      sends[0].entry = protocol::Commands::newEntry(md, value);
      sends[0].txn = txn;
      topic_->publish(sends);
    });
    seq_++;
    settle();
  }
  void settle() {
    for (int i = 0; i < 4; i++) runOnLoop([] {});
  }
  Status endTxn(TxnID txn, proto::TxnAction action) {
    std::promise<Status> done;
    runOnLoop([&] { topic_->endTxn(txn, action, 0, [&](Status s) { done.set_value(s); }); });
    Status s = done.get_future().get();
    settle();
    return s;
  }
  // A Shared consumer on subscription "s" with many permits; its sink records entry ids.
  void subscribe() {
    consumer_ = std::make_shared<Consumer>(1, "c", &sink_, proto::CommandSubscribe::Shared, 0);
    std::promise<Status> added;
    SubscribeRequest req;
    req.subscription = "s";
    req.subType = proto::CommandSubscribe::Shared;
    req.initialPosition = storage::InitialPosition::kEarliest;
    req.consumer = consumer_;
    runOnLoop([&] {
      topic_->subscribe(req, [&](Status s) { added.set_value(s); });
      topic_->subscription("s")->dispatcher()->flow(consumer_.get(), 1000);
    });
    ASSERT_TRUE(added.get_future().get().isOk());
    settle();
  }
  // Entry ids dispatched so far, in order.
  std::vector<uint64_t> dispatched() {
    settle();
    return sink_.entryIds;
  }
  // Entry e of the topic's first ledger. Thread: the loop.
  Position pos(int64_t e) const { return Position{ledger_->firstPosition().ledgerId, e}; }

  std::shared_ptr<ReceiptSink> receipts_ = std::make_shared<ReceiptSink>();
  std::shared_ptr<Producer> producer_ = std::make_shared<Producer>(1, "p", receipts_);
  uint64_t seq_ = 0;
  RecordingSink sink_;
  std::shared_ptr<Consumer> consumer_;
};

const TxnID kTxn1{1, 1};
const TxnID kTxn2{1, 2};

TEST_F(TransactionBufferTest, OngoingTxnHoldsDispatchAtItsFirstPositionUntilCommit) {
  subscribe();
  publish("a");                               // entry 0
  publish("t1", kTxn1);                       // entry 1
  publish("b");                               // entry 2: behind the open txn, held too (Pulsar)
  publish("t2", kTxn1);                       // entry 3
  EXPECT_EQ(receipts_->receipts.size(), 4u);  // stored at once, answered
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{0}));
  ASSERT_TRUE(endTxn(kTxn1, proto::COMMIT).isOk());
  // In order, the commit marker (entry 4) neither dispatched nor left in the backlog.
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{0, 1, 2, 3}));
  runOnLoop([&] {
    EXPECT_FALSE(topic_->transactionBuffer().maxReadPosition().has_value());
    EXPECT_TRUE(topic_->subscription("s")->cursor().isAcknowledged(pos(4)));
    EXPECT_FALSE(topic_->subscription("s")->cursor().isAcknowledged(pos(3)));  // not acked yet
  });
}

TEST_F(TransactionBufferTest, AbortedEntriesAreNeverDispatchedAndAckedThrough) {
  subscribe();
  publish("t1", kTxn1);   // entry 0
  publish("t2", kTxn2);   // entry 1
  publish("t1b", kTxn1);  // entry 2
  EXPECT_TRUE(dispatched().empty());
  ASSERT_TRUE(endTxn(kTxn1, proto::ABORT).isOk());   // marker: entry 3
  EXPECT_TRUE(dispatched().empty());                 // txn2 (entry 1) still holds the rest
  ASSERT_TRUE(endTxn(kTxn2, proto::COMMIT).isOk());  // marker: entry 4
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{1}));
  // Aborted entries and both markers are acked by the subscription: only entry 1 is unacked.
  runOnLoop([&] {
    auto& cursor = topic_->subscription("s")->cursor();
    for (int64_t e : {0, 2, 3, 4}) {
      EXPECT_TRUE(cursor.isAcknowledged(pos(e))) << e;
    }
    EXPECT_FALSE(cursor.isAcknowledged(pos(1)));
    EXPECT_TRUE(topic_->transactionBuffer().isAborted(kTxn1));
  });
  // A retried abort writes nothing; a SEND in an ended txn is refused after the low water mark.
  ASSERT_TRUE(endTxn(kTxn1, proto::ABORT).isOk());
  runOnLoop([&] { EXPECT_EQ(ledger_->lastConfirmedEntry(), pos(4)); });
}

TEST_F(TransactionBufferTest, RestartKeepsOpenTxnsInvisibleAndAbortedOnesSkipped) {
  publish("t1", kTxn1);                             // entry 0, aborted below
  publish("t2", kTxn2);                             // entry 1, still open at the restart
  ASSERT_TRUE(endTxn(kTxn1, proto::ABORT).isOk());  // entry 2
  publish("plain");                                 // entry 3, behind the open txn2
  restart();
  runOnLoop([&] {
    EXPECT_TRUE(topic_->transactionBuffer().isAborted(kTxn1));
    EXPECT_EQ(topic_->transactionBuffer().ongoingCount(), 1u);
    EXPECT_EQ(topic_->maxReadPosition(), pos(0));
  });
  subscribe();
  EXPECT_TRUE(dispatched().empty());
  ASSERT_TRUE(endTxn(kTxn2, proto::COMMIT).isOk());
  // The new ledger after the restart holds the commit marker; txn1's entry stays skipped.
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{1, 3}));
}

TEST_F(TransactionBufferTest, RecoveryReplaysTheTailAfterTheSnapshot) {
  publish("t1", kTxn1);
  ASSERT_TRUE(endTxn(kTxn1, proto::COMMIT).isOk());  // snapshot: nothing ongoing
  publish("t2", kTxn2);                              // after the snapshot: found by the replay
  restart();
  runOnLoop([&] { EXPECT_EQ(topic_->transactionBuffer().ongoingCount(), 1u); });
  subscribe();
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{0}));
}

// transactionCoordinatorEnabled off (the default).
class TransactionBufferOffTest : public TransactionBufferTest {
 protected:
  void SetUp() override { start(); }
};

TEST_F(TransactionBufferOffTest, TransactionalSendIsRefusedWhenTransactionsAreOff) {
  publish("t1", kTxn1);
  ASSERT_EQ(receipts_->errors.size(), 1u);
  EXPECT_EQ(receipts_->errors[0].error(), proto::NotAllowedError);
  EXPECT_EQ(receipts_->errors[0].message(), "Transaction buffer disable!");
  runOnLoop([&] { EXPECT_EQ(ledger_->lastConfirmedEntry().entryId, -1); });
  EXPECT_EQ(endTxn(kTxn1, proto::COMMIT).code(), StatusCode::kNotAllowed);
}

// The snapshot's max read entry as stored in the buffer's cursor (-2: no snapshot).
int64_t snapshotMaxReadEntry(storage::ManagedLedger& ml) {
  for (auto* c : ml.cursors()) {
    if (c->name() != kTxnBufferCursorName) continue;
    auto it = c->properties().find("tb.maxRead.entry");
    return it == c->properties().end() ? -2 : it->second;
  }
  return -2;
}

// transactionBufferSnapshotMaxTransactionCount = 3.
class TransactionBufferSnapshotCountTest : public TransactionBufferTest {
 protected:
  void SetUp() override {
    options_.transactionCoordinatorEnabled = true;
    options_.transactionBufferSnapshotMaxTransactionCount = 3;
    start();
  }
};

TEST_F(TransactionBufferSnapshotCountTest, SnapshotsEveryThirdEndAndRecoversWithoutOne) {
  const TxnID kTxn3{1, 3};
  publish("t1", kTxn1);  // entry 0: the first snapshot (nothing readable yet)
  int64_t first = -2;
  runOnLoop([&] { first = snapshotMaxReadEntry(*ledger_); });
  ASSERT_NE(first, -2);
  ASSERT_TRUE(endTxn(kTxn1, proto::COMMIT).isOk());                      // entry 1
  publish("t2", kTxn2);                                                  // entry 2
  ASSERT_TRUE(endTxn(kTxn2, proto::ABORT).isOk());                       // entry 3
  runOnLoop([&] { EXPECT_EQ(snapshotMaxReadEntry(*ledger_), first); });  // 2 ends: none yet
  publish("t3", kTxn3);                                                  // entry 4
  ASSERT_TRUE(endTxn(kTxn3, proto::COMMIT).isOk());                      // entry 5, the third end
  runOnLoop([&] { EXPECT_EQ(snapshotMaxReadEntry(*ledger_), 5); });
  // Two more ends after that snapshot, then a crash: the replay finds them again.
  publish("t4", TxnID{1, 4});                             // entry 6
  ASSERT_TRUE(endTxn(TxnID{1, 4}, proto::ABORT).isOk());  // entry 7
  publish("t5", TxnID{1, 5});                             // entry 8, open at the crash
  runOnLoop([&] { EXPECT_EQ(snapshotMaxReadEntry(*ledger_), 5); });
  restart(true);
  runOnLoop([&] {
    EXPECT_TRUE(topic_->transactionBuffer().isAborted(kTxn2));
    EXPECT_TRUE(topic_->transactionBuffer().isAborted(TxnID{1, 4}));
    EXPECT_EQ(topic_->transactionBuffer().ongoingCount(), 1u);
  });
  subscribe();
  EXPECT_EQ(dispatched(), (std::vector<uint64_t>{0, 4}));
}

TEST_F(TransactionBufferSnapshotCountTest, TheTimerSnapshotsAPendingChange) {
  publish("t1", kTxn1);
  ASSERT_TRUE(endTxn(kTxn1, proto::COMMIT).isOk());  // entry 1: one end, no snapshot
  runOnLoop([&] { EXPECT_NE(snapshotMaxReadEntry(*ledger_), 1); });
  runOnLoop([&] { topic_->snapshotTransactionBuffer(); });  // transactionBufferSnapshotMinTime
  runOnLoop([&] { EXPECT_EQ(snapshotMaxReadEntry(*ledger_), 1); });
}

TEST_F(TransactionBufferTest, SendBelowTheLowWaterMarkIsRefused) {
  publish("t1", kTxn2);
  std::promise<Status> done;
  runOnLoop([&] { topic_->endTxn(kTxn2, proto::COMMIT, 2, [&](Status s) { done.set_value(s); }); });
  ASSERT_TRUE(done.get_future().get().isOk());
  settle();
  publish("late", kTxn1);
  ASSERT_EQ(receipts_->errors.size(), 1u);
  EXPECT_EQ(receipts_->errors[0].error(), proto::NotAllowedError);
  EXPECT_EQ(receipts_->errors[0].message(),
            "Transaction [(1,1)] has been ended. Please use a new transaction to send message.");
}

TEST(EntryMetadataTxnTest, PeekReadsTxnIdAndMarkerType) {
  proto::MessageMetadata md;
  md.set_producer_name("pulsar.txn.marker");
  md.set_sequence_id(static_cast<uint64_t>(-1));
  md.set_publish_time(1);
  md.set_marker_type(21);
  md.set_txnid_most_bits(3);
  md.set_txnid_least_bits(9);
  Buffer entry = protocol::Commands::newEntry(md, "");
  EntryMetadataPeek peek;
  ASSERT_TRUE(peekEntryMetadata(entry.view(), &peek).isOk());
  EXPECT_TRUE(peek.hasTxnid);
  EXPECT_TRUE(peek.hasMarkerType);
  EXPECT_EQ(peek.markerType, 21);
  EXPECT_EQ(peek.txnidMostBits, 3u);
  EXPECT_EQ(peek.txnidLeastBits, 9u);
}

}  // namespace
}  // namespace magnetar::broker
