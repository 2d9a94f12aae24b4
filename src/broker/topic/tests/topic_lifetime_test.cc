// A topic's lifetime against its own callbacks: an add that a closed managed ledger refuses
// completes in a later task on the topic's executor, and that task may hold the last reference
// (the publish task of an unloaded topic held it; the connection had already dropped its own).
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <vector>

#include "broker/topic/tests/topic_fixture.h"

namespace magnetar::broker {
namespace {

class TopicLifetimeTest : public LoopTopicTest<> {
 protected:
  void SetUp() override { openTopic("lifetime"); }
};

// Issue 52: before the fix the refused add's callback ran on the freed PersistentTopic
// (ASan: heap-use-after-free in the callback of PersistentTopic::publish).
TEST_F(TopicLifetimeTest, AnAddRefusedAfterTheCloseKeepsTheTopicUntilItsCallbackRan) {
  std::promise<Status> closed;
  runOnLoop([&] {
    topic_->closeLedger([&](const Status& s) { closed.set_value(s); }, /*release=*/false);
  });
  ASSERT_TRUE(closed.get_future().get().isOk());
  std::weak_ptr<PersistentTopic> weak = topic_;
  // No connection: the answer goes nowhere, the topic's own work is what is checked.
  auto producer = std::make_shared<Producer>(1, "p", nullptr);
  runOnLoop([&] {
    auto last = std::move(topic_);  // the only reference, as an unloaded topic's publish task
    std::vector<PendingSend> sends(1);
    sends[0].producer = producer;
    sends[0].sequenceId = 7;
    sends[0].highestSequenceId = 7;
    sends[0].entry = Buffer::copyOf("late send");
    last->publish(sends);
  });
  // The refused add completes in a later task; then the topic goes.
  for (int i = 0; i < 3; i++) runOnLoop([] {});
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(producer.use_count(), 1);
}

}  // namespace
}  // namespace magnetar::broker
