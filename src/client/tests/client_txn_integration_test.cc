// Transactions of the client against a running broker with transactionCoordinatorEnabled=true:
// $BROKER_URL (tests/harness/with_broker.py sets it; skipped when unset). Run on both brokers:
//   .venv/bin/python tests/harness/with_broker.py --broker pulsar
//       --set transactionCoordinatorEnabled=true -- build/src/client/client_txn_integration_test
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "base/clock.h"
#include "client/client.h"

namespace magnetar::client {
namespace {

using namespace std::chrono_literals;

std::string uniqueTopic(const std::string& base) {
  return "persistent://public/default/txn-" + base + "-" + std::to_string(nowMs());
}

class TxnIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("BROKER_URL");
    if (url == nullptr)
      GTEST_SKIP() << "BROKER_URL not set (run through tests/harness/with_broker.py)";
    ClientConfig cc;
    cc.enableTransaction = true;
    cc.operationTimeout = 30s;
    cc.maxBackoff = 1s;
    client_ = std::make_unique<Client>(url, cc);
    ASSERT_TRUE(client_->status().isOk());
  }
  void TearDown() override {
    if (client_) (void)client_->close();
  }

  Consumer subscribe(const std::string& topic, const std::string& sub,
                     SubscriptionType type = SubscriptionType::kShared) {
    ConsumerConfig c;
    c.subscriptionType = type;
    c.initialPosition = InitialPosition::kEarliest;
    auto r = client_->subscribe(topic, sub, c);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? *r : Consumer{};
  }

  Transaction newTxn(std::chrono::milliseconds timeout = 60s) {
    auto t = client_->newTransaction(timeout);
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    return t.isOk() ? *t : Transaction{};
  }

  // Sends payloads prefix0..prefix{n-1} in txn (null: without) and waits for every receipt.
  void sendN(Producer& p, const std::string& prefix, int n, const Transaction* txn) {
    std::atomic<int> failed{0};
    for (int i = 0; i < n; ++i) {
      std::string payload = prefix + std::to_string(i);
      std::string key = "k" + std::to_string(i % 3);
      p.sendAsync(OutgoingMessage{.payload = payload, .key = key, .txn = txn},
                  [&failed](const Status& s, const MessageId&) {
                    if (!s.isOk()) ++failed;
                  });
    }
    ASSERT_TRUE(p.flush().isOk());
    EXPECT_EQ(failed.load(), 0);
  }

  // Payloads received until `quiet` passes without a message.
  static std::vector<std::string> drain(Consumer& c, std::chrono::milliseconds quiet = 1500ms) {
    std::vector<std::string> out;
    while (auto m = c.receive(quiet)) {
      out.push_back(m->payloadString());
      (void)c.acknowledge(*m);
    }
    return out;
  }

  std::unique_ptr<Client> client_;
};

TEST_F(TxnIntegration, CommittedSendsBecomeVisibleAtCommitOnly) {
  for (bool batching : {false, true}) {
    std::string topic = uniqueTopic(batching ? "commit-batch" : "commit");
    Consumer c = subscribe(topic, "s");
    ProducerConfig pc;
    pc.batchingEnabled = batching;
    auto p = client_->createProducer(topic, pc);
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    Transaction txn = newTxn();
    sendN(*p, "t", 20, &txn);
    EXPECT_TRUE(drain(c, 1000ms).empty()) << "uncommitted messages were delivered";
    ASSERT_TRUE(txn.commit().isOk());
    EXPECT_EQ(txn.state(), TransactionState::kCommitted);
    auto got = drain(c);
    ASSERT_EQ(got.size(), 20u);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(got[i], "t" + std::to_string(i));
    EXPECT_FALSE(txn.commit().isOk()) << "a committed transaction committed again";
  }
}

TEST_F(TxnIntegration, AbortedSendsAreNeverVisible) {
  std::string topic = uniqueTopic("abort");
  Consumer c = subscribe(topic, "s");
  auto p = client_->createProducer(topic);
  ASSERT_TRUE(p.isOk());
  Transaction txn = newTxn();
  sendN(*p, "aborted", 10, &txn);
  ASSERT_TRUE(txn.abort().isOk());
  EXPECT_EQ(txn.state(), TransactionState::kAborted);
  sendN(*p, "plain", 3, nullptr);
  auto got = drain(c);
  EXPECT_EQ(got, (std::vector<std::string>{"plain0", "plain1", "plain2"}));
  // Sending in an ended transaction fails.
  auto r = p->send(OutgoingMessage{.payload = "late", .txn = &txn});
  EXPECT_FALSE(r.isOk());
}

