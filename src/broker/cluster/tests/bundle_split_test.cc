// The split algorithms and the auto-split choice as Pulsar 4.2 computes them
// (NamespaceBundleSplitAlgorithm's implementations, NamespaceBundleFactory.splitBundles,
// BundleSplitterTask); tests/differential/test_bundle_split.py checks the same boundaries on
// the reference broker.
#include "broker/cluster/bundle_split.h"

#include <gtest/gtest.h>

namespace magnetar::broker::cluster {
namespace {

std::vector<uint64_t> boundariesOf(SplitAlgorithm a, const SplitRequest& r) {
  auto b = splitBoundaries(a, r);
  EXPECT_TRUE(b.isOk()) << b.status().message();
  return b.isOk() ? *b : std::vector<uint64_t>{};
}

SplitRequest request(uint64_t lo, uint64_t hi, std::vector<SplitTopic> topics) {
  SplitRequest r;
  r.lower = lo;
  r.upper = hi;
  r.topics = std::move(topics);
  return r;
}

TEST(BundleSplit, AlgorithmNamesArePulsars) {
  for (const char* n : {"range_equally_divide", "topic_count_equally_divide",
                        "specified_positions_divide", "flow_or_qps_equally_divide"}) {
    auto a = splitAlgorithmByName(n);
    ASSERT_TRUE(a.has_value()) << n;
    EXPECT_STREQ(splitAlgorithmName(*a), n);
  }
  EXPECT_FALSE(splitAlgorithmByName("RANGE_EQUALLY_DIVIDE").has_value());
  EXPECT_FALSE(splitAlgorithmByName("").has_value());
}

TEST(BundleSplit, RangeEquallyDivideTakesTheMiddle) {
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kRangeEquallyDivide, request(0, 0x40000000, {})),
            (std::vector<uint64_t>{0x20000000}));
  // The last bundle ends at 0xffffffff: its middle rounds down (Java's long division).
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kRangeEquallyDivide, request(0xc0000000, 0xffffffff, {})),
            (std::vector<uint64_t>{0xdfffffff}));
}

TEST(BundleSplit, TopicCountEquallyDivideCutsBetweenTheMiddleHashes) {
  auto even = request(0, 0x40000000, {{40, 0, 0}, {10, 0, 0}, {30, 0, 0}, {20, 0, 0}});
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kTopicCountEquallyDivide, even),
            (std::vector<uint64_t>{25}));
  auto odd = request(0, 0x40000000, {{10, 0, 0}, {20, 0, 0}, {31, 0, 0}});
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kTopicCountEquallyDivide, odd),
            (std::vector<uint64_t>{15}));
  // One topic or none: no boundary (the split does nothing).
  EXPECT_TRUE(
      boundariesOf(SplitAlgorithm::kTopicCountEquallyDivide, request(0, 100, {{5, 0, 0}})).empty());
}

TEST(BundleSplit, SpecifiedPositionsKeepsThoseInsideTheRange) {
  auto r = request(0x10000000, 0x40000000, {{0x11000000, 0, 0}, {0x31000000, 0, 0}});
  r.positions = {0x30000000, 0x50000000, 0x20000000, 0x10000000, -1};
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kSpecifiedPositionsDivide, r),
            (std::vector<uint64_t>{0x20000000, 0x30000000}));
  r.positions = {0x50000000};
  EXPECT_TRUE(boundariesOf(SplitAlgorithm::kSpecifiedPositionsDivide, r).empty());
  r.positions = {0x20000000};
  r.topics.resize(1);  // fewer than 2 topics: nothing to split
  EXPECT_TRUE(boundariesOf(SplitAlgorithm::kSpecifiedPositionsDivide, r).empty());
  r.positions.clear();
  auto none = splitBoundaries(SplitAlgorithm::kSpecifiedPositionsDivide, r);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), "SplitBoundaries can't be empty");
}

