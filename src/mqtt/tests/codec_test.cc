// The MQTT codec: round trips of every packet in both versions, and hostile input (truncated,
// oversized remaining length, bad flags, bad UTF-8, bad properties) with the errors it names.
#include "mqtt/codec.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar::mqtt {
namespace {

constexpr size_t kMax = 1 << 20;

// Decodes one whole packet from bytes (header included).
Result<Packet> decodeAll(const std::string& bytes, ProtocolVersion v, size_t max = kMax) {
  auto h = parseFixedHeader(bytes, max);
  if (!h.isOk()) return h.status();
  if (!h->has_value()) return Status::corruption("incomplete header");
  const FixedHeader& fh = **h;
  if (bytes.size() < fh.packetSize()) return Status::corruption("incomplete body");
  return decodePacket(fh, std::string_view(bytes).substr(fh.headerLength, fh.remainingLength), v);
}

std::string encode(const Packet& p, ProtocolVersion v) {
  std::string out;
  encodePacket(p, v, &out);
  return out;
}

void expectRoundTrip(const Packet& p, ProtocolVersion v) {
  std::string bytes = encode(p, v);
  auto back = decodeAll(bytes, v);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_TRUE(*back == p) << packetTypeName(typeOf(p));
}

Properties someProperties() {
  Properties p;
  p.ints[PropertyId::kMessageExpiryInterval] = 60;
  p.ints[PropertyId::kPayloadFormatIndicator] = 1;
  p.strings[PropertyId::kContentType] = "application/json";
  p.userProperties = {{"k", "v"}, {"k", "v2"}};
  return p;
}

TEST(MqttCodec, ConnectRoundTripsInBothVersions) {
  Connect c;
  c.clientId = "device-1";
  c.keepAliveSeconds = 30;
  c.cleanSession = false;
  c.username = "user";
  c.password = std::string("p\0ss", 4);
  c.will = Will{"last/will", "gone", 1, true, {}};
  expectRoundTrip(c, ProtocolVersion::kV311);
  c.version = ProtocolVersion::kV5;
  c.properties.ints[PropertyId::kSessionExpiryInterval] = 3600;
  c.properties.ints[PropertyId::kReceiveMaximum] = 10;
  c.will->properties.ints[PropertyId::kWillDelayInterval] = 5;
  expectRoundTrip(c, ProtocolVersion::kV5);
}

TEST(MqttCodec, KnownBytesOfA311Connect) {
  // CONNECT, MQTT 3.1.1, clean session, keep alive 60, client id "a".
  const std::string bytes(
      "\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01"
      "a",
      15);
  auto p = decodeAll(bytes, ProtocolVersion::kV311);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  const auto& c = std::get<Connect>(*p);
  EXPECT_EQ(c.version, ProtocolVersion::kV311);
  EXPECT_TRUE(c.cleanSession);
  EXPECT_EQ(c.keepAliveSeconds, 60);
  EXPECT_EQ(c.clientId, "a");
  EXPECT_EQ(encode(c, ProtocolVersion::kV311), bytes);
}

TEST(MqttCodec, EveryOtherPacketRoundTrips) {
  for (auto v : {ProtocolVersion::kV311, ProtocolVersion::kV5}) {
    const bool v5 = v == ProtocolVersion::kV5;
    Properties props = v5 ? someProperties() : Properties{};
    expectRoundTrip(Connack{true, 0, {}}, v);
    expectRoundTrip(Publish{0, false, true, "a/b", 0, props, "payload"}, v);
    expectRoundTrip(Publish{1, true, false, "a/b", 7, props, std::string(300, 'x')}, v);
    expectRoundTrip(PubAck{PacketType::kPuback, 7, 0, {}}, v);
    expectRoundTrip(PubAck{PacketType::kPubrel, 9, 0, {}}, v);
    // QoS 2: the PUBLISH (DUP too) and its three acknowledgements.
    expectRoundTrip(Publish{2, false, false, "a/b", 8, props, "two"}, v);
    expectRoundTrip(Publish{2, true, true, "a/b", 65535, props, "two again"}, v);
    expectRoundTrip(PubAck{PacketType::kPubrec, 8, 0, {}}, v);
    expectRoundTrip(PubAck{PacketType::kPubcomp, 8, 0, {}}, v);
    expectRoundTrip(Subscribe{5, {}, {{"$share/g/a/#", 2, false, false, 0}}}, v);
    expectRoundTrip(SubAck{PacketType::kSuback, 5, {}, {reason::kGrantedQos2}}, v);
    Subscribe s{3, {}, {{"a/+", 1, false, false, 0}, {"b/#", 0, false, false, 0}}};
    if (v5) {
      s.subscriptions[0].noLocal = true;
      s.subscriptions[0].retainHandling = 2;
      s.properties.subscriptionIds = {12};
    }
    expectRoundTrip(s, v);
    expectRoundTrip(SubAck{PacketType::kSuback, 3, {}, {1, 0, 0x80}}, v);
    expectRoundTrip(SubAck{PacketType::kUnsuback,
                           4,
                           {},
                           v5 ? std::vector<uint8_t>{0, 0x11} : std::vector<uint8_t>{}},
                    v);
    expectRoundTrip(Unsubscribe{4, {}, {"a/+", "b"}}, v);
    expectRoundTrip(Ping{PacketType::kPingreq}, v);
    expectRoundTrip(Ping{PacketType::kPingresp}, v);
    expectRoundTrip(Disconnect{}, v);
  }
  Disconnect d{PacketType::kDisconnect, reason::kKeepAliveTimeout, {}};
  d.properties.strings[PropertyId::kReasonString] = "keep alive timeout";
  expectRoundTrip(d, ProtocolVersion::kV5);
  expectRoundTrip(PubAck{PacketType::kPuback, 7, reason::kQuotaExceeded, {}}, ProtocolVersion::kV5);
  PubAck comp{PacketType::kPubcomp, 9, reason::kPacketIdentifierNotFound, {}};
  comp.properties.strings[PropertyId::kReasonString] = "no QoS 2 PUBLISH with packet id 9";
  expectRoundTrip(comp, ProtocolVersion::kV5);
  expectRoundTrip(PubAck{PacketType::kPubrel, 9, reason::kPacketIdentifierNotFound, {}},
                  ProtocolVersion::kV5);
  expectRoundTrip(PubAck{PacketType::kPubrec, 9, reason::kUnspecifiedError, {}},
                  ProtocolVersion::kV5);
  // A PUBLISH bound to an outbound topic alias: empty topic name, the alias property.
  Publish aliased{1, false, false, "", 3, {}, "x"};
  aliased.properties.ints[PropertyId::kTopicAlias] = 2;
  expectRoundTrip(aliased, ProtocolVersion::kV5);
}

// QoS 2 hostile input: QoS 3, PUBREL with reserved flags 0 or packet id 0, PUBREC/PUBCOMP id 0.
TEST(MqttCodec, Qos2PacketsRefuseBadIdsAndFlags) {
  for (auto v : {ProtocolVersion::kV311, ProtocolVersion::kV5}) {
    auto r = decodeAll(std::string("\x36\x06\x00\x01t\x00\x01\x00", 8), v);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(reasonCodeOf(r.status()), reason::kMalformedPacket);
    r = decodeAll(std::string("\x60\x02\x00\x05", 4), v);  // PUBREL must carry flags 2
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(reasonCodeOf(r.status()), reason::kMalformedPacket);
    for (const char* zero : {"\x62\x02\x00\x00", "\x50\x02\x00\x00", "\x70\x02\x00\x00"}) {
      r = decodeAll(std::string(zero, 4), v);
      ASSERT_FALSE(r.isOk());
      EXPECT_EQ(reasonCodeOf(r.status()), reason::kProtocolError);
    }
    r = decodeAll(std::string("\x62\x01\x00", 3), v);  // truncated id
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(reasonCodeOf(r.status()), reason::kMalformedPacket);
  }
}

TEST(MqttCodec, RemainingLengthEncodingAtItsBoundaries) {
  for (uint32_t v : {0u, 127u, 128u, 16383u, 16384u, 2097151u, 2097152u, kMaxRemainingLength}) {
    std::string b;
    appendVarInt(v, &b);
    std::string packet = "\x30" + b;
    auto h = parseFixedHeader(packet, SIZE_MAX);
    ASSERT_TRUE(h.isOk()) << v;
    ASSERT_TRUE(h->has_value()) << v;
    EXPECT_EQ((*h)->remainingLength, v);
    EXPECT_EQ((*h)->headerLength, 1 + b.size());
  }
}

TEST(MqttCodec, AFifthRemainingLengthByteIsMalformed) {
  auto h = parseFixedHeader(std::string("\x30\xff\xff\xff\xff\x01", 6), SIZE_MAX);
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), StatusCode::kCorruption);
  EXPECT_NE(h.status().message().find("longer than 4 bytes"), std::string::npos);
  EXPECT_EQ(reasonCodeOf(h.status()), reason::kMalformedPacket);
}

