#include "mqtt/codec.h"

#include <array>
#include <cassert>

#include "fmt/format.h"

namespace magnetar::mqtt {
namespace {

// How a property's value is written (spec 2.2.2.2).
enum class Kind : uint8_t { kNone, kByte, kU16, kU32, kVarInt, kUtf8, kBinary, kPair };

// Where a property may appear: a bit per packet type, and bit 0 for the will properties.
constexpr uint16_t bit(PacketType t) { return uint16_t(1u << static_cast<int>(t)); }
constexpr uint16_t kWill = 1;
constexpr uint16_t kAcks = bit(PacketType::kPuback) | bit(PacketType::kPubrec) |
                           bit(PacketType::kPubrel) | bit(PacketType::kPubcomp);

struct PropertySpec {
  Kind kind = Kind::kNone;
  uint16_t where = 0;
};

constexpr std::array<PropertySpec, 0x2B> makeSpecs() {
  using T = PacketType;
  std::array<PropertySpec, 0x2B> s{};
  const uint16_t pub = bit(T::kPublish) | kWill;
  s[0x01] = {Kind::kByte, pub};
  s[0x02] = {Kind::kU32, pub};
  s[0x03] = {Kind::kUtf8, pub};
  s[0x08] = {Kind::kUtf8, pub};
  s[0x09] = {Kind::kBinary, pub};
  s[0x0B] = {Kind::kVarInt, uint16_t(bit(T::kPublish) | bit(T::kSubscribe))};
  s[0x11] = {Kind::kU32, uint16_t(bit(T::kConnect) | bit(T::kConnack) | bit(T::kDisconnect))};
  s[0x12] = {Kind::kUtf8, bit(T::kConnack)};
  s[0x13] = {Kind::kU16, bit(T::kConnack)};
  const uint16_t auth = bit(T::kConnect) | bit(T::kConnack) | bit(T::kAuth);
  s[0x15] = {Kind::kUtf8, auth};
  s[0x16] = {Kind::kBinary, auth};
  s[0x17] = {Kind::kByte, bit(T::kConnect)};
  s[0x18] = {Kind::kU32, kWill};
  s[0x19] = {Kind::kByte, bit(T::kConnect)};
  s[0x1A] = {Kind::kUtf8, bit(T::kConnack)};
  s[0x1C] = {Kind::kUtf8, uint16_t(bit(T::kConnack) | bit(T::kDisconnect))};
  s[0x1F] = {Kind::kUtf8, uint16_t(bit(T::kConnack) | kAcks | bit(T::kSuback) | bit(T::kUnsuback) |
                                   bit(T::kDisconnect) | bit(T::kAuth))};
  const uint16_t cc = bit(T::kConnect) | bit(T::kConnack);
  s[0x21] = {Kind::kU16, cc};
  s[0x22] = {Kind::kU16, cc};
  s[0x23] = {Kind::kU16, bit(T::kPublish)};
  s[0x24] = {Kind::kByte, bit(T::kConnack)};
  s[0x25] = {Kind::kByte, bit(T::kConnack)};
  s[0x26] = {Kind::kPair, uint16_t(0xFFFF & ~bit(T::kPingreq) & ~bit(T::kPingresp))};
  s[0x27] = {Kind::kU32, cc};
  s[0x28] = {Kind::kByte, bit(T::kConnack)};
  s[0x29] = {Kind::kByte, bit(T::kConnack)};
  s[0x2A] = {Kind::kByte, bit(T::kConnack)};
  return s;
}
constexpr auto kSpecs = makeSpecs();

// A bounds-checked reader over one packet body. Every read reports a truncation as kCorruption
// naming `what`.
class Reader {
 public:
  Reader(std::string_view data, PacketType type) : data_(data), type_(type) {}
  size_t remaining() const { return data_.size() - pos_; }
  bool atEnd() const { return pos_ == data_.size(); }

