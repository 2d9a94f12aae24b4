// Client integration tests against `magnetar standalone`: ordering for every subscription type,
// acknowledgements and redelivery, flow control, seek, Failover, producer rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "client/client.h"
#include "client/routing.h"
#include "client/tests/it_util.h"

namespace magnetar::client {
namespace {

using namespace std::chrono_literals;
using namespace it;
using testing::StandaloneBroker;

// ---- Ordering for every subscription type --------------------------------------------------

struct OrderCase {
  SubscriptionType type;
  bool batching;
};

class OrderIT : public ClientIT, public ::testing::WithParamInterface<OrderCase> {};

std::string orderCaseName(const ::testing::TestParamInfo<OrderCase>& info) {
  static const char* kNames[] = {"Exclusive", "Shared", "Failover", "KeyShared"};
  return std::string(kNames[static_cast<int>(info.param.type)]) +
         (info.param.batching ? "Batched" : "");
}

TEST_P(OrderIT, TenThousandMessagesArriveInOrderAndAcksStick) {
  constexpr int kCount = 10000;
  std::string t = topic("order");
  ConsumerConfig cc;
  cc.subscriptionType = GetParam().type;
  cc.initialPosition = InitialPosition::kEarliest;
  auto consumer = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(consumer.isOk()) << consumer.status().toString();
  ProducerConfig pc = producerConfig(GetParam().batching);
  auto producer = client_->createProducer(t, pc);
  ASSERT_TRUE(producer.isOk()) << producer.status().toString();

  // Runs of 50 messages per key: batches (one key each) hold up to 50 messages.
  auto key = [](int i) { return "key-" + std::to_string(i / 50 % 7); };
  auto ids = produce(*producer, 0, kCount, key);
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << i;

  auto got = receiveN(*consumer, kCount);
  ASSERT_EQ(indexes(got), range(0, kCount));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i].messageId(), ids[i]) << i;
    EXPECT_EQ(got[i].key(), key(i));
    EXPECT_EQ(got[i].producerName(), producer->producerName());
  }
  EXPECT_EQ(producer->lastSequenceId(), kCount - 1);
  EXPECT_TRUE(consumer->close().isOk());

  // Everything was acknowledged: the subscription has nothing left.
  auto again = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(again.isOk()) << again.status().toString();
  expectNothingMore(*again);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, OrderIT,
    ::testing::Values(OrderCase{SubscriptionType::kExclusive, false},
                      OrderCase{SubscriptionType::kShared, false},
                      OrderCase{SubscriptionType::kFailover, false},
                      OrderCase{SubscriptionType::kKeyShared, false},
                      OrderCase{SubscriptionType::kExclusive, true},
                      OrderCase{SubscriptionType::kKeyShared, true}),
    orderCaseName);

TEST_F(ClientIT, KeyBasedGroupingKeepsPerKeyOrder) {
  constexpr int kCount = 5000;
  std::string t = topic("grouped");
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kKeyShared;
  auto consumer = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(consumer.isOk());
  ProducerConfig pc = producerConfig(true);
  pc.batchingGroupByKey = true;
  auto producer = client_->createProducer(t, pc);
  ASSERT_TRUE(producer.isOk());
  auto key = [](int i) { return "key-" + std::to_string(i % 7); };
  auto ids = produce(*producer, 0, kCount, key);
  int batched = 0;
  for (const auto& id : ids) batched += id.batchSize > 1;
  EXPECT_GT(batched, kCount / 2);  // interleaved keys still fill batches
  auto got = receiveN(*consumer, kCount);
  ASSERT_EQ(got.size(), static_cast<size_t>(kCount));
  std::map<std::string, int> last;
  std::set<int> all;
  for (const auto& m : got) {
    int i = indexOf(m);
    all.insert(i);
    EXPECT_EQ(m.key(), key(i));
    auto [it, fresh] = last.try_emplace(m.key(), i);
    if (!fresh) {
      EXPECT_LT(it->second, i) << m.key();
      it->second = i;
    }
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kCount));
}

