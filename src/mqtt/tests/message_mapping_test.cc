// MQTT 5 properties <-> Pulsar message properties (MoP's names), batches split for delivery.
#include "mqtt/message_mapping.h"

#include <gtest/gtest.h>

#include "protocol/commands.h"

namespace magnetar::mqtt {
namespace {

TEST(MqttMessageMapping, PropertiesGoToPulsarWithMopNamesAndBack) {
  Publish p;
  p.topic = "t";
  p.properties.userProperties = {{"unit", "C"}, {"room", "1"}};
  p.properties.strings[PropertyId::kContentType] = "application/json";
  p.properties.ints[PropertyId::kMessageExpiryInterval] = 60;
  p.properties.ints[PropertyId::kPayloadFormatIndicator] = 1;
  proto::MessageMetadata md;
  md.set_producer_name("x");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  toPulsarProperties(p, 1000, &md);
  std::map<std::string, std::string> kv;
  for (const auto& e : md.properties()) kv[e.key()] = e.value();
  EXPECT_EQ(kv["MQTT_PROPERTIES_38_unit"], "C");
  EXPECT_EQ(kv["MQTT_PROPERTIES_3_"], "application/json");
  EXPECT_EQ(kv["MQTT_PROPERTIES_2_"], "1060");  // absolute expiry, epoch seconds
  EXPECT_EQ(kv["MQTT_PROPERTIES_1_"], "1");
  auto* plain = md.add_properties();
  plain->set_key("pulsar-key");
  plain->set_value("v");
  Buffer entry = protocol::Commands::newEntry(md, "payload");
  auto msgs = messagesOfEntry(entry, 1010);
  ASSERT_TRUE(msgs.isOk()) << msgs.status().message();
  ASSERT_EQ(msgs->size(), 1u);
  const DeliveredMessage& m = (*msgs)[0];
  EXPECT_FALSE(m.expired);
  EXPECT_EQ(m.payload, "payload");
  EXPECT_EQ(*m.properties.str(PropertyId::kContentType), "application/json");
  EXPECT_EQ(*m.properties.num(PropertyId::kMessageExpiryInterval), 50u);  // what is left
  EXPECT_EQ(*m.properties.num(PropertyId::kPayloadFormatIndicator), 1u);
  std::vector<std::pair<std::string, std::string>> want = {
      {"unit", "C"}, {"room", "1"}, {"pulsar-key", "v"}};
  EXPECT_EQ(m.properties.userProperties, want);
  auto late = messagesOfEntry(entry, 1060);
  ASSERT_TRUE(late.isOk());
  EXPECT_TRUE((*late)[0].expired);
}

TEST(MqttMessageMapping, BatchesAreSplitAndMalformedOnesRefused) {
  std::string payload;
  for (std::string body : {"one", "two!"}) {
    proto::SingleMessageMetadata smm;
    smm.set_payload_size(static_cast<int>(body.size()));
    auto* kv = smm.add_properties();
    kv->set_key("k");
    kv->set_value(body);
    std::string s = smm.SerializeAsString();
    const uint32_t n = static_cast<uint32_t>(s.size());
    payload.push_back(static_cast<char>(n >> 24));
    payload.push_back(static_cast<char>(n >> 16));
    payload.push_back(static_cast<char>(n >> 8));
    payload.push_back(static_cast<char>(n));
    payload += s + body;
  }
  proto::MessageMetadata md;
  md.set_producer_name("x");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  md.set_num_messages_in_batch(2);
  auto msgs = messagesOfEntry(protocol::Commands::newEntry(md, payload), 0);
  ASSERT_TRUE(msgs.isOk()) << msgs.status().message();
  ASSERT_EQ(msgs->size(), 2u);
  EXPECT_EQ((*msgs)[0].payload, "one");
  EXPECT_EQ((*msgs)[1].payload, "two!");
  EXPECT_EQ((*msgs)[1].properties.userProperties[0].second, "two!");
  auto cut = messagesOfEntry(protocol::Commands::newEntry(md, payload.substr(0, 12)), 0);
  ASSERT_FALSE(cut.isOk());
  EXPECT_EQ(cut.status().code(), StatusCode::kCorruption);
  md.set_compression(proto::LZ4);
  auto lz4 = messagesOfEntry(protocol::Commands::newEntry(md, payload), 0);
  ASSERT_FALSE(lz4.isOk());
  EXPECT_EQ(lz4.status().code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace magnetar::mqtt
