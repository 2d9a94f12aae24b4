// Batch building (producer side) and splitting (consumer side).
#include "client/batch.h"

#include <gtest/gtest.h>

#include "client/message_factory.h"
#include "protocol/frame.h"

namespace magnetar::client {
namespace {

struct DecodedSend {
  proto::CommandSend send;
  Buffer entry;
};

DecodedSend decodeOne(const std::string& frame) {
  protocol::FrameDecoder decoder;
  DecodedSend out;
  int frames = 0;
  Status s = decoder.feed(reinterpret_cast<const uint8_t*>(frame.data()), frame.size(),
                          [&](const proto::BaseCommand& cmd, Buffer entry) {
                            EXPECT_EQ(cmd.type(), proto::BaseCommand::SEND);
                            out.send = cmd.send();
                            out.entry = std::move(entry);
                            ++frames;
                          });
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(frames, 1);
  EXPECT_TRUE(decoder.idle());
  return out;
}

// What BatchBuilder::encode writes: the SEND frames and the batches' callbacks (producer "p").
struct Encoded {
  Encoded() { md.set_producer_name("p"); }
  void encode(BatchBuilder& b, uint64_t producerId = 1, uint64_t publishTime = 1) {
    b.encode(producerId, publishTime, md, send, &frames, &cbs);
  }
  proto::MessageMetadata md;
  proto::CommandSend send;
  std::string frames;
  RingQueue<SendCallback> cbs;
};

TEST(BatchTest, EncodedBatchSplitsBackIntoItsMessages) {
  BatchBuilder b;
  std::vector<std::pair<Status, MessageId>> results;
  auto cb = [&](const Status& s, const MessageId& id) { results.emplace_back(s, id); };
  OutgoingMessage m1{.payload = "first", .key = "k"};
  OutgoingMessage m2{.payload = "", .key = "k", .properties = {{"a", "1"}, {"b", "2"}}};
  OutgoingMessage m3{
      .payload = std::string_view("x\0y", 3), .key = "k", .orderingKey = "ok", .eventTime = 1234};
  b.add(m1, 7, cb);
  b.add(m2, 8, cb);
  b.add(m3, 9, cb);
  EXPECT_EQ(b.numMessages(), 3);
  EXPECT_EQ(b.firstSequenceId(), 7u);
  EXPECT_EQ(b.lastSequenceId(), 9u);

  Encoded out;
  out.encode(b, 42, 1000);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(out.cbs.size(), 3u);

  DecodedSend d = decodeOne(out.frames);
  EXPECT_EQ(d.send.producer_id(), 42u);
  EXPECT_EQ(d.send.sequence_id(), 7u);
  EXPECT_EQ(d.send.highest_sequence_id(), 9u);
  EXPECT_EQ(d.send.num_messages(), 3);
  ASSERT_TRUE(protocol::verifyChecksum(d.entry).isOk());
  proto::MessageMetadata got;
  ASSERT_TRUE(protocol::parseMetadata(d.entry, &got).isOk());
  EXPECT_EQ(got.producer_name(), "p");
  EXPECT_EQ(got.sequence_id(), 7u);
  EXPECT_EQ(got.publish_time(), 1000u);
  EXPECT_TRUE(got.has_num_messages_in_batch());
  EXPECT_EQ(got.num_messages_in_batch(), 3);
  EXPECT_EQ(got.partition_key(), "k");

  auto layout = protocol::parseEntryLayout(d.entry.view());
  ASSERT_TRUE(layout.isOk());
  std::vector<BatchedMessage> parts;
  std::string_view payload = d.entry.view().substr(layout->payloadOffset, layout->payloadSize);
  ASSERT_TRUE(splitBatch(payload, 3, &parts).isOk());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(payload.substr(parts[0].payloadOffset, parts[0].payloadSize), "first");
  EXPECT_EQ(parts[1].payloadSize, 0u);
  EXPECT_EQ(parts[1].metadata.properties_size(), 2);
  EXPECT_EQ(parts[1].metadata.properties(1).value(), "2");
  EXPECT_EQ(payload.substr(parts[2].payloadOffset, parts[2].payloadSize),
            std::string_view("x\0y", 3));
  EXPECT_EQ(parts[2].metadata.ordering_key(), "ok");
  EXPECT_EQ(parts[2].metadata.event_time(), 1234u);
  EXPECT_EQ(parts[2].metadata.sequence_id(), 9u);

  // Messages built from the batch are views into the entry buffer (no copy).
  auto topic = std::make_shared<const std::string>("persistent://public/default/t");
  MessageId id{5, 6, -1, 2, 3};
  Message m = MessageFactory::batched(d.entry, layout->payloadOffset, parts[2], got, id, 4, topic);
  EXPECT_EQ(m.payload(), std::string_view("x\0y", 3));
  EXPECT_GE(reinterpret_cast<const uint8_t*>(m.payload().data()), d.entry.data());
  EXPECT_LE(reinterpret_cast<const uint8_t*>(m.payload().data()) + 3,
            d.entry.data() + d.entry.size());
  EXPECT_EQ(m.key(), "k");
  EXPECT_EQ(m.orderingKey(), "ok");
  EXPECT_EQ(m.sequenceId(), 9u);
  EXPECT_EQ(m.redeliveryCount(), 4u);
  EXPECT_EQ(m.producerName(), "p");
  EXPECT_EQ(m.messageId(), id);
  EXPECT_EQ(m.topic(), *topic);
  Message m1got = MessageFactory::batched(d.entry, layout->payloadOffset, parts[1], got,
                                          MessageId{5, 6, -1, 1, 3}, 0, topic);
  EXPECT_EQ(m1got.property("b"), "2");
  EXPECT_EQ(m1got.property("zz"), "");
}

TEST(BatchTest, SplitRejectsTruncatedAndOversizedParts) {
  BatchBuilder b;
  b.add(OutgoingMessage{.payload = "hello"}, 1, [](const Status&, const MessageId&) {});
  b.add(OutgoingMessage{.payload = "world"}, 2, [](const Status&, const MessageId&) {});
  Encoded out;
  out.encode(b);
  DecodedSend d = decodeOne(out.frames);
  auto layout = protocol::parseEntryLayout(d.entry.view());
  ASSERT_TRUE(layout.isOk());
  std::string payload(d.entry.view().substr(layout->payloadOffset, layout->payloadSize));
  std::vector<BatchedMessage> parts;
  ASSERT_TRUE(splitBatch(payload, 2, &parts).isOk());
  // Claiming more messages than are there, or cutting the payload anywhere, fails cleanly.
  EXPECT_EQ(splitBatch(payload, 3, &parts).code(), StatusCode::kCorruption);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    EXPECT_FALSE(splitBatch(std::string_view(payload).substr(0, cut), 2, &parts).isOk()) << cut;
  }
  // A metadata size pointing past the end.
  std::string bad = payload;
  bad[0] = '\x7f';
  EXPECT_EQ(splitBatch(bad, 2, &parts).code(), StatusCode::kCorruption);
  EXPECT_EQ(splitBatch(payload, 0, &parts).code(), StatusCode::kCorruption);
}

TEST(BatchTest, GroupingContainerKeepsOneKeyPerBatchInSequenceOrder) {
  BatchContainer c(100, 1 << 20, /*groupByKey=*/true);
  auto noop = [](const Status&, const MessageId&) {};
  const char* keys[] = {"a", "b", "a", "", "c", "b", "a"};
  uint64_t seq = 10;
  for (const char* k : keys) {
    EXPECT_FALSE(c.add(OutgoingMessage{.payload = "p", .key = k}, seq++, noop));
  }
  EXPECT_EQ(c.numMessages(), 7);
  std::vector<std::pair<std::string, std::pair<uint64_t, int>>> got;
  Encoded out;
  c.drain([&](BatchBuilder& b) {
    got.push_back({b.key(), {b.firstSequenceId(), b.numMessages()}});
    out.encode(b);
  });
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], (std::pair<std::string, std::pair<uint64_t, int>>{"a", {10, 3}}));
  EXPECT_EQ(got[1], (std::pair<std::string, std::pair<uint64_t, int>>{"b", {11, 2}}));
  EXPECT_EQ(got[2], (std::pair<std::string, std::pair<uint64_t, int>>{"", {13, 1}}));
  EXPECT_EQ(got[3], (std::pair<std::string, std::pair<uint64_t, int>>{"c", {14, 1}}));
  EXPECT_EQ(out.cbs.size(), 7u);

  // Each frame's entry carries its batch key; reuse after drain keeps keys apart.
  EXPECT_FALSE(c.add(OutgoingMessage{.payload = "q", .key = "b"}, 20, noop));
  EXPECT_FALSE(c.add(OutgoingMessage{.payload = "q", .key = "a"}, 21, noop));
  std::vector<std::string> keys2;
  c.drain([&](BatchBuilder& b) {
    keys2.push_back(b.key());
    out.encode(b);
  });
  EXPECT_EQ(keys2, (std::vector<std::string>{"b", "a"}));
}