TEST_F(ClientIT, KeySharedSpreadsKeysAndKeepsEachKeyOnOneConsumerInOrder) {
  std::string t = topic("keyshared");
  constexpr int kConsumers = 3;
  constexpr int kCount = 3000;
  // The listeners run on the client's I/O thread and may still be called after this body returns
  // (a failed ASSERT, a redelivery): they own the state they touch.
  struct State {
    std::mutex mu;
    std::map<std::string, std::set<std::string>> consumersOfKey;
    std::map<std::string, int> lastOfKey;
    std::atomic<int> received{0}, outOfOrder{0};
  };
  auto st = std::make_shared<State>();
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kKeyShared;
  cc.consumerName = "ks-";
  cc.messageListener = [st](Consumer& c, const Message& m) {
    std::lock_guard<std::mutex> lock(st->mu);
    st->consumersOfKey[m.key()].insert(c.consumerName());
    auto [it, fresh] = st->lastOfKey.try_emplace(m.key(), indexOf(m));
    if (!fresh) {
      if (it->second >= indexOf(m)) st->outOfOrder++;
      it->second = indexOf(m);
    }
    c.acknowledge(m);
    st->received++;
  };
  std::vector<Consumer> consumers = subscribeN(*client_, t, cc, kConsumers);
  ASSERT_EQ(consumers.size(), static_cast<size_t>(kConsumers));
  auto p = client_->createProducer(t, producerConfig(true));
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, kCount, [](int i) { return "key-" + std::to_string(i % 50); });
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (st->received.load() < kCount && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(st->received.load(), kCount);
  EXPECT_EQ(st->outOfOrder.load(), 0);
  std::lock_guard<std::mutex> lock(st->mu);
  std::set<std::string> used;
  for (const auto& [key, names] : st->consumersOfKey) {
    EXPECT_EQ(names.size(), 1u) << key << " went to several consumers";
    used.insert(names.begin(), names.end());
  }
  EXPECT_GE(used.size(), 2u);  // 50 keys over 3 consumers: more than one is used
}

// ---- Redelivery and acknowledgements -------------------------------------------------------

TEST_F(ClientIT, UnackedMessagesAreRedeliveredAfterTheConsumerCloses) {
  for (auto type : {SubscriptionType::kExclusive, SubscriptionType::kShared}) {
    std::string t = topic("redeliver");
    ConsumerConfig cc;
    cc.subscriptionType = type;
    auto c1 = client_->subscribe(t, "sub", cc);
    ASSERT_TRUE(c1.isOk()) << c1.status().toString();
    auto p = unbatchedProducer(t);
    ASSERT_TRUE(p.isOk());
    produce(*p, 0, 100);
    auto got = receiveN(*c1, 100, /*ack=*/false);
    ASSERT_EQ(indexes(got), range(0, 100));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(c1->acknowledge(got[i]).isOk());
    ASSERT_TRUE(c1->close().isOk());

    auto c2 = client_->subscribe(t, "sub", cc);
    ASSERT_TRUE(c2.isOk()) << c2.status().toString();
    auto again = receiveN(*c2, 50);
    EXPECT_EQ(indexes(again), range(50, 100));
    for (const auto& m : again) EXPECT_EQ(m.messageId(), got[indexOf(m)].messageId());
    expectNothingMore(*c2);
  }
}

TEST_F(ClientIT, CumulativeAckAcknowledgesEverythingUpToTheId) {
  std::string t = topic("cumulative");
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kExclusive;
  auto c1 = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c1.isOk());
  auto p = client_->createProducer(t, producerConfig(false));
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 100);
  auto got = receiveN(*c1, 100, /*ack=*/false);
  ASSERT_EQ(indexes(got), range(0, 100));
  ASSERT_TRUE(c1->acknowledgeCumulative(got[59]).isOk());
  ASSERT_TRUE(c1->close().isOk());

  auto c2 = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c2.isOk());
  EXPECT_EQ(indexes(receiveN(*c2, 40)), range(60, 100));
  expectNothingMore(*c2);

  // Not allowed on Shared, as in Pulsar.
  ConsumerConfig shared;
  shared.subscriptionType = SubscriptionType::kShared;
  auto s = client_->subscribe(t, "shared-sub", shared);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->acknowledgeCumulative(got[0].messageId()).code(), StatusCode::kNotAllowed);
}

TEST_F(ClientIT, NegativeAckRedeliversAfterTheDelay) {
  std::string t = topic("nack");
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kShared;
  cc.negativeAckRedeliveryDelay = 200ms;
  auto c = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk());
  auto p = unbatchedProducer(t);
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 3);
  auto got = receiveN(*c, 3, /*ack=*/false);
  ASSERT_EQ(indexes(got), range(0, 3));
  c->acknowledge(got[0]);
  c->acknowledge(got[2]);
  auto t0 = std::chrono::steady_clock::now();
  c->negativeAcknowledge(got[1]);
  auto again = receiveN(*c, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_EQ(indexOf(again[0]), 1);
  EXPECT_EQ(again[0].messageId(), got[1].messageId());
  EXPECT_GE(again[0].redeliveryCount(), 1u);
  expectNothingMore(*c);
}

