// How an MQTT PUBLISH and a Pulsar message carry each other's fields (MoP's
// PulsarMessageConverter names): MQTT 5 properties become Pulsar message properties named
// "MQTT_PROPERTIES_<property id>_" (user properties: that prefix + the name), and back; Pulsar
// properties without the prefix reach MQTT 5 subscribers as user properties. Thread: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "mqtt/codec.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::mqtt {

// The prefix of a Pulsar property carrying MQTT 5 property `id` (MoP's MQTT_PROPERTIES).
std::string mqttPropertyKey(PropertyId id);

// Adds p's MQTT 5 properties to md's properties: user properties, content type, response topic,
// correlation data, payload format indicator, and the message expiry interval as the absolute
// expiry time in epoch seconds (nowSeconds + interval), as MoP stores it; p.retain as
// kRetainedProperty.
void toPulsarProperties(const Publish& p, int64_t nowSeconds, proto::MessageMetadata* md);

// The Pulsar property marking a message published with the MQTT retain flag (Magnetar's; MoP
// keeps no such mark), for MQTT 5 Retain As Published. Value "true".
inline constexpr std::string_view kRetainedProperty = "MQTT_RETAINED";

// Pulsar properties (key, value) back to MQTT 5 properties into `out`, as for delivery (the
// remaining expiry interval from the stored expiry time). False when the message has expired.
bool propertiesFromPulsar(const std::vector<std::pair<std::string, std::string>>& kvs,
                          int64_t nowSeconds, Properties* out);

// One message of a stored entry, as an MQTT subscriber gets it.
struct DeliveredMessage {
  std::string payload;
  Properties properties;  // MQTT 5 only; ignored for 3.1.1
  bool expired = false;   // its MQTT message expiry passed (not delivered, MQTT 5 3.3.2.3.3)
  bool retained = false;  // published with the retain flag (kRetainedProperty)
};

// The messages of an entry (a batch gives several), with their properties mapped back
// (the MoP-prefixed ones to their MQTT property, the rest as user properties; the remaining
// expiry interval from the stored expiry time). Errors: kCorruption for a malformed entry or
// batch, kUnsupported for a compressed one.
Result<std::vector<DeliveredMessage>> messagesOfEntry(const Buffer& entry, int64_t nowSeconds);

}  // namespace magnetar::mqtt
