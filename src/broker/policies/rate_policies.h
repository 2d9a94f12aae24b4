// The rate-limit policies of Pulsar's admin API (PublishRate, DispatchRateImpl, SubscribeRate)
// read from the JSON the admin routes stored: topic policies publishRate, dispatchRate,
// subscriptionDispatchRate, subscribeRate; the namespace Policies' per-cluster maps
// publishMaxMessageRate, topicDispatchRate, subscriptionDispatchRate, clusterSubscribeRate; and
// a resource group's ResourceGroup. docs/rate-limits.md.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_POLICIES)
#error "broker/policies is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <optional>
#include <string>

namespace magnetar::broker {

// Pulsar's PublishRate: per second; <= 0 (Pulsar's -1) is no limit.
struct PublishRate {
  int64_t msgs = -1;   // publishThrottlingRateInMsg
  int64_t bytes = -1;  // publishThrottlingRateInByte
  bool operator==(const PublishRate&) const = default;
};

// Pulsar's DispatchRateImpl: per ratePeriodInSecond; <= 0 is no limit. relativeToPublishRate:
// the limit is the configured rate plus the topic's publish rate (PIP-52).
struct DispatchRate {
  int64_t msgs = -1;   // dispatchThrottlingRateInMsg
  int64_t bytes = -1;  // dispatchThrottlingRateInByte
  bool relativeToPublishRate = false;
  int32_t ratePeriodInSecond = 1;
  bool operator==(const DispatchRate&) const = default;
};

// Pulsar's SubscribeRate: SUBSCRIBEs per consumer per ratePeriodInSecond; <= 0 is no limit.
struct SubscribeRate {
  int32_t perConsumer = -1;  // subscribeThrottlingRatePerConsumer
  int32_t ratePeriodInSecond = 30;
  bool operator==(const SubscribeRate&) const = default;
};

// Pulsar's ResourceGroup (/admin/resourcegroups/{name}): per second, for every topic of the
// namespaces attached to the group on one broker together; <= 0 (Pulsar's -1) is no limit.
// Pulsar 4.2 enforces the publish quota only (docs/rate-limits.md).
struct ResourceGroupQuota {
  int64_t publishRateInMsgs = -1;
  int64_t publishRateInBytes = -1;
  int64_t dispatchRateInMsgs = -1;
  int64_t dispatchRateInBytes = -1;
  bool operator==(const ResourceGroupQuota&) const = default;
};

// Parse the JSON object text of each (fields missing: Pulsar's defaults); nullopt when the text
// is not an object. Thread: any.
std::optional<PublishRate> parsePublishRate(const std::string& json);
std::optional<DispatchRate> parseDispatchRate(const std::string& json);
std::optional<SubscribeRate> parseSubscribeRate(const std::string& json);
std::optional<ResourceGroupQuota> parseResourceGroupQuota(const std::string& json);
// The entry for `cluster` of a Policies map field kept as JSON text (cluster -> object); nullopt
// when absent.
std::optional<std::string> clusterEntry(const std::string& mapJson, const std::string& cluster);

}  // namespace magnetar::broker
