// magnetar-client: produce and consume messages from a shell, like Pulsar's `pulsar-client`.
//   magnetar-client produce -m TEXT [-m TEXT...] -n N [-k KEY] [-r RATE] [--service-url URL] TOPIC
//   magnetar-client consume -s SUB [-t TYPE] [-n N] [-p Earliest|Latest] [--service-url URL] TOPIC
// Exit status: 0 on success, 1 on a runtime error, 2 on bad usage.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "base/logging.h"
#include "client/client.h"

namespace magnetar::client {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

struct ProduceOptions {
  std::string serviceUrl = "pulsar://localhost:6650";
  std::string topic;
  std::vector<std::string> messages;
  int count = 1;
  std::string key;
  double rate = 0;  // messages/s, 0 = as fast as possible
  bool batching = false;
};

struct ConsumeOptions {
  std::string serviceUrl = "pulsar://localhost:6650";
  std::string topic;
  std::string subscription;
  std::string type = "Exclusive";
  std::string position = "Latest";
  int count = 1;  // 0 = until interrupted
};

int fail(const std::string& what, const Status& s) {
  std::cerr << "magnetar-client: " << what << ": " << s.toString() << "\n";
  return kExitError;
}

int produce(const ProduceOptions& o) {
  Client client(o.serviceUrl);
  if (!client.status().isOk()) return fail("bad service URL", client.status());
  ProducerConfig config;
  config.batchingEnabled = o.batching;
  config.blockIfQueueFull = true;
  auto producer = client.createProducer(o.topic, config);
  if (!producer) return fail("cannot create a producer on " + o.topic, producer.status());

  std::mutex mu;
  Status firstError;
  std::atomic<uint64_t> ok{0};
  auto start = std::chrono::steady_clock::now();
  uint64_t sent = 0;
  for (int i = 0; i < o.count; ++i) {
    for (const auto& text : o.messages) {
      if (o.rate > 0) {
        auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(sent) / o.rate));
        std::this_thread::sleep_until(due);
      }
      producer->sendAsync(OutgoingMessage{.payload = text, .key = o.key},
                          [&](const Status& s, const MessageId&) {
                            if (s.isOk()) {
                              ok.fetch_add(1);
                              return;
                            }
                            std::lock_guard<std::mutex> lock(mu);
                            if (firstError.isOk()) firstError = s;
                          });
      ++sent;
    }
  }
  Status flushed = producer->flush();
  Status closed = producer->close();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!firstError.isOk()) {
      std::cerr << ok.load() << " messages successfully produced\n";
      return fail("send failed", firstError);
    }
  }
  if (!flushed.isOk()) return fail("flush failed", flushed);
  if (!closed.isOk()) return fail("close failed", closed);
  std::cout << ok.load() << " messages successfully produced\n";
  return 0;
}

std::string describe(const Message& m) {
  std::string out = "key:[" + (m.hasKey() ? m.key() : std::string("null")) + "], properties:[";
  bool first = true;
  for (const auto& [k, v] : m.properties()) {
    if (!first) out += ", ";
    first = false;
    out += k + "=" + v;
  }
  out += "], content:";
  out += m.payload();
  return out;
}

int consume(const ConsumeOptions& o) {
  Client client(o.serviceUrl);
  if (!client.status().isOk()) return fail("bad service URL", client.status());
  ConsumerConfig config;
  if (o.type == "Shared") {
    config.subscriptionType = SubscriptionType::kShared;
  } else if (o.type == "Failover") {
    config.subscriptionType = SubscriptionType::kFailover;
  } else if (o.type == "Key_Shared") {
    config.subscriptionType = SubscriptionType::kKeyShared;
  }
  config.initialPosition =
      o.position == "Earliest" ? InitialPosition::kEarliest : InitialPosition::kLatest;
  auto consumer = client.subscribe(o.topic, o.subscription, config);
  if (!consumer) return fail("cannot subscribe to " + o.topic, consumer.status());
  int received = 0;
  while (o.count == 0 || received < o.count) {
    auto m = consumer->receive(std::chrono::milliseconds(-1));
    if (!m) return fail("receive failed", m.status());
    std::cout << "----- got message -----\n" << describe(*m) << "\n" << std::flush;
    Status s = consumer->acknowledge(*m);
    if (!s.isOk()) return fail("acknowledge failed", s);
    ++received;
  }
  Status s = consumer->close();
  if (!s.isOk()) return fail("close failed", s);
  std::cout << received << " messages successfully consumed\n";
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"Produce and consume messages (Pulsar binary protocol)", "magnetar-client"};
  app.require_subcommand(1);
  std::string logLevel = "warn";
  app.add_option("--log-level", logLevel, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  ProduceOptions po;
  auto* prod = app.add_subcommand("produce", "Produce messages to a topic");
  prod->add_option("--service-url,--url", po.serviceUrl, "Broker URL, pulsar://host:port");
  prod->add_option("-m,--messages", po.messages, "Message text; repeatable")->required();
  prod->add_option("-n,--num-produce", po.count, "Times to send each message")
      ->check(CLI::PositiveNumber);
  prod->add_option("-k,--key", po.key, "Partition key of every message");
  prod->add_option("-r,--rate", po.rate, "Messages per second (0: as fast as possible)")
      ->check(CLI::NonNegativeNumber);
  prod->add_flag("-b,--batching", po.batching, "Batch messages (key-based batching)");
  prod->add_option("topic", po.topic, "Topic name")->required();

  ConsumeOptions co;
  auto* cons = app.add_subcommand("consume", "Consume messages from a topic");
  cons->add_option("--service-url,--url", co.serviceUrl, "Broker URL, pulsar://host:port");
  cons->add_option("-s,--subscription-name", co.subscription, "Subscription name")->required();
  cons->add_option("-t,--subscription-type", co.type, "Subscription type")
      ->check(CLI::IsMember({"Exclusive", "Shared", "Failover", "Key_Shared"}));
  cons->add_option("-p,--subscription-position", co.position, "Initial position")
      ->check(CLI::IsMember({"Earliest", "Latest"}));
  cons->add_option("-n,--num-messages", co.count, "Messages to consume (0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
  cons->add_option("topic", co.topic, "Topic name")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  initLogging(logLevel);
  if (prod->parsed()) return produce(po);
  return consume(co);
}

}  // namespace
}  // namespace magnetar::client

int main(int argc, char** argv) { return magnetar::client::run(argc, argv); }
