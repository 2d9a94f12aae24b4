// How an MQTT PUBLISH and a Pulsar message carry each other's fields (MoP's
// PulsarMessageConverter names): MQTT 5 properties become Pulsar message properties named
// "MQTT_PROPERTIES_<property id>_" (user properties: that prefix + the name), and back; Pulsar
// properties without the prefix reach MQTT 5 subscribers as user properties. Thread: stateless.
#pragma once

#include <cstdint>
#include <string>
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
// expiry time in epoch seconds (nowSeconds + interval), as MoP stores it.
void toPulsarProperties(const Publish& p, int64_t nowSeconds, proto::MessageMetadata* md);

// One message of a stored entry, as an MQTT subscriber gets it.
struct DeliveredMessage {
  std::string payload;
  Properties properties;  // MQTT 5 only; ignored for 3.1.1
  bool expired = false;   // its MQTT message expiry passed (not delivered, MQTT 5 3.3.2.3.3)
};

// The messages of an entry (a batch gives several), with their properties mapped back
// (the MoP-prefixed ones to their MQTT property, the rest as user properties; the remaining
// expiry interval from the stored expiry time). Errors: kCorruption for a malformed entry or
// batch, kUnsupported for a compressed one.
Result<std::vector<DeliveredMessage>> messagesOfEntry(const Buffer& entry, int64_t nowSeconds);

}  // namespace magnetar::mqtt
