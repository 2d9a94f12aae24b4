// The client's transaction pieces that need no broker: the coordinator commands and the
// transactional ACK as encoded, the txn ids of SEND frames and their metadata, response errors,
// and the client-side refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>

#include "client/batch.h"
#include "client/client.h"
#include "client/transaction_impl.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::client {
namespace {

using protocol::Commands;
using BC = proto::BaseCommand;

// The single frame in bytes: its command and its entry (payload frames).
std::pair<BC, Buffer> decodeOne(const uint8_t* data, size_t len) {
  protocol::FrameDecoder decoder;
  std::pair<BC, Buffer> out;
  int frames = 0;
  Status s = decoder.feed(data, len, [&](const BC& cmd, Buffer entry) {
    out = {cmd, std::move(entry)};
    ++frames;
  });
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(frames, 1);
  return out;
}

BC decodeCommand(const Buffer& b) { return decodeOne(b.data(), b.size()).first; }

// The MessageMetadata of an entry `[0x0e01][crc32c][size][metadata][payload]`.
proto::MessageMetadata metadataOf(const Buffer& entry) {
  const uint8_t* p = entry.data() + 6;
  uint32_t size = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  proto::MessageMetadata md;
  EXPECT_TRUE(md.ParseFromArray(p + 4, static_cast<int>(size)));
  return md;
}

TEST(TransactionCommandsTest, CoordinatorCommandsCarryTheirFields) {
  BC c = decodeCommand(Commands::newTcClientConnectRequest(3, 11));
  ASSERT_EQ(c.type(), BC::TC_CLIENT_CONNECT_REQUEST);
  EXPECT_EQ(c.tcclientconnectrequest().tc_id(), 3u);
  EXPECT_EQ(c.tcclientconnectrequest().request_id(), 11u);

  // The timeout travels in milliseconds in txn_ttl_seconds, as Pulsar's clients send it.
  BC n = decodeCommand(Commands::newNewTxn(2, 12, 45000));
  ASSERT_EQ(n.type(), BC::NEW_TXN);
  EXPECT_EQ(n.newtxn().tc_id(), 2u);
  EXPECT_EQ(n.newtxn().request_id(), 12u);
  EXPECT_EQ(n.newtxn().txn_ttl_seconds(), 45000u);

  BC a = decodeCommand(Commands::newAddPartitionToTxn(13, 2, 99, "persistent://t/n/x"));
  ASSERT_EQ(a.type(), BC::ADD_PARTITION_TO_TXN);
  EXPECT_EQ(a.addpartitiontotxn().txnid_most_bits(), 2u);
  EXPECT_EQ(a.addpartitiontotxn().txnid_least_bits(), 99u);
  ASSERT_EQ(a.addpartitiontotxn().partitions_size(), 1);
  EXPECT_EQ(a.addpartitiontotxn().partitions(0), "persistent://t/n/x");

  BC s = decodeCommand(Commands::newAddSubscriptionToTxn(14, 2, 99, "persistent://t/n/x", "sub"));
  ASSERT_EQ(s.type(), BC::ADD_SUBSCRIPTION_TO_TXN);
  ASSERT_EQ(s.addsubscriptiontotxn().subscription_size(), 1);
  EXPECT_EQ(s.addsubscriptiontotxn().subscription(0).topic(), "persistent://t/n/x");
  EXPECT_EQ(s.addsubscriptiontotxn().subscription(0).subscription(), "sub");
  EXPECT_EQ(s.addsubscriptiontotxn().txnid_least_bits(), 99u);

  BC e = decodeCommand(Commands::newEndTxn(15, 2, 99, proto::ABORT));
  ASSERT_EQ(e.type(), BC::END_TXN);
  EXPECT_EQ(e.endtxn().txn_action(), proto::ABORT);
  EXPECT_EQ(e.endtxn().txnid_most_bits(), 2u);
  EXPECT_EQ(e.endtxn().request_id(), 15u);
}

TEST(TransactionCommandsTest, AckWithTxnOfABatchMessageKeepsTheOtherBits) {
  const int64_t ackSet[] = {0b1011};  // batch of 4, index 2 acked
  BC a = decodeCommand(Commands::newAckWithTxn(
      7, proto::CommandAck::Individual, protocol::WireMessageId{5, 6, -1, 2}, ackSet, 4, 1, 8, 21));
  ASSERT_EQ(a.type(), BC::ACK);
  const auto& ack = a.ack();
  EXPECT_EQ(ack.consumer_id(), 7u);
  EXPECT_EQ(ack.txnid_most_bits(), 1u);
  EXPECT_EQ(ack.txnid_least_bits(), 8u);
  EXPECT_EQ(ack.request_id(), 21u);
  ASSERT_EQ(ack.message_id_size(), 1);
  EXPECT_EQ(ack.message_id(0).ledgerid(), 5u);
  EXPECT_EQ(ack.message_id(0).entryid(), 6u);
  EXPECT_FALSE(ack.message_id(0).has_batch_index());
  EXPECT_EQ(ack.message_id(0).batch_size(), 4);
  ASSERT_EQ(ack.message_id(0).ack_set_size(), 1);
  EXPECT_EQ(ack.message_id(0).ack_set(0), 0b1011);

  BC whole = decodeCommand(Commands::newAckWithTxn(
      7, proto::CommandAck::Individual, protocol::WireMessageId{5, 6, -1, -1}, {}, 0, 1, 8, 22));
  EXPECT_EQ(whole.ack().message_id(0).ack_set_size(), 0);
  EXPECT_FALSE(whole.ack().message_id(0).has_batch_size());
}

TEST(TransactionSendTest, BatchOfATransactionCarriesItsTxnIdAndTheNextDoesNot) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  proto::CommandSend send;
  std::string frames;
  RingQueue<SendCallback> cbs;
  BatchBuilder b;
  TxnID txn{3, 77};
  b.add(OutgoingMessage{.payload = "a"}, 1, [](const Status&, const MessageId&) {});
  b.encode(1, 1, md, send, &frames, &cbs, &txn);
  auto [cmd, entry] = decodeOne(reinterpret_cast<const uint8_t*>(frames.data()), frames.size());
  EXPECT_EQ(cmd.send().txnid_most_bits(), 3u);
  EXPECT_EQ(cmd.send().txnid_least_bits(), 77u);
  auto meta = metadataOf(entry);
  EXPECT_EQ(meta.txnid_most_bits(), 3u);
  EXPECT_EQ(meta.txnid_least_bits(), 77u);

