// Topic names and partition routing.
#include "client/routing.h"

#include <gtest/gtest.h>

#include <set>

#include "base/murmur3.h"
#include "client/client_impl.h"

namespace magnetar::client {
namespace {

TEST(RoutingTest, NormalizesTopicNamesLikePulsar) {
  EXPECT_EQ(*normalizeTopic("t"), "persistent://public/default/t");
  EXPECT_EQ(*normalizeTopic("tn/ns/t"), "persistent://tn/ns/t");
  EXPECT_EQ(*normalizeTopic("persistent://a/b/c"), "persistent://a/b/c");
  EXPECT_EQ(*normalizeTopic("non-persistent://a/b/c"), "non-persistent://a/b/c");
  EXPECT_FALSE(normalizeTopic("").isOk());
  EXPECT_FALSE(normalizeTopic("a/b").isOk());
  EXPECT_FALSE(normalizeTopic("http://a/b/c").isOk());
  EXPECT_FALSE(normalizeTopic("persistent://a/b").isOk());
  EXPECT_EQ(partitionName("persistent://a/b/c", 3), "persistent://a/b/c-partition-3");
}

TEST(RoutingTest, KeyedMessagesUseMurmur3MaskedModulo) {
  // MurmurHash3_x86_32("hello", seed 0) = 613153351 (reference value).
  EXPECT_EQ(murmur3_32("hello", 5, 0), 613153351u);
  EXPECT_EQ(partitionForKey("hello", 10), 613153351 % 10);
  for (int n : {1, 2, 3, 7, 16}) {
    for (const char* k : {"a", "key-1", "user-42", "\xff\xfe"}) {
      std::string_view key(k);
      uint32_t h = murmur3_32(key.data(), key.size(), 0) & 0x7fffffffu;
      EXPECT_EQ(partitionForKey(key, n), static_cast<int>(h % n)) << k << " " << n;
    }
  }
  PartitionRouter r(RoutingMode::kRoundRobin, 7);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(r.route("hello"), partitionForKey("hello", 7));
}

TEST(RoutingTest, KeylessMessagesRoundRobinOrStick) {
  PartitionRouter rr(RoutingMode::kRoundRobin, 4, 2);
  std::vector<int> got;
  for (int i = 0; i < 8; ++i) got.push_back(rr.route(""));
  EXPECT_EQ(got, (std::vector<int>{2, 3, 0, 1, 2, 3, 0, 1}));

  PartitionRouter single(RoutingMode::kSinglePartition, 4, 5);
  std::set<int> seen;
  for (int i = 0; i < 10; ++i) seen.insert(single.route(""));
  EXPECT_EQ(seen, (std::set<int>{1}));
}

TEST(RoutingTest, ParsesServiceUrls) {
  EXPECT_EQ(*parseServiceUrl("pulsar://localhost:6650"),
            std::vector<std::string>{"localhost:6650"});
  EXPECT_EQ(*parseServiceUrl("pulsar://h1,h2:7000/"),
            (std::vector<std::string>{"h1:6650", "h2:7000"}));
  EXPECT_EQ(*parseServiceUrl("pulsar://[::1]:6650"), std::vector<std::string>{"::1:6650"});
  EXPECT_FALSE(parseServiceUrl("http://localhost:8080").isOk());
  EXPECT_EQ(*parseServiceUrl("pulsar+ssl://localhost"), std::vector<std::string>{"localhost:6651"});
  EXPECT_FALSE(parseServiceUrl("pulsar://").isOk());
  EXPECT_FALSE(parseServiceUrl("pulsar://host:99999").isOk());
  EXPECT_FALSE(parseServiceUrl("pulsar://host:x").isOk());
}

}  // namespace
}  // namespace magnetar::client