  Status truncated(const char* what) const {
    return Status::corruption(
        fmt::format("malformed {}: truncated at {}", packetTypeName(type_), what));
  }
  Status malformed(const std::string& why) const {
    return Status::corruption(fmt::format("malformed {}: {}", packetTypeName(type_), why));
  }
  Status protocolError(const std::string& why) const {
    return Status::invalidArgument(
        fmt::format("protocol error in {}: {}", packetTypeName(type_), why));
  }

  Status u8(uint8_t* v, const char* what) {
    if (remaining() < 1) return truncated(what);
    *v = static_cast<uint8_t>(data_[pos_++]);
    return Status::ok();
  }
  Status u16(uint16_t* v, const char* what) {
    if (remaining() < 2) return truncated(what);
    *v = uint16_t(uint8_t(data_[pos_]) << 8 | uint8_t(data_[pos_ + 1]));
    pos_ += 2;
    return Status::ok();
  }
  Status u32(uint32_t* v, const char* what) {
    if (remaining() < 4) return truncated(what);
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) x = x << 8 | uint8_t(data_[pos_ + i]);
    pos_ += 4;
    *v = x;
    return Status::ok();
  }
  Status varInt(uint32_t* v, const char* what) {
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
      uint8_t b = 0;
      if (Status s = u8(&b, what); !s.isOk()) return s;
      x |= uint32_t(b & 0x7F) << (7 * i);
      if (!(b & 0x80)) {
        *v = x;
        return Status::ok();
      }
    }
    return malformed(fmt::format("{} longer than 4 bytes", what));
  }
  Status binary(std::string* v, const char* what) {
    uint16_t n = 0;
    if (Status s = u16(&n, what); !s.isOk()) return s;
    if (remaining() < n) return truncated(what);
    v->assign(data_.substr(pos_, n));
    pos_ += n;
    return Status::ok();
  }
  Status utf8(std::string* v, const char* what) {
    if (Status s = binary(v, what); !s.isOk()) return s;
    if (!validUtf8(*v)) return malformed(fmt::format("{} is not valid UTF-8", what));
    return Status::ok();
  }
  std::string_view rest() {
    std::string_view r = data_.substr(pos_);
    pos_ = data_.size();
    return r;
  }
  // The MQTT 5 property block; `where` selects the packet's column (kWill for will properties).
  Status properties(Properties* p, uint16_t where);

 private:
  Status property(Properties* p, uint16_t where);
  std::string_view data_;
  size_t pos_ = 0;
  PacketType type_;
};

Status Reader::properties(Properties* p, uint16_t where) {
  uint32_t len = 0;
  if (Status s = varInt(&len, "property length"); !s.isOk()) return s;
  if (len > remaining()) return truncated("properties");
  Reader sub(data_.substr(pos_, len), type_);
  pos_ += len;
  while (!sub.atEnd()) {
    if (Status s = sub.property(p, where); !s.isOk()) return s;
  }
  return Status::ok();
}

