// Client integration tests against `magnetar standalone`: many producers and consumers at once,
// partitioned topics, keep-alive, reconnect across a broker restart.
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

// ---- Many at once ---------------------------------------------------------------------------

TEST_F(ClientIT, ManyProducersAndConsumersAtOnce) {
  Client client(broker_->serviceUrl(), testClientConfig(2));
  constexpr int kProducers = 8;
  constexpr int kPerProducer = 2000;
  constexpr int kConsumers = 4;
  std::string shared = topic("many-shared");

  // Shared subscription with listener consumers. The listeners run on the client's I/O threads
  // and may be called after this body returns (a failed ASSERT): they own the state they touch.
  struct State {
    std::mutex mu;
    std::map<std::string, std::set<int>> seen;  // producer -> indexes
    std::atomic<int> received{0}, duplicates{0};
  };
  auto st = std::make_shared<State>();
  ConsumerConfig cc;
  cc.subscriptionType = SubscriptionType::kShared;
  cc.receiverQueueSize = 100;
  cc.messageListener = [st](Consumer& c, const Message& m) {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (!st->seen[m.producerName()].insert(indexOf(m)).second) st->duplicates++;
    }
    c.acknowledge(m);
    st->received++;
  };
  std::vector<Consumer> consumers = subscribeN(client, shared, cc, kConsumers);
  ASSERT_EQ(consumers.size(), static_cast<size_t>(kConsumers));
  // Per-topic Exclusive pairs checking order, concurrently with the shared load.
  constexpr int kPairs = 6;
  std::vector<std::string> pairTopics;
  std::vector<Consumer> pairConsumers;
  for (int i = 0; i < kPairs; ++i) {
    pairTopics.push_back(topic("many-pair"));
    auto c = client.subscribe(pairTopics.back(), "sub");
    ASSERT_TRUE(c.isOk());
    pairConsumers.push_back(*c);
  }

  std::vector<std::thread> threads;
  for (int i = 0; i < kProducers; ++i) {
    threads.emplace_back([&, i] {
      ProducerConfig pc = producerConfig(i % 2 == 0);
      auto p = client.createProducer(shared, pc);
      ASSERT_TRUE(p.isOk()) << p.status().toString();
      produce(*p, 0, kPerProducer);
      EXPECT_TRUE(p->close().isOk());
    });
  }
  for (int i = 0; i < kPairs; ++i) {
    threads.emplace_back([&, i] {
      auto p = client.createProducer(pairTopics[i], producerConfig());
      ASSERT_TRUE(p.isOk());
      produce(*p, 0, 1000);
    });
  }
  for (int i = 0; i < kPairs; ++i) {
    EXPECT_EQ(indexes(receiveN(pairConsumers[i], 1000)), range(0, 1000)) << pairTopics[i];
  }
  for (auto& th : threads) th.join();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (st->received.load() < kProducers * kPerProducer &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(st->received.load(), kProducers * kPerProducer);
  EXPECT_EQ(st->duplicates.load(), 0);
  {
    std::lock_guard<std::mutex> lock(st->mu);
    EXPECT_EQ(st->seen.size(), static_cast<size_t>(kProducers));
    for (const auto& [name, idx] : st->seen) {
      EXPECT_EQ(idx.size(), static_cast<size_t>(kPerProducer)) << name;
    }
  }
  EXPECT_GE(client.connectionCount(), 1u);
  // One per I/O thread to the service URL and to the lookup's advertised address (which is a
  // different host string than 127.0.0.1 unless the broker advertises that).
  EXPECT_LE(client.connectionCount(), 4u);
  EXPECT_TRUE(client.close().isOk());
}

// ---- Partitioned topics (own broker: auto-created topics get 4 partitions) -------------------

TEST(ClientPartitionedIT, ProducerRoutesByKeyAndConsumerReadsEveryPartition) {
  if (!StandaloneBroker::binaryExists()) GTEST_SKIP() << "no broker binary";
  StandaloneBroker broker({"allowAutoTopicCreationType=partitioned", "defaultNumPartitions=4"});
  ASSERT_TRUE(broker.start().isOk());
  Client client(broker.serviceUrl(), testClientConfig(2));
  std::string t = "persistent://public/default/partitioned-" + std::to_string(::getpid());
  auto n = client.getNumberOfPartitions(t);
  ASSERT_TRUE(n.isOk()) << n.status().toString();
  ASSERT_EQ(*n, 4);
  ConsumerConfig cc;
  cc.initialPosition = InitialPosition::kEarliest;
  auto c = client.subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ProducerConfig pc = producerConfig(false);
  auto p = client.createProducer(t, pc);
  ASSERT_TRUE(p.isOk()) << p.status().toString();
  auto key = [](int i) { return i < 800 ? "k" + std::to_string(i % 20) : std::string(); };
  auto ids = produce(*p, 0, 1000, key);
  for (int i = 0; i < 1000; ++i) {
    if (i < 800) {
      EXPECT_EQ(ids[i].partition, partitionForKey(key(i), 4)) << i;
    }
  }
  auto got = receiveN(*c, 1000);
  ASSERT_EQ(got.size(), 1000u);
  std::map<std::string, int> lastOfKey;
  std::set<int> keylessPartitions;
  std::set<int> all;
  for (const auto& m : got) {
    int i = indexOf(m);
    all.insert(i);
    EXPECT_EQ(m.topic(), partitionName(t, m.messageId().partition));
    if (i < 800) {
      EXPECT_EQ(m.messageId().partition, partitionForKey(m.key(), 4));
      auto [it, fresh] = lastOfKey.try_emplace(m.key(), i);
      if (!fresh) {
        EXPECT_LT(it->second, i) << "key " << m.key() << " out of order";
        it->second = i;
      }
    } else {
      keylessPartitions.insert(m.messageId().partition);
    }
  }
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(keylessPartitions.size(), 4u);  // round-robin reaches every partition
  EXPECT_TRUE(client.close().isOk());
}

