#include "histogram.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <thread>
#include <vector>

namespace magnetar::perf {
namespace {

TEST(LatencyHistogramTest, BucketsCoverValuesWithThreeDigitPrecision) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint64_t v = rng() >> (rng() % 36 + 28);  // spread over many octaves (shift < 64)
    v = std::min(v, LatencyHistogram::kMaxValue);
    size_t idx = LatencyHistogram::indexOf(v);
    ASSERT_LT(idx, LatencyHistogram::kBucketCount);
    uint64_t lo = LatencyHistogram::lowestOf(idx), hi = LatencyHistogram::highestOf(idx);
    ASSERT_LE(lo, v);
    ASSERT_GE(hi, v);
    // Any value of the bucket is within 1/1000 of v (3 significant digits); exact below 2048.
    ASSERT_LT(static_cast<double>(hi - lo) / std::max<uint64_t>(v, 1), 0.001) << "v=" << v;
    if (v < LatencyHistogram::kLinearLimit) {
      ASSERT_EQ(lo, hi);
    }
  }
  EXPECT_EQ(LatencyHistogram::indexOf(LatencyHistogram::kMaxValue),
            LatencyHistogram::kBucketCount - 1);
  // Adjacent buckets tile the value range without gaps.
  for (size_t i = 1; i < LatencyHistogram::kBucketCount; ++i) {
    ASSERT_EQ(LatencyHistogram::lowestOf(i), LatencyHistogram::highestOf(i - 1) + 1) << i;
  }
}

TEST(LatencyHistogramTest, PercentilesOfUniformValues) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.max(), 100000u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_NEAR(h.mean(), 50000.5, 1e-6);
  auto within = [](uint64_t got, double want) {
    return std::abs(static_cast<double>(got) - want) <= want * 0.001 + 1;
  };
  EXPECT_TRUE(within(h.valueAtPercentile(50), 50000)) << h.valueAtPercentile(50);
  EXPECT_TRUE(within(h.valueAtPercentile(90), 90000)) << h.valueAtPercentile(90);
  EXPECT_TRUE(within(h.valueAtPercentile(99), 99000)) << h.valueAtPercentile(99);
  EXPECT_TRUE(within(h.valueAtPercentile(99.9), 99900)) << h.valueAtPercentile(99.9);
  EXPECT_EQ(h.valueAtPercentile(100), 100000u);
  // Small values are exact.
  LatencyHistogram small;
  for (uint64_t v : {3, 3, 3, 7, 1000}) small.record(v);
  EXPECT_EQ(small.valueAtPercentile(50), 3u);
  EXPECT_EQ(small.valueAtPercentile(80), 7u);
  EXPECT_EQ(small.valueAtPercentile(99), 1000u);
}

TEST(LatencyHistogramTest, SkewedDistributionTail) {
  LatencyHistogram h;
  for (int i = 0; i < 9900; ++i) h.record(100);
  for (int i = 0; i < 99; ++i) h.record(5000);
  h.record(1234567);
  EXPECT_EQ(h.valueAtPercentile(50), 100u);
  EXPECT_EQ(h.valueAtPercentile(99), 100u);
  EXPECT_NEAR(static_cast<double>(h.valueAtPercentile(99.5)), 5000, 5);
  EXPECT_EQ(h.max(), 1234567u);
  EXPECT_NEAR(static_cast<double>(h.valueAtPercentile(99.999)), 1234567, 1234567 * 0.001);
}

TEST(LatencyHistogramTest, EmptyAndClamped) {
  LatencyHistogram h;
  EXPECT_EQ(h.valueAtPercentile(99), 0u);
  EXPECT_EQ(h.max(), 0u);
  h.record(UINT64_MAX);
  EXPECT_EQ(h.max(), LatencyHistogram::kMaxValue);
}

TEST(LatencyHistogramTest, IntervalSnapshots) {
  LatencyHistogram h;
  for (int i = 0; i < 1000; ++i) h.record(10);
  auto first = h.snapshot();
  for (int i = 0; i < 1000; ++i) h.record(20000);
  auto interval = h.snapshot().minus(first);
  EXPECT_EQ(interval.total, 1000u);
  EXPECT_NEAR(static_cast<double>(interval.valueAtPercentile(50)), 20000, 20);
  EXPECT_EQ(first.valueAtPercentile(99), 10u);
}

TEST(LatencyHistogramTest, ConcurrentRecordsAreAllCounted) {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 100000; ++i) h.record(static_cast<uint64_t>(i % 5000 + t));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(h.count(), 400000u);
  EXPECT_EQ(h.max(), 4999u + 3);
  LatencyHistogram sum;
  sum.add(h);
  sum.add(h);
  EXPECT_EQ(sum.count(), 800000u);
  EXPECT_EQ(sum.valueAtPercentile(50), h.valueAtPercentile(50));
}

TEST(LatencyHistogramTest, PercentileDistributionText) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 10000; ++v) h.record(v * 10);  // 10 us .. 100 ms
  std::string text = h.percentileDistribution(1000.0);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find("Percentile"), std::string::npos);
  double lastValue = -1, lastPct = -1, value = 0, pct = 0;
  uint64_t count = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    ASSERT_TRUE(row >> value >> pct >> count) << line;
    EXPECT_GE(value, lastValue);
    EXPECT_GT(pct, lastPct);
    lastValue = value;
    lastPct = pct;
    ++rows;
  }
  EXPECT_GT(rows, 20);
  EXPECT_DOUBLE_EQ(lastPct, 1.0);
  EXPECT_NEAR(lastValue, 100.0, 1e-9);  // max in ms
  EXPECT_EQ(count, 10000u);
  EXPECT_NE(text.find("#[Max     =      100.000, Total count    =        10000]"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace magnetar::perf
