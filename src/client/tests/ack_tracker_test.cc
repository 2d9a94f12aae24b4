// Ack grouping, batch acknowledgement and the negative-ack tracker.
#include "client/ack_tracker.h"

#include <gtest/gtest.h>

#include "protocol/frame.h"

namespace magnetar::client {
namespace {

// Decodes the ACK frames into their commands.
std::vector<proto::CommandAck> decodeAcks(const std::vector<Buffer>& frames) {
  std::vector<proto::CommandAck> out;
  protocol::FrameDecoder decoder;
  for (const auto& f : frames) {
    Status s = decoder.feed(f.data(), f.size(), [&](const proto::BaseCommand& cmd, Buffer) {
      EXPECT_EQ(cmd.type(), proto::BaseCommand::ACK);
      out.push_back(cmd.ack());
    });
    EXPECT_TRUE(s.isOk()) << s.toString();
  }
  return out;
}

TEST(AckTrackerTest, IndividualAcksAreGroupedIntoOneFrame) {
  AckGroupingTracker t(9);
  EXPECT_TRUE(t.takeFrames().empty());
  for (int64_t e = 0; e < 5; ++e) EXPECT_FALSE(t.addIndividual(MessageId{3, e}));
  EXPECT_EQ(t.pendingIndividual(), 5u);
  auto acks = decodeAcks(t.takeFrames());
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].consumer_id(), 9u);
  EXPECT_EQ(acks[0].ack_type(), proto::CommandAck::Individual);
  ASSERT_EQ(acks[0].message_id_size(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(acks[0].message_id(i).ledgerid(), 3u);
    EXPECT_EQ(acks[0].message_id(i).entryid(), static_cast<uint64_t>(i));
  }
  EXPECT_EQ(t.pendingIndividual(), 0u);
  EXPECT_TRUE(t.takeFrames().empty());
}

TEST(AckTrackerTest, GroupReportsFullAtMaxSize) {
  AckGroupingTracker t(1, 4);
  EXPECT_FALSE(t.addIndividual(MessageId{1, 1}));
  EXPECT_FALSE(t.addIndividual(MessageId{1, 2}));
  EXPECT_FALSE(t.addIndividual(MessageId{1, 3}));
  EXPECT_TRUE(t.addIndividual(MessageId{1, 4}));
}

TEST(AckTrackerTest, BatchEntryIsAckedOnlyWhenAllItsMessagesAre) {
  AckGroupingTracker t(1);
  t.onBatchReceived(2, 10, 3);
  EXPECT_EQ(t.trackedBatches(), 1u);
  EXPECT_FALSE(t.addIndividual(MessageId{2, 10, -1, 0, 3}));
  EXPECT_FALSE(t.addIndividual(MessageId{2, 10, -1, 2, 3}));
  EXPECT_FALSE(t.addIndividual(MessageId{2, 10, -1, 2, 3}));  // twice: still one
  EXPECT_EQ(t.pendingIndividual(), 0u);
  EXPECT_FALSE(t.addIndividual(MessageId{2, 10, -1, 1, 3}));
  EXPECT_EQ(t.pendingIndividual(), 1u);
  EXPECT_EQ(t.trackedBatches(), 0u);
  auto acks = decodeAcks(t.takeFrames());
  ASSERT_EQ(acks.size(), 1u);
  ASSERT_EQ(acks[0].message_id_size(), 1);
  EXPECT_EQ(acks[0].message_id(0).entryid(), 10u);
  EXPECT_FALSE(acks[0].message_id(0).has_batch_index());
}

TEST(AckTrackerTest, RedeliveredBatchMustBeAckedAgainInFull) {
  AckGroupingTracker t(1);
  t.onBatchReceived(2, 10, 2);
  t.addIndividual(MessageId{2, 10, -1, 0, 2});
  t.onBatchReceived(2, 10, 2);  // redelivered: index 0 is unacked again
  t.addIndividual(MessageId{2, 10, -1, 1, 2});
  EXPECT_EQ(t.pendingIndividual(), 0u);
  t.addIndividual(MessageId{2, 10, -1, 0, 2});
  EXPECT_EQ(t.pendingIndividual(), 1u);
}

TEST(AckTrackerTest, CumulativeKeepsTheHighestAndHandlesBatches) {
  AckGroupingTracker t(4);
  t.addCumulative(MessageId{1, 5});
  t.addCumulative(MessageId{1, 3});
  ASSERT_TRUE(t.pendingCumulative().has_value());
  EXPECT_EQ(t.pendingCumulative()->entryId, 5u);
  t.addCumulative(MessageId{2, 0});
  EXPECT_EQ(t.pendingCumulative()->ledgerId, 2u);

  // Mid-batch: acks up to the previous entry; the last index acks the entry itself.
  AckGroupingTracker b(4);
  b.onBatchReceived(7, 20, 4);
  b.addCumulative(MessageId{7, 20, -1, 1, 4});
  ASSERT_TRUE(b.pendingCumulative().has_value());
  EXPECT_EQ(b.pendingCumulative()->entryId, 19u);
  b.addCumulative(MessageId{7, 20, -1, 3, 4});
  EXPECT_EQ(b.pendingCumulative()->entryId, 20u);
  EXPECT_EQ(b.trackedBatches(), 0u);
  auto acks = decodeAcks(b.takeFrames());
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].ack_type(), proto::CommandAck::Cumulative);
  EXPECT_EQ(acks[0].message_id(0).ledgerid(), 7u);
  EXPECT_EQ(acks[0].message_id(0).entryid(), 20u);
  EXPECT_FALSE(b.pendingCumulative().has_value());

  // Mid-batch of entry 0: nothing before it to ack yet.
  AckGroupingTracker z(4);
  z.onBatchReceived(7, 0, 2);
  z.addCumulative(MessageId{7, 0, -1, 0, 2});
  EXPECT_FALSE(z.pendingCumulative().has_value());
}

TEST(AckTrackerTest, CumulativeAndIndividualGoInSeparateFrames) {
  AckGroupingTracker t(4);
  t.addIndividual(MessageId{1, 9});
  t.addCumulative(MessageId{1, 4});
  auto acks = decodeAcks(t.takeFrames());
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0].ack_type(), proto::CommandAck::Cumulative);
  EXPECT_EQ(acks[1].ack_type(), proto::CommandAck::Individual);
}

TEST(NegativeAckTrackerTest, EntriesComeDueAfterTheDelay) {
  using namespace std::chrono_literals;
  NegativeAckTracker t(100ms);
  auto t0 = NegativeAckTracker::Clock::now();
  t.add(MessageId{1, 1}, t0);
  t.add(MessageId{1, 2, -1, 0, 2}, t0 + 50ms);
  t.add(MessageId{1, 2, -1, 1, 2}, t0 + 50ms);  // same entry
  EXPECT_EQ(t.size(), 2u);
  EXPECT_TRUE(t.takeDue(t0 + 99ms).empty());
  auto due = t.takeDue(t0 + 100ms);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].entryId, 1u);
  due = t.takeDue(t0 + 200ms);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].entryId, 2u);
  EXPECT_EQ(due[0].batchIndex, -1);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace magnetar::client