Status Reader::property(Properties* p, uint16_t where) {
  uint32_t rawId = 0;
  if (Status s = varInt(&rawId, "property id"); !s.isOk()) return s;
  if (rawId >= kSpecs.size() || kSpecs[rawId].kind == Kind::kNone) {
    return malformed(fmt::format("unknown property 0x{:02X}", rawId));
  }
  const PropertySpec& spec = kSpecs[rawId];
  if (!(spec.where & where)) {
    return malformed(fmt::format("property 0x{:02X} is not allowed here", rawId));
  }
  auto id = static_cast<PropertyId>(rawId);
  if (spec.kind == Kind::kPair) {
    std::pair<std::string, std::string> kv;
    if (Status s = utf8(&kv.first, "user property name"); !s.isOk()) return s;
    if (Status s = utf8(&kv.second, "user property value"); !s.isOk()) return s;
    p->userProperties.push_back(std::move(kv));
    return Status::ok();
  }
  if (spec.kind == Kind::kUtf8 || spec.kind == Kind::kBinary) {
    std::string v;
    Status s = spec.kind == Kind::kUtf8 ? utf8(&v, "property value") : binary(&v, "property value");
    if (!s.isOk()) return s;
    if (!p->strings.emplace(id, std::move(v)).second) {
      return malformed(fmt::format("property 0x{:02X} repeated", rawId));
    }
    return Status::ok();
  }
  uint32_t v = 0;
  Status s;
  if (spec.kind == Kind::kByte) {
    uint8_t b = 0;
    s = u8(&b, "property value");
    v = b;
  } else if (spec.kind == Kind::kU16) {
    uint16_t w = 0;
    s = u16(&w, "property value");
    v = w;
  } else if (spec.kind == Kind::kU32) {
    s = u32(&v, "property value");
  } else {
    s = varInt(&v, "property value");
  }
  if (!s.isOk()) return s;
  if (spec.kind == Kind::kByte && v > 1) {
    return protocolError(fmt::format("property 0x{:02X} must be 0 or 1, not {}", rawId, v));
  }
  if (v == 0 && (id == PropertyId::kReceiveMaximum || id == PropertyId::kMaximumPacketSize ||
                 id == PropertyId::kSubscriptionIdentifier || id == PropertyId::kTopicAlias)) {
    return protocolError(fmt::format("property 0x{:02X} must not be 0", rawId));
  }
  if (id == PropertyId::kSubscriptionIdentifier) {
    if (type_ == PacketType::kSubscribe && !p->subscriptionIds.empty()) {
      return malformed("subscription identifier repeated");
    }
    p->subscriptionIds.push_back(v);
    return Status::ok();
  }
  if (!p->ints.emplace(id, v).second) {
    return malformed(fmt::format("property 0x{:02X} repeated", rawId));
  }
  return Status::ok();
}

bool isV5(ProtocolVersion v) { return v == ProtocolVersion::kV5; }

Status finish(Reader& r) {
  if (!r.atEnd()) return r.malformed(fmt::format("{} bytes after the packet's end", r.remaining()));
  return Status::ok();
}

Status readConnectFlags(Reader& r, Connect* c, uint8_t* flags) {
  if (Status s = r.u8(flags, "connect flags"); !s.isOk()) return s;
  const uint8_t f = *flags;
  if (f & 0x01) return r.malformed("reserved connect flag set");
  c->cleanSession = f & 0x02;
  const bool will = f & 0x04;
  const uint8_t willQos = (f >> 3) & 0x03;
  if (willQos == 3) return r.malformed("will QoS 3");
  if (!will && (willQos != 0 || (f & 0x20))) {
    return r.malformed("will QoS or retain set without the will flag");
  }
  if (c->version == ProtocolVersion::kV311 && (f & 0x40) && !(f & 0x80)) {
    return r.protocolError("password flag without the user name flag");
  }
  return r.u16(&c->keepAliveSeconds, "keep alive");
}

