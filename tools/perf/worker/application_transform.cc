// Application, role kTransform: consume-transform-produce with or without transactions (issue 45;
// scenario iot-telemetry-txn). One loop thread per consumer: receive a batch of up to txnBatch
// inputs, then in one transaction send one derived message per input to the output topic and ack
// the inputs, and commit (Pulsar's consume-transform-produce pattern); without transactions, send,
// flush the producer, then ack (at least once). The loop of txn-ab (tools/perf/txn_ab).
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "application.h"
#include "gateway_fleet.h"
#include "payload.h"

namespace magnetar::perf {

using namespace std::chrono_literals;

Status Application::startTransform() {
  client::ProducerConfig pc;
  pc.blockIfQueueFull = true;
  pc.batchingEnabled = config_.batching;
  pc.batchingMaxPublishDelay = std::chrono::milliseconds(config_.batchingMaxPublishDelayMs);
  pc.maxPendingMessages = static_cast<int>(std::max<uint32_t>(1000, 2 * config_.txnBatch));
  pc.sendTimeout = std::chrono::milliseconds(config_.sendTimeoutMs);
  for (auto& pod : pods_) {
    for (uint32_t t = 0; t < config_.topics; ++t) {
      auto p = client_->createProducer(config_.outputTopic(index_, t), pc);
      if (!p) {
        return Status::error(p.status().code(), fmt::format("{}: output producer: {}", pod->name,
                                                            p.status().message()));
      }
      pod->producers.push_back(*p);
    }
  }
  for (auto& pod : pods_) {
    for (uint32_t t = 0; t < config_.topics; ++t) {
      loops_.emplace_back([this, raw = pod.get(), t] { transformLoop(*raw, t); });
    }
  }
  return Status::ok();
}

void Application::transformLoop(Pod& pod, uint32_t topic) {
  // Which transactions are aborted on purpose: a fixed sequence per loop (seed, application,
  // pod's consumer), so runs with the same seed abort the same batches.
  std::mt19937_64 rng(config_.seed * 1000003 + std::hash<std::string>{}(pod.name) + topic);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<client::Message> batch;
  batch.reserve(config_.txnBatch);
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (!fillBatch(pod, topic, &batch)) continue;
    bool abortFirst = config_.txnAbortFraction > 0 && coin(rng) < config_.txnAbortFraction;
    const uint64_t start = monotonicNs();
    Status s = abortFirst ? transformBatch(pod, topic, batch, true) : Status::ok();
    if (s.isOk()) s = transformBatch(pod, topic, batch, false);
    if (!s.isOk()) {
      fail(fmt::format("{} topic {}: {}", pod.name, topic, s.toString()));
      return;
    }
    batchUs_.record((monotonicNs() - start) / 1000);
  }
}

// Receives up to txnBatch new inputs: waits up to 100 ms for the first (then checks stopping_),
// up to txnBatchWaitMs from the first for the rest. Duplicates (redeliveries of inputs already
// transformed) are not transformed again; without transactions they are acked again.
bool Application::fillBatch(Pod& pod, uint32_t topic, std::vector<client::Message>* batch) {
  client::Consumer& consumer = pod.consumers[topic];
  batch->clear();
  uint64_t deadline = 0;
  while (batch->size() < config_.txnBatch) {
    auto wait = 100ms;
    if (deadline != 0) {
      uint64_t now = monotonicNs();
      if (now >= deadline) break;
      wait = std::chrono::milliseconds((deadline - now) / 1000000 + 1);
    }
    auto m = consumer.receive(wait);
    if (!m) break;
    Delivery d;
    if (!track(pod, *m, &d) || d == Delivery::kDuplicate) {
      if (!config_.transactions) (void)consumer.acknowledge(*m);
      continue;
    }
    if (deadline == 0) deadline = monotonicNs() + config_.txnBatchWaitMs * 1000000ull;
    batch->push_back(std::move(*m));
  }
  return !batch->empty();
}

// One attempt at a batch: the derived messages (kFlagDerived, kFlagAborted too when abort) and
// the acks in one transaction, then commit (or abort when abort); without transactions the sends,
// a flush, then the acks.
Status Application::transformBatch(Pod& pod, uint32_t topic,
                                   const std::vector<client::Message>& batch, bool abort) {
  client::Consumer& consumer = pod.consumers[topic];
  client::Producer& out = pod.producers[topic];
  client::Transaction txn;
  if (config_.transactions) {
    auto t = client_->newTransaction(std::chrono::milliseconds(config_.txnTimeoutMs));
    if (!t) return t.status();
    txn = *t;
  }
  auto sendFailed = std::make_shared<std::atomic<int>>(0);
  std::string buf;
  for (const auto& m : batch) {
    buf.assign(m.payload());
    uint32_t flags = 0;
    std::memcpy(&flags, buf.data() + 12, 4);
    setFlags(buf.data(), flags | kFlagDerived | (abort ? kFlagAborted : 0));
    client::OutgoingMessage om{.payload = buf, .key = m.key()};
    if (txn) om.txn = &txn;
    out.sendAsync(om, [sendFailed](const Status& s, const client::MessageId&) {
      if (!s.isOk()) sendFailed->fetch_add(1);
    });
    if (txn) consumer.acknowledgeAsync(m.messageId(), txn, [](const Status&) {});
  }
  if (txn) {
    if (abort) {
      aborted_.fetch_add(1, std::memory_order_relaxed);
      return txn.abort();
    }
    Status s = txn.commit();
    if (s.isOk()) committed_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  Status s = out.flush();
  if (s.isOk() && sendFailed->load() > 0) {
    s = Status::internal(fmt::format("{} sends failed", sendFailed->load()));
  }
  if (!s.isOk()) return s;
  for (const auto& m : batch) (void)consumer.acknowledge(m);
  committed_.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

}  // namespace magnetar::perf
