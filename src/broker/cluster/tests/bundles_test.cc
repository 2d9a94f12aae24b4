// Bundles as Pulsar computes them: the hash values are java.util.zip.CRC32 (= Guava's crc32,
// padToLong) of the names, the boundaries PoliciesUtil.getBundles(n).
#include "broker/cluster/bundles.h"

#include <gtest/gtest.h>

namespace magnetar::broker::cluster {
namespace {

TEST(Bundles, TopicHashIsCrc32OfTheFullName) {
  EXPECT_EQ(topicHash("123456789"), 0xcbf43926u);  // CRC-32/IEEE check value
  EXPECT_EQ(topicHash(""), 0u);
  EXPECT_EQ(topicHash("persistent://public/default/my-topic"), 0x2bad45f7u);
  EXPECT_EQ(topicHash("persistent://public/default/topic-0"), 0x47f49a71u);
  EXPECT_EQ(topicHash("persistent://public/default/topic-2"), 0xa9fafb5du);
  EXPECT_EQ(topicHash("persistent://public/default/topic-3"), 0xdefdcbcbu);
  EXPECT_EQ(topicHash("persistent://public/default/t-partition-0"), 0x3da51034u);
}

TEST(Bundles, DefaultBoundariesArePulsars) {
  auto four = defaultBoundaries(4);
  ASSERT_TRUE(four.isOk());
  EXPECT_EQ(*four, (std::vector<uint64_t>{0, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff}));
  EXPECT_EQ(bundleName((*four)[0], (*four)[1]), "0x00000000_0x40000000");
  EXPECT_EQ(bundleName((*four)[3], (*four)[4]), "0xc0000000_0xffffffff");
  auto one = defaultBoundaries(1);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(*one, (std::vector<uint64_t>{0, 0xffffffff}));
  auto three = defaultBoundaries(3);  // 2^32 / 3 = 0x55555555
  ASSERT_TRUE(three.isOk());
  EXPECT_EQ(*three, (std::vector<uint64_t>{0, 0x55555555, 0xaaaaaaaa, 0xffffffff}));
  EXPECT_EQ(defaultBoundaries(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(defaultBoundaries(-3).status().code(), StatusCode::kInvalidArgument);
}

TEST(Bundles, TopicsFallInTheRangeOfTheirHash) {
  auto b = defaultBoundaries(4).value();
  EXPECT_EQ(findBundle(b, topicHash("persistent://public/default/topic-1")), 0u);
  EXPECT_EQ(findBundle(b, topicHash("persistent://public/default/topic-0")), 1u);
  EXPECT_EQ(findBundle(b, topicHash("persistent://public/default/topic-2")), 2u);
  EXPECT_EQ(findBundle(b, topicHash("persistent://public/default/topic-3")), 3u);
  // Lower bounds are inside, upper bounds outside; 0xffffffff is in the last bundle.
  EXPECT_EQ(findBundle(b, 0), 0u);
  EXPECT_EQ(findBundle(b, 0x3fffffff), 0u);
  EXPECT_EQ(findBundle(b, 0x40000000), 1u);
  EXPECT_EQ(findBundle(b, 0xfffffffe), 3u);
  EXPECT_EQ(findBundle(b, 0xffffffff), 3u);
}

TEST(Bundles, BoundariesFromPoliciesAreCheckedWithClearErrors) {
  auto ok = parseBoundaries({"0x00000000", "0x80000000", "0xffffffff"});
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(*ok, (std::vector<uint64_t>{0, 0x80000000, 0xffffffff}));
  for (std::vector<std::string> bad : {std::vector<std::string>{"0x00000000"},
                                       {"0x00000000", "zz"},
                                       {"0x0", "0x1ffffffff"},
                                       {"0x00000000", "0x80000000", "0x70000000", "0xffffffff"},
                                       {"0x10", "0xffffffff"},
                                       {"0x00000000", "0x80000000"}}) {
    auto r = parseBoundaries(bad);
    EXPECT_FALSE(r.isOk()) << bad.back();
    if (!r.isOk()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
  uint64_t lo = 0, hi = 0;
  ASSERT_TRUE(parseBundleName("0x40000000_0x80000000", &lo, &hi).isOk());
  EXPECT_EQ(lo, 0x40000000u);
  EXPECT_EQ(hi, 0x80000000u);
  EXPECT_FALSE(parseBundleName("0x80000000_0x40000000", &lo, &hi).isOk());
  EXPECT_FALSE(parseBundleName("garbage", &lo, &hi).isOk());
}

}  // namespace
}  // namespace magnetar::broker::cluster
