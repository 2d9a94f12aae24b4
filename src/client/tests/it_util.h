// Helpers and the fixture of the client integration tests (client_integration_*_test.cc): a real
// `magnetar standalone` process on free ports; tests are skipped when the broker binary does not
// exist ($MAGNETAR_BIN or the build tree's).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "client/client.h"
#include "client/routing.h"
#include "client/tests/standalone_broker.h"

namespace magnetar::client::it {

using namespace std::chrono_literals;
using testing::StandaloneBroker;

inline constexpr auto kReceiveTimeout = 10s;

inline std::string payloadOf(int i) { return "m-" + std::to_string(i); }

inline int indexOf(const Message& m) {
  auto p = m.payload();
  if (p.substr(0, 2) != "m-") return -1;
  return std::stoi(std::string(p.substr(2)));
}

inline ClientConfig testClientConfig(int ioThreads = 1) {
  ClientConfig c;
  c.ioThreads = ioThreads;
  c.operationTimeout = 20s;
  c.maxBackoff = 1s;
  return c;
}

// Producer settings of these tests: sendAsync blocks instead of failing when 1000 are pending.
inline ProducerConfig producerConfig(bool batching = true) {
  ProducerConfig pc;
  pc.batchingEnabled = batching;
  pc.blockIfQueueFull = true;
  return pc;
}

// Sends messages [from, to) asynchronously, then flushes; returns their ids in order.
inline std::vector<MessageId> produce(Producer& p, int from, int to,
                               const std::function<std::string(int)>& key = nullptr) {
  std::vector<MessageId> ids(static_cast<size_t>(to - from));
  std::atomic<int> failures{0};
  for (int i = from; i < to; ++i) {
    std::string payload = payloadOf(i);
    std::string k = key ? key(i) : "";
    p.sendAsync(OutgoingMessage{.payload = payload, .key = k},
                [&ids, &failures, i, from](const Status& s, const MessageId& id) {
                  if (!s.isOk()) {
                    failures.fetch_add(1);
                    ADD_FAILURE() << "send " << i << " failed: " << s.toString();
                  }
                  ids[static_cast<size_t>(i - from)] = id;
                });
  }
  Status s = p.flush();
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(failures.load(), 0);
  return ids;
}

// Receives n messages (each within kReceiveTimeout), acking each when ack is set.
inline std::vector<Message> receiveN(Consumer& c, int n, bool ack = true) {
  std::vector<Message> out;
  for (int i = 0; i < n; ++i) {
    auto m = c.receive(std::chrono::duration_cast<std::chrono::milliseconds>(kReceiveTimeout));
    if (!m) {
      ADD_FAILURE() << "receive " << i << " of " << n << ": " << m.status().toString();
      break;
    }
    if (ack) {
      EXPECT_TRUE(c.acknowledge(*m).isOk());
    }
    out.push_back(std::move(*m));
  }
  return out;
}

inline void expectNothingMore(Consumer& c, std::chrono::milliseconds wait = 500ms) {
  auto m = c.receive(wait);
  EXPECT_FALSE(m.isOk()) << "unexpected message " << m->payloadString();
  if (!m) {
    EXPECT_EQ(m.status().code(), StatusCode::kTimeout);
  }
}

inline std::vector<int> indexes(const std::vector<Message>& ms) {
  std::vector<int> out;
  for (const auto& m : ms) out.push_back(indexOf(m));
  return out;
}

inline std::vector<int> range(int from, int to) {
  std::vector<int> out;
  for (int i = from; i < to; ++i) out.push_back(i);
  return out;
}

// One broker for the suite; each test uses its own topics.
// n consumers of subscription "sub" on t with config cc, named "<cc.consumerName><i>" when
// cc.consumerName is set; empty, with a failed expectation, when a subscribe fails.
inline std::vector<Consumer> subscribeN(Client& client, const std::string& t, ConsumerConfig cc,
                                        int n) {
  const std::string prefix = cc.consumerName;
  std::vector<Consumer> consumers;
  for (int i = 0; i < n; ++i) {
    if (!prefix.empty()) cc.consumerName = prefix + std::to_string(i);
    auto c = client.subscribe(t, "sub", cc);
    EXPECT_TRUE(c.isOk()) << c.status().toString();
    if (!c.isOk()) return {};
    consumers.push_back(*c);
  }
  return consumers;
}

class ClientIT : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!StandaloneBroker::binaryExists()) return;
    broker_ = new StandaloneBroker();
    *startStatus_ = broker_->start();
  }
  static void TearDownTestSuite() {
    delete broker_;
    broker_ = nullptr;
  }

  void SetUp() override {
    if (!StandaloneBroker::binaryExists()) {
      GTEST_SKIP() << "no broker binary at " << StandaloneBroker::binaryPath()
                   << " (build target magnetar or set MAGNETAR_BIN)";
    }
    ASSERT_TRUE(startStatus_->isOk()) << startStatus_->toString();
    Status alive = broker_->checkAlive();
    ASSERT_TRUE(alive.isOk()) << alive.toString();
    client_ = std::make_unique<Client>(broker_->serviceUrl(), testClientConfig());
    ASSERT_TRUE(client_->status().isOk());
  }

  void TearDown() override {
    if (client_) {
      EXPECT_TRUE(client_->close().isOk());
    }
    if (broker_) {
      Status alive = broker_->checkAlive();
      EXPECT_TRUE(alive.isOk()) << alive.toString();
    }
    if (HasFailure() && broker_) std::cerr << "--- broker log ---\n" << broker_->logTail();
  }

  static std::string topic(const std::string& name) {
    static std::atomic<int> n{0};
    return "persistent://public/default/" + name + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(n.fetch_add(1));
  }

  // A producer of t with producerConfig(false): unbatched, so each message is its own entry.
  Result<Producer> unbatchedProducer(const std::string& t) {
    return client_->createProducer(t, producerConfig(false));
  }

  static inline StandaloneBroker* broker_ = nullptr;
  static inline Status* startStatus_ = new Status();
  std::unique_ptr<Client> client_;
};

}  // namespace magnetar::client::it
