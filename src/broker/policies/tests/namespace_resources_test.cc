#include "broker/policies/namespace_resources.h"

#include <gtest/gtest.h>

#include "storage/metadata_store.h"

namespace magnetar::broker {
namespace {

TEST(NamespaceResourcesTest, NamespacesAndPartitionedTopicsSurviveAReload) {
  storage::MemoryMetadataStore store;
  {
    NamespaceResources r;
    r.load(&store, {"public/default"});
    ASSERT_TRUE(r.create("t/a").isOk());
    EXPECT_EQ(r.create("t/a").code(), StatusCode::kAlreadyExists);
    ASSERT_TRUE(r.createPartitioned("persistent://t/a/p", 3).isOk());
    EXPECT_EQ(r.createPartitioned("persistent://t/a/p", 2).code(), StatusCode::kAlreadyExists);
    auto before = r.updatePartitioned("persistent://t/a/p", 5);
    ASSERT_TRUE(before.isOk());
    EXPECT_EQ(*before, 3);
  }
  NamespaceResources again;
  again.load(&store, {});
  EXPECT_EQ(again.list(), (std::vector<std::string>{"public/default", "t/a"}));
  EXPECT_EQ(again.partitions("persistent://t/a/p"), 5);
  EXPECT_FALSE(again.partitions("persistent://t/a/other").has_value());
}

TEST(NamespaceResourcesTest, BadChangesAreRefusedAndChangeNothing) {
  NamespaceResources r;
  r.load(nullptr, {"t/a"});
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
  r.load(nullptr, {"t/a", "t/ab"});
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

TEST(NamespaceResourcesTest, DamagedPartitionCountsAreSkipped) {
  storage::MemoryMetadataStore store;
  ASSERT_TRUE(store
                  .write({storage::MetadataOp::put("/admin/magnetar/partitioned-topics",
                                                   "persistent://t/a/ok=2\npersistent://t/a/"
                                                   "bad=x\npersistent://t/a/zero=0\nnoequals\n")})
                  .isOk());
  NamespaceResources r;
  r.load(&store, {});
  EXPECT_EQ(r.partitions("persistent://t/a/ok"), 2);
  EXPECT_FALSE(r.partitions("persistent://t/a/bad").has_value());
  EXPECT_FALSE(r.partitions("persistent://t/a/zero").has_value());
}

}  // namespace
}  // namespace magnetar::broker