TEST(MqttCodec, OversizedPacketIsRefusedAtItsHeader) {
  // 1 MiB + 1 announced, only the header present: refused before any body byte.
  std::string b = "\x30";
  appendVarInt(1 << 20, &b);
  auto h = parseFixedHeader(b, 1 << 20);
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), StatusCode::kTooLarge);
  EXPECT_EQ(reasonCodeOf(h.status()), reason::kPacketTooLarge);
}

TEST(MqttCodec, IncompleteHeaderAsksForMore) {
  auto h = parseFixedHeader(std::string("\x30\x80", 2), kMax);
  ASSERT_TRUE(h.isOk());
  EXPECT_FALSE(h->has_value());
  h = parseFixedHeader("", kMax);
  ASSERT_TRUE(h.isOk());
  EXPECT_FALSE(h->has_value());
}

TEST(MqttCodec, BadFixedHeaderFlagsAreMalformed) {
  for (std::string bad : {std::string("\x31\x00", 2) + "",  // PUBLISH flags ok: not bad
                          std::string("\x36\x00", 2),       // PUBLISH QoS 3
                          std::string("\x80\x00", 2),       // SUBSCRIBE flags 0, must be 2
                          std::string("\xc1\x00", 2),       // PINGREQ flags 1
                          std::string("\x62\x00", 2) + "",  // PUBREL flags 2: fine
                          std::string("\x00\x00", 2)}) {    // type 0
    auto h = parseFixedHeader(bad, kMax);
    const uint8_t b0 = static_cast<uint8_t>(bad[0]);
    const bool fine = b0 == 0x31 || b0 == 0x62;
    EXPECT_EQ(h.isOk(), fine) << int(b0);
    if (!fine) {
      EXPECT_EQ(h.status().code(), StatusCode::kCorruption) << int(b0);
    }
  }
}