TEST(BatchTest, OrderedContainerClosesTheBatchOnAKeyChange) {
  auto noop = [](const Status&, const MessageId&) {};
  BatchContainer c(100, 1 << 20);
  EXPECT_TRUE(c.accepts(OutgoingMessage{.key = "a"}));
  c.add(OutgoingMessage{.payload = "1", .key = "a"}, 1, noop);
  c.add(OutgoingMessage{.payload = "2", .key = "a"}, 2, noop);
  EXPECT_TRUE(c.accepts(OutgoingMessage{.key = "a"}));
  EXPECT_FALSE(c.accepts(OutgoingMessage{.key = "b"}));
  EXPECT_FALSE(c.accepts(OutgoingMessage{.key = "a", .orderingKey = "o"}));
  Encoded out;
  std::vector<std::pair<std::string, int>> got;
  auto drain = [&] {
    c.drain([&](BatchBuilder& b) {
      got.emplace_back(b.key(), b.numMessages());
      out.encode(b);
    });
  };
  drain();
  EXPECT_TRUE(c.accepts(OutgoingMessage{.key = "b"}));
  c.add(OutgoingMessage{.payload = "3", .key = "b"}, 3, noop);
  drain();
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{{"a", 2}, {"b", 1}}));
  EXPECT_EQ(out.cbs.size(), 3u);
}

TEST(BatchTest, ContainerReportsFullAtMessageAndByteLimits) {
  auto noop = [](const Status&, const MessageId&) {};
  BatchContainer byCount(3, 1 << 20, /*groupByKey=*/true);
  EXPECT_FALSE(byCount.add(OutgoingMessage{.payload = "x"}, 1, noop));
  EXPECT_FALSE(byCount.add(OutgoingMessage{.payload = "x", .key = "other"}, 2, noop));
  EXPECT_TRUE(byCount.add(OutgoingMessage{.payload = "x"}, 3, noop));

  BatchContainer byBytes(1000, 100);
  std::string big(60, 'z');
  EXPECT_FALSE(byBytes.add(OutgoingMessage{.payload = big}, 1, noop));
  EXPECT_TRUE(byBytes.add(OutgoingMessage{.payload = big}, 2, noop));
  EXPECT_GE(byBytes.bytes(), 120u);
}

}  // namespace
}  // namespace magnetar::client