Result<Packet> decodeConnect(Reader& r) {
  Connect c;
  std::string name;
  if (Status s = r.utf8(&name, "protocol name"); !s.isOk()) return s;
  uint8_t level = 0;
  if (Status s = r.u8(&level, "protocol level"); !s.isOk()) return s;
  if (name != "MQTT" || (level != 4 && level != 5)) {
    return Status::error(
        StatusCode::kUnsupported,
        fmt::format("unsupported protocol {} level {} (MQTT 3.1.1 and 5.0 are)", name, int(level)));
  }
  c.version = static_cast<ProtocolVersion>(level);
  uint8_t flags = 0;
  if (Status s = readConnectFlags(r, &c, &flags); !s.isOk()) return s;
  if (isV5(c.version)) {
    if (Status s = r.properties(&c.properties, bit(PacketType::kConnect)); !s.isOk()) return s;
  }
  if (Status s = r.utf8(&c.clientId, "client identifier"); !s.isOk()) return s;
  if (flags & 0x04) {
    Will w;
    w.qos = (flags >> 3) & 0x03;
    w.retain = flags & 0x20;
    if (isV5(c.version)) {
      if (Status s = r.properties(&w.properties, kWill); !s.isOk()) return s;
    }
    if (Status s = r.utf8(&w.topic, "will topic"); !s.isOk()) return s;
    if (Status s = r.binary(&w.payload, "will payload"); !s.isOk()) return s;
    c.will = std::move(w);
  }
  if (flags & 0x80) {
    c.username.emplace();
    if (Status s = r.utf8(&*c.username, "user name"); !s.isOk()) return s;
  }
  if (flags & 0x40) {
    c.password.emplace();
    if (Status s = r.binary(&*c.password, "password"); !s.isOk()) return s;
  }
  if (Status s = finish(r); !s.isOk()) return s;
  return Packet(std::move(c));
}

Result<Packet> decodeConnack(Reader& r, ProtocolVersion v) {
  Connack c;
  uint8_t flags = 0;
  if (Status s = r.u8(&flags, "acknowledge flags"); !s.isOk()) return s;
  if (flags & 0xFE) return r.malformed("reserved acknowledge flags set");
  c.sessionPresent = flags & 1;
  if (Status s = r.u8(&c.reasonCode, "reason code"); !s.isOk()) return s;
  if (isV5(v)) {
    if (Status s = r.properties(&c.properties, bit(PacketType::kConnack)); !s.isOk()) return s;
  }
  if (Status s = finish(r); !s.isOk()) return s;
  return Packet(std::move(c));
}

Result<Packet> decodePublish(Reader& r, uint8_t flags, ProtocolVersion v) {
  Publish p;
  p.retain = flags & 0x01;
  p.qos = (flags >> 1) & 0x03;
  p.dup = flags & 0x08;
  if (p.dup && p.qos == 0) return r.malformed("DUP flag set at QoS 0");
  if (Status s = r.utf8(&p.topic, "topic name"); !s.isOk()) return s;
  if (p.topic.find_first_of("+#") != std::string::npos) {
    return r.protocolError("topic name '" + p.topic + "' has a wildcard");
  }
  if (p.qos > 0) {
    if (Status s = r.u16(&p.packetId, "packet identifier"); !s.isOk()) return s;
    if (p.packetId == 0) return r.protocolError("packet identifier 0");
  }
  if (isV5(v)) {
    if (Status s = r.properties(&p.properties, bit(PacketType::kPublish)); !s.isOk()) return s;
  }
  if (p.topic.empty() && !p.properties.num(PropertyId::kTopicAlias)) {
    return r.protocolError("empty topic name without a topic alias");
  }
  p.payload.assign(r.rest());
  return Packet(std::move(p));
}

// PUBACK/PUBREC/PUBREL/PUBCOMP, and MQTT 5's DISCONNECT and AUTH (no packet id): the reason
// code and properties are left out when the packet ends before them.
Result<Packet> decodeAck(Reader& r, PacketType t, ProtocolVersion v) {
  const bool hasId = t != PacketType::kDisconnect && t != PacketType::kAuth;
  PubAck a;
  a.type = t;
  if (hasId) {
    if (Status s = r.u16(&a.packetId, "packet identifier"); !s.isOk()) return s;
    if (a.packetId == 0) return r.protocolError("packet identifier 0");
  }
  if (isV5(v) && !r.atEnd()) {
    if (Status s = r.u8(&a.reasonCode, "reason code"); !s.isOk()) return s;
    if (!r.atEnd()) {
      if (Status s = r.properties(&a.properties, bit(t)); !s.isOk()) return s;
    }
  }
  if (Status s = finish(r); !s.isOk()) return s;
  if (hasId) return Packet(std::move(a));
  return Packet(Disconnect{t, a.reasonCode, std::move(a.properties)});
}

