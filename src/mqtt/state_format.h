// The records of MQTT's durable state in the broker's metadata store (docs/mqtt-format.md): a
// persistent session's subscriptions and expiry, a topic's retained message; and the small pure
// rules of session state (topic aliases, retain handling, will delay). No I/O. Thread: stateless.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mqtt/codec.h"

namespace magnetar::mqtt {

// Metadata-store paths (docs/mqtt-format.md). A client id or topic becomes one path component:
// Java's URLEncoder form (topic_mapping.h urlEncode) with '.' also as %2E, so "." and ".." (which
// ZooKeeper refuses) cannot occur.
inline constexpr std::string_view kSessionsRoot = "/mqtt/sessions";
inline constexpr std::string_view kRetainedRoot = "/mqtt/retained";
std::string storePathComponent(std::string_view s);
// The inverse of storePathComponent. kInvalidArgument on a bad escape.
Result<std::string> fromStorePathComponent(std::string_view s);

// Session expiry of "never" (MQTT 5 0xFFFFFFFF; every 3.1.1 clean-session-0 session).
inline constexpr uint32_t kSessionNeverExpires = 0xFFFFFFFFu;

// A will waiting for its Will Delay Interval after its connection ended (MQTT 5 3.1.3.2.2).
struct PendingWill {
  Will will;
  int64_t dueMs = 0;  // wall clock (ms since the epoch) when it is published
  bool operator==(const PendingWill&) const = default;
};

// A persistent session (clean session 0 / MQTT 5 session expiry > 0) as stored.
struct StoredSession {
  std::vector<SubscriptionRequest> filters;       // the granted filters (qos 0..2)
  uint32_t expirySeconds = kSessionNeverExpires;  // after the connection ends
  int64_t disconnectedAtMs = 0;  // wall clock of the end of its last connection; 0: connected
  // QoS 2 PUBLISHes stored and PUBRECed whose PUBREL has not come yet (MQTT 4.3.3): a PUBLISH
  // with one of these packet ids is a duplicate, answered PUBREC and not stored again.
  std::vector<uint16_t> qos2Received;
  std::optional<PendingWill> will;  // the will waiting for its delay, if any
  bool operator==(const StoredSession&) const = default;
};
// JSON (docs/mqtt-format.md). decodeSession: kCorruption when it does not parse or a field has
// the wrong type or range.
std::string encodeSession(const StoredSession& s);
Result<StoredSession> decodeSession(std::string_view json);
// Whether a disconnected session has expired at `nowMs` (a connected one never has).
bool sessionExpired(const StoredSession& s, int64_t nowMs);

// A retained message as stored (also a pending will's message): the PUBLISH's topic, QoS, payload,
// and its MQTT 5 properties as the Pulsar properties message_mapping.h gives them (the expiry
// interval as an absolute time).
struct RetainedMessage {
  std::string topic;
  uint8_t qos = 0;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> pulsarProperties;
  bool operator==(const RetainedMessage&) const = default;
};
// `nowSeconds`: epoch seconds, for the message expiry interval.
RetainedMessage retainedOf(const Publish& p, int64_t nowSeconds);
// JSON, payload in base64. decodeRetained: kCorruption as decodeSession.
std::string encodeRetained(const RetainedMessage& r);
Result<RetainedMessage> decodeRetained(std::string_view json);

// MQTT 5 topic aliases a client sets on its PUBLISHes (3.3.2.3.4). Resolves p's topic in place:
// an alias with a topic name (re)binds it, an alias alone takes the bound name. Errors (the
// reason code the DISCONNECT carries): reason::kTopicAliasInvalid (0x94) for alias 0 or over
// `maximum`; reason::kProtocolError (0x82) for an alias not bound yet. 0: resolved.
uint8_t resolveTopicAlias(Publish* p, uint16_t maximum, std::map<uint16_t, std::string>* aliases,
                          std::string* why);

// MQTT 5 3.3.1.3 Retain Handling: whether a SUBSCRIBE sends the retained messages its filter
// matches (0: always; 1: only when the subscription did not exist; 2: never).
bool sendsRetained(uint8_t retainHandling, bool subscriptionExisted);

// Seconds from the end of a connection to its will's publication (MQTT 5 3.1.3.2.2): the Will
// Delay Interval, cut to the session's end (0 for a session that ends with the connection).
uint32_t willDelaySeconds(const Will& w, bool persistentSession, uint32_t sessionExpirySeconds);

}  // namespace magnetar::mqtt