TEST_F(TxnIntegration, PartitionedTopicCommit) {
  std::string topic = uniqueTopic("partitioned");
  // The reference broker auto-creates non-partitioned topics; the admin API is not in reach
  // here, so this uses the non-partitioned path per partition name instead.
  Consumer c0 = subscribe(topic + "-a", "s");
  Consumer c1 = subscribe(topic + "-b", "s");
  auto p0 = client_->createProducer(topic + "-a");
  auto p1 = client_->createProducer(topic + "-b");
  ASSERT_TRUE(p0.isOk() && p1.isOk());
  Transaction txn = newTxn();
  sendN(*p0, "a", 5, &txn);
  sendN(*p1, "b", 5, &txn);
  ASSERT_TRUE(txn.commit().isOk());
  EXPECT_EQ(drain(c0).size(), 5u);
  EXPECT_EQ(drain(c1).size(), 5u);
}

// Consume-transform-produce: the acks of an aborted transaction are released (the messages come
// back to a new consumer), those of a committed one are kept.
TEST_F(TxnIntegration, AcksTakeEffectOnCommitOnly) {
  std::string in = uniqueTopic("in");
  std::string out = uniqueTopic("out");
  Consumer outC = subscribe(out, "verify");
  {
    auto p = client_->createProducer(in);
    ASSERT_TRUE(p.isOk());
    sendN(*p, "in", 10, nullptr);
  }
  auto producer = client_->createProducer(out);
  ASSERT_TRUE(producer.isOk());
  for (bool commit : {false, true}) {
    Consumer c = subscribe(in, "app");
    Transaction txn = newTxn();
    std::vector<Message> received;
    for (int i = 0; i < 10; ++i) {
      auto m = c.receive(10s);
      ASSERT_TRUE(m.isOk()) << "round " << commit << " message " << i;
      received.push_back(*m);
    }
    for (auto& m : received) {
      std::string payload = "out-" + m.payloadString();
      producer->sendAsync(OutgoingMessage{.payload = payload, .txn = &txn},
                          [](const Status&, const MessageId&) {});
      ASSERT_TRUE(c.acknowledge(m.messageId(), txn).isOk());
    }
    ASSERT_TRUE(commit ? txn.commit().isOk() : txn.abort().isOk());
    ASSERT_TRUE(c.close().isOk());
  }
  Consumer again = subscribe(in, "app");
  EXPECT_TRUE(drain(again, 1500ms).empty()) << "committed acks were not kept";
  auto got = drain(outC);
  EXPECT_EQ(got.size(), 10u) << "only the committed transaction's output is visible";
}

TEST_F(TxnIntegration, ConflictingAckFails) {
  std::string topic = uniqueTopic("conflict");
  Consumer c = subscribe(topic, "s");
  ProducerConfig pc;
  pc.batchingEnabled = false;
  auto p = client_->createProducer(topic, pc);
  ASSERT_TRUE(p.isOk());
  sendN(*p, "x", 1, nullptr);
  auto m = c.receive(10s);
  ASSERT_TRUE(m.isOk());
  Transaction t1 = newTxn();
  Transaction t2 = newTxn();
  ASSERT_TRUE(c.acknowledge(m->messageId(), t1).isOk());
  Status s = c.acknowledge(m->messageId(), t2);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("TransactionConflict"), std::string::npos) << s.toString();
  // t2 had a failed operation: its commit aborts it.
  Status cs = t2.commit();
  EXPECT_NE(cs.message().find("TransactionHasOperationFailed"), std::string::npos) << cs.toString();
  EXPECT_TRUE(t1.commit().isOk());
}

TEST_F(TxnIntegration, TimedOutTransactionCannotCommit) {
  Transaction txn = newTxn(1s);
  std::this_thread::sleep_for(3s);
  Status s = txn.commit();
  EXPECT_FALSE(s.isOk());
}

}  // namespace
}  // namespace magnetar::client
