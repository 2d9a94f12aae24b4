// TransactionCoordinator against a fake TransactionBufferClient, on the in-memory managed
// ledger: the state machine, the log's entries (Pulsar's TransactionMetadataEntry), recovery
// after a reopen, timeouts and the errors Pulsar answers.
#include "broker/transaction/transaction_coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "broker/transaction/coordinator_registry.h"
#include "storage/memory_managed_ledger.h"
#include "storage/tests/test_executor.h"

namespace magnetar::broker {
namespace {

struct Call {
  std::string topic;
  std::string subscription;  // empty: endTxnOnTopic
  TxnID txn;
  proto::TxnAction action;
  int64_t lowWaterMark;
};

class FakeTbClient : public TransactionBufferClient {
 public:
  void endTxnOnTopic(const std::string& topic, const TxnID& txn, proto::TxnAction action,
                     int64_t lwm, Done done) override {
    calls.push_back({topic, "", txn, action, lwm});
    done(fail);
  }
  void endTxnOnSubscription(const std::string& topic, const std::string& sub, const TxnID& txn,
                            proto::TxnAction action, int64_t lwm, Done done) override {
    calls.push_back({topic, sub, txn, action, lwm});
    done(fail);
  }
  std::vector<Call> calls;
  Status fail;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  std::shared_ptr<TransactionCoordinator> open(uint64_t tcId = 7) {
    std::shared_ptr<TransactionCoordinator> tc;
    TransactionCoordinator::open(
        tcId, factory_, &ex_, &tb_, [this] { return now_; }, maxActive_,
        [&](Result<std::shared_ptr<TransactionCoordinator>> r) {
          ASSERT_TRUE(r.isOk()) << r.status().toString();
          tc = r.value();
        });
    ex_.runPending();
    return tc;
  }
  TxnID newTxn(TransactionCoordinator& tc, uint64_t timeoutMs = 60000) {
    TxnID id;
    tc.newTransaction(timeoutMs, "", [&](Result<TxnID> r) {
      ASSERT_TRUE(r.isOk());
      id = r.value();
    });
    ex_.runPending();
    return id;
  }
  Status run(const std::function<void(std::function<void(Status)>)>& op) {
    Status out = Status::internal("not answered");
    op([&](Status s) { out = s; });
    ex_.runPending();
    return out;
  }
  Status end(TransactionCoordinator& tc, const TxnID& id, proto::TxnAction a) {
    return run([&](auto cb) { tc.endTransaction(id, a, cb); });
  }
  void closeAndWait(TransactionCoordinator& tc) {
    run([&](auto cb) { tc.close(cb); });
  }
  // The log's entries, in order.
  std::vector<proto::TransactionMetadataEntry> logEntries(uint64_t tcId = 7) {
    std::vector<proto::TransactionMetadataEntry> out;
    factory_.asyncOpen(TransactionLog::ledgerName(tcId), &ex_, [&](auto r) {
      ASSERT_TRUE(r.isOk());
      auto ml = r.value();
      ml->asyncReadEntries(ml->firstPosition(), 1000, 1 << 20, [&](Status s, auto entries) {
        ASSERT_TRUE(s.isOk());
        for (auto& e : entries) {
          out.emplace_back();
          EXPECT_TRUE(out.back().ParseFromArray(e.data.data(), static_cast<int>(e.data.size())));
        }
      });
    });
    ex_.runPending();
    return out;
  }

