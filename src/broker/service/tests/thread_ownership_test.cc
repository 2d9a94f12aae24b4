// The executor-ownership checks (MAGNETAR_DCHECK_ON): a topic's methods abort when called off its
// executor's thread and run when handed to it.
#include <gtest/gtest.h>

#include <future>
#include <memory>

#include "broker/topic/topic.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

class ThreadOwnershipDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    loop_.start();
    std::promise<std::shared_ptr<storage::ManagedLedger>> opened;
    factory_.asyncOpen("public/default/persistent/owned", &loop_,
                       [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
                         opened.set_value(r.isOk() ? r.value() : nullptr);
                       });
    auto ml = opened.get_future().get();
    ASSERT_TRUE(ml);
    auto name = TopicName::parse("persistent://public/default/owned");
    ASSERT_TRUE(name.isOk());
    topic_ = std::make_shared<PersistentTopic>(name.value(), ml, loop_, options_);
  }
  void TearDown() override {
    runOnLoop([this] { topic_.reset(); });
    loop_.stop();
  }
  template <typename F>
  void runOnLoop(F f) {
    std::promise<void> done;
    loop_.execute([&] {
      f();
      done.set_value();
    });
    done.get_future().get();
  }

  net::EventLoop loop_{"topic-loop"};
  storage::MemoryManagedLedgerFactory factory_;
  BrokerOptions options_;
  std::shared_ptr<PersistentTopic> topic_;
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
