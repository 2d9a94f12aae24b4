// The executor-ownership checks (MAGNETAR_DCHECK_ON): a topic's methods abort when called off its
// executor's thread and run when handed to it.
#include <gtest/gtest.h>

#include "broker/topic/tests/topic_fixture.h"

namespace magnetar::broker {
namespace {

class ThreadOwnershipDeathTest : public LoopTopicTest<> {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    openTopic("owned");
  }
};

TEST_F(ThreadOwnershipDeathTest, TopicCalledOffItsExecutorAborts) {
  EXPECT_FALSE(loop_.inExecutorThread());
  EXPECT_DEATH(topic_->terminate(nullptr), "topic\\.cc:[0-9]+: terminate: DCHECK failed");
  EXPECT_DEATH(topic_->createSubscription("s", storage::InitialPosition::kEarliest),
               "createSubscription: DCHECK failed");
}

TEST_F(ThreadOwnershipDeathTest, TopicCalledOnItsExecutorRuns) {
  Status created = Status::ok();
  runOnLoop(
      [&] { created = topic_->createSubscription("s", storage::InitialPosition::kEarliest); });
  EXPECT_TRUE(created.isOk()) << created.toString();
  bool terminated = false;
  runOnLoop([&] {
    topic_->terminate(nullptr);
    terminated = topic_->isTerminated();
  });
  EXPECT_TRUE(terminated);
}

}  // namespace
}  // namespace magnetar::broker