TEST(BundleSplit, FlowOrQpsCutsWhereTheRatePilesUp) {
  auto r =
      request(0, 0x40000000, {{300, 60, 0}, {100, 60, 0}, {400, 0, 0}, {200, 60, 0}});  // 400: idle
  r.maxMsgRate = 100;
  r.maxBandwidthMbytes = 100;
  r.diffThresholdPercentage = 10;
  // 60 + 60 > 100 before 200 and before 300: one past the middle of each pair of hashes.
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kFlowOrQpsEquallyDivide, r),
            (std::vector<uint64_t>{151, 251}));
  // Under maxMsgRate * 1.1 in all (and under the bandwidth): no split.
  r.topics = {{100, 50, 0}, {200, 59, 0}};
  EXPECT_TRUE(boundariesOf(SplitAlgorithm::kFlowOrQpsEquallyDivide, r).empty());
  // The bandwidth alone: 2 topics of 60 MiB/s each against 100 MiB/s.
  r.topics = {{1000, 1, 60.0 * 1024 * 1024}, {3000, 1, 60.0 * 1024 * 1024}};
  EXPECT_EQ(boundariesOf(SplitAlgorithm::kFlowOrQpsEquallyDivide, r),
            (std::vector<uint64_t>{2001}));
  // One busy topic: nothing to split.
  r.topics = {{1000, 500, 0}, {3000, 0, 0}};
  EXPECT_TRUE(boundariesOf(SplitAlgorithm::kFlowOrQpsEquallyDivide, r).empty());
}

TEST(BundleSplit, CutAfterSplitInsertsThePoints) {
  std::vector<uint64_t> cut{0, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff};
  auto two = cutAfterSplit(cut, 1, {0x60000000});
  ASSERT_TRUE(two.isOk());
  EXPECT_EQ(*two,
            (std::vector<uint64_t>{0, 0x40000000, 0x60000000, 0x80000000, 0xc0000000, 0xffffffff}));
  auto three = cutAfterSplit(cut, 3, {0xe0000000, 0xd0000000, 0xe0000000});
  ASSERT_TRUE(three.isOk());
  EXPECT_EQ(*three, (std::vector<uint64_t>{0, 0x40000000, 0x80000000, 0xc0000000, 0xd0000000,
                                           0xe0000000, 0xffffffff}));
  auto outside = cutAfterSplit(cut, 0, {0x40000000});
  ASSERT_FALSE(outside.isOk());
  EXPECT_EQ(outside.status().message(),
            "The given fixed keys must between the key range of the "
            "0x00000000_0x40000000 bundle");
  auto narrow = cutAfterSplit({0, 1, 0xffffffff}, 0, {0});
  ASSERT_FALSE(narrow.isOk());
  EXPECT_EQ(narrow.status().message(), "0x00000000_0x00000001 bundle can't be split further");
  EXPECT_FALSE(cutAfterSplit(cut, 4, {5}).isOk());
}

TEST(BundleSplit, FindBundlesToSplitAsBundleSplitterTask) {
  SplitThresholds t;
  t.maxTopics = 10;
  t.maxSessions = 5;
  t.maxMsgRate = 100;
  t.maxBandwidthMbytes = 1;
  t.maxBundlesPerNamespace = 3;
  std::map<std::string, BundleLoad> b;
  b["a/n/0x00000000_0x40000000"] = {2, 0, 0, 101, 0};                // msg rate
  b["a/n/0x40000000_0x80000000"] = {11, 0, 0, 0, 0};                 // topics
  b["a/n/0x80000000_0xc0000000"] = {2, 3, 3, 0, 0};                  // sessions (6 > 5)
  b["a/m/0x00000000_0xffffffff"] = {2, 0, 0, 0, 2.0 * 1024 * 1024};  // bandwidth
  b["a/m/0x00000000_0x10000000"] = {1, 0, 0, 1e6, 0};                // a single topic
  b["a/k/0x00000000_0xffffffff"] = {3, 1, 1, 99, 1000};              // under every threshold
  std::map<std::string, int> count{{"a/n", 2}, {"a/m", 1}, {"a/k", 1}};
  // a/n has 2 bundles of at most 3: one split this round (the first by key).
  EXPECT_EQ(findBundlesToSplit(b, count, t),
            (std::vector<std::string>{"a/m/0x00000000_0xffffffff", "a/n/0x00000000_0x40000000"}));
  count["a/n"] = 1;
  EXPECT_EQ(findBundlesToSplit(b, count, t).size(), 3u);
  t.maxSessions = 0;  // off
  t.maxBundlesPerNamespace = 128;
  EXPECT_EQ(findBundlesToSplit(b, count, t),
            (std::vector<std::string>{"a/m/0x00000000_0xffffffff", "a/n/0x00000000_0x40000000",
                                      "a/n/0x40000000_0x80000000"}));
}

}  // namespace
}  // namespace magnetar::broker::cluster