  // The reused metadata and command must not leak the txn id into a later plain batch.
  frames.clear();
  b.add(OutgoingMessage{.payload = "b"}, 2, [](const Status&, const MessageId&) {});
  b.encode(1, 1, md, send, &frames, &cbs, nullptr);
  auto [cmd2, entry2] = decodeOne(reinterpret_cast<const uint8_t*>(frames.data()), frames.size());
  EXPECT_FALSE(cmd2.send().has_txnid_most_bits());
  EXPECT_FALSE(metadataOf(entry2).has_txnid_least_bits());
}

TEST(TransactionResponseTest, CoordinatorErrorsAreReadFromEveryResponse) {
  BC r;
  r.set_type(BC::END_TXN_RESPONSE);
  r.mutable_endtxnresponse()->set_request_id(1);
  EXPECT_EQ(tcResponseError(r), proto::UnknownError);
  r.mutable_endtxnresponse()->set_error(proto::TransactionNotFound);
  EXPECT_EQ(tcResponseError(r), proto::TransactionNotFound);

  BC n;
  n.set_type(BC::NEW_TXN_RESPONSE);
  n.mutable_newtxnresponse()->set_request_id(1);
  n.mutable_newtxnresponse()->set_error(proto::TransactionCoordinatorNotFound);
  EXPECT_TRUE(isCoordinatorNotFound(n));
  BC c;
  c.set_type(BC::TC_CLIENT_CONNECT_RESPONSE);
  c.mutable_tcclientconnectresponse()->set_request_id(1);
  c.mutable_tcclientconnectresponse()->set_error(proto::TransactionCoordinatorNotFound);
  EXPECT_TRUE(isCoordinatorNotFound(c));
  EXPECT_EQ((TxnID{1, 2}).toString(), "(1,2)");
}

TEST(TransactionClientTest, NewTransactionNeedsEnableTransaction) {
  Client client("pulsar://127.0.0.1:1");
  auto t = client.newTransaction();
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().code(), StatusCode::kNotAllowed);
}

TEST(TransactionClientTest, NewTransactionWithoutABrokerFailsWithinTheTimeout) {
  ClientConfig cc;
  cc.enableTransaction = true;
  cc.operationTimeout = std::chrono::milliseconds(500);
  Client client("pulsar://127.0.0.1:1", cc);
  auto start = std::chrono::steady_clock::now();
  auto t = client.newTransaction();
  EXPECT_FALSE(t.isOk());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(TransactionClientTest, EmptyTransactionHandleIsRefused) {
  Transaction none;
  EXPECT_EQ(none.commit().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.abort().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace magnetar::client
