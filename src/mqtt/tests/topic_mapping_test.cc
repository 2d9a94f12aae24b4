// MoP's default topic mapping and MQTT topic filter matching.
#include "mqtt/topic_mapping.h"

#include <gtest/gtest.h>

namespace magnetar::mqtt {
namespace {

TEST(MqttTopicMapping, UrlEncodingAsJavaUrlEncoder) {
  EXPECT_EQ(urlEncode("sensors/room 1/temp"), "sensors%2Froom+1%2Ftemp");
  EXPECT_EQ(urlEncode("a.b-c*d_e09"), "a.b-c*d_e09");
  EXPECT_EQ(urlEncode("caf\xC3\xA9"), "caf%C3%A9");
  EXPECT_EQ(*urlDecode("sensors%2Froom+1%2Ftemp"), "sensors/room 1/temp");
  EXPECT_FALSE(urlDecode("bad%2").isOk());
  EXPECT_FALSE(urlDecode("bad%zz").isOk());
}

TEST(MqttTopicMapping, DefaultMappingAndDirectNames) {
  EXPECT_EQ(*pulsarTopicName("a/b", "public", "default", "persistent"),
            "persistent://public/default/a%2Fb");
  EXPECT_EQ(*pulsarTopicName("persistent://t1/ns1/x/y", "public", "default", "persistent"),
            "persistent://t1/ns1/x%2Fy");
  EXPECT_EQ(*pulsarTopicName("non-persistent://t1/ns1/x", "p", "d", "persistent"),
            "non-persistent://t1/ns1/x");
  EXPECT_FALSE(pulsarTopicName("persistent://t1/ns1", "p", "d", "persistent").isOk());
}

TEST(MqttTopicMapping, SharedSubscriptionFilters) {
  auto s = parseSharedFilter("$share/group-1/a/+/c");
  ASSERT_TRUE(s.isOk());
  ASSERT_TRUE(s->has_value());
  EXPECT_EQ((*s)->group, "group-1");
  EXPECT_EQ((*s)->filter, "a/+/c");
  EXPECT_EQ(selectingFilter("$share/group-1/a/+/c"), "a/+/c");
  s = parseSharedFilter("$share/g/#");
  ASSERT_TRUE(s.isOk() && s->has_value());
  EXPECT_EQ((*s)->filter, "#");
  for (const char* plain : {"a/b", "$SYS/x", "$shared/g/a", "share/g/a"}) {
    auto p = parseSharedFilter(plain);
    ASSERT_TRUE(p.isOk()) << plain;
    EXPECT_FALSE(p->has_value()) << plain;
    EXPECT_EQ(selectingFilter(plain), plain);
  }
  // MQTT-4.8.2-1/-2: a ShareName of one character at least, without '+' '#' (or '/'), then a
  // valid filter.
  for (const char* bad : {"$share/", "$share/g", "$share//a", "$share/a+/b", "$share/#/b",
                          "$share/g/", "$share/g/a#", "$share/g/a/#/b"}) {
    auto p = parseSharedFilter(bad);
    ASSERT_FALSE(p.isOk()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(selectingFilter(bad), bad);
  }
}

TEST(MqttTopicMapping, FilterValidity) {
  for (const char* ok : {"a", "a/b", "+", "#", "a/+/c", "a/#", "+/+", "/"}) {
    EXPECT_TRUE(validTopicFilter(ok)) << ok;
  }
  for (const char* bad : {"", "a#", "a/#/c", "a+/b", "#/a", "a/b+"}) {
    EXPECT_FALSE(validTopicFilter(bad)) << bad;
  }
  EXPECT_TRUE(isWildcardFilter("a/+"));
  EXPECT_FALSE(isWildcardFilter("a/b"));
}

TEST(MqttTopicMapping, Matching) {
  EXPECT_TRUE(topicMatches("a/+/c", "a/b/c"));
  EXPECT_FALSE(topicMatches("a/+/c", "a/b/d"));
  EXPECT_FALSE(topicMatches("a/+", "a/b/c"));
  EXPECT_TRUE(topicMatches("a/#", "a/b/c"));
  EXPECT_TRUE(topicMatches("a/#", "a"));
  EXPECT_TRUE(topicMatches("#", "x/y"));
  EXPECT_TRUE(topicMatches("+/+", "/x"));
  EXPECT_FALSE(topicMatches("+", "/x"));
  EXPECT_FALSE(topicMatches("#", "$SYS/x"));
  EXPECT_TRUE(topicMatches("$SYS/#", "$SYS/x"));
  EXPECT_TRUE(topicMatches("a/b", "a/b"));
  EXPECT_FALSE(topicMatches("a/b", "a/b/c"));
}

}  // namespace
}  // namespace magnetar::mqtt
