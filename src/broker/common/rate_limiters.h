// The broker-wide rate limiters (docs/rate-limits.md): brokerPublisherThrottlingMaxMessageRate /
// MaxByteRate over every topic's publishes, dispatchThrottlingRateInMsg / InByte over every
// subscription's dispatch. One per broker, configured by BrokerService from the dynamic
// settings; topics and connections hold a pointer (the broker outlives them). Thread: any.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include "base/token_bucket.h"

namespace magnetar::broker {

struct BrokerRateLimiters {
  MessageRateLimiter publish;
  MessageRateLimiter dispatch;
};

}  // namespace magnetar::broker