Result<Packet> decodeSubscribe(Reader& r, ProtocolVersion v) {
  Subscribe sub;
  if (Status s = r.u16(&sub.packetId, "packet identifier"); !s.isOk()) return s;
  if (sub.packetId == 0) return r.protocolError("packet identifier 0");
  if (isV5(v)) {
    if (Status s = r.properties(&sub.properties, bit(PacketType::kSubscribe)); !s.isOk()) return s;
  }
  while (!r.atEnd()) {
    SubscriptionRequest req;
    if (Status s = r.utf8(&req.filter, "topic filter"); !s.isOk()) return s;
    uint8_t o = 0;
    if (Status s = r.u8(&o, "subscription options"); !s.isOk()) return s;
    req.qos = o & 0x03;
    if (req.qos == 3) return r.malformed("subscription QoS 3");
    if (isV5(v)) {
      req.noLocal = o & 0x04;
      req.retainAsPublished = o & 0x08;
      req.retainHandling = (o >> 4) & 0x03;
      if (req.retainHandling == 3) return r.malformed("retain handling 3");
      if (o & 0xC0) return r.malformed("reserved subscription option bits set");
    } else if (o & 0xFC) {
      return r.malformed("reserved subscription option bits set");
    }
    sub.subscriptions.push_back(std::move(req));
  }
  if (sub.subscriptions.empty()) return r.protocolError("no topic filter");
  return Packet(std::move(sub));
}

Result<Packet> decodeSubAck(Reader& r, PacketType t, ProtocolVersion v) {
  SubAck a;
  a.type = t;
  if (Status s = r.u16(&a.packetId, "packet identifier"); !s.isOk()) return s;
  if (isV5(v)) {
    if (Status s = r.properties(&a.properties, bit(t)); !s.isOk()) return s;
  }
  if (t == PacketType::kUnsuback && !isV5(v)) {
    if (Status s = finish(r); !s.isOk()) return s;
    return Packet(std::move(a));
  }
  std::string_view codes = r.rest();
  a.reasonCodes.assign(codes.begin(), codes.end());
  if (t == PacketType::kSuback && a.reasonCodes.empty()) return r.protocolError("no reason code");
  return Packet(std::move(a));
}

Result<Packet> decodeUnsubscribe(Reader& r, ProtocolVersion v) {
  Unsubscribe u;
  if (Status s = r.u16(&u.packetId, "packet identifier"); !s.isOk()) return s;
  if (u.packetId == 0) return r.protocolError("packet identifier 0");
  if (isV5(v)) {
    if (Status s = r.properties(&u.properties, bit(PacketType::kUnsubscribe)); !s.isOk()) return s;
  }
  while (!r.atEnd()) {
    std::string f;
    if (Status s = r.utf8(&f, "topic filter"); !s.isOk()) return s;
    u.filters.push_back(std::move(f));
  }
  if (u.filters.empty()) return r.protocolError("no topic filter");
  return Packet(std::move(u));
}

// The fixed-header flags each type must carry (spec 2.1.3); PUBLISH's are checked apart.
uint8_t requiredFlags(PacketType t) {
  return t == PacketType::kPubrel || t == PacketType::kSubscribe || t == PacketType::kUnsubscribe
             ? 0x02
             : 0x00;
}

// ---- Encoding ----------------------------------------------------------------------------

class Writer {
 public:
  void u8(uint8_t v) { b_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) {
    u8(uint8_t(v >> 8));
    u8(uint8_t(v));
  }
  void u32(uint32_t v) {
    for (int i = 3; i >= 0; i--) u8(uint8_t(v >> (8 * i)));
  }
  void str(std::string_view s) {
    assert(s.size() <= 0xFFFF);
    u16(static_cast<uint16_t>(s.size()));
    b_.append(s);
  }
  void raw(std::string_view s) { b_.append(s); }
  void varInt(uint32_t v) { appendVarInt(v, &b_); }
  void properties(const Properties& p);
  const std::string& bytes() const { return b_; }