// ---- Keep-alive: PINGs both ways keep an idle connection open --------------------------------

TEST(ClientKeepAliveIT, IdleConnectionSurvivesPingsBothWays) {
  if (!StandaloneBroker::binaryExists()) GTEST_SKIP() << "no broker binary";
  StandaloneBroker broker({"keepAliveIntervalSeconds=1"});
  ASSERT_TRUE(broker.start().isOk());
  ClientConfig config = testClientConfig();
  config.keepAliveInterval = 300ms;
  Client client(broker.serviceUrl(), config);
  std::string t = "persistent://public/default/keepalive-" + std::to_string(::getpid());
  auto c = client.subscribe(t, "sub");
  ASSERT_TRUE(c.isOk());
  auto p = client.createProducer(t, producerConfig(false));
  ASSERT_TRUE(p.isOk());
  std::this_thread::sleep_for(3500ms);  // several broker PINGs and client PINGs
  EXPECT_TRUE(p->isConnected());
  EXPECT_TRUE(c->isConnected());
  EXPECT_EQ(c->stats().reconnects, 0u);
  produce(*p, 0, 10);
  EXPECT_EQ(indexes(receiveN(*c, 10)), range(0, 10));
  EXPECT_TRUE(client.close().isOk());
}

// ---- Reconnect across a broker restart ------------------------------------------------------

TEST(ClientReconnectIT, ProducerResendsPendingAndConsumerResubscribesAfterRestart) {
  if (!StandaloneBroker::binaryExists()) GTEST_SKIP() << "no broker binary";
  StandaloneBroker broker;
  ASSERT_TRUE(broker.start().isOk());
  ClientConfig config = testClientConfig();
  config.operationTimeout = 30s;
  config.maxBackoff = 500ms;
  Client client(broker.serviceUrl(), config);
  std::string t = "persistent://public/default/restart-" + std::to_string(::getpid());
  ConsumerConfig cc;
  cc.initialPosition = InitialPosition::kEarliest;
  auto c = client.subscribe(t, "sub", cc);
  ASSERT_TRUE(c.isOk());
  ProducerConfig pc = producerConfig(false);
  auto p = client.createProducer(t, pc);
  ASSERT_TRUE(p.isOk());
  produce(*p, 0, 100);
  EXPECT_EQ(indexes(receiveN(*c, 100)), range(0, 100));

  int port = broker.port();
  broker.stop();
  // Sent while the broker is down: queued, then re-sent in order after the reconnect.
  std::atomic<int> ok{0};
  for (int i = 100; i < 200; ++i) {
    std::string payload = payloadOf(i);
    p->sendAsync(OutgoingMessage{.payload = payload}, [&](const Status& s, const MessageId&) {
      if (s.isOk()) ok++;
    });
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(p->isConnected());
  ASSERT_TRUE(broker.start(port).isOk());
  ASSERT_TRUE(p->flush().isOk());
  EXPECT_EQ(ok.load(), 100);
  EXPECT_TRUE(p->isConnected());

  // The consumer resubscribed; the new messages arrive in order (old ones only if the storage
  // kept them and the acks were lost).
  std::vector<int> got;
  while (got.empty() || got.back() != 199) {
    auto m = c->receive(15000ms);
    ASSERT_TRUE(m.isOk()) << m.status().toString() << "\n" << broker.logTail();
    c->acknowledge(*m);
    got.push_back(indexOf(*m));
  }
  auto from = std::find(got.begin(), got.end(), 100);
  ASSERT_NE(from, got.end());
  EXPECT_EQ(std::vector<int>(from, got.end()), range(100, 200));
  EXPECT_GE(c->stats().reconnects, 1u);
  EXPECT_TRUE(client.close().isOk());
}

}  // namespace
}  // namespace magnetar::client
