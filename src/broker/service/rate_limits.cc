// BrokerService's rate limits: the broker-wide limiters and the policy resolution behind each
// topic's publish, dispatch and subscribe limits (docs/rate-limits.md).
#include "base/clock.h"
#include "broker/service/broker_service.h"

namespace magnetar::broker {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

// A policy's JSON text from the topic's policies, else the namespace Policies' map field entry
// for this cluster.
std::optional<std::string> policyText(const TopicPolicies& topic, const char* topicPolicy,
                                      const NamespacePolicies& ns, const char* nsField,
                                      const std::string& cluster) {
  if (auto it = topic.find(topicPolicy); it != topic.end()) return it->second;
  if (auto it = ns.keptFields.find(nsField); it != ns.keptFields.end()) {
    return clusterEntry(it->second, cluster);
  }
  return std::nullopt;
}

}  // namespace

void BrokerService::resolveRateLimits(const std::string& policyKey, const NamespacePolicies& ns,
                                      TopicPolicyLimits* l) const {
  const TopicPolicies topic = policies_.topicPolicies(policyKey);
  const std::string& cluster = options_.clusterName;
  const BrokerDynamicOptions& d = options_.dynamic;
  // Pulsar's topicPolicies hierarchy: topic > namespace > broker (its update*BrokerValue calls).
  std::optional<PublishRate> publish;
  if (auto t = policyText(topic, "publishRate", ns, "publishMaxMessageRate", cluster)) {
    publish = parsePublishRate(*t);
  }
  l->publishRate = publish.value_or(PublishRate{d.maxPublishRatePerTopicInMessages.load(),
                                                d.maxPublishRatePerTopicInBytes.load()});
  const bool relative = d.dispatchThrottlingRateRelativeToPublishRate.load();
  std::optional<DispatchRate> dispatch;
  if (auto t = policyText(topic, "dispatchRate", ns, "topicDispatchRate", cluster)) {
    dispatch = parseDispatchRate(*t);
  }
  l->dispatchRate =
      dispatch.value_or(DispatchRate{d.dispatchThrottlingRatePerTopicInMsg.load(),
                                     d.dispatchThrottlingRatePerTopicInByte.load(), relative, 1});
  std::optional<DispatchRate> sub;
  if (auto t =
          policyText(topic, "subscriptionDispatchRate", ns, "subscriptionDispatchRate", cluster)) {
    sub = parseDispatchRate(*t);
  }
  l->subscriptionDispatchRate =
      sub.value_or(DispatchRate{d.dispatchThrottlingRatePerSubscriptionInMsg.load(),
                                d.dispatchThrottlingRatePerSubscriptionInByte.load(), relative, 1});
  std::optional<SubscribeRate> subscribe;
  if (auto t = policyText(topic, "subscribeRate", ns, "clusterSubscribeRate", cluster)) {
    subscribe = parseSubscribeRate(*t);
  }
  l->subscribeRate =
      subscribe.value_or(SubscribeRate{d.subscribeThrottlingRatePerConsumer.load(),
                                       d.subscribeRatePeriodPerConsumerInSecond.load()});
  l->resourceGroupPublish = nullptr;
  if (auto group = resourceGroupOf(ns)) {
    std::lock_guard<std::mutex> lock(groupLimitersMu_);
    if (auto it = groupLimiters_.find(*group); it != groupLimiters_.end()) {
      l->resourceGroupPublish = it->second.get();
    }
  }
}

void BrokerService::onResourceGroupChanged(const std::string& name) {
  std::optional<ResourceGroupQuota> quota;
  if (auto json = policies_.resourceGroup(name)) {
    quota = parseResourceGroupQuota(*json).value_or(ResourceGroupQuota{});
  }
  {
    std::lock_guard<std::mutex> lock(groupLimitersMu_);
    auto& limiter = groupLimiters_[name];
    if (!limiter) limiter = std::make_unique<MessageRateLimiter>();
    // Pulsar's ResourceGroupPublishLimiter.update builds new buckets: only on a change, so
    // re-applying the same quota (the store's watch after an admin call) keeps the balance.
    const ResourceGroupQuota q = quota.value_or(ResourceGroupQuota{});
    auto old = groupQuotas_.find(name);
    if (old == groupQuotas_.end() || !(old->second == q)) {
      limiter->configure(q.publishRateInMsgs, q.publishRateInBytes, kSecondNs, steadyNowNs());
      groupQuotas_[name] = q;
    }
  }
  // Topics of the namespaces naming it attach to (or, deleted, let go of) its limiter.
  reapplyPolicies([&](const TopicName& t) {
    return resourceGroupOf(policies_.namespacePolicies(t.namespaceName())) == name;
  });
}

void BrokerService::onRateSettingsChanged() {
  const BrokerDynamicOptions& d = options_.dynamic;
  {
    std::lock_guard<std::mutex> lock(rateSettingsMu_);
    const int64_t now = steadyNowNs();
    const auto& p = rateLimiters_.publish;
    const int64_t pubMsgs = d.brokerPublisherThrottlingMaxMessageRate.load();
    const int64_t pubBytes = d.brokerPublisherThrottlingMaxByteRate.load();
    // Rebuilt only when changed, so re-applying the same values keeps the balances.
    if (std::max<int64_t>(0, pubMsgs) != p.msgBucket().rate() ||
        std::max<int64_t>(0, pubBytes) != p.byteBucket().rate()) {
      rateLimiters_.publish.configure(pubMsgs, pubBytes, kSecondNs, now);
    }
    const auto& q = rateLimiters_.dispatch;
    const int64_t dMsgs = d.dispatchThrottlingRateInMsg.load();
    const int64_t dBytes = d.dispatchThrottlingRateInByte.load();
    if (std::max<int64_t>(0, dMsgs) != q.msgBucket().rate() ||
        std::max<int64_t>(0, dBytes) != q.byteBucket().rate()) {
      rateLimiters_.dispatch.configure(dMsgs, dBytes, kSecondNs, now);
    }
  }
  // The defaults behind the policies: every loaded topic resolves its limits again.
  reapplyPolicies([](const TopicName&) { return true; });
}

}  // namespace magnetar::broker
