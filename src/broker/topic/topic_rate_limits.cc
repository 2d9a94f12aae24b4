// PersistentTopic's rate limits: publish, dispatch (topic and subscriptions) and subscribe
// (docs/rate-limits.md).
#include <algorithm>

#include "base/clock.h"
#include "base/dcheck.h"
#include "broker/topic/topic.h"

namespace magnetar::broker {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

// Subscribe windows are forgotten once this many are kept and theirs have ended.
constexpr size_t kSubscribeWindowsPruneAt = 1024;

}  // namespace

void PersistentTopic::setBrokerRateLimiters(BrokerRateLimiters* limiters) {
  brokerRates_ = limiters;
  for (auto& [n, sub] : subscriptions_) attachRateLimits(*sub);
}

void PersistentTopic::attachRateLimits(Subscription& sub) {
  sub.setDispatchRateLimiters(&dispatchRate_, brokerRates_ ? &brokerRates_->dispatch : nullptr,
                              &options_.dynamic.dispatchThrottlingOnNonBacklogConsumerEnabled);
  configureDispatchRate(sub.dispatchRateLimiter(), limits_.subscriptionDispatchRate);
}

void PersistentTopic::configureDispatchRate(MessageRateLimiter& l, const DispatchRate& r) {
  int64_t msgs = r.msgs;
  int64_t bytes = r.bytes;
  if (r.relativeToPublishRate) {  // PIP-52: the configured rate on top of the publish rate
    if (msgs > 0) msgs += static_cast<int64_t>(publishMsgRate_);
    if (bytes > 0) bytes += static_cast<int64_t>(publishByteRate_);
  }
  l.configure(msgs, bytes, std::max<int64_t>(1, r.ratePeriodInSecond) * kSecondNs, steadyNowNs());
}

void PersistentTopic::applyRateLimits(const TopicPolicyLimits& before) {
  MAGNETAR_DCHECK_ON(executor_);
  groupPublishRate_.store(limits_.resourceGroupPublish, std::memory_order_release);
  // Only a changed limit is rebuilt (full again, as Pulsar builds new buckets on an update):
  // other policy changes leave the balances alone.
  if (!(before.publishRate == limits_.publishRate)) {
    publishRate_->configure(limits_.publishRate.msgs, limits_.publishRate.bytes, kSecondNs,
                            steadyNowNs());
  }
  bool dispatchChanged = false;
  if (!(before.dispatchRate == limits_.dispatchRate)) {
    configureDispatchRate(dispatchRate_, limits_.dispatchRate);
    dispatchChanged = true;
  }
  if (!(before.subscriptionDispatchRate == limits_.subscriptionDispatchRate)) {
    for (auto& [n, sub] : subscriptions_) {
      configureDispatchRate(sub->dispatchRateLimiter(), limits_.subscriptionDispatchRate);
    }
    dispatchChanged = true;
  }
  if (dispatchChanged) {
    for (auto& [n, sub] : subscriptions_) sub->dispatchRateChanged();
  }
  if (!(before.subscribeRate == limits_.subscribeRate)) subscribeWindows_.clear();
}

void PersistentTopic::updatePublishRateForDispatch(double msgRateIn, double byteRateIn) {
  MAGNETAR_DCHECK_ON(executor_);
  publishMsgRate_ = msgRateIn;
  publishByteRate_ = byteRateIn;
  if (limits_.dispatchRate.relativeToPublishRate) {
    configureDispatchRate(dispatchRate_, limits_.dispatchRate);
  }
  if (limits_.subscriptionDispatchRate.relativeToPublishRate) {
    for (auto& [n, sub] : subscriptions_) {
      configureDispatchRate(sub->dispatchRateLimiter(), limits_.subscriptionDispatchRate);
    }
  }
}

bool PersistentTopic::trySubscribePermit(const std::string& peerAddress,
                                         const std::string& consumerName, uint64_t consumerId) {
  MAGNETAR_DCHECK_ON(executor_);
  const SubscribeRate& r = limits_.subscribeRate;
  if (r.perConsumer <= 0) return true;
  const int64_t now = steadyNowNs();
  const int64_t period = std::max<int32_t>(1, r.ratePeriodInSecond) * kSecondNs;
  if (subscribeWindows_.size() >= kSubscribeWindowsPruneAt) {
    std::erase_if(subscribeWindows_,
                  [&](const auto& kv) { return now - kv.second.startNs >= period; });
  }
  // Pulsar's ConsumerIdentifier: the client's host (its address up to the port), the
  // consumer's name and id; a reconnecting consumer keeps all three.
  const size_t colon = peerAddress.rfind(':');
  std::string host = colon == std::string::npos ? peerAddress : peerAddress.substr(0, colon);
  SubscribeWindow& w = subscribeWindows_[{std::move(host), consumerName, consumerId}];
  if (w.count == 0 || now - w.startNs >= period) {
    w.startNs = now;
    w.count = 0;
  }
  if (w.count >= r.perConsumer) return false;
  ++w.count;
  return true;
}

}  // namespace magnetar::broker
