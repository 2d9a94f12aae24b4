#include "mqtt/message_mapping.h"

#include <charconv>

#include "fmt/format.h"
#include "protocol/frame.h"

namespace magnetar::mqtt {
namespace {

void addProperty(proto::MessageMetadata* md, std::string key, std::string value) {
  auto* kv = md->add_properties();
  kv->set_key(std::move(key));
  kv->set_value(std::move(value));
}

std::optional<int64_t> parseInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// One Pulsar property into `out`: a MoP-prefixed one to its MQTT property, another as a user
// property. False when the message has expired.
bool fromPulsarProperty(const std::string& key, const std::string& value, int64_t now,
                        Properties* out) {
  static const std::string kPrefix = "MQTT_PROPERTIES_";
  if (key.rfind(kPrefix, 0) != 0) {
    out->userProperties.emplace_back(key, value);
    return true;
  }
  const size_t end = key.find('_', kPrefix.size());
  auto id = end == std::string::npos
                ? std::nullopt
                : parseInt(std::string_view(key).substr(kPrefix.size(), end - kPrefix.size()));
  if (!id) {
    out->userProperties.emplace_back(key, value);
    return true;
  }
  switch (static_cast<PropertyId>(*id)) {
    case PropertyId::kUserProperty:
      out->userProperties.emplace_back(key.substr(end + 1), value);
      break;
    case PropertyId::kContentType:
    case PropertyId::kResponseTopic:
    case PropertyId::kCorrelationData:
      out->strings[static_cast<PropertyId>(*id)] = value;
      break;
    case PropertyId::kPayloadFormatIndicator:
      if (auto v = parseInt(value); v && (*v == 0 || *v == 1)) {
        out->ints[PropertyId::kPayloadFormatIndicator] = static_cast<uint32_t>(*v);
      }
      break;
    case PropertyId::kMessageExpiryInterval:
      if (auto at = parseInt(value)) {
        if (*at <= now) return false;
        out->ints[PropertyId::kMessageExpiryInterval] = static_cast<uint32_t>(*at - now);
      }
      break;
    default:
      break;
  }
  return true;
}

template <typename KVs>
DeliveredMessage deliveredOf(std::string payload, const KVs& kvs, int64_t now) {
  DeliveredMessage m;
  m.payload = std::move(payload);
  for (const auto& kv : kvs) {
    if (kv.key() == kRetainedProperty) {
      m.retained = kv.value() == "true";
      continue;
    }
    if (!fromPulsarProperty(kv.key(), kv.value(), now, &m.properties)) m.expired = true;
  }
  return m;
}

}  // namespace

bool propertiesFromPulsar(const std::vector<std::pair<std::string, std::string>>& kvs,
                          int64_t nowSeconds, Properties* out) {
  bool live = true;
  for (const auto& [k, v] : kvs) {
    if (k == kRetainedProperty) continue;
    if (!fromPulsarProperty(k, v, nowSeconds, out)) live = false;
  }
  return live;
}

std::string mqttPropertyKey(PropertyId id) {
  return fmt::format("MQTT_PROPERTIES_{}_", static_cast<int>(id));
}

void toPulsarProperties(const Publish& p, int64_t nowSeconds, proto::MessageMetadata* md) {
  const Properties& props = p.properties;
  for (const auto& [k, v] : props.userProperties) {
    addProperty(md, mqttPropertyKey(PropertyId::kUserProperty) + k, v);
  }
  for (PropertyId id :
       {PropertyId::kContentType, PropertyId::kResponseTopic, PropertyId::kCorrelationData}) {
    if (const std::string* v = props.str(id)) addProperty(md, mqttPropertyKey(id), *v);
  }
  if (auto v = props.num(PropertyId::kPayloadFormatIndicator)) {
    addProperty(md, mqttPropertyKey(PropertyId::kPayloadFormatIndicator), std::to_string(*v));
  }
  if (auto v = props.num(PropertyId::kMessageExpiryInterval)) {
    addProperty(md, mqttPropertyKey(PropertyId::kMessageExpiryInterval),
                std::to_string(nowSeconds + static_cast<int64_t>(*v)));
  }
  if (p.retain) addProperty(md, std::string(kRetainedProperty), "true");
}

Result<std::vector<DeliveredMessage>> messagesOfEntry(const Buffer& entry, int64_t nowSeconds) {
  proto::MessageMetadata md;
  if (Status s = protocol::parseMetadata(entry, &md); !s.isOk()) return s;
  auto payload = protocol::payloadOf(entry);
  if (!payload.isOk()) return payload.status();
  if (md.compression() != proto::NONE) {
    return Status::error(StatusCode::kUnsupported,
                         "compressed entries are not delivered to MQTT subscribers yet");
  }
  std::vector<DeliveredMessage> out;
  if (!md.has_num_messages_in_batch()) {
    out.push_back(deliveredOf(std::string(*payload), md.properties(), nowSeconds));
    return out;
  }
  // A batch: [u32 BE size][SingleMessageMetadata][payload_size bytes], repeated.
  std::string_view rest = *payload;
  for (int i = 0; i < md.num_messages_in_batch(); i++) {
    if (rest.size() < 4) return Status::corruption("batch truncated at a message header");
    const uint32_t n = uint32_t(uint8_t(rest[0])) << 24 | uint32_t(uint8_t(rest[1])) << 16 |
                       uint32_t(uint8_t(rest[2])) << 8 | uint32_t(uint8_t(rest[3]));
    rest.remove_prefix(4);
    proto::SingleMessageMetadata smm;
    if (n > rest.size() || !smm.ParseFromArray(rest.data(), static_cast<int>(n))) {
      return Status::corruption("batch message metadata does not parse");
    }
    rest.remove_prefix(n);
    const auto size = static_cast<size_t>(smm.payload_size());
    if (smm.payload_size() < 0 || size > rest.size()) {
      return Status::corruption("batch message payload past the entry's end");
    }
    DeliveredMessage m =
        deliveredOf(std::string(rest.substr(0, size)), smm.properties(), nowSeconds);
    rest.remove_prefix(size);
    if (smm.compacted_out()) m.expired = true;  // not for delivery; still acknowledged
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace magnetar::mqtt