 private:
  std::string b_;
};

void Writer::properties(const Properties& p) {
  Writer w;
  for (const auto& [id, v] : p.ints) {
    w.varInt(static_cast<uint32_t>(id));
    switch (kSpecs[static_cast<size_t>(id)].kind) {
      case Kind::kByte:
        w.u8(uint8_t(v));
        break;
      case Kind::kU16:
        w.u16(uint16_t(v));
        break;
      case Kind::kU32:
        w.u32(v);
        break;
      default:
        w.varInt(v);
        break;
    }
  }
  for (const auto& [id, v] : p.strings) {
    w.varInt(static_cast<uint32_t>(id));
    w.str(v);
  }
  for (uint32_t id : p.subscriptionIds) {
    w.varInt(static_cast<uint32_t>(PropertyId::kSubscriptionIdentifier));
    w.varInt(id);
  }
  for (const auto& [k, v] : p.userProperties) {
    w.varInt(static_cast<uint32_t>(PropertyId::kUserProperty));
    w.str(k);
    w.str(v);
  }
  varInt(static_cast<uint32_t>(w.bytes().size()));
  raw(w.bytes());
}

void encodeConnect(const Connect& c, Writer& w) {
  const bool v5 = isV5(c.version);
  w.str("MQTT");
  w.u8(static_cast<uint8_t>(c.version));
  uint8_t f = c.cleanSession ? 0x02 : 0;
  if (c.will) f |= uint8_t(0x04 | (c.will->qos << 3) | (c.will->retain ? 0x20 : 0));
  if (c.password) f |= 0x40;
  if (c.username) f |= 0x80;
  w.u8(f);
  w.u16(c.keepAliveSeconds);
  if (v5) w.properties(c.properties);
  w.str(c.clientId);
  if (c.will) {
    if (v5) w.properties(c.will->properties);
    w.str(c.will->topic);
    w.str(c.will->payload);
  }
  if (c.username) w.str(*c.username);
  if (c.password) w.str(*c.password);
}

// The body of p; *flags gets the fixed header's low nibble.
void encodeBody(const Packet& p, ProtocolVersion v, Writer& w, uint8_t* flags) {
  const bool v5 = isV5(v);
  *flags = requiredFlags(typeOf(p));
  if (const auto* c = std::get_if<Connect>(&p)) {
    encodeConnect(*c, w);
  } else if (const auto* a = std::get_if<Connack>(&p)) {
    w.u8(a->sessionPresent ? 1 : 0);
    w.u8(a->reasonCode);
    if (v5) w.properties(a->properties);
  } else if (const auto* pub = std::get_if<Publish>(&p)) {
    *flags = uint8_t((pub->dup ? 0x08 : 0) | (pub->qos << 1) | (pub->retain ? 1 : 0));
    w.str(pub->topic);
    if (pub->qos > 0) w.u16(pub->packetId);
    if (v5) w.properties(pub->properties);
    w.raw(pub->payload);
  } else if (const auto* ack = std::get_if<PubAck>(&p)) {
    w.u16(ack->packetId);
    if (v5 && (ack->reasonCode != 0 || !ack->properties.empty())) {
      w.u8(ack->reasonCode);
      if (!ack->properties.empty()) w.properties(ack->properties);
    }
  } else if (const auto* sub = std::get_if<Subscribe>(&p)) {
    w.u16(sub->packetId);
    if (v5) w.properties(sub->properties);
    for (const auto& r : sub->subscriptions) {
      w.str(r.filter);
      uint8_t o = r.qos;
      if (v5) {
        o |= uint8_t((r.noLocal ? 0x04 : 0) | (r.retainAsPublished ? 0x08 : 0) |
                     (r.retainHandling << 4));
      }
      w.u8(o);
    }
  } else if (const auto* sa = std::get_if<SubAck>(&p)) {
    w.u16(sa->packetId);
    if (v5) w.properties(sa->properties);
    if (v5 || sa->type == PacketType::kSuback) {
      for (uint8_t rc : sa->reasonCodes) w.u8(rc);
    }
  } else if (const auto* u = std::get_if<Unsubscribe>(&p)) {
    w.u16(u->packetId);
    if (v5) w.properties(u->properties);
    for (const auto& f : u->filters) w.str(f);
  } else if (const auto* d = std::get_if<Disconnect>(&p)) {
    if (v5 && (d->reasonCode != 0 || !d->properties.empty())) {
      w.u8(d->reasonCode);
      if (!d->properties.empty()) w.properties(d->properties);
    }
  }
}

}  // namespace

