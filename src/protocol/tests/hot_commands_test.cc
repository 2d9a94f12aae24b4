// The hand-encoded hot frames (MESSAGE header, SEND_RECEIPT) against protobuf's own encoding.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "protocol/commands.h"
#include "protocol/tests/test_util.h"

namespace magnetar::protocol {
namespace {

using testing::decodeAll;
using testing::DecodedFrame;
using testing::decodeOne;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// The MESSAGE BaseCommand as protobuf encodes it, for byte comparison.
std::string protobufMessageCommand(uint64_t consumerId, uint64_t ledgerId, uint64_t entryId,
                                   uint32_t redeliveryCount, const std::vector<int64_t>& ackSet,
                                   std::optional<uint64_t> epoch, int32_t partition = -1) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::MESSAGE);
  auto* m = cmd.mutable_message();
  m->set_consumer_id(consumerId);
  m->mutable_message_id()->set_ledgerid(ledgerId);
  m->mutable_message_id()->set_entryid(entryId);
  if (partition >= 0) m->mutable_message_id()->set_partition(partition);
  if (redeliveryCount > 0) m->set_redelivery_count(redeliveryCount);
  for (int64_t w : ackSet) m->add_ack_set(w);
  if (epoch) m->set_consumer_epoch(*epoch);
  return cmd.SerializeAsString();
}

struct MessageCase {
  uint64_t consumerId, ledgerId, entryId;
  uint32_t redelivery;
  std::vector<int64_t> ackSet;
  std::optional<uint64_t> epoch;
};

TEST(HotCommandsTest, MessageHeaderMatchesProtobufBytes) {
  std::vector<MessageCase> cases = {
      {0, 0, 0, 0, {}, std::nullopt},
      {1, 2, 3, 0, {}, std::nullopt},
      {127, 128, 16383, 1, {}, std::nullopt},
      {kMax64, kMax64, kMax64, std::numeric_limits<uint32_t>::max(), {}, kMax64},
      {5, 1000000, 123456789, 3, {-1, 0, 7, std::numeric_limits<int64_t>::min()}, 2},
  };
  // Many ack_set words push the CommandMessage length past one varint byte.
  cases.push_back({9, 9, 9, 0, std::vector<int64_t>(40, -1), std::nullopt});
  for (const auto& c : cases) {
    std::string expectCmd =
        protobufMessageCommand(c.consumerId, c.ledgerId, c.entryId, c.redelivery, c.ackSet,
                               c.epoch);
    const size_t entryLen = 1234;
    std::vector<uint8_t> out(maxMessageHeaderSize(c.ackSet.size()), 0xAA);
    size_t n = Commands::writeMessageHeader(out.data(), c.consumerId, c.ledgerId, c.entryId,
                                            c.redelivery, entryLen, c.ackSet, c.epoch);
    ASSERT_LE(n, out.size());
    ASSERT_EQ(n, 8 + expectCmd.size());
    EXPECT_EQ(std::string(reinterpret_cast<char*>(out.data()) + 8, n - 8), expectCmd);
    uint32_t total = (uint32_t{out[0]} << 24) | (out[1] << 16) | (out[2] << 8) | out[3];
    uint32_t cmdSize = (uint32_t{out[4]} << 24) | (out[5] << 16) | (out[6] << 8) | out[7];
    EXPECT_EQ(cmdSize, expectCmd.size());
    EXPECT_EQ(total, 4 + expectCmd.size() + entryLen);
  }
}

TEST(HotCommandsTest, MessageHeaderCarriesThePartition) {
  for (int32_t partition : {0, 1, 127, 128, std::numeric_limits<int32_t>::max()}) {
    std::vector<int64_t> ackSet = {-1, 3};
    std::string expectCmd = protobufMessageCommand(kMax64, kMax64, kMax64, 7, ackSet, kMax64,
                                                   partition);
    std::vector<uint8_t> out(maxMessageHeaderSize(ackSet.size()), 0xAA);
    size_t n = Commands::writeMessageHeader(out.data(), kMax64, kMax64, kMax64, 7, 10, ackSet,
                                            kMax64, partition);
    ASSERT_LE(n, out.size());
    EXPECT_EQ(std::string(reinterpret_cast<char*>(out.data()) + 8, n - 8), expectCmd);
  }
}

