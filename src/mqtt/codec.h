// The MQTT 3.1.1 and 5.0 packet codec: fixed header, remaining length, every control packet and
// MQTT 5 properties. No I/O; depends on src/base only. Byte layouts: OASIS MQTT Version 3.1.1
// (2014) and MQTT Version 5.0 (2019), chapters 2 and 3. Thread: all functions are stateless.
//
// Decode errors are Status codes with a message naming the packet and field:
//   kCorruption      a malformed packet (MQTT 5 reason 0x81): truncated or trailing bytes, bad
//                    fixed-header flags, a remaining length over 4 bytes, bad UTF-8, a property
//                    not allowed in the packet or repeated, QoS 3;
//   kInvalidArgument a protocol error (reason 0x82): packet id 0 where one is needed, an empty
//                    SUBSCRIBE, a PUBLISH topic with wildcards, a property value out of range;
//   kTooLarge        a packet over the receiver's maximum packet size (reason 0x95);
//   kUnsupported     a CONNECT of another protocol name or level (3.1.1: return code 0x01,
//                    5.0: reason 0x84).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"

namespace magnetar::mqtt {

// Control packet types (the fixed header's high nibble). Never renumber: wire values.
enum class PacketType : uint8_t {
  kConnect = 1,
  kConnack = 2,
  kPublish = 3,
  kPuback = 4,
  kPubrec = 5,
  kPubrel = 6,
  kPubcomp = 7,
  kSubscribe = 8,
  kSuback = 9,
  kUnsubscribe = 10,
  kUnsuback = 11,
  kPingreq = 12,
  kPingresp = 13,
  kDisconnect = 14,
  kAuth = 15,  // MQTT 5 only
};
const char* packetTypeName(PacketType t);

// The CONNECT protocol level. Wire values.
enum class ProtocolVersion : uint8_t { kV311 = 4, kV5 = 5 };

// MQTT 5 property identifiers (spec 2.2.2.2). Wire values.
enum class PropertyId : uint8_t {
  kPayloadFormatIndicator = 0x01,
  kMessageExpiryInterval = 0x02,
  kContentType = 0x03,
  kResponseTopic = 0x08,
  kCorrelationData = 0x09,
  kSubscriptionIdentifier = 0x0B,
  kSessionExpiryInterval = 0x11,
  kAssignedClientIdentifier = 0x12,
  kServerKeepAlive = 0x13,
  kAuthenticationMethod = 0x15,
  kAuthenticationData = 0x16,
  kRequestProblemInformation = 0x17,
  kWillDelayInterval = 0x18,
  kRequestResponseInformation = 0x19,
  kResponseInformation = 0x1A,
  kServerReference = 0x1C,
  kReasonString = 0x1F,
  kReceiveMaximum = 0x21,
  kTopicAliasMaximum = 0x22,
  kTopicAlias = 0x23,
  kMaximumQos = 0x24,
  kRetainAvailable = 0x25,
  kUserProperty = 0x26,
  kMaximumPacketSize = 0x27,
  kWildcardSubscriptionAvailable = 0x28,
  kSubscriptionIdentifierAvailable = 0x29,
  kSharedSubscriptionAvailable = 0x2A,
};

// MQTT 5 reason codes the broker sends (spec 2.4). Wire values.
namespace reason {
inline constexpr uint8_t kSuccess = 0x00;
inline constexpr uint8_t kGrantedQos1 = 0x01;
inline constexpr uint8_t kGrantedQos2 = 0x02;
inline constexpr uint8_t kNoSubscriptionExisted = 0x11;
inline constexpr uint8_t kUnspecifiedError = 0x80;
inline constexpr uint8_t kMalformedPacket = 0x81;
inline constexpr uint8_t kProtocolError = 0x82;
inline constexpr uint8_t kImplementationSpecificError = 0x83;
inline constexpr uint8_t kUnsupportedProtocolVersion = 0x84;
inline constexpr uint8_t kClientIdentifierNotValid = 0x85;
inline constexpr uint8_t kBadUserNameOrPassword = 0x86;
inline constexpr uint8_t kNotAuthorized = 0x87;
inline constexpr uint8_t kServerUnavailable = 0x88;
inline constexpr uint8_t kServerBusy = 0x89;
inline constexpr uint8_t kBadAuthenticationMethod = 0x8C;
inline constexpr uint8_t kKeepAliveTimeout = 0x8D;
inline constexpr uint8_t kSessionTakenOver = 0x8E;
inline constexpr uint8_t kTopicFilterInvalid = 0x8F;
inline constexpr uint8_t kTopicNameInvalid = 0x90;
inline constexpr uint8_t kPacketIdentifierNotFound = 0x92;
inline constexpr uint8_t kReceiveMaximumExceeded = 0x93;
inline constexpr uint8_t kTopicAliasInvalid = 0x94;
inline constexpr uint8_t kPacketTooLarge = 0x95;
inline constexpr uint8_t kQuotaExceeded = 0x97;
inline constexpr uint8_t kPayloadFormatInvalid = 0x99;
inline constexpr uint8_t kQosNotSupported = 0x9B;
inline constexpr uint8_t kSharedSubscriptionsNotSupported = 0x9E;
inline constexpr uint8_t kWildcardSubscriptionsNotSupported = 0xA2;
// MQTT 3.1.1 CONNACK return codes (spec 3.2.2.3) and the SUBACK failure code.
inline constexpr uint8_t kV3UnacceptableProtocolVersion = 0x01;
inline constexpr uint8_t kV3IdentifierRejected = 0x02;
inline constexpr uint8_t kV3ServerUnavailable = 0x03;
inline constexpr uint8_t kV3BadUserNameOrPassword = 0x04;
inline constexpr uint8_t kV3NotAuthorized = 0x05;
inline constexpr uint8_t kV3SubscribeFailure = 0x80;
}  // namespace reason

// The reason code a decode error maps to (see the file comment); kUnspecifiedError otherwise.
uint8_t reasonCodeOf(const Status& decodeError);

// MQTT 5 properties of one packet. Integer-valued ones (byte, two-byte, four-byte, variable byte
// integer) by id in `ints`; UTF-8 strings and binary data by id in `strings`; the two
// repeatable ones apart. Empty for MQTT 3.1.1.
struct Properties {
  std::map<PropertyId, uint32_t> ints;
  std::map<PropertyId, std::string> strings;
  std::vector<uint32_t> subscriptionIds;                            // 0x0B
  std::vector<std::pair<std::string, std::string>> userProperties;  // 0x26, in order

