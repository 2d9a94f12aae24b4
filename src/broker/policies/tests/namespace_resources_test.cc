#include "broker/policies/namespace_resources.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(NamespaceResourcesTest, BadChangesAreRefusedAndChangeNothing) {
  NamespaceResources r;
  r.ensure("t/a");
  EXPECT_EQ(r.createPartitioned("persistent://t/a/p", 0).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.createPartitioned("persistent://t/a/p", 4).isOk());
  EXPECT_EQ(r.updatePartitioned("persistent://t/a/p", 2).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.partitions("persistent://t/a/p"), 4);
  EXPECT_EQ(r.updatePartitioned("persistent://t/a/none", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.removePartitioned("persistent://t/a/none").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.remove("t/none").code(), StatusCode::kNotFound);
}

TEST(NamespaceResourcesTest, RemovingANamespaceForgetsItsPartitionedTopicsOnly) {
  NamespaceResources r;
  r.ensure("t/a");
  r.ensure("t/ab");
  ASSERT_TRUE(r.createPartitioned("persistent://t/a/p", 2).isOk());
  ASSERT_TRUE(r.createPartitioned("non-persistent://t/a/q", 2).isOk());
  ASSERT_TRUE(r.createPartitioned("persistent://t/ab/p", 2).isOk());
  EXPECT_EQ(r.partitionedWithPrefix("persistent://t/a/").size(), 1u);
  ASSERT_TRUE(r.remove("t/a").isOk());
  EXPECT_FALSE(r.exists("t/a"));
  EXPECT_FALSE(r.partitions("persistent://t/a/p").has_value());
  EXPECT_FALSE(r.partitions("non-persistent://t/a/q").has_value());
  EXPECT_EQ(r.partitions("persistent://t/ab/p"), 2);
}

}  // namespace
}  // namespace magnetar::broker
