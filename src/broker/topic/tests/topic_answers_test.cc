// A topic pass's answers to a connection (ProducerSink::sendAnswers): compact receipt records the
// connection turns into SEND_RECEIPT frames on its own loop (issue 47), a CLOSE_PRODUCER's SUCCESS
// after the receipts of the SENDs before it (Pulsar's ServerCnx.handleCloseProducer), and a
// broker-side close after the last answer it waited for.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "broker/topic/tests/topic_fixture.h"
#include "net/tests/frame_bytes.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::broker {
namespace {

// Records, in the order the connection would write them: each SEND_RECEIPT ("r<seq>@<entry>"),
// SUCCESS ("ok<request>"), the releases ("done<n>") and CLOSE_PRODUCERs ("close<id>"); and the
// batches as the topic handed them over.
class AnswerSink : public ProducerSink {
 public:
  void sendAnswers(ReceiptBatch& batch) override {
    batches.push_back(batch);
    ProducerSink::sendAnswers(batch);  // frames, releases, closes: the default order
    EXPECT_FALSE(batch.hasFrames());   // left empty for the next pass
  }
  void send(net::FrameBatch&& frames) override {
    std::string bytes = net::flatten(frames);
    Status s =
        decoder_.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                      [this](const proto::BaseCommand& cmd, Buffer) {
                        if (cmd.type() == proto::BaseCommand::SEND_RECEIPT) {
                          const auto& r = cmd.send_receipt();
                          events.push_back("r" + std::to_string(r.sequence_id()) + "@" +
                                           std::to_string(r.message_id().entryid()));
                        } else if (cmd.type() == proto::BaseCommand::SUCCESS) {
                          events.push_back("ok" + std::to_string(cmd.success().request_id()));
                        } else {
                          events.push_back("other");
                        }
                      });
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  void sendFrame(const Buffer&) override { events.push_back("direct"); }
  void publishCompleted(uint32_t n, uint64_t) override {
    events.push_back("done" + std::to_string(n));
  }
  void closeProducerFromBroker(uint64_t id) override {
    events.push_back("close" + std::to_string(id));
  }
  const std::string& peerAddress() const override { return peer_; }
  const std::string& clientVersion() const override { return peer_; }

  std::vector<ReceiptBatch> batches;
  std::vector<std::string> events;

 private:
  std::string peer_ = "test";
  protocol::FrameDecoder decoder_;
};

class TopicAnswersTest : public LoopTopicTest<> {
 protected:
  void SetUp() override {
    openTopic("answers", /*dedupPolicy=*/false);
    std::promise<Status> ready;
    runOnLoop([&] { topic_->initialize([&](const Status& s) { ready.set_value(s); }); });
    ASSERT_TRUE(ready.get_future().get().isOk());
    producer_ = std::make_shared<Producer>(7, "p", sink_);
    std::promise<Status> added;
    runOnLoop([&] {
      topic_->addProducer(
          producer_,
          [&](Status s, proto::ServerError, std::optional<uint64_t>) {
            added.set_value(std::move(s));
          },
          [] {});
    });
    ASSERT_TRUE(added.get_future().get().isOk());
  }
  std::vector<PendingSend> sends(uint64_t from, int n) {
    std::vector<PendingSend> out(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
      out[i].producer = producer_;
      out[i].sequenceId = from + static_cast<uint64_t>(i);
      out[i].highestSequenceId = out[i].sequenceId;
      out[i].entry = Buffer::copyOf("m");
    }
    return out;
  }
  void drain() {
    for (int i = 0; i < 5; i++) runOnLoop([] {});
  }

  std::shared_ptr<AnswerSink> sink_ = std::make_shared<AnswerSink>();
  std::shared_ptr<Producer> producer_;
};

// The topic hands over records, not frames: the frames are built by the connection.
TEST_F(TopicAnswersTest, ReceiptsAreHandedOverAsRecordsAndEncodeAsSendReceipts) {
  runOnLoop([&] {
    auto s = sends(10, 3);
    topic_->publish(s);
  });
  drain();
  ASSERT_EQ(sink_->batches.size(), 1u);  // one hand-over for the pass
  const ReceiptBatch& b = sink_->batches[0];
  ASSERT_EQ(b.items.size(), 3u);
  EXPECT_TRUE(b.frames.empty());
  EXPECT_EQ(b.completed, 3u);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(b.items[i].producerId, 7u);
    EXPECT_EQ(b.items[i].sequenceId, 10 + i);
    EXPECT_EQ(b.items[i].entryId, static_cast<int64_t>(i));
  }
  // The bytes a connection writes are Commands::newSendReceipt's.
  net::FrameBatch encoded;
  b.encode(encoded);
  std::string want;
  for (size_t i = 0; i < 3; i++) {
    Buffer f = protocol::Commands::newSendReceipt(
        7, 10 + i, static_cast<uint64_t>(b.items[i].ledgerId), i, 10 + i);
    want.append(f.view());
  }
  EXPECT_EQ(net::flatten(encoded), want);
  EXPECT_EQ(sink_->events, (std::vector<std::string>{"r10@0", "r11@1", "r12@2", "done3"}));
}

// CLOSE_PRODUCER with SENDs in flight: SUCCESS after their receipts, in the same hand-over.
TEST_F(TopicAnswersTest, CloseProducerSuccessFollowsTheReceiptsOfTheSendsBeforeIt) {
  runOnLoop([&] {
    auto s = sends(0, 3);
    topic_->publish(s);
    topic_->closeProducerByClient(producer_, 42);  // the adds are not completed yet
  });
  drain();
  EXPECT_EQ(sink_->events, (std::vector<std::string>{"r0@0", "r1@1", "r2@2", "ok42", "done3"}));
}

// Closed by the broker (terminate) with SENDs in flight: CLOSE_PRODUCER after their answers.
TEST_F(TopicAnswersTest, BrokerCloseFollowsTheLastAnswer) {
  std::promise<Status> terminated;
  runOnLoop([&] {
    auto s = sends(0, 2);
    topic_->publish(s);
    topic_->terminate([&](Status st, storage::Position) { terminated.set_value(std::move(st)); });
  });
  ASSERT_TRUE(terminated.get_future().get().isOk());
  drain();
  ASSERT_GE(sink_->events.size(), 4u);
  EXPECT_EQ(sink_->events.back(), "close7");
  EXPECT_EQ(std::vector<std::string>(sink_->events.begin(), sink_->events.begin() + 2),
            (std::vector<std::string>{"r0@0", "r1@1"}));
}

}  // namespace
}  // namespace magnetar::broker