TEST(HotCommandsTest, MessageHeaderPlusStoredEntryDecodes) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(1);
  md.set_publish_time(2);
  Buffer entry = Commands::newEntry(md, "payload bytes");

  std::string wire;
  std::vector<int64_t> ackSet = {0x0F, -2};
  size_t n = Commands::newMessageHeader(&wire, 11, 22, 33, 2, entry.size(), ackSet, 4);
  EXPECT_EQ(n, wire.size());
  wire += entry.view();
  // A second frame without extras right behind it.
  Commands::newMessageHeader(&wire, 11, 22, 34, 0, entry.size());
  wire += entry.view();

  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(decodeAll(wire, &frames).isOk());
  ASSERT_EQ(frames.size(), 2u);
  const auto& m = frames[0].cmd.message();
  EXPECT_EQ(frames[0].cmd.type(), proto::BaseCommand::MESSAGE);
  EXPECT_EQ(m.consumer_id(), 11u);
  EXPECT_EQ(m.message_id().ledgerid(), 22u);
  EXPECT_EQ(m.message_id().entryid(), 33u);
  EXPECT_EQ(m.redelivery_count(), 2u);
  ASSERT_EQ(m.ack_set_size(), 2);
  EXPECT_EQ(m.ack_set(1), -2);
  EXPECT_EQ(m.consumer_epoch(), 4u);
  EXPECT_EQ(frames[0].entry, std::string(entry.view()));
  EXPECT_TRUE(verifyChecksum(frames[0].entry).isOk());
  EXPECT_EQ(frames[1].cmd.message().message_id().entryid(), 34u);
  EXPECT_FALSE(frames[1].cmd.message().has_redelivery_count());
  EXPECT_FALSE(frames[1].cmd.message().has_consumer_epoch());
  EXPECT_EQ(frames[1].entry, std::string(entry.view()));
}

TEST(HotCommandsTest, SendReceiptMatchesProtobufBytes) {
  struct Case {
    uint64_t producerId, sequenceId, ledgerId, entryId;
    std::optional<uint64_t> highest;
  };
  for (const Case& c : {Case{0, 0, 0, 0, std::nullopt}, Case{1, 2, 3, 4, 2},
                        Case{kMax64, kMax64, kMax64, kMax64, kMax64},
                        Case{300, 70000, 1ULL << 40, 5, std::nullopt}}) {
    proto::BaseCommand cmd;
    cmd.set_type(proto::BaseCommand::SEND_RECEIPT);
    auto* r = cmd.mutable_send_receipt();
    r->set_producer_id(c.producerId);
    r->set_sequence_id(c.sequenceId);
    r->mutable_message_id()->set_ledgerid(c.ledgerId);
    r->mutable_message_id()->set_entryid(c.entryId);
    if (c.highest) r->set_highest_sequence_id(*c.highest);
    std::string expect = cmd.SerializeAsString();

    uint8_t buf[kMaxSendReceiptSize];
    size_t n = Commands::writeSendReceipt(buf, c.producerId, c.sequenceId, c.ledgerId, c.entryId,
                                          c.highest);
    ASSERT_LE(n, kMaxSendReceiptSize);
    ASSERT_EQ(n, 8 + expect.size());
    EXPECT_EQ(std::string(reinterpret_cast<char*>(buf) + 8, n - 8), expect);

    auto d = decodeOne(Commands::newSendReceipt(c.producerId, c.sequenceId, c.ledgerId,
                                                c.entryId, c.highest));
    ASSERT_EQ(d.cmd.type(), proto::BaseCommand::SEND_RECEIPT);
    EXPECT_EQ(d.cmd.send_receipt().producer_id(), c.producerId);
    EXPECT_EQ(d.cmd.send_receipt().sequence_id(), c.sequenceId);
    EXPECT_EQ(d.cmd.send_receipt().message_id().ledgerid(), c.ledgerId);
    EXPECT_EQ(d.cmd.send_receipt().message_id().entryid(), c.entryId);
    EXPECT_EQ(d.cmd.send_receipt().has_highest_sequence_id(), c.highest.has_value());
  }
}

TEST(HotCommandsTest, AppendSendReceiptBatches) {
  std::string out;
  for (uint64_t i = 0; i < 100; ++i) {
    size_t before = out.size();
    size_t n = Commands::appendSendReceipt(&out, 1, i, 9, i, i);
    EXPECT_EQ(out.size(), before + n);
  }
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(decodeAll(out, &frames).isOk());
  ASSERT_EQ(frames.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(frames[i].cmd.send_receipt().sequence_id(), i);
    EXPECT_EQ(frames[i].cmd.send_receipt().message_id().entryid(), i);
  }
}

}  // namespace
}  // namespace magnetar::protocol