TEST(MqttCodec, EveryTruncationOfAValidPacketIsAnError) {
  Connect c;
  c.version = ProtocolVersion::kV5;
  c.clientId = "dev";
  c.username = "u";
  c.password = "p";
  c.will = Will{"w", "x", 1, false, someProperties()};
  c.properties = someProperties();
  c.properties.ints.erase(PropertyId::kMessageExpiryInterval);
  c.properties.ints.erase(PropertyId::kPayloadFormatIndicator);
  c.properties.strings.clear();
  const std::string bytes = encode(c, ProtocolVersion::kV5);
  ASSERT_TRUE(decodeAll(bytes, ProtocolVersion::kV5).isOk());
  auto h = parseFixedHeader(bytes, kMax);
  const FixedHeader fh = **h;
  const std::string_view body = std::string_view(bytes).substr(fh.headerLength);
  for (size_t n = 0; n < body.size(); n++) {
    FixedHeader shorter = fh;
    shorter.remainingLength = static_cast<uint32_t>(n);
    auto p = decodePacket(shorter, body.substr(0, n), ProtocolVersion::kV5);
    ASSERT_FALSE(p.isOk()) << "decoded with " << n << " of " << body.size() << " bytes";
    EXPECT_EQ(p.status().code(), StatusCode::kCorruption) << n << ": " << p.status().message();
  }
}

TEST(MqttCodec, TrailingBytesAreMalformed) {
  std::string b = encode(Ping{PacketType::kPingreq}, ProtocolVersion::kV311);
  b[1] = 1;
  b.push_back('x');
  auto p = decodeAll(b, ProtocolVersion::kV311);
  ASSERT_FALSE(p.isOk());
  EXPECT_NE(p.status().message().find("after the packet's end"), std::string::npos);
}