TEST_F(ClientIT, RedeliverUnacknowledgedMessagesReplaysTheUnacked) {
  std::string t = topic("redeliver-all");
  auto c = client_->subscribe(t, "sub");
  ASSERT_TRUE(c.isOk());
  auto p = client_->createProducer(t, producerConfig(false));
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 20);
  auto got = receiveN(*c, 10, /*ack=*/false);
  for (int i = 0; i < 5; ++i) c->acknowledge(got[i]);
  c->redeliverUnacknowledgedMessages();
  // Pending acks go out before the REDELIVER, so 0..4 never come back; 5..19 all do. Messages
  // the broker had already dispatched may arrive once more before the replay (no consumer epoch).
  std::vector<int> replay;
  std::set<int> seen;
  while (seen.size() < 15) {
    auto m = c->receive(3000ms);
    ASSERT_TRUE(m.isOk()) << "missing some of 5..19; got " << ::testing::PrintToString(replay);
    c->acknowledge(*m);
    replay.push_back(indexOf(*m));
    seen.insert(indexOf(*m));
  }
  ASSERT_EQ(*seen.begin(), 5) << ::testing::PrintToString(replay);
  EXPECT_EQ(*seen.rbegin(), 19);
  // The replay itself is in order: from the last 5 on, indexes increase.
  auto from = std::find(replay.rbegin(), replay.rend(), 5).base() - 1;
  EXPECT_TRUE(std::is_sorted(from, replay.end())) << ::testing::PrintToString(replay);
  // Without consumer epochs a message dispatched before the REDELIVER can still arrive once
  // more; anything that does is one of 5..19, never an acked one.
  for (auto m = c->receive(300ms); m.isOk(); m = c->receive(300ms)) {
    EXPECT_GE(indexOf(*m), 5);
    EXPECT_LE(indexOf(*m), 19);
    c->acknowledge(*m);
  }
}

// ---- Flow control --------------------------------------------------------------------------

TEST_F(ClientIT, BrokerNeverExceedsFlowPermits) {
  std::string t = topic("flow");
  auto p = unbatchedProducer(t);
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 200);
  ConsumerConfig cc;
  cc.receiverQueueSize = 10;
  cc.initialPosition = InitialPosition::kEarliest;
  auto c = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk());

  auto waitFor = [&](uint64_t received) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (c->stats().messagesReceived < received && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    std::this_thread::sleep_for(300ms);  // anything beyond the permits would arrive by now
  };
  waitFor(10);
  EXPECT_EQ(c->stats().messagesReceived, 10u);
  EXPECT_EQ(c->numMessagesInQueue(), 10u);
  EXPECT_EQ(c->stats().permitsSent, 10u);

  // Processing half the queue returns 5 permits (one FLOW), no more.
  auto first = receiveN(*c, 5, /*ack=*/false);
  EXPECT_EQ(indexes(first), range(0, 5));
  waitFor(15);
  EXPECT_EQ(c->stats().messagesReceived, 15u);
  EXPECT_EQ(c->stats().permitsSent, 15u);
  EXPECT_EQ(c->numMessagesInQueue(), 10u);

  auto rest = receiveN(*c, 195, /*ack=*/false);
  EXPECT_EQ(indexes(rest), range(5, 200));
  auto st = c->stats();
  EXPECT_EQ(st.permitViolations, 0u);
  EXPECT_EQ(st.messagesReceived, 200u);
  EXPECT_LE(st.messagesReceived, st.permitsSent);
}

// ---- Seek and last message id --------------------------------------------------------------

TEST_F(ClientIT, SeekByMessageIdAndByTime) {
  std::string t = topic("seek");
  auto p = unbatchedProducer(t);
  ASSERT_TRUE(p.isOk());
  auto ids = produce(*p, 0, 50);
  std::this_thread::sleep_for(20ms);
  uint64_t middle = nowMs();
  std::this_thread::sleep_for(20ms);
  auto more = produce(*p, 50, 100);
  ids.insert(ids.end(), more.begin(), more.end());

  ConsumerConfig cc;
  cc.initialPosition = InitialPosition::kEarliest;
  auto c = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk());
  ASSERT_EQ(indexes(receiveN(*c, 100)), range(0, 100));
  expectNothingMore(*c, 200ms);

  ASSERT_TRUE(c->seek(ids[40]).isOk());
  EXPECT_EQ(indexes(receiveN(*c, 60)), range(40, 100));
  expectNothingMore(*c, 200ms);

  ASSERT_TRUE(c->seek(middle).isOk());
  EXPECT_EQ(indexes(receiveN(*c, 50)), range(50, 100));

  ASSERT_TRUE(c->seek(MessageId::earliest()).isOk());
  EXPECT_EQ(indexes(receiveN(*c, 100)), range(0, 100));

  auto last = c->getLastMessageId();
  ASSERT_TRUE(last.isOk()) << last.status().toString();
  EXPECT_EQ(last->ledgerId, ids.back().ledgerId);
  EXPECT_EQ(last->entryId, ids.back().entryId);
}