  storage::testing::ManualExecutor ex_;
  storage::MemoryManagedLedgerFactory factory_;
  FakeTbClient tb_;
  int64_t now_ = 1'000'000;
  int64_t maxActive_ = 0;
};

TEST_F(CoordinatorTest, NewTxnIdsCarryTheCoordinatorIdAndASequence) {
  auto tc = open(7);
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->state(), TransactionCoordinator::State::kReady);
  // Pulsar's sequence starts at -1: the first txn is (7,0); the mark is 0 with nothing ongoing.
  EXPECT_EQ(tc->lowWaterMark(), 0);
  EXPECT_EQ(tc->stats().sequenceId, -1);
  TxnID a = newTxn(*tc), b = newTxn(*tc);
  EXPECT_EQ(a, (TxnID{7, 0}));
  EXPECT_EQ(b, (TxnID{7, 1}));
  EXPECT_EQ(tc->lowWaterMark(), -1);  // first ongoing is 0
  auto st = tc->stats();
  EXPECT_EQ(st.created, 2);
  EXPECT_EQ(st.active, 2);
  EXPECT_EQ(st.appendCount, 2);
}

TEST_F(CoordinatorTest, StatsCountExecutionLatencyAndRecovery) {
  auto tc = open();
  auto st = tc->stats();
  EXPECT_EQ(st.state, "Ready");
  EXPECT_EQ(st.recoverStartTimeMs, now_);
  EXPECT_EQ(st.recoverEndTimeMs, now_);
  TxnID fast = newTxn(*tc), slow = newTxn(*tc);
  now_ += 15;  // 15 ms after opening: the 20 ms bucket (index 1)
  ASSERT_TRUE(end(*tc, fast, proto::COMMIT).isOk());
  now_ += 4'000'000;  // past 3000000 ms: the overflow bucket
  ASSERT_TRUE(end(*tc, slow, proto::ABORT).isOk());
  st = tc->stats();
  EXPECT_EQ(st.executionLatencyBuckets[1], 1);
  EXPECT_EQ(st.executionLatencyBuckets.back(), 1);
  EXPECT_EQ(st.executionLatencyBuckets[0], 0);
}

TEST_F(CoordinatorTest, CommitFansOutThenLogsCommittedAndForgets) {
  auto tc = open();
  TxnID id = newTxn(*tc);
  ASSERT_TRUE(
      run([&](auto cb) { tc->addProducedPartitions(id, {"persistent://t/n/a"}, cb); }).isOk());
  ASSERT_TRUE(run([&](auto cb) {
                tc->addAckedSubscriptions(id, {{"persistent://t/n/b", "sub"}}, cb);
              }).isOk());
  ASSERT_TRUE(end(*tc, id, proto::COMMIT).isOk());
  ASSERT_EQ(tb_.calls.size(), 2u);
  EXPECT_EQ(tb_.calls[0].subscription, "sub");
  EXPECT_EQ(tb_.calls[1].topic, "persistent://t/n/a");
  EXPECT_EQ(tb_.calls[1].action, proto::COMMIT);
  EXPECT_EQ(tc->find(id), nullptr);
  EXPECT_EQ(tc->stats().committed, 1);
  EXPECT_EQ(tc->stats().active, 0);
  // Again: the txn is gone, TransactionNotFound as Pulsar.
  Status again = end(*tc, id, proto::COMMIT);
  EXPECT_EQ(txnServerError(again), proto::TransactionNotFound);
  EXPECT_EQ(again.message(), "The transaction with this txdID `(7,0)`not found ");
}

TEST_F(CoordinatorTest, LogEntriesArePulsarsTransactionMetadataEntries) {
  auto tc = open();
  TxnID id = newTxn(*tc, 5000);
  ASSERT_TRUE(
      run([&](auto cb) { tc->addProducedPartitions(id, {"persistent://t/n/a"}, cb); }).isOk());
  ASSERT_TRUE(end(*tc, id, proto::ABORT).isOk());
  auto log = logEntries();
  ASSERT_EQ(log.size(), 4u);
  using E = proto::TransactionMetadataEntry;
  EXPECT_EQ(log[0].metadata_op(), E::NEW);
  EXPECT_EQ(log[0].txnid_most_bits(), 7u);
  EXPECT_EQ(log[0].txnid_least_bits(), 0u);  // the first sequence, as Pulsar's
  EXPECT_EQ(log[0].max_local_txn_id(), 0u);
  EXPECT_EQ(log[0].timeout_ms(), 5000u);
  EXPECT_EQ(log[0].start_time(), static_cast<uint64_t>(now_));
  EXPECT_EQ(log[1].metadata_op(), E::ADD_PARTITION);
  EXPECT_EQ(log[1].partitions(0), "persistent://t/n/a");
  EXPECT_EQ(log[2].metadata_op(), E::UPDATE);
  EXPECT_EQ(log[2].expected_status(), proto::OPEN);
  EXPECT_EQ(log[2].new_status(), proto::ABORTING);
  EXPECT_EQ(log[3].new_status(), proto::ABORTED);
  // Round trip of the bytes: field numbers as Pulsar's (metadata_op = 1 ... owner = 12).
  E e;
  e.set_owner("role");
  e.set_max_local_txn_id(3);
  std::string b = e.SerializeAsString();
  EXPECT_EQ(static_cast<uint8_t>(b[0]), (11 << 3) | 0);  // max_local_txn_id, varint
  EXPECT_EQ(static_cast<uint8_t>(b[2]), (12 << 3) | 2);  // owner, length-delimited
}

TEST_F(CoordinatorTest, RecoveryReplaysOngoingTransactionsAndKeepsTheSequence) {
  auto tc = open();
  TxnID ended = newTxn(*tc);
  TxnID open1 = newTxn(*tc);
  TxnID committing = newTxn(*tc);
  ASSERT_TRUE(
      run([&](auto cb) { tc->addProducedPartitions(open1, {"persistent://t/n/x"}, cb); }).isOk());
  ASSERT_TRUE(run([&](auto cb) {
                tc->addProducedPartitions(committing, {"persistent://t/n/y"}, cb);
              }).isOk());
  ASSERT_TRUE(end(*tc, ended, proto::ABORT).isOk());
  tb_.fail = Status::ioError("topic unavailable");  // committing stays COMMITTING
  EXPECT_FALSE(end(*tc, committing, proto::COMMIT).isOk());
  closeAndWait(*tc);
  tc.reset();

  tb_ = FakeTbClient{};
  auto again = open();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->find(ended), nullptr);
  ASSERT_NE(again->find(open1), nullptr);
  EXPECT_EQ(again->find(open1)->status, proto::OPEN);
  EXPECT_EQ(again->find(open1)->producedPartitions.count("persistent://t/n/x"), 1u);
  // The COMMITTING one finished its fan-out after recovery.
  EXPECT_EQ(again->find(committing), nullptr);
  ASSERT_EQ(tb_.calls.size(), 1u);
  EXPECT_EQ(tb_.calls[0].topic, "persistent://t/n/y");
  EXPECT_EQ(tb_.calls[0].action, proto::COMMIT);
  // Ids are never reused.
  EXPECT_EQ(newTxn(*again), (TxnID{7, 3}));
}

