// LatencyHistogram: a log-linear histogram of non-negative integer values (microseconds in the
// perf worker) with 3 significant decimal digits, in the manner of HdrHistogram.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace magnetar::perf {

// Bucket layout: values below 2048 have one counter each; above, each power-of-two range
// [2^k, 2^(k+1)) is split into 1024 equal sub-buckets, so a bucket is never wider than 1/1024 of
// its values (relative error < 0.1 %: 3 significant digits, HdrHistogram's
// numberOfSignificantValueDigits = 3). Values above kMaxValue (2^36, ~19 h in us) are clamped.
//
// Thread: record() may be called from any number of threads at once (relaxed atomic adds, no
// allocation); snapshot()/reads from any thread see a consistent-enough view (counts may lag).
class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 10;                       // 1024 sub-buckets per octave
  static constexpr uint64_t kLinearLimit = 2ull << kSubBucketBits;  // 2048
  static constexpr int kMaxBits = 36;
  static constexpr uint64_t kMaxValue = (1ull << kMaxBits) - 1;
  static constexpr size_t kBucketCount =
      kLinearLimit + (kMaxBits - kSubBucketBits - 1) * (1ull << kSubBucketBits);

  LatencyHistogram();

  // Adds one value (clamped to [0, kMaxValue]). Lock-free, no allocation.
  void record(uint64_t value);

  // Bucket index of value and the range [lowest, highest] of values that share it.
  static size_t indexOf(uint64_t value);
  static uint64_t lowestOf(size_t index);
  static uint64_t highestOf(size_t index);

  uint64_t count() const { return total_.load(std::memory_order_relaxed); }
  uint64_t max() const { return max_.load(std::memory_order_relaxed); }
  uint64_t min() const;
  double mean() const;
  // The smallest recorded value v such that at least p % of the values are <= v, reported as the
  // highest value of its bucket (capped at max()), as HdrHistogram's getValueAtPercentile. 0 when
  // empty. p in [0, 100].
  uint64_t valueAtPercentile(double p) const;

  // A plain copy of the counts (for interval histograms: later.minus(earlier)).
  struct Snapshot {
    std::vector<uint64_t> counts;  // kBucketCount entries
    uint64_t total = 0;
    uint64_t maxValue = 0;
    uint64_t valueAtPercentile(double p) const;
    // Counts of this minus earlier (clamped at 0); maxValue = highest non-empty bucket's top.
    Snapshot minus(const Snapshot& earlier) const;
  };
  Snapshot snapshot() const;

  // Adds every count of other into this (not thread-safe against concurrent record on other).
  void add(const LatencyHistogram& other);

  // HdrHistogram's percentile distribution text (.hgrm): columns Value, Percentile, TotalCount,
  // 1/(1-Percentile); values divided by unitRatio (1000: us -> ms); 5 ticks per half distance;
  // footer with mean, standard deviation, max, total count, buckets and sub-buckets.
  std::string percentileDistribution(double unitRatio, int ticksPerHalfDistance = 5) const;

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> total_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
  std::atomic<uint64_t> min_{UINT64_MAX};
};

}  // namespace magnetar::perf