TEST(MqttCodec, BadUtf8IsMalformed) {
  const std::string bad[] = {std::string("a\0b", 3),
                             "\xC0\xAF",          // NUL, overlong '/'
                             "\xED\xA0\x80",      // surrogate U+D800
                             "\xF4\x90\x80\x80",  // over U+10FFFF
                             "\xE2\x82",          // cut sequence
                             "\x80",
                             "\xFF"};
  for (const auto& s : bad) {
    EXPECT_FALSE(validUtf8(s)) << s;
    Publish p{0, false, false, "t" + s, 0, {}, ""};
    auto r = decodeAll(encode(p, ProtocolVersion::kV311), ProtocolVersion::kV311);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find("not valid UTF-8"), std::string::npos);
  }
  EXPECT_TRUE(validUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
}

TEST(MqttCodec, ProtocolErrors) {
  // A PUBLISH topic with a wildcard, packet id 0 at QoS 1, an empty SUBSCRIBE.
  auto r = decodeAll(encode(Publish{0, false, false, "a/+", 0, {}, ""}, ProtocolVersion::kV311),
                     ProtocolVersion::kV311);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reasonCodeOf(r.status()), reason::kProtocolError);
  r = decodeAll(encode(Publish{1, false, false, "a", 0, {}, ""}, ProtocolVersion::kV311),
                ProtocolVersion::kV311);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("packet identifier 0"), std::string::npos);
  r = decodeAll(encode(Subscribe{1, {}, {}}, ProtocolVersion::kV311), ProtocolVersion::kV311);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("no topic filter"), std::string::npos);
}

TEST(MqttCodec, ConnectFlagsAndVersion) {
  Connect c;
  c.clientId = "x";
  std::string b = encode(c, ProtocolVersion::kV311);
  std::string reserved = b;
  reserved[9] |= 0x01;  // reserved flag
  auto r = decodeAll(reserved, ProtocolVersion::kV311);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("reserved connect flag"), std::string::npos);
  std::string willQos = b;
  willQos[9] |= 0x08;  // will QoS without the will flag
  EXPECT_FALSE(decodeAll(willQos, ProtocolVersion::kV311).isOk());
  std::string level3 = b;
  level3[8] = 3;  // MQTT 3.1 level with the 3.1.1 name
  r = decodeAll(level3, ProtocolVersion::kV311);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(reasonCodeOf(r.status()), reason::kUnsupportedProtocolVersion);
}

TEST(MqttCodec, PropertiesAreCheckedPerPacket) {
  // A Session Expiry Interval inside a PUBLISH is not allowed there.
  Publish p{0, false, false, "t", 0, {}, "x"};
  p.properties.ints[PropertyId::kSessionExpiryInterval] = 5;
  auto r = decodeAll(encode(p, ProtocolVersion::kV5), ProtocolVersion::kV5);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("0x11 is not allowed"), std::string::npos);
  // A property repeated.
  std::string b("\x30\x0e\x00\x01t\x0a\x02\x00\x00\x00\x01\x02\x00\x00\x00\x01", 16);
  r = decodeAll(b, ProtocolVersion::kV5);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("repeated"), std::string::npos);
  // An unknown property id.
  std::string unknown("\x30\x06\x00\x01t\x02\x7f\x00", 8);
  r = decodeAll(unknown, ProtocolVersion::kV5);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("unknown property"), std::string::npos);
  // A property length past the packet's end.
  std::string over("\x30\x05\x00\x01t\x09\x01", 7);
  r = decodeAll(over, ProtocolVersion::kV5);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("truncated at properties"), std::string::npos);
  // Receive Maximum 0 is a protocol error.
  Connect c;
  c.version = ProtocolVersion::kV5;
  c.properties.ints[PropertyId::kReceiveMaximum] = 0;
  r = decodeAll(encode(c, ProtocolVersion::kV5), ProtocolVersion::kV5);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(MqttCodec, AuthIsMqtt5Only) {
  std::string b("\xf0\x00", 2);
  EXPECT_FALSE(decodeAll(b, ProtocolVersion::kV311).isOk());
  auto r = decodeAll(b, ProtocolVersion::kV5);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(typeOf(*r), PacketType::kAuth);
}

}  // namespace
}  // namespace magnetar::mqtt
