// Dispatch to a consumer whose connection is over pulsarChannelWriteBufferHighWaterMark: it
// still takes what is left of dispatcherMaxReadSizeBytes since its connection was last seen under
// the watermark (so a queue the connection's loop has not written yet does not send its entries
// through the replay set), then nothing until the connection calls back (docs/memory-limits.md).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "broker/topic/internal/key_shared_selector.h"
#include "broker/topic/subscription.h"
#include "broker/topic/tests/dispatch_test_util.h"
#include "protocol/commands.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

using proto::CommandSubscribe;

// A connection's sink: bounds what is queued to it, writable as told.
class WatermarkSink : public RecordingSink {
 public:
  bool limitsOutbound() const override { return true; }
  bool isWritable() override { return writable; }
  bool writable = true;
};

class OutboundDispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = openSubscription(factory_, ex_, "t/default/persistent/out", "s",
                            "persistent://t/default/out", options_, &ml_);
    ASSERT_TRUE(sub_);
  }

  static Buffer entry(const std::string& key, int seq) {
    proto::MessageMetadata md;
    md.set_producer_name("p");
    md.set_sequence_id(static_cast<uint64_t>(seq));
    md.set_publish_time(1700000000000);
    md.set_partition_key(key);
    return protocol::Commands::newEntry(md, std::string(100, 'x'));
  }

  void publish(const std::string& key, int count) {
    for (int i = 0; i < count; ++i) {
      ml_->asyncAddEntry(entry(key, seq_++), [](Status, storage::Position) {});
    }
    ex_.drain();
  }

  std::string keyOwnedBy(const Consumer* owner) {
    const KeySharedSelector* sel = sub_->dispatcher()->keySharedSelector();
    for (int i = 0; i < 10000; ++i) {
      std::string key = "key-" + std::to_string(i);
      if (sel->select(sel->hashOf(key)) == owner) return key;
    }
    ADD_FAILURE() << "no key owned by " << owner->name();
    return {};
  }

  std::shared_ptr<Consumer> add(uint64_t id, const std::string& name, RecordingSink* sink) {
    auto c = std::make_shared<Consumer>(id, name, sink, CommandSubscribe::Key_Shared, 0);
    EXPECT_TRUE(sub_->addConsumer(c).isOk());
    return c;
  }

  StepExecutor ex_;
  storage::MemoryManagedLedgerFactory factory_{storage::MemoryLedgerOptions{.cachedReads = true}};
  std::shared_ptr<storage::ManagedLedger> ml_;
  BrokerOptions options_;
  std::unique_ptr<Subscription> sub_;
  int seq_ = 0;
  WatermarkSink sinkA_;
  RecordingSink sinkB_;  // no outbound bound: takes all
};

// A's connection is over the watermark from the start: A takes entries until
// dispatcherMaxReadSizeBytes of them went its way, over several passes, then none (they wait in
// the replay set) until its connection is writable again; B (a sink without a bound) gets all of
// its own.
TEST_F(OutboundDispatchTest, BackedUpConnectionTakesAtMostOnePassOfBytesThenWaits) {
  const size_t entryBytes = entry("k", 0).size();
  options_.dynamic.dispatcherMaxReadSizeBytes.store(static_cast<int64_t>(4 * entryBytes));
  options_.dynamic.dispatcherMaxReadBatchSize.store(3);
  auto a = add(1, "a", &sinkA_);
  auto b = add(2, "b", &sinkB_);
  const std::string keyA = keyOwnedBy(a.get());
  const std::string keyB = keyOwnedBy(b.get());
  ASSERT_FALSE(keyA.empty());
  ASSERT_FALSE(keyB.empty());
  sinkA_.writable = false;
  publish(keyA, 10);  // 0..9
  publish(keyB, 5);   // 10..14
  sub_->dispatcher()->flow(a.get(), 100);
  sub_->dispatcher()->flow(b.get(), 100);
  ex_.drain();
  // Four entries' bytes: A got 0..3 (before: none while over the watermark).
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sinkB_.entryIds, (std::vector<uint64_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 6u);
  // More passes (permits, new entries) give A nothing while its connection stays backed up.
  sub_->dispatcher()->flow(a.get(), 10);
  publish(keyA, 2);  // 15, 16
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds.size(), 4u);
  // Writable again (the connection's call back): the rest, in order.
  sinkA_.writable = true;
  for (int i = 0; i < 10 && sinkA_.entryIds.size() < 12; ++i) {
    sub_->dispatcher()->consumerWritable(a.get());  // each pass stops at the pass limit
    ex_.drain();
  }
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16}));
  EXPECT_EQ(sub_->dispatcher()->replayBacklog(), 0u);
}

// The budget starts again each time the connection is seen under the watermark: a consumer whose
// connection is writable at each pass takes a full pass every time.
TEST_F(OutboundDispatchTest, BudgetRestartsWhenTheConnectionIsWritable) {
  const size_t entryBytes = entry("k", 0).size();
  options_.dynamic.dispatcherMaxReadSizeBytes.store(static_cast<int64_t>(2 * entryBytes));
  auto a = add(1, "a", &sinkA_);
  const std::string keyA = keyOwnedBy(a.get());
  publish(keyA, 6);
  sinkA_.writable = false;
  sub_->dispatcher()->flow(a.get(), 100);
  ex_.drain();
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1}));
  sinkA_.writable = true;
  sub_->dispatcher()->consumerWritable(a.get());
  ex_.drain();
  // Each pass stops at the pass limit and asks for the call back, which comes while writable.
  for (int i = 0; i < 3 && sinkA_.entryIds.size() < 6; ++i) {
    sub_->dispatcher()->consumerWritable(a.get());
    ex_.drain();
  }
  EXPECT_EQ(sinkA_.entryIds, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace magnetar::broker