const char* packetTypeName(PacketType t) {
  static constexpr const char* kNames[] = {"RESERVED",  "CONNECT",  "CONNACK",     "PUBLISH",
                                           "PUBACK",    "PUBREC",   "PUBREL",      "PUBCOMP",
                                           "SUBSCRIBE", "SUBACK",   "UNSUBSCRIBE", "UNSUBACK",
                                           "PINGREQ",   "PINGRESP", "DISCONNECT",  "AUTH"};
  return kNames[static_cast<uint8_t>(t) & 0x0F];
}

uint8_t reasonCodeOf(const Status& e) {
  switch (e.code()) {
    case StatusCode::kCorruption:
      return reason::kMalformedPacket;
    case StatusCode::kInvalidArgument:
      return reason::kProtocolError;
    case StatusCode::kTooLarge:
      return reason::kPacketTooLarge;
    case StatusCode::kUnsupported:
      return reason::kUnsupportedProtocolVersion;
    default:
      return reason::kUnspecifiedError;
  }
}

PacketType typeOf(const Packet& p) {
  struct V {
    PacketType operator()(const Connect&) const { return PacketType::kConnect; }
    PacketType operator()(const Connack&) const { return PacketType::kConnack; }
    PacketType operator()(const Publish&) const { return PacketType::kPublish; }
    PacketType operator()(const PubAck& a) const { return a.type; }
    PacketType operator()(const Subscribe&) const { return PacketType::kSubscribe; }
    PacketType operator()(const SubAck& a) const { return a.type; }
    PacketType operator()(const Unsubscribe&) const { return PacketType::kUnsubscribe; }
    PacketType operator()(const Ping& a) const { return a.type; }
    PacketType operator()(const Disconnect& a) const { return a.type; }
  };
  return std::visit(V{}, p);
}

Result<std::optional<FixedHeader>> parseFixedHeader(std::string_view data, size_t maxPacketSize) {
  if (data.empty()) return std::optional<FixedHeader>();
  FixedHeader h;
  const uint8_t b0 = static_cast<uint8_t>(data[0]);
  h.type = static_cast<PacketType>(b0 >> 4);
  h.flags = b0 & 0x0F;
  if (b0 >> 4 == 0) return Status::corruption("malformed packet: reserved packet type 0");
  if (h.type == PacketType::kPublish) {
    if (((h.flags >> 1) & 0x03) == 3) return Status::corruption("malformed PUBLISH: QoS 3");
  } else if (h.flags != requiredFlags(h.type)) {
    return Status::corruption(
        fmt::format("malformed {}: fixed header flags 0x{:X}, expected 0x{:X}",
                    packetTypeName(h.type), h.flags, requiredFlags(h.type)));
  }
  uint32_t len = 0;
  for (size_t i = 1; i <= 4; i++) {
    if (data.size() <= i) return std::optional<FixedHeader>();
    const uint8_t b = static_cast<uint8_t>(data[i]);
    len |= uint32_t(b & 0x7F) << (7 * (i - 1));
    if (!(b & 0x80)) {
      h.remainingLength = len;
      h.headerLength = static_cast<uint8_t>(i + 1);
      if (h.packetSize() > maxPacketSize) {
        return Status::error(StatusCode::kTooLarge,
                             fmt::format("{} of {} bytes is over the maximum packet size {}",
                                         packetTypeName(h.type), h.packetSize(), maxPacketSize));
      }
      return std::optional<FixedHeader>(h);
    }
  }
  return Status::corruption(
      fmt::format("malformed {}: remaining length longer than 4 bytes", packetTypeName(h.type)));
}

