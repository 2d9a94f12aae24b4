// Message expiry (Pulsar's PersistentMessageExpiryMonitor), for the message TTL check and the admin
// expire-messages calls: moves a subscription's mark-delete position past its expired entries and
// counts them in totalMsgExpired.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "broker/topic/topic.h"

namespace magnetar::broker {

// True when an entry published at publishTimeMs has expired at nowMs for a TTL of ttlSeconds
// (Pulsar's MessageImpl.isEntryExpired: now > publishTime + ttl).
inline bool isEntryExpired(uint64_t publishTimeMs, int64_t nowMs, int64_t ttlSeconds) {
  return nowMs > static_cast<int64_t>(publishTimeMs) + ttlSeconds * 1000;
}

// Expires every entry of `sub` published more than ttlSeconds before now: scans from the first
// entry after the mark-delete position while entries are expired and mark-deletes up to the last
// expired one. cb(status) on the topic's executor; kNotFound when the subscription is missing.
// Thread: the topic's executor.
void expireByTime(const std::shared_ptr<PersistentTopic>& topic, const std::string& sub,
                  int64_t ttlSeconds, std::function<void(Status)> cb);

// Expires the entries of `sub` up to and including `upTo` (clamped to the last entry).
// Thread: the topic's executor.
void expireUpTo(const std::shared_ptr<PersistentTopic>& topic, const std::string& sub,
                storage::Position upTo, const std::function<void(Status)>& cb);

}  // namespace magnetar::broker