  std::optional<uint32_t> num(PropertyId id) const {
    auto it = ints.find(id);
    return it == ints.end() ? std::nullopt : std::optional<uint32_t>(it->second);
  }
  const std::string* str(PropertyId id) const {
    auto it = strings.find(id);
    return it == strings.end() ? nullptr : &it->second;
  }
  bool empty() const {
    return ints.empty() && strings.empty() && subscriptionIds.empty() && userProperties.empty();
  }
  bool operator==(const Properties&) const = default;
};

struct Will {
  std::string topic;
  std::string payload;
  uint8_t qos = 0;
  bool retain = false;
  Properties properties;  // MQTT 5 will properties
  bool operator==(const Will&) const = default;
};

struct Connect {
  ProtocolVersion version = ProtocolVersion::kV311;
  bool cleanSession = true;  // MQTT 5: Clean Start
  uint16_t keepAliveSeconds = 0;
  std::string clientId;
  Properties properties;
  std::optional<Will> will;
  std::optional<std::string> username;
  std::optional<std::string> password;  // binary
  bool operator==(const Connect&) const = default;
};

struct Connack {
  bool sessionPresent = false;
  uint8_t reasonCode = 0;  // 3.1.1: the return code
  Properties properties;
  bool operator==(const Connack&) const = default;
};

struct Publish {
  uint8_t qos = 0;
  bool dup = false;
  bool retain = false;
  std::string topic;
  uint16_t packetId = 0;  // QoS > 0 only
  Properties properties;
  std::string payload;
  bool operator==(const Publish&) const = default;
};

// PUBACK, PUBREC, PUBREL, PUBCOMP: a packet id and, in MQTT 5, a reason code and properties.
struct PubAck {
  PacketType type = PacketType::kPuback;
  uint16_t packetId = 0;
  uint8_t reasonCode = 0;
  Properties properties;
  bool operator==(const PubAck&) const = default;
};

struct SubscriptionRequest {
  std::string filter;
  uint8_t qos = 0;
  bool noLocal = false;            // MQTT 5
  bool retainAsPublished = false;  // MQTT 5
  uint8_t retainHandling = 0;      // MQTT 5, 0..2
  bool operator==(const SubscriptionRequest&) const = default;
};

struct Subscribe {
  uint16_t packetId = 0;
  Properties properties;
  std::vector<SubscriptionRequest> subscriptions;  // at least one
  bool operator==(const Subscribe&) const = default;
};

// SUBACK, and UNSUBACK (whose reason codes are MQTT 5 only).
struct SubAck {
  PacketType type = PacketType::kSuback;
  uint16_t packetId = 0;
  Properties properties;
  std::vector<uint8_t> reasonCodes;
  bool operator==(const SubAck&) const = default;
};

struct Unsubscribe {
  uint16_t packetId = 0;
  Properties properties;
  std::vector<std::string> filters;  // at least one
  bool operator==(const Unsubscribe&) const = default;
};

// PINGREQ, PINGRESP: nothing but the type.
struct Ping {
  PacketType type = PacketType::kPingreq;
  bool operator==(const Ping&) const = default;
};

// DISCONNECT and (MQTT 5) AUTH: a reason code and properties.
struct Disconnect {
  PacketType type = PacketType::kDisconnect;
  uint8_t reasonCode = 0;
  Properties properties;
  bool operator==(const Disconnect&) const = default;
};

using Packet = std::variant<Connect, Connack, Publish, PubAck, Subscribe, SubAck, Unsubscribe, Ping,
                            Disconnect>;
PacketType typeOf(const Packet& p);

// The largest remaining length the 4-byte encoding allows (spec 1.5.5): 268,435,455.
inline constexpr uint32_t kMaxRemainingLength = 268'435'455;

struct FixedHeader {
  PacketType type = PacketType::kConnect;
  uint8_t flags = 0;             // the low nibble
  uint32_t remainingLength = 0;  // bytes after the fixed header
  uint8_t headerLength = 0;      // 2..5
  size_t packetSize() const { return headerLength + size_t{remainingLength}; }
};

// Reads the fixed header at the front of `data`: nullopt while more bytes are needed (at most 5
// are ever needed). Errors: kCorruption (type 0, a fifth length byte, flags other than the
// spec's for the type), kTooLarge (packetSize() > maxPacketSize, checked before the body
// arrives).
Result<std::optional<FixedHeader>> parseFixedHeader(std::string_view data, size_t maxPacketSize);

// Decodes one packet's body (`body`: exactly header.remainingLength bytes). CONNECT carries its
// own version (`version` is ignored for it); every other packet is read as `version` says.
// Errors: see the file comment. The packets a client may not send (CONNACK, SUBACK, ...) are
// decoded too (tests, fuzzing); the broker refuses them itself.
Result<Packet> decodePacket(const FixedHeader& header, std::string_view body,
                            ProtocolVersion version);

// Appends the packet's bytes to *out in `version`'s layout (CONNECT uses its own version).
// MQTT 5 fields are left out for 3.1.1. REQUIRES: strings fit in 65535 bytes and the packet in
// kMaxRemainingLength (checked in debug builds).
void encodePacket(const Packet& p, ProtocolVersion version, std::string* out);

// Whether `s` is a well-formed MQTT UTF-8 string (spec 1.5.4): valid UTF-8, no overlong forms,
// no surrogates, no U+0000.
bool validUtf8(std::string_view s);

// Splits a byte stream into packets and decodes them: bytes are appended as they arrive, next()
// gives the packets in order. The version is MQTT 3.1.1 until a CONNECT is decoded, then that
// CONNECT's. Holds at most one partial packet (<= maxPacketSize, refused at its header).
// Errors as decodePacket and parseFixedHeader; the first one is sticky (next() repeats it).
// Thread: one connection's loop; not shared.
class PacketReader {
 public:
  explicit PacketReader(size_t maxPacketSize) : maxPacketSize_(maxPacketSize) {}
  void append(const uint8_t* data, size_t len);
  // The next whole packet; nullopt while more bytes are needed.
  Result<std::optional<Packet>> next();
  ProtocolVersion version() const { return version_; }
  // Bytes appended and not yet taken by next().
  size_t buffered() const { return buf_.size() - pos_; }
  const Status& error() const { return error_; }

 private:
  size_t maxPacketSize_;
  std::string buf_;
  size_t pos_ = 0;
  Status error_;
  ProtocolVersion version_ = ProtocolVersion::kV311;
};

// Appends the variable byte integer encoding of v (REQUIRES: v <= kMaxRemainingLength).
void appendVarInt(uint32_t v, std::string* out);

}  // namespace magnetar::mqtt
