// Delayed delivery in the dispatcher: entries whose metadata carries deliver_at_time, batches
// included (a batch's deliver time is in its entry metadata, the first message's, as Pulsar's
// clients write it), over the in-memory managed ledger.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "broker/topic/subscription.h"
#include "broker/topic/tests/dispatch_test_util.h"
#include "protocol/byte_order.h"
#include "protocol/commands.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

using proto::CommandSubscribe;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs ex_ until it is idle; returns how many tasks (read rounds, with uncached reads) ran.
size_t drainCounting(StepExecutor& ex) {
  size_t n = 0;
  while (ex.runOne()) ++n;
  return n;
}

class DelayedDispatchTest : public ::testing::Test {
 protected:
  // cachedReads false: every read is a task on ex_ (a cache miss), so tasks count read rounds.
  void open(CommandSubscribe::SubType type, bool cachedReads = true) {
    options_.isDelayedDeliveryDeliverAtTimeStrict = true;  // no tick of slack in the checks
    options_.delayedDeliveryTickTimeMillis = 10;           // the bucket width (8 ms) comes from it
    storage::MemoryLedgerOptions lo;
    lo.cachedReads = cachedReads;
    factory_ = std::make_unique<storage::MemoryManagedLedgerFactory>(lo);
    sub_ = openSubscription(*factory_, ex_, "t/default/persistent/delayed", "s",
                            "persistent://t/default/delayed", options_, &ml_);
    ASSERT_TRUE(sub_);
    sub_->setDelayedDelivery(DelayedDeliveryPolicies{true, 10, 0});
    consumer_ = std::make_shared<Consumer>(1, "c", &sink_, type, 0);
    ASSERT_TRUE(sub_->addConsumer(consumer_).isOk());
  }

  // A batch of `count` messages; deliverAtMs < 0: no deliver_at_time.
  void publishBatch(int count, int64_t deliverAtMs) {
    std::string payload;
    for (int i = 0; i < count; ++i) {
      proto::SingleMessageMetadata s;
      s.set_payload_size(1);
      std::string bytes = s.SerializeAsString();
      uint8_t size[4];
      protocol::wire::writeBE32(size, static_cast<uint32_t>(bytes.size()));
      payload.append(reinterpret_cast<const char*>(size), 4);
      payload += bytes;
      payload += "x";
    }
    proto::MessageMetadata md;
    md.set_producer_name("p");
    md.set_sequence_id(static_cast<uint64_t>(seq_));
    seq_ += count;
    md.set_publish_time(static_cast<uint64_t>(nowMs()));
    md.set_num_messages_in_batch(count);
    if (deliverAtMs >= 0) md.set_deliver_at_time(deliverAtMs);
    ml_->asyncAddEntry(protocol::Commands::newEntry(md, payload), [](Status, storage::Position) {});
    ex_.drain();
  }

  void checkReadAhead(CommandSubscribe::SubType type);

  StepExecutor ex_;
  std::unique_ptr<storage::MemoryManagedLedgerFactory> factory_;
  std::shared_ptr<storage::ManagedLedger> ml_;
  BrokerOptions options_;
  std::unique_ptr<Subscription> sub_;
  RecordingSink sink_;
  std::shared_ptr<Consumer> consumer_;
  int seq_ = 0;
};

// A batch whose metadata says deliver later is held back as a whole on Shared; the entries
// behind it go out at once; the batch follows once its time has passed.
TEST_F(DelayedDispatchTest, BatchWithDeliverAtTimeIsHeldUntilItsTime) {
  open(CommandSubscribe::Shared);
  const int64_t at = nowMs() + 400;
  publishBatch(5, at);              // entry 0: delayed
  publishBatch(3, -1);              // entry 1: now
  publishBatch(2, nowMs() - 1000);  // entry 2: its time has passed
  sub_->dispatcher()->flow(consumer_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 1);
  // Not before its time, even when the dispatcher reads again.
  sub_->dispatcher()->flow(consumer_.get(), 1);
  ex_.drain();
  EXPECT_EQ(sink_.entryIds.size(), 2u);
  // Buckets are a tick wide (rounded up): due at most one tick after `at`.
  while (nowMs() <= at + 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sub_->dispatcher()->flow(consumer_.get(), 1);  // a read pass after the time
  ex_.drain();
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{1, 2, 0}));
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 0);
}

// A consumer with one permit left still gets the dispatcher to read ahead of delayed entries a
// full dispatcherMaxReadBatchSize at a time: 1000 delayed entries are tracked in about 1000 / 100
// reads (not one read per permit), and the first entry that is not delayed goes out.
void DelayedDispatchTest::checkReadAhead(CommandSubscribe::SubType type) {
  open(type, /*cachedReads=*/false);
  const int kDelayed = 1000;
  const int64_t at = nowMs() + 3600 * 1000;
  for (int i = 0; i < kDelayed; ++i) publishBatch(1, at);
  publishBatch(1, -1);  // entry 1000: now
  publishBatch(1, -1);  // entry 1001: now, but no permit is left for it
  ASSERT_EQ(options_.dynamic.dispatcherMaxReadBatchSize.load(), 100);
  sub_->dispatcher()->flow(consumer_.get(), 1);
  size_t reads = drainCounting(ex_);
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), kDelayed);
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{1000}));
  // One read of 1 entry (the permit), then batches of 100; a few spare for the end of the log.
  EXPECT_LE(reads, static_cast<size_t>(kDelayed / 100 + 4));
  // The entry that found no permit goes out with the next one.
  sub_->dispatcher()->flow(consumer_.get(), 1);
  ex_.drain();
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{1000, 1001}));
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), kDelayed);
}

TEST_F(DelayedDispatchTest, SharedReadsAheadOfDelayedEntriesInFullBatches) {
  checkReadAhead(CommandSubscribe::Shared);
}

TEST_F(DelayedDispatchTest, KeySharedReadsAheadOfDelayedEntriesInFullBatches) {
  checkReadAhead(CommandSubscribe::Key_Shared);
}

// Backpressure holds: without permits nothing is read, delayed entries included.
TEST_F(DelayedDispatchTest, NoReadsWithoutPermits) {
  open(CommandSubscribe::Shared, /*cachedReads=*/false);
  const int64_t at = nowMs() + 3600 * 1000;
  for (int i = 0; i < 300; ++i) publishBatch(1, at);
  sub_->dispatcher()->onNewEntries();
  EXPECT_EQ(drainCounting(ex_), 0u);
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 0);
  // Once the permits are used up by due entries, the read-ahead stops too.
  publishBatch(1, -1);  // entry 300
  publishBatch(1, -1);  // entry 301
  sub_->dispatcher()->flow(consumer_.get(), 1);
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 300);
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{300}));
  for (int i = 0; i < 300; ++i) publishBatch(1, at);  // entries 302..601
  sub_->dispatcher()->onNewEntries();
  ex_.drain();
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 300);
}

// Exclusive (and Failover) ignore deliver_at_time, as Pulsar.
TEST_F(DelayedDispatchTest, ExclusiveDeliversADelayedBatchAtOnce) {
  open(CommandSubscribe::Exclusive);
  publishBatch(4, nowMs() + 3600 * 1000);
  sub_->dispatcher()->flow(consumer_.get(), 100);
  ex_.drain();
  EXPECT_EQ(sink_.entryIds, (std::vector<uint64_t>{0}));
  EXPECT_EQ(sub_->dispatcher()->delayedMessages(), 0);
}

}  // namespace
}  // namespace magnetar::broker
