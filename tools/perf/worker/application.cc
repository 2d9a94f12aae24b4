#include "application.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>

#include "gateway_fleet.h"
#include "payload.h"

namespace magnetar::perf {

Application::Application(const WorkloadConfig& config, uint32_t index, AppRole role)
    : config_(config),
      index_(index),
      name_(config.subscriptionPrefix + std::to_string(index)),
      joinSeconds_(config.joinOf(index)),
      role_(role),
      tracker_(config.devices) {}

Application::~Application() { close(); }

Status Application::createSubscriptions(const std::vector<uint32_t>& produced) {
  client::ClientConfig cc;
  cc.ioThreadPrefix = fmt::format("app{}-init", index_);
  cc.tlsTrustCertsFilePath = config_.tlsTrustCertsFilePath;
  client::Client setup(config_.serviceUrl, cc);
  if (!setup.status().isOk()) return setup.status();
  for (uint32_t t = 0; t < config_.topics; ++t) {
    client::ConsumerConfig c;
    c.subscriptionType = client::SubscriptionType::kKeyShared;
    c.consumerName = name_ + "-init";
    auto consumer = setup.subscribe(config_.topicPrefix + std::to_string(t), name_, c);
    if (!consumer) {
      return Status::error(consumer.status().code(),
                           fmt::format("{}: subscribe: {}", name_, consumer.status().message()));
    }
    Status s = consumer->close();
    if (!s.isOk()) return s;
  }
  tracker_.startAt(produced);
  return setup.close();
}

Status Application::join() {
  joinStartNs_ = monotonicNs();
  client::ClientConfig cc;
  cc.ioThreads = config_.consumerIoThreads;
  cc.ioThreadPrefix = fmt::format("app{}{}-io", role_ == AppRole::kVerify ? "check" : "", index_);
  cc.tlsTrustCertsFilePath = config_.tlsTrustCertsFilePath;
  cc.connectionsPerBroker = static_cast<int>(config_.pods);
  cc.operationTimeout = std::chrono::milliseconds(60000);
  cc.enableTransaction = role_ == AppRole::kTransform && config_.transactions;
  client_ = std::make_unique<client::Client>(config_.serviceUrl, cc);
  if (!client_->status().isOk()) return client_->status();
  for (uint32_t p = 0; p < config_.pods; ++p) {
    auto pod = std::make_unique<Pod>();
    pod->app = this;
    pod->name = fmt::format("{}-pod-{}", name_, p);
    pods_.push_back(std::move(pod));
  }
  // Every pod subscribes every topic at once, as a pod's multi-topic consumer does (one topic at
  // a time made a late joiner's 30 subscribes wait on its first topics' backlog: up to 5 s of
  // round trips). Each of the P connections carries T consumers, as before.
  Status s = subscribeAll();
  if (!s.isOk()) return s;
  if (role_ == AppRole::kTransform) {
    Status s = startTransform();
    if (!s.isOk()) return s;
  }
  joinNs_ = monotonicNs();
  return Status::ok();
}

Status Application::subscribeAll() {
  std::mutex mu;
  std::condition_variable cv;
  size_t left = static_cast<size_t>(config_.pods) * config_.topics;
  Status first = Status::ok();
  for (auto& pod : pods_) pod->consumers.resize(config_.topics);
  for (uint32_t t = 0; t < config_.topics; ++t) {
    for (auto& pod : pods_) {
      client::ConsumerConfig c;
      c.subscriptionType = client::SubscriptionType::kKeyShared;
      c.consumerName = pod->name;
      c.receiverQueueSize = static_cast<int>(config_.receiverQueueSize);
      Pod* raw = pod.get();
      if (role_ != AppRole::kTransform) {  // the transform loops receive() instead
        c.messageListener = [raw](client::Consumer& consumer, const client::Message& m) {
          raw->app->onMessage(*raw, consumer, m);
        };
      }
      client_->subscribeAsync(
          config_.topicPrefix + std::to_string(t), name_, c,
          [&, raw, t](Result<client::Consumer> consumer) {
            std::lock_guard<std::mutex> lock(mu);
            if (consumer) {
              raw->consumers[t] = *consumer;
            } else if (first.isOk()) {
              first = Status::error(
                  consumer.status().code(),
                  fmt::format("{} on topic {}: {}", raw->name, t, consumer.status().message()));
            }
            if (--left == 0) cv.notify_all();
          });
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return left == 0; });
  return first;
}

bool Application::track(const Pod& pod, const client::Message& m, Delivery* d) {
  const uint64_t now = monotonicNs();
  TelemetryRecord r;
  if (!decodePayload(m.payload(), m.key(), config_.payloadBytes, config_.devices, &r,
                     /*keyless=*/config_.gatewayProtocol == "mqtt")) {
    tracker_.invalid();
    std::lock_guard<std::mutex> lock(invalidMu_);
    if (invalidSamples_.size() < 100) {
      invalidSamples_.push_back(fmt::format("{} {} payload={}B key={}B", pod.name,
                                            m.messageId().toString(), m.payload().size(),
                                            m.key().size()));
    }
    return false;
  }
  // A verifier tracks only derived outputs of committed transactions (OutputCheck::record).
  bool tracked = true;
  if (role_ == AppRole::kVerify) {
    tracked = (r.flags & kFlagAborted) == 0 && (r.flags & kFlagDerived) != 0;
    *d = output_.record(r, pod.name.c_str());
  } else {
    *d = tracker_.deliver(r.device, r.counter, pod.name.c_str());
  }
  if (tracked && *d != Delivery::kDuplicate) {
    lastUniqueNs_.store(now, std::memory_order_relaxed);
    if (!r.warmup) {
      e2eUs_.record(now > r.sendTimeNs ? (now - r.sendTimeNs) / 1000 : 0);
      measured_.fetch_add(1, std::memory_order_relaxed);
    }
    if (tracker_.unique() >= target_.load(std::memory_order_relaxed) &&
        targetNs_.load(std::memory_order_relaxed) == 0) {
      uint64_t zero = 0;
      targetNs_.compare_exchange_strong(zero, now);
    }
  }
  return true;
}

void Application::onMessage(Pod& pod, client::Consumer& consumer, const client::Message& m) {
  Delivery d;
  (void)track(pod, m, &d);
  (void)consumer.acknowledge(m);
}

void Application::setTarget(uint64_t uniqueTarget) {
  target_.store(uniqueTarget);
  if (tracker_.unique() >= uniqueTarget) {
    uint64_t zero = 0;
    targetNs_.compare_exchange_strong(zero, std::max<uint64_t>(lastUniqueNs_.load(), 1));
  }
}

uint64_t Application::permitViolations() const {
  uint64_t n = 0;
  for (const auto& pod : pods_) {
    for (const auto& c : pod->consumers) n += c.stats().permitViolations;
  }
  return n;
}

std::vector<std::string> Application::invalidSamples() const {
  std::lock_guard<std::mutex> lock(invalidMu_);
  return invalidSamples_;
}

TransformCounts Application::transformCounts() const {
  return TransformCounts{committed_.load(), aborted_.load()};
}

std::string Application::failure() const {
  std::lock_guard<std::mutex> lock(invalidMu_);
  return failure_;
}

void Application::fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(invalidMu_);
  if (failure_.empty()) failure_ = what;
}

void Application::close() {
  if (closed_) return;
  closed_ = true;
  stopping_ = true;
  for (auto& t : loops_) t.join();
  for (auto& pod : pods_) {
    for (auto& p : pod->producers) (void)p.close();
  }
  for (auto& pod : pods_) {
    for (auto& c : pod->consumers) (void)c.close();
  }
  if (client_) (void)client_->close();
}

}  // namespace magnetar::perf