Result<Packet> decodePacket(const FixedHeader& h, std::string_view body, ProtocolVersion v) {
  if (body.size() != h.remainingLength) {
    return Status::corruption(fmt::format("malformed {}: {} body bytes, remaining length {}",
                                          packetTypeName(h.type), body.size(), h.remainingLength));
  }
  Reader r(body, h.type);
  switch (h.type) {
    case PacketType::kConnect:
      return decodeConnect(r);
    case PacketType::kConnack:
      return decodeConnack(r, v);
    case PacketType::kPublish:
      return decodePublish(r, h.flags, v);
    case PacketType::kPuback:
    case PacketType::kPubrec:
    case PacketType::kPubrel:
    case PacketType::kPubcomp:
      return decodeAck(r, h.type, v);
    case PacketType::kSubscribe:
      return decodeSubscribe(r, v);
    case PacketType::kSuback:
    case PacketType::kUnsuback:
      return decodeSubAck(r, h.type, v);
    case PacketType::kUnsubscribe:
      return decodeUnsubscribe(r, v);
    case PacketType::kPingreq:
    case PacketType::kPingresp:
      if (Status s = finish(r); !s.isOk()) return s;
      return Packet(Ping{h.type});
    case PacketType::kAuth:
      if (!isV5(v)) return r.malformed("AUTH is MQTT 5 only");
      return decodeAck(r, h.type, v);
    case PacketType::kDisconnect:
      return decodeAck(r, h.type, v);
  }
  return r.malformed("unknown packet type");
}

void encodePacket(const Packet& p, ProtocolVersion v, std::string* out) {
  if (const auto* c = std::get_if<Connect>(&p)) v = c->version;
  Writer w;
  uint8_t flags = 0;
  encodeBody(p, v, w, &flags);
  assert(w.bytes().size() <= kMaxRemainingLength);
  out->push_back(static_cast<char>(static_cast<uint8_t>(typeOf(p)) << 4 | flags));
  appendVarInt(static_cast<uint32_t>(w.bytes().size()), out);
  out->append(w.bytes());
}

void PacketReader::append(const uint8_t* data, size_t len) {
  if (!error_.isOk()) return;
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {  // drop what was taken before growing
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(reinterpret_cast<const char*>(data), len);
}

Result<std::optional<Packet>> PacketReader::next() {
  if (!error_.isOk()) return error_;
  std::string_view rest = std::string_view(buf_).substr(pos_);
  auto h = parseFixedHeader(rest, maxPacketSize_);
  if (!h.isOk()) return error_ = h.status();
  if (!h->has_value() || rest.size() < (*h)->packetSize()) return std::optional<Packet>();
  const FixedHeader& fh = **h;
  auto p = decodePacket(fh, rest.substr(fh.headerLength, fh.remainingLength), version_);
  if (!p.isOk()) return error_ = p.status();
  pos_ += fh.packetSize();
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  if (const auto* c = std::get_if<Connect>(&*p)) version_ = c->version;
  return std::optional<Packet>(std::move(*p));
}

void appendVarInt(uint32_t v, std::string* out) {
  assert(v <= kMaxRemainingLength);
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    if (v) b |= 0x80;
    out->push_back(static_cast<char>(b));
  } while (v);
}

bool validUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      i++;
      continue;
    }
    int n;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (int k = 1; k <= n; k++) {
      const uint8_t cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace magnetar::mqtt