// ---- Failover ------------------------------------------------------------------------------

TEST_F(ClientIT, FailoverSwitchesToTheStandbyWhenTheActiveCloses) {
  std::string t = topic("failover");
  // Events may come on the client's loop after this test returns: the listener owns its state.
  struct Events {
    std::mutex mu;
    std::map<std::string, std::vector<bool>> byName;
  };
  auto events = std::make_shared<Events>();
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kFailover;
  cc.activeConsumerListener = [events](Consumer& c, bool active) {
    std::lock_guard<std::mutex> lock(events->mu);
    events->byName[c.consumerName()].push_back(active);
  };
  cc.consumerName = "a";
  auto a = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(a.isOk());
  cc.consumerName = "b";
  auto b = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(b.isOk());
  auto p = client_->createProducer(t, producerConfig(false));
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 1000);

  // Exactly one of them is active.
  Consumer* active = &*a;
  Consumer* standby = &*b;
  auto m = a->receive(3000ms);
  if (!m) {
    std::swap(active, standby);
    m = active->receive(std::chrono::duration_cast<std::chrono::milliseconds>(kReceiveTimeout));
  }
  ASSERT_TRUE(m.isOk());
  EXPECT_EQ(indexOf(*m), 0);
  active->acknowledge(*m);
  auto more = receiveN(*active, 199);
  EXPECT_EQ(indexes(more), range(1, 200));
  expectNothingMore(*standby, 300ms);

  std::string activeName = active->consumerName();
  ASSERT_TRUE(active->close().isOk());
  auto rest = receiveN(*standby, 800);
  EXPECT_EQ(indexes(rest), range(200, 1000));
  // The broker tells the standby it is active before its first message (Pulsar's
  // scheduleReadOnActiveConsumer notifies, then reads), so by now the event is in.
  std::lock_guard<std::mutex> lock(events->mu);
  const std::vector<bool>& seen = events->byName[standby->consumerName()];
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(seen.back()) << "events of the standby: " << seen.size();
}

// ---- Producers ------------------------------------------------------------------------------

TEST_F(ClientIT, ProducerNamesAndAccessModesAreEnforced) {
  std::string t = topic("names");
  ProducerConfig named;
  named.producerName = "the-one";
  auto p1 = client_->createProducer(t, named);
  ASSERT_TRUE(p1.isOk()) << p1.status().toString();
  EXPECT_EQ(p1->producerName(), "the-one");
  auto p2 = client_->createProducer(t, named);
  ASSERT_FALSE(p2.isOk());
  EXPECT_EQ(p2.status().code(), StatusCode::kBusy) << p2.status().toString();

  std::string t2 = topic("exclusive");
  ProducerConfig exclusive;
  exclusive.accessMode = ProducerAccessMode::kExclusive;
  auto e1 = client_->createProducer(t2, exclusive);
  ASSERT_TRUE(e1.isOk()) << e1.status().toString();
  auto e2 = client_->createProducer(t2);
  EXPECT_FALSE(e2.isOk());

  ConsumerConfig cc;
  auto c1 = client_->subscribe(t, "excl", cc);
  ASSERT_TRUE(c1.isOk());
  auto c2 = client_->subscribe(t, "excl", cc);
  ASSERT_FALSE(c2.isOk());
  EXPECT_EQ(c2.status().code(), StatusCode::kBusy) << c2.status().toString();
}

