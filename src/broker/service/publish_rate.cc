// ServerCnx's publish rate limits (Pulsar's PublishRateLimiterImpl and the connection's
// throttling): docs/rate-limits.md.
#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/dcheck.h"
#include "broker/service/broker_service.h"
#include "broker/service/server_cnx.h"

namespace magnetar::broker {

void ServerCnx::checkPublishRate(const std::shared_ptr<PersistentTopic>& topic, int64_t msgs,
                                 int64_t bytes) {
  MAGNETAR_DCHECK_ON(loop());
  const int64_t now = steadyNowNs();
  MessageRateLimiter& topicLimiter = topic->publishRateLimiter();
  MessageRateLimiter& brokerLimiter = service_.rateLimiters().publish;
  bool paused = false;
  auto pauseOn = [&](const std::shared_ptr<PersistentTopic>& t, MessageRateLimiter* l) {
    paused = true;
    for (const auto& entry : rateThrottledBy_) {
      if (entry.second == l) return;  // SENDs of one read batch: listed once
    }
    rateThrottledBy_.emplace_back(t, l);
  };
  // Tokens are taken whatever happens (the SEND was read); a limiter left without any pauses
  // this connection, as Pulsar's producer.incrementThrottleCount.
  if (topicLimiter.enabled() && topicLimiter.consume(msgs, bytes, now)) {
    pauseOn(topic, &topicLimiter);
  }
  if (brokerLimiter.enabled() && brokerLimiter.consume(msgs, bytes, now)) {
    pauseOn(nullptr, &brokerLimiter);
  }
  // The namespace's resource group (Pulsar's ResourceGroupPublishLimiter, one of the topic's
  // publish limiters): shared by the group's topics on this broker, owned by BrokerService.
  MessageRateLimiter* group = topic->resourceGroupPublishLimiter();
  if (group && group->enabled() && group->consume(msgs, bytes, now)) pauseOn(nullptr, group);
  if (!paused) return;
  topic->countPublishRateLimited();
  if (rateThrottled_) return;  // the timer is armed
  rateThrottled_ = true;
  updateReadState();
  armPublishRateTimer(now);
}

void ServerCnx::armPublishRateTimer(int64_t nowNs) {
  int64_t waitNs = 0;
  for (auto& [topic, limiter] : rateThrottledBy_) {
    waitNs = std::max(waitNs, limiter->throttleNanos(nowNs));
  }
  // At least 1 ms (a limiter removed meanwhile answers 0), at most 1 s (then checked again).
  waitNs = std::clamp<int64_t>(waitNs, 1'000'000, 1'000'000'000);
  publishRateTimer_.expires_after(std::chrono::nanoseconds(waitNs));
  publishRateTimer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    auto self = std::static_pointer_cast<ServerCnx>(weak.lock());
    if (self && !self->isClosed()) self->onPublishRateTimer();
  });
}

void ServerCnx::onPublishRateTimer() {
  MAGNETAR_DCHECK_ON(loop());
  const int64_t now = steadyNowNs();
  // Pulsar's unthrottleQueuedProducers: resume once every limiter that paused has tokens.
  std::erase_if(rateThrottledBy_, [&](const auto& entry) { return entry.second->hasTokens(now); });
  if (!rateThrottledBy_.empty()) {
    armPublishRateTimer(now);
    return;
  }
  rateThrottled_ = false;
  updateReadState();
}

}  // namespace magnetar::broker