TEST_F(CoordinatorTest, SequenceSurvivesWhenEveryTransactionEnded) {
  auto tc = open();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(end(*tc, newTxn(*tc), proto::COMMIT).isOk());
  EXPECT_EQ(tc->lowWaterMark(), 0);  // nothing ongoing: 0, as Pulsar's
  closeAndWait(*tc);
  auto again = open();
  EXPECT_EQ(again->stats().sequenceId, 2);
  EXPECT_EQ(newTxn(*again), (TxnID{7, 3}));
}

TEST_F(CoordinatorTest, WrongStateIsInvalidTxnStatus) {
  auto tc = open();
  TxnID id = newTxn(*tc);
  ASSERT_TRUE(
      run([&](auto cb) { tc->addProducedPartitions(id, {"persistent://t/n/a"}, cb); }).isOk());
  tb_.fail = Status::ioError("down");
  EXPECT_FALSE(end(*tc, id, proto::ABORT).isOk());  // now ABORTING
  Status commit = end(*tc, id, proto::COMMIT);
  EXPECT_EQ(txnServerError(commit), proto::InvalidTxnStatus);
  EXPECT_EQ(commit.message(),
            "Expect Txn `(7,0)` to be in COMMITTING status but it is in ABORTING status");
  Status add = run([&](auto cb) { tc->addProducedPartitions(id, {"persistent://t/n/a"}, cb); });
  EXPECT_EQ(txnServerError(add), proto::InvalidTxnStatus);
  // The retry at the next tick ends it once the buffer answers.
  tb_.fail = Status::ok();
  tc->tick();
  ex_.runPending();
  EXPECT_EQ(tc->find(id), nullptr);
  EXPECT_EQ(tc->stats().aborted, 1);
}

TEST_F(CoordinatorTest, UnknownTxnIsTransactionNotFound) {
  auto tc = open();
  Status s = run([&](auto cb) { tc->addAckedSubscriptions(TxnID{7, 99}, {{"t", "s"}}, cb); });
  EXPECT_EQ(txnServerError(s), proto::TransactionNotFound);
}