TEST_F(ClientIT, SyncSendExplicitSequenceIdsAndProperties) {
  std::string t = topic("sync");
  ConsumerConfig cc;
  auto c = client_->subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk());
  ProducerConfig pc = producerConfig(false);
  pc.initialSequenceId = 100;
  auto p = client_->createProducer(t, pc);
  ASSERT_TRUE(p.isOk());
  auto id1 = p->send(OutgoingMessage{.payload = "a", .properties = {{"x", "1"}}, .eventTime = 77});
  ASSERT_TRUE(id1.isOk()) << id1.status().toString();
  auto id2 = p->send(OutgoingMessage{.payload = "b", .orderingKey = "ord", .sequenceId = 500});
  ASSERT_TRUE(id2.isOk());
  auto id3 = p->send(OutgoingMessage{.payload = "c"});
  ASSERT_TRUE(id3.isOk());
  EXPECT_LT(*id1, *id2);
  EXPECT_EQ(p->lastSequenceId(), 501);

  auto got = receiveN(*c, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload(), "a");
  EXPECT_EQ(got[0].sequenceId(), 100u);
  EXPECT_EQ(got[0].property("x"), "1");
  EXPECT_EQ(got[0].eventTime(), 77u);
  EXPECT_FALSE(got[0].hasKey());
  EXPECT_EQ(got[1].sequenceId(), 500u);
  EXPECT_EQ(got[1].orderingKey(), "ord");
  EXPECT_EQ(got[2].sequenceId(), 501u);
  EXPECT_EQ(got[2].messageId(), *id3);
  EXPECT_GT(got[2].publishTime(), 0u);
  EXPECT_EQ(got[2].topic(), t);
}

TEST_F(ClientIT, PendingQueueBoundFailsFastWhenFull) {
  std::string t = topic("bound");
  ProducerConfig pc;
  pc.batchingEnabled = true;
  pc.batchingMaxPublishDelay = std::chrono::microseconds(2000000);  // keep them pending
  pc.batchingMaxMessages = 1000;
  pc.maxPendingMessages = 5;
  auto p = client_->createProducer(t, pc);
  ASSERT_TRUE(p.isOk());
  std::atomic<int> ok{0}, busy{0};
  for (int i = 0; i < 8; ++i) {
    p->sendAsync(OutgoingMessage{.payload = "x"}, [&](const Status& s, const MessageId&) {
      if (s.isOk()) ok++;
      if (s.code() == StatusCode::kBusy) busy++;
    });
  }
  EXPECT_EQ(busy.load(), 3);
  EXPECT_EQ(p->pendingMessages(), 5u);
  ASSERT_TRUE(p->flush().isOk());
  EXPECT_EQ(ok.load(), 5);
  EXPECT_EQ(p->pendingMessages(), 0u);
}

TEST_F(ClientIT, RunEveryPacesSendsOnTheProducersIoThread) {
  constexpr int kTicks = 20;
  auto producer = client_->createProducer(topic("run-every"));
  ASSERT_TRUE(producer.isOk()) << producer.status().toString();
  std::mutex mu;
  std::set<std::thread::id> tickThreads, receiptThreads;
  std::atomic<int> ticks{0}, receipts{0}, failures{0};
  Status s = client_->runEvery(0, 1ms, [&] {
    int i = ticks.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mu);
      tickThreads.insert(std::this_thread::get_id());
    }
    OutgoingMessage m;
    std::string payload = "tick-" + std::to_string(i);
    m.payload = payload;
    producer->sendAsync(m, [&](const Status& st, const MessageId&) {
      std::lock_guard<std::mutex> lock(mu);
      receiptThreads.insert(std::this_thread::get_id());
      if (!st.isOk()) failures.fetch_add(1);
      receipts.fetch_add(1);
    });
    return i + 1 < kTicks;  // false: no further call
  });
  ASSERT_TRUE(s.isOk()) << s.toString();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (receipts.load() < kTicks && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  std::this_thread::sleep_for(20ms);  // 20 periods: a call after `false` would show
  EXPECT_EQ(ticks.load(), kTicks);
  EXPECT_EQ(receipts.load(), kTicks);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(producer->lastSequenceId(), kTicks - 1);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(tickThreads.size(), 1u);
  EXPECT_NE(*tickThreads.begin(), std::this_thread::get_id());
  EXPECT_EQ(receiptThreads, tickThreads);  // the producer's own I/O thread

  Client closed(broker_->serviceUrl(), testClientConfig());
  ASSERT_TRUE(closed.close().isOk());
  EXPECT_EQ(closed.runEvery(0, 1ms, [] { return false; }).code(), StatusCode::kClosed);
}

TEST_F(ClientIT, UnsubscribeDeletesTheSubscription) {
  std::string t = topic("unsub");
  auto c = client_->subscribe(t, "sub");
  ASSERT_TRUE(c.isOk());
  auto p = client_->createProducer(t, producerConfig());
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 10);
  ASSERT_TRUE(c->unsubscribe().isOk());
  EXPECT_FALSE(c->receive(100ms).isOk());
  // A new subscription at Latest does not see the old messages.
  auto c2 = client_->subscribe(t, "sub");
  ASSERT_TRUE(c2.isOk());
  produce(*p, 10, 11);
  EXPECT_EQ(indexes(receiveN(*c2, 1)), range(10, 11));
}

}  // namespace
}  // namespace magnetar::client
