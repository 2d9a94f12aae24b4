// Non-persistent dispatch (Dispatcher::sendNonPersistent, Pulsar's NonPersistentDispatcher*):
// each published entry goes at once to one consumer that can take it, by subscription type, or
// is dropped and its messages counted; acks keep nothing.
#include <gtest/gtest.h>

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

// Counts the MESSAGE frames and checks each carries message id 0:0; writable as told.
class NpSink : public RecordingSink {
 public:
  bool limitsOutbound() const override { return true; }
  bool isWritable() override { return writable; }
  bool writable = true;
};

class NonPersistentDispatchTest : public ::testing::Test {
 protected:
  void open(CommandSubscribe::SubType type, int consumers) {
    factory_ = std::make_unique<storage::MemoryManagedLedgerFactory>();
    sub_ = openSubscription(*factory_, ex_, "t/default/non-persistent/np", "s",
                            "non-persistent://t/default/np", options_, &ml_);
    ASSERT_TRUE(sub_);
    ASSERT_TRUE(sub_->nonPersistent());
    for (int i = 0; i < consumers; ++i) {
      consumers_.push_back(std::make_shared<Consumer>(i + 1, "c" + std::to_string(i),
                                                      &sinks_[static_cast<size_t>(i)], type, 0));
      ASSERT_TRUE(sub_->addConsumer(consumers_.back()).isOk());
    }
    ex_.drain();
  }

  // An entry of `batch` messages with `key` as its partition key ("" for none).
  static Buffer entry(int batch, const std::string& key = "") {
    proto::MessageMetadata md;
    md.set_producer_name("p");
    md.set_sequence_id(1);
    md.set_publish_time(1);
    if (batch > 1) md.set_num_messages_in_batch(batch);
    if (!key.empty()) md.set_partition_key(key);
    return protocol::Commands::newEntry(md, "x");
  }

  Dispatcher& dispatcher() { return *sub_->dispatcher(); }

  StepExecutor ex_;
  std::unique_ptr<storage::MemoryManagedLedgerFactory> factory_;
  std::shared_ptr<storage::ManagedLedger> ml_;
  BrokerOptions options_;
  std::unique_ptr<Subscription> sub_;
  NpSink sinks_[2];
  std::vector<std::shared_ptr<Consumer>> consumers_;
};

TEST_F(NonPersistentDispatchTest, ExclusiveTakesWhatItsPermitsAllowAndTheRestIsDropped) {
  open(CommandSubscribe::Exclusive, 1);
  dispatcher().flow(consumers_[0].get(), 3);
  dispatcher().sendNonPersistent({entry(1), entry(1), entry(1), entry(1), entry(5)});
  EXPECT_EQ(sinks_[0].entryIds, (std::vector<uint64_t>{0, 0, 0}));  // message id 0:0
  EXPECT_EQ(dispatcher().stats().msgOutCounter, 3u);
  EXPECT_EQ(dispatcher().stats().msgDropCounter, 6u);  // one single message and a batch of 5
  EXPECT_EQ(consumers_[0]->permits, 0);
  // Nothing waits for the consumer: new permits bring nothing old.
  dispatcher().flow(consumers_[0].get(), 10);
  ex_.drain();
  EXPECT_EQ(sinks_[0].entryIds.size(), 3u);
  EXPECT_EQ(sub_->msgBacklog(), 0);
  // A batch goes out while any permit is left, as Pulsar's (permits > 0).
  dispatcher().sendNonPersistent({entry(20)});
  EXPECT_EQ(sinks_[0].entryIds.size(), 4u);
  EXPECT_EQ(consumers_[0]->permits, -10);
  // Acks keep nothing and pend nothing.
  bool acked = false;
  sub_->acknowledge(consumers_[0].get(), {{0, 0}}, [&](const Status& s) { acked = s.isOk(); });
  EXPECT_TRUE(acked);
  EXPECT_EQ(consumers_[0]->unackedMessages, 0);
}

TEST_F(NonPersistentDispatchTest, AConnectionOverItsWatermarkGetsNothing) {
  open(CommandSubscribe::Exclusive, 1);
  dispatcher().flow(consumers_[0].get(), 100);
  sinks_[0].writable = false;
  dispatcher().sendNonPersistent({entry(1), entry(1)});
  EXPECT_TRUE(sinks_[0].entryIds.empty());
  EXPECT_EQ(dispatcher().stats().msgDropCounter, 2u);
  sinks_[0].writable = true;
  dispatcher().sendNonPersistent({entry(1)});
  EXPECT_EQ(sinks_[0].entryIds.size(), 1u);
}

TEST_F(NonPersistentDispatchTest, SharedGoesRoundRobinOverConsumersThatCanTake) {
  open(CommandSubscribe::Shared, 2);
  dispatcher().flow(consumers_[0].get(), 2);
  dispatcher().flow(consumers_[1].get(), 10);
  std::vector<Buffer> entries;
  for (int i = 0; i < 8; ++i) entries.push_back(entry(1));
  dispatcher().sendNonPersistent(entries);
  EXPECT_EQ(sinks_[0].entryIds.size(), 2u);
  EXPECT_EQ(sinks_[1].entryIds.size(), 6u);
  EXPECT_EQ(dispatcher().stats().msgDropCounter, 0u);
  for (int i = 0; i < 6; ++i) entries.push_back(entry(1));  // 14 now; 4 permits left
  dispatcher().sendNonPersistent(entries);
  EXPECT_EQ(sinks_[0].entryIds.size() + sinks_[1].entryIds.size(), 12u);
  EXPECT_EQ(dispatcher().stats().msgDropCounter, 10u);
}

TEST_F(NonPersistentDispatchTest, KeySharedSendsAKeyToItsOwnerOnly) {
  open(CommandSubscribe::Key_Shared, 2);
  dispatcher().flow(consumers_[0].get(), 1000);
  dispatcher().flow(consumers_[1].get(), 1000);
  std::vector<Buffer> entries;
  for (int i = 0; i < 40; ++i) entries.push_back(entry(1, "k" + std::to_string(i % 4)));
  dispatcher().sendNonPersistent(entries);
  EXPECT_EQ(sinks_[0].entryIds.size() + sinks_[1].entryIds.size(), 40u);
  // Each key's 10 messages went to one consumer.
  EXPECT_EQ(sinks_[0].entryIds.size() % 10, 0u);
  // The owner of a key without permits drops it; the other consumer does not take it instead.
  Consumer* owner = sinks_[0].entryIds.empty() ? consumers_[1].get() : consumers_[0].get();
  owner->permits = 0;
  const size_t before = sinks_[0].entryIds.size() + sinks_[1].entryIds.size();
  dispatcher().sendNonPersistent(entries);
  const size_t sent = sinks_[0].entryIds.size() + sinks_[1].entryIds.size() - before;
  EXPECT_EQ(sent + dispatcher().stats().msgDropCounter, 40u);
  EXPECT_GT(dispatcher().stats().msgDropCounter, 0u);
}

TEST_F(NonPersistentDispatchTest, WithoutConsumersEverythingIsDropped) {
  open(CommandSubscribe::Failover, 1);
  sub_->removeConsumer(consumers_[0].get());
  dispatcher().sendNonPersistent({entry(3)});
  EXPECT_EQ(dispatcher().stats().msgDropCounter, 3u);
  EXPECT_TRUE(sinks_[0].entryIds.empty());
}

}  // namespace
}  // namespace magnetar::broker
