#include "broker/common/topic_name.h"

#include <gtest/gtest.h>

namespace magnetar::broker {

TEST(TopicNameTest, ShortAndFullForms) {
  auto a = TopicName::parse("my-topic");
  ASSERT_TRUE(a.isOk());
  EXPECT_EQ(a->toString(), "persistent://public/default/my-topic");
  auto b = TopicName::parse("t1/ns1/x");
  ASSERT_TRUE(b.isOk());
  EXPECT_EQ(b->toString(), "persistent://t1/ns1/x");
  EXPECT_EQ(b->namespaceName(), "t1/ns1");
  EXPECT_EQ(b->persistenceName(), "t1/ns1/persistent/x");
  auto c = TopicName::parse("persistent://public/default/iot-partition-3");
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c->partitionIndex(), 3);
  EXPECT_EQ(c->partitionedTopicName(), "persistent://public/default/iot");
  EXPECT_EQ(c->partition(5).toString(), "persistent://public/default/iot-partition-5");
}

TEST(TopicNameTest, RejectsBadNames) {
  EXPECT_FALSE(TopicName::parse("").isOk());
  EXPECT_FALSE(TopicName::parse("a/b").isOk());
  EXPECT_FALSE(TopicName::parse("bogus://public/default/x").isOk());
  EXPECT_FALSE(TopicName::parse("persistent://public/default/").isOk());
  EXPECT_FALSE(TopicName::parse("persistent://pub lic/default/x").isOk());
  EXPECT_FALSE(TopicName::parse("persistent://public/default/a/b").isOk());
  auto bad = TopicName::parse("a/b");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace magnetar::broker
