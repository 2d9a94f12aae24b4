// MQTT's stored records (sessions, retained messages: docs/mqtt-format.md) and the pure rules
// of session state: topic aliases, retain handling, will delay.
#include "mqtt/state_format.h"

#include <gtest/gtest.h>

#include "mqtt/message_mapping.h"
#include "protocol/commands.h"

namespace magnetar::mqtt {
namespace {

TEST(MqttStateFormat, SessionRoundTripsAndBadRecordsAreCorruption) {
  StoredSession s;
  s.filters.push_back(SubscriptionRequest{"a/+/c", 1, false, true, 2});
  s.filters.push_back(SubscriptionRequest{"x", 0, true, false, 0});
  s.expirySeconds = 3600;
  s.disconnectedAtMs = 1700000000123;
  const std::string json = encodeSession(s);
  auto back = decodeSession(json);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(*back, s);
  for (const char* bad :
       {"", "[]", "{\"filters\":[]}", "{\"filters\":{},\"expirySeconds\":1,\"disconnectedAtMs\":0}",
        "{\"filters\":[{\"filter\":\"a\",\"qos\":3}],\"expirySeconds\":1,\"disconnectedAtMs\":0}",
        "{\"filters\":[],\"expirySeconds\":1,\"disconnectedAtMs\":0,\"qos2Received\":[0]}",
        "{\"filters\":[],\"expirySeconds\":1,\"disconnectedAtMs\":0,\"qos2Received\":[65536]}",
        "{\"filters\":[],\"expirySeconds\":1,\"disconnectedAtMs\":0,\"qos2Received\":7}",
        "{\"filters\":[],\"expirySeconds\":1,\"disconnectedAtMs\":0,\"will\":{\"dueMs\":1}}",
        "{\"filters\":[],\"expirySeconds\":1,\"disconnectedAtMs\":0,\"will\":[]}",
        "{\"filters\":[{\"filter\":\"\",\"qos\":0}],\"expirySeconds\":1,\"disconnectedAtMs\":0}",
        "{\"filters\":[],\"expirySeconds\":4294967296,\"disconnectedAtMs\":0}",
        "{\"filters\":[],\"expirySeconds\":-1,\"disconnectedAtMs\":0}"}) {
    auto r = decodeSession(bad);
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
  }
}

// QoS 2 packet ids waiting for PUBREL and a will waiting for its delay are in the record, so
// they outlive a broker restart.
TEST(MqttStateFormat, SessionKeepsQos2IdsAndAPendingWill) {
  StoredSession s;
  s.filters.push_back(SubscriptionRequest{"$share/g/a/#", 2, false, false, 0});
  s.expirySeconds = 120;
  s.disconnectedAtMs = 1700000000123;
  s.qos2Received = {1, 7, 65535};
  PendingWill w;
  w.dueMs = 1700000006123;
  w.will.topic = "dev/1/status";
  w.will.payload = std::string("lost\0\xfe", 6);
  w.will.qos = 2;
  w.will.retain = true;
  w.will.properties.strings[PropertyId::kContentType] = "text/plain";
  w.will.properties.ints[PropertyId::kMessageExpiryInterval] = 300;
  w.will.properties.userProperties = {{"k", "v"}};
  s.will = w;
  const std::string json = encodeSession(s);
  auto back = decodeSession(json);
  ASSERT_TRUE(back.isOk()) << back.status().message() << json;
  EXPECT_EQ(*back, s) << json;
  // The Will Delay Interval itself is not kept: the due time says it.
  w.will.properties.ints[PropertyId::kWillDelayInterval] = 6;
  s.will = w;
  back = decodeSession(encodeSession(s));
  ASSERT_TRUE(back.isOk());
  EXPECT_FALSE(back->will->will.properties.num(PropertyId::kWillDelayInterval));
  EXPECT_EQ(back->will->dueMs, w.dueMs);
  // Without either, the record is as before (no new fields).
  StoredSession plain;
  EXPECT_EQ(encodeSession(plain).find("will"), std::string::npos);
  EXPECT_EQ(encodeSession(plain).find("qos2Received"), std::string::npos);
}

TEST(MqttStateFormat, SessionExpiryCountsFromTheDisconnection) {
  StoredSession s;
  s.expirySeconds = 10;
  EXPECT_FALSE(sessionExpired(s, 1'000'000'000));  // connected
  s.disconnectedAtMs = 1000;
  EXPECT_FALSE(sessionExpired(s, 10'999));
  EXPECT_TRUE(sessionExpired(s, 11'000));
  s.expirySeconds = kSessionNeverExpires;
  EXPECT_FALSE(sessionExpired(s, INT64_MAX / 2));
}

TEST(MqttStateFormat, RetainedKeepsPayloadQosAndProperties) {
  Publish p;
  p.topic = "home/kitchen/temp";
  p.qos = 1;
  p.retain = true;
  p.payload = std::string("21.5\0\xff", 6);
  p.properties.userProperties = {{"unit", "C"}};
  p.properties.strings[PropertyId::kContentType] = "text/plain";
  p.properties.ints[PropertyId::kMessageExpiryInterval] = 30;
  RetainedMessage r = retainedOf(p, 1000);
  EXPECT_EQ(r.topic, p.topic);
  EXPECT_EQ(r.qos, 1);
  auto back = decodeRetained(encodeRetained(r));
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->payload, p.payload);
  Properties props;
  ASSERT_TRUE(propertiesFromPulsar(back->pulsarProperties, 1010, &props));
  EXPECT_EQ(*props.str(PropertyId::kContentType), "text/plain");
  EXPECT_EQ(*props.num(PropertyId::kMessageExpiryInterval), 20u);
  ASSERT_EQ(props.userProperties.size(), 1u);  // the retain mark is not a user property
  EXPECT_EQ(props.userProperties[0].first, "unit");
  Properties late;
  EXPECT_FALSE(propertiesFromPulsar(back->pulsarProperties, 1030, &late));  // expired
  for (const char* bad : {"{}", "{\"topic\":\"t\",\"qos\":0,\"payload\":\"***\"}",
                          "{\"topic\":\"t\",\"qos\":0,\"payload\":\"\",\"properties\":[[1,2]]}",
                          "{\"topic\":\"\",\"qos\":0,\"payload\":\"\"}"}) {
    auto d = decodeRetained(bad);
    ASSERT_FALSE(d.isOk()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << bad;
  }
}

TEST(MqttStateFormat, RetainFlagTravelsAsAPulsarProperty) {
  Publish p;
  p.topic = "t";
  p.retain = true;
  proto::MessageMetadata md;
  md.set_producer_name("x");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  toPulsarProperties(p, 0, &md);
  auto msgs = messagesOfEntry(protocol::Commands::newEntry(md, "v"), 0);
  ASSERT_TRUE(msgs.isOk());
  EXPECT_TRUE((*msgs)[0].retained);
  EXPECT_TRUE((*msgs)[0].properties.userProperties.empty());
  p.retain = false;
  proto::MessageMetadata plain;
  plain.set_producer_name("x");
  plain.set_sequence_id(0);
  plain.set_publish_time(1);
  toPulsarProperties(p, 0, &plain);
  EXPECT_FALSE((*messagesOfEntry(protocol::Commands::newEntry(plain, "v"), 0))[0].retained);
}

TEST(MqttStateFormat, StorePathComponentsAvoidDotsAndSlashes) {
  EXPECT_EQ(storePathComponent("a/b c"), "a%2Fb+c");
  EXPECT_EQ(storePathComponent(".."), "%2E%2E");
  EXPECT_EQ(storePathComponent("dev.1"), "dev%2E1");
  for (const char* s : {"a/b c", "..", "dev.1", "$SYS/x", "ünï"}) {
    auto back = fromStorePathComponent(storePathComponent(s));
    ASSERT_TRUE(back.isOk());
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(fromStorePathComponent("%G1").isOk());
}

TEST(MqttStateFormat, TopicAliasesBindResolveAndRefuse) {
  std::map<uint16_t, std::string> aliases;
  std::string why;
  Publish bind;
  bind.topic = "long/topic/name";
  bind.properties.ints[PropertyId::kTopicAlias] = 3;
  EXPECT_EQ(resolveTopicAlias(&bind, 10, &aliases, &why), reason::kSuccess);
  EXPECT_EQ(bind.topic, "long/topic/name");
  EXPECT_FALSE(bind.properties.num(PropertyId::kTopicAlias));  // not passed on
  Publish use;
  use.properties.ints[PropertyId::kTopicAlias] = 3;
  EXPECT_EQ(resolveTopicAlias(&use, 10, &aliases, &why), reason::kSuccess);
  EXPECT_EQ(use.topic, "long/topic/name");
  Publish rebind;
  rebind.topic = "other";
  rebind.properties.ints[PropertyId::kTopicAlias] = 3;
  EXPECT_EQ(resolveTopicAlias(&rebind, 10, &aliases, &why), reason::kSuccess);
  EXPECT_EQ(aliases[3], "other");
  Publish unbound;
  unbound.properties.ints[PropertyId::kTopicAlias] = 4;
  EXPECT_EQ(resolveTopicAlias(&unbound, 10, &aliases, &why), reason::kProtocolError);
  for (uint32_t bad : {0u, 11u}) {
    Publish p;
    p.topic = "t";
    p.properties.ints[PropertyId::kTopicAlias] = bad;
    why.clear();
    EXPECT_EQ(resolveTopicAlias(&p, 10, &aliases, &why), reason::kTopicAliasInvalid) << bad;
    EXPECT_NE(why.find("Topic Alias Maximum"), std::string::npos);
  }
  Publish none;
  none.topic = "plain";
  EXPECT_EQ(resolveTopicAlias(&none, 0, &aliases, &why), reason::kSuccess);
  Publish anyWhenOff;
  anyWhenOff.topic = "t";
  anyWhenOff.properties.ints[PropertyId::kTopicAlias] = 1;
  EXPECT_EQ(resolveTopicAlias(&anyWhenOff, 0, &aliases, &why), reason::kTopicAliasInvalid);
}

TEST(MqttStateFormat, RetainHandlingAndWillDelay) {
  EXPECT_TRUE(sendsRetained(0, false));
  EXPECT_TRUE(sendsRetained(0, true));
  EXPECT_TRUE(sendsRetained(1, false));
  EXPECT_FALSE(sendsRetained(1, true));
  EXPECT_FALSE(sendsRetained(2, false));
  Will w;
  EXPECT_EQ(willDelaySeconds(w, true, 100), 0u);
  w.properties.ints[PropertyId::kWillDelayInterval] = 30;
  EXPECT_EQ(willDelaySeconds(w, true, 100), 30u);
  EXPECT_EQ(willDelaySeconds(w, true, 5), 5u);   // the session ends first
  EXPECT_EQ(willDelaySeconds(w, false, 0), 0u);  // ends with the connection
  EXPECT_EQ(willDelaySeconds(w, true, kSessionNeverExpires), 30u);
}

}  // namespace
}  // namespace magnetar::mqtt