TEST_F(CoordinatorTest, TimedOutTransactionsAreAborted) {
  auto tc = open();
  TxnID shortTxn = newTxn(*tc, 1000);
  TxnID longTxn = newTxn(*tc, 60000);
  ASSERT_TRUE(run([&](auto cb) {
                tc->addProducedPartitions(shortTxn, {"persistent://t/n/a"}, cb);
              }).isOk());
  now_ += 999;
  tc->tick();
  ex_.runPending();
  EXPECT_NE(tc->find(shortTxn), nullptr);
  now_ += 1;
  tc->tick();
  ex_.runPending();
  EXPECT_EQ(tc->find(shortTxn), nullptr);
  EXPECT_NE(tc->find(longTxn), nullptr);
  ASSERT_EQ(tb_.calls.size(), 1u);
  EXPECT_EQ(tb_.calls[0].action, proto::ABORT);
  EXPECT_EQ(tb_.calls[0].lowWaterMark, -1);
  EXPECT_EQ(tc->stats().timedOut, 1);
  EXPECT_EQ(tc->stats().aborted, 1);
  EXPECT_EQ(tc->lowWaterMark(), 0);  // 1 is the first ongoing
}

TEST_F(CoordinatorTest, ClosedCoordinatorIsTransactionCoordinatorNotFound) {
  auto tc = open(3);
  closeAndWait(*tc);
  Result<TxnID> r = Status::internal("not answered");
  tc->newTransaction(1000, "", [&](Result<TxnID> x) { r = std::move(x); });
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(txnServerError(r.status()), proto::TransactionCoordinatorNotFound);
  EXPECT_EQ(r.status().message(), "Transaction coordinator with id 3 not found!");
}

TEST_F(CoordinatorTest, MaxActiveTransactionsRefusesNewOnes) {
  maxActive_ = 1;
  auto tc = open();
  newTxn(*tc);
  Result<TxnID> r = Status::internal("not answered");
  tc->newTransaction(1000, "", [&](Result<TxnID> x) { r = std::move(x); });
  ex_.runPending();
  EXPECT_FALSE(r.isOk());
}

TEST_F(CoordinatorTest, RegistryLoadsOnceAndServesTheReadyCoordinator) {
  CoordinatorRegistry reg(
      factory_, [this](uint64_t) { return &ex_; }, &tb_, 0, std::chrono::milliseconds(0),
      [this] { return now_; });
  int answered = 0;
  reg.load(0, [&](auto r) { answered += r.isOk(); });
  reg.load(0, [&](auto r) { answered += r.isOk(); });
  reg.load(3, [&](auto r) { answered += r.isOk(); });
  EXPECT_EQ(reg.get(0), nullptr);  // still recovering
  // Loading ones are listed too (cluster mode closes them if their bundle left meanwhile).
  EXPECT_EQ(reg.loadedIds(), (std::vector<uint64_t>{0, 3}));
  ex_.runPending();
  EXPECT_EQ(answered, 3);
  ASSERT_NE(reg.get(0), nullptr);
  EXPECT_EQ(reg.stats().size(), 2u);
  reg.unload(0);
  ex_.runPending();
  EXPECT_EQ(reg.get(0), nullptr);
  EXPECT_EQ(reg.loadedIds(), (std::vector<uint64_t>{3}));
}

TEST(TransactionLogName, IsPulsars) {
  EXPECT_EQ(TransactionLog::ledgerName(0), "pulsar/system/persistent/__transaction_log_0");
  EXPECT_TRUE(TransactionLog::isLogLedger("pulsar/system/persistent/__transaction_log_12"));
  EXPECT_FALSE(TransactionLog::isLogLedger("public/default/persistent/__transaction_log_1"));
}

TEST(TransactionInternalNames, AreNotTopics) {
  EXPECT_TRUE(isTransactionInternalName("pulsar/system/persistent/__transaction_log_0"));
  EXPECT_TRUE(
      isTransactionInternalName("public/default/persistent/t-sub__transaction_pending_ack"));
  EXPECT_TRUE(isTransactionInternalName(
      "persistent://pulsar/system/transaction_coordinator_assign-partition-0"));
  EXPECT_FALSE(isTransactionInternalName("public/default/persistent/orders"));
}

}  // namespace
}  // namespace magnetar::broker
