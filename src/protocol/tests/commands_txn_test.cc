// Round trip of the transaction commands: the coordinator's answers (commands_txn.cc) to the
// client's requests (commands_client.cc).
#include <gtest/gtest.h>

#include "protocol/commands.h"
#include "protocol/tests/test_util.h"

namespace magnetar::protocol {
namespace {

using testing::decodeOne;
using BC = proto::BaseCommand;

TEST(CommandsTxnTest, TcClientConnect) {
  auto req = decodeOne(Commands::newTcClientConnectRequest(2, 3));
  ASSERT_EQ(req.cmd.type(), BC::TC_CLIENT_CONNECT_REQUEST);
  EXPECT_EQ(req.cmd.tcclientconnectrequest().request_id(), 3u);
  EXPECT_EQ(req.cmd.tcclientconnectrequest().tc_id(), 2u);
  auto ok = decodeOne(Commands::newTcClientConnectResponse(3));
  ASSERT_EQ(ok.cmd.type(), BC::TC_CLIENT_CONNECT_RESPONSE);
  EXPECT_FALSE(ok.cmd.tcclientconnectresponse().has_error());
  auto err = decodeOne(
      Commands::newTcClientConnectResponse(3, proto::TransactionCoordinatorNotFound, "no tc"));
  EXPECT_EQ(err.cmd.tcclientconnectresponse().error(), proto::TransactionCoordinatorNotFound);
  EXPECT_EQ(err.cmd.tcclientconnectresponse().message(), "no tc");
}

TEST(CommandsTxnTest, NewTxn) {
  auto req = decodeOne(Commands::newNewTxn(1, 5, 60000));
  ASSERT_EQ(req.cmd.type(), BC::NEW_TXN);
  EXPECT_EQ(req.cmd.newtxn().tc_id(), 1u);
  EXPECT_EQ(req.cmd.newtxn().txn_ttl_seconds(), 60000u);
  auto ok = decodeOne(Commands::newNewTxnResponse(5, 9, 1));
  ASSERT_EQ(ok.cmd.type(), BC::NEW_TXN_RESPONSE);
  EXPECT_EQ(ok.cmd.newtxnresponse().txnid_least_bits(), 9u);
  EXPECT_EQ(ok.cmd.newtxnresponse().txnid_most_bits(), 1u);
  EXPECT_FALSE(ok.cmd.newtxnresponse().has_error());
  auto err = decodeOne(Commands::newNewTxnErrorResponse(5, 4, proto::UnknownError, "x"));
  EXPECT_EQ(err.cmd.newtxnresponse().txnid_most_bits(), 4u);
  EXPECT_EQ(err.cmd.newtxnresponse().error(), proto::UnknownError);
  EXPECT_EQ(err.cmd.newtxnresponse().message(), "x");
}

TEST(CommandsTxnTest, AddPartitionAndSubscription) {
  auto p = decodeOne(Commands::newAddPartitionToTxn(6, 1, 9, "persistent://a/b/c"));
  ASSERT_EQ(p.cmd.type(), BC::ADD_PARTITION_TO_TXN);
  EXPECT_EQ(p.cmd.addpartitiontotxn().partitions(0), "persistent://a/b/c");
  EXPECT_EQ(p.cmd.addpartitiontotxn().txnid_least_bits(), 9u);
  auto pr = decodeOne(
      Commands::newAddPartitionToTxnResponse(6, 9, 1, proto::TransactionNotFound, "gone"));
  ASSERT_EQ(pr.cmd.type(), BC::ADD_PARTITION_TO_TXN_RESPONSE);
  EXPECT_EQ(pr.cmd.addpartitiontotxnresponse().error(), proto::TransactionNotFound);
  EXPECT_EQ(pr.cmd.addpartitiontotxnresponse().txnid_most_bits(), 1u);
  auto s = decodeOne(Commands::newAddSubscriptionToTxn(7, 1, 9, "persistent://a/b/c", "s"));
  ASSERT_EQ(s.cmd.type(), BC::ADD_SUBSCRIPTION_TO_TXN);
  EXPECT_EQ(s.cmd.addsubscriptiontotxn().subscription(0).subscription(), "s");
  auto sr = decodeOne(Commands::newAddSubscriptionToTxnResponse(7, 9, 1));
  ASSERT_EQ(sr.cmd.type(), BC::ADD_SUBSCRIPTION_TO_TXN_RESPONSE);
  EXPECT_FALSE(sr.cmd.addsubscriptiontotxnresponse().has_error());
}

TEST(CommandsTxnTest, EndTxn) {
  auto e = decodeOne(Commands::newEndTxn(8, 1, 9, proto::ABORT));
  ASSERT_EQ(e.cmd.type(), BC::END_TXN);
  EXPECT_EQ(e.cmd.endtxn().txn_action(), proto::ABORT);
  auto r = decodeOne(Commands::newEndTxnResponse(8, 9, 1, proto::InvalidTxnStatus, "state"));
  ASSERT_EQ(r.cmd.type(), BC::END_TXN_RESPONSE);
  EXPECT_EQ(r.cmd.endtxnresponse().error(), proto::InvalidTxnStatus);
  EXPECT_EQ(r.cmd.endtxnresponse().txnid_least_bits(), 9u);
}

TEST(CommandsTxnTest, EndTxnOnPartitionAndSubscription) {
  auto p =
      decodeOne(Commands::newEndTxnOnPartition(4, "persistent://t/n/a", 2, 7, proto::COMMIT, 5));
  ASSERT_EQ(p.cmd.type(), BC::END_TXN_ON_PARTITION);
  const auto& ep = p.cmd.endtxnonpartition();
  EXPECT_EQ(ep.request_id(), 4u);
  EXPECT_EQ(ep.topic(), "persistent://t/n/a");
  EXPECT_EQ(ep.txnid_most_bits(), 2u);
  EXPECT_EQ(ep.txnid_least_bits(), 7u);
  EXPECT_EQ(ep.txn_action(), proto::COMMIT);
  EXPECT_EQ(ep.txnid_least_bits_of_low_watermark(), 5u);
  auto s = decodeOne(
      Commands::newEndTxnOnSubscription(6, 2, 7, "persistent://t/n/a", "sub", proto::ABORT, 3));
  ASSERT_EQ(s.cmd.type(), BC::END_TXN_ON_SUBSCRIPTION);
  const auto& es = s.cmd.endtxnonsubscription();
  EXPECT_EQ(es.request_id(), 6u);
  EXPECT_EQ(es.subscription().topic(), "persistent://t/n/a");
  EXPECT_EQ(es.subscription().subscription(), "sub");
  EXPECT_EQ(es.txn_action(), proto::ABORT);
  EXPECT_EQ(es.txnid_least_bits_of_low_watermark(), 3u);
}

}  // namespace
}  // namespace magnetar::protocol
