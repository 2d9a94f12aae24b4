// A failed write fences publishing (Pulsar's PersistentTopic.addFailed): the producers are closed,
// SENDs already on their way are not stored, and once the writes in flight completed a producer
// that reconnects and sends again from the first failed id has everything stored, in order. Found
// by the chaos suite (cluster, seed 1): a ledger creation failed after a broker pause, the failed
// publishes' resends came after later sends had been stored, and dedup answered them as
// duplicates (163 receipted messages lost).
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "broker/topic/tests/topic_fixture.h"

namespace magnetar::broker {
namespace {

class TopicWriteFailureTest : public LoopTopicTest<::testing::TestWithParam<bool>> {
 protected:
  void SetUp() override {
    openTopic("write-failure", /*dedupPolicy=*/GetParam());
    std::promise<Status> ready;
    runOnLoop([&] { topic_->initialize([&](const Status& s) { ready.set_value(s); }); });
    ASSERT_TRUE(ready.get_future().get().isOk());
  }
  // Lets the posted add completions and the topic's flush run.
  void drain() {
    for (int i = 0; i < 5; i++) runOnLoop([] {});
  }
  std::pair<Status, proto::ServerError> add(const std::shared_ptr<Producer>& p) {
    std::promise<std::pair<Status, proto::ServerError>> r;
    runOnLoop([&] {
      topic_->addProducer(
          p,
          [&](Status s, proto::ServerError e, std::optional<uint64_t>) {
            r.set_value({std::move(s), e});
          },
          [] {});
    });
    return r.get_future().get();
  }
  void send(const std::shared_ptr<Producer>& p, std::vector<uint64_t> seqs) {
    runOnLoop([&] {
      std::vector<PendingSend> sends(seqs.size());
      for (size_t i = 0; i < seqs.size(); i++) {
        sends[i].producer = p;
        sends[i].sequenceId = seqs[i];
        sends[i].highestSequenceId = seqs[i];
        sends[i].numMessages = 1;
        sends[i].entry = Buffer::copyOf("m" + std::to_string(seqs[i]));
      }
      topic_->publish(sends);
    });
  }
  std::vector<std::string> stored() {
    std::promise<std::vector<std::string>> r;
    runOnLoop([&] {
      ledger_->asyncReadEntries(ledger_->firstPosition(), 100, 1 << 20,
                                [&](const Status&, std::vector<storage::Entry> entries) {
                                  std::vector<std::string> out;
                                  for (auto& e : entries) out.emplace_back(e.data.view());
                                  r.set_value(std::move(out));
                                });
    });
    return r.get_future().get();
  }
};

TEST_P(TopicWriteFailureTest, LaterSendsAreNotStoredBeforeTheFailedOnesAreSentAgain) {
  auto first = std::make_shared<Producer>(1, "p", nullptr);
  ASSERT_TRUE(add(first).first.isOk());
  send(first, {0});
  drain();
  // The writes of 1 and 2 fail; 3 and 4, pipelined behind them, reach the topic afterwards.
  ledgerOptions_.failAdds->store(2);
  send(first, {1, 2});
  drain();
  EXPECT_TRUE(first->closed);  // CLOSE_PRODUCER: the client sends again from 1
  send(first, {3, 4});
  drain();
  EXPECT_EQ(stored(), (std::vector<std::string>{"m0"}));

  // The client's new producer resends everything it had pending.
  auto second = std::make_shared<Producer>(2, "p", nullptr);
  auto [status, error] = add(second);
  ASSERT_TRUE(status.isOk()) << status.toString() << " " << error;
  send(second, {1, 2, 3, 4});
  drain();
  EXPECT_EQ(stored(), (std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"}));
  // Resent again (a lost receipt): dedup keeps them once; without dedup they are stored again.
  send(second, {3, 4});
  drain();
  EXPECT_EQ(stored().size(), GetParam() ? 5u : 7u);
}

INSTANTIATE_TEST_SUITE_P(Dedup, TopicWriteFailureTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "On" : "Off"; });

}  // namespace
}  // namespace magnetar::broker
