#include "histogram.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace magnetar::perf {
namespace {

constexpr uint64_t kSubBuckets = 1ull << LatencyHistogram::kSubBucketBits;

// Rank (1-based) of the value at percentile p among total values.
uint64_t rankOf(double p, uint64_t total) {
  p = std::clamp(p, 0.0, 100.0);
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total)));
  return std::max<uint64_t>(rank, 1);
}

template <typename CountAt>
uint64_t percentileOf(double p, uint64_t total, uint64_t maxValue, CountAt countAt) {
  if (total == 0) return 0;
  uint64_t rank = rankOf(p, total);
  uint64_t seen = 0;
  for (size_t i = 0; i < LatencyHistogram::kBucketCount; ++i) {
    seen += countAt(i);
    if (seen >= rank) return std::min(LatencyHistogram::highestOf(i), maxValue);
  }
  return maxValue;
}

// HdrHistogram's footer terms: buckets = power-of-two ranges after the first, each of
// subBucketCount = 2048 slots of which the upper 1024 are used (our layout is the same).
std::string footerBuckets() {
  return fmt::format("#[Buckets = {:12}, SubBuckets     = {:12}]\n",
                     LatencyHistogram::kMaxBits - LatencyHistogram::kSubBucketBits,
                     LatencyHistogram::kLinearLimit);
}

}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(new std::atomic<uint64_t>[kBucketCount]) {
  for (size_t i = 0; i < kBucketCount; ++i) counts_[i].store(0, std::memory_order_relaxed);
}

size_t LatencyHistogram::indexOf(uint64_t value) {
  if (value < kLinearLimit) return static_cast<size_t>(value);
  value = std::min(value, kMaxValue);
  int top = 63 - std::countl_zero(value);  // >= 11
  int shift = top - kSubBucketBits;
  uint64_t sub = (value >> shift) - kSubBuckets;
  return static_cast<size_t>(kLinearLimit + static_cast<uint64_t>(top - kSubBucketBits - 1) *
                                                kSubBuckets + sub);
}

uint64_t LatencyHistogram::lowestOf(size_t index) {
  if (index < kLinearLimit) return index;
  uint64_t rel = index - kLinearLimit;
  uint64_t octave = rel / kSubBuckets;
  uint64_t sub = rel % kSubBuckets;
  return (kSubBuckets + sub) << (octave + 1);
}

uint64_t LatencyHistogram::highestOf(size_t index) {
  if (index < kLinearLimit) return index;
  uint64_t octave = (index - kLinearLimit) / kSubBuckets;
  return lowestOf(index) + (1ull << (octave + 1)) - 1;
}

void LatencyHistogram::record(uint64_t value) {
  value = std::min(value, kMaxValue);
  counts_[indexOf(value)].fetch_add(1, std::memory_order_relaxed);
  total_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  uint64_t m = max_.load(std::memory_order_relaxed);
  while (value > m && !max_.compare_exchange_weak(m, value, std::memory_order_relaxed)) {
  }
  m = min_.load(std::memory_order_relaxed);
  while (value < m && !min_.compare_exchange_weak(m, value, std::memory_order_relaxed)) {
  }
}

uint64_t LatencyHistogram::min() const {
  uint64_t m = min_.load(std::memory_order_relaxed);
  return m == UINT64_MAX ? 0 : m;
}

double LatencyHistogram::mean() const {
  uint64_t n = count();
  return n == 0 ? 0.0 : static_cast<double>(sum_.load(std::memory_order_relaxed)) / n;
}

uint64_t LatencyHistogram::valueAtPercentile(double p) const {
  return percentileOf(p, count(), max(),
                      [this](size_t i) { return counts_[i].load(std::memory_order_relaxed); });
}

uint64_t LatencyHistogram::Snapshot::valueAtPercentile(double p) const {
  return percentileOf(p, total, maxValue, [this](size_t i) { return counts[i]; });
}

LatencyHistogram::Snapshot LatencyHistogram::Snapshot::minus(const Snapshot& earlier) const {
  Snapshot d;
  d.counts.resize(kBucketCount);
  for (size_t i = 0; i < kBucketCount; ++i) {
    uint64_t before = i < earlier.counts.size() ? earlier.counts[i] : 0;
    d.counts[i] = counts[i] > before ? counts[i] - before : 0;
    d.total += d.counts[i];
    if (d.counts[i] > 0) d.maxValue = std::min(highestOf(i), maxValue);
  }
  return d;
}

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const {
  Snapshot s;
  s.counts.resize(kBucketCount);
  for (size_t i = 0; i < kBucketCount; ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.total += s.counts[i];
  }
  s.maxValue = max();
  return s;
}

void LatencyHistogram::add(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBucketCount; ++i) {
    uint64_t c = other.counts_[i].load(std::memory_order_relaxed);
    if (c != 0) counts_[i].fetch_add(c, std::memory_order_relaxed);
  }
  total_.fetch_add(other.count(), std::memory_order_relaxed);
  sum_.fetch_add(other.sum_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  uint64_t m = max_.load();
  while (other.max() > m && !max_.compare_exchange_weak(m, other.max())) {
  }
  uint64_t lo = min_.load();
  uint64_t otherMin = other.min_.load();
  while (otherMin < lo && !min_.compare_exchange_weak(lo, otherMin)) {
  }
}

std::string LatencyHistogram::percentileDistribution(double unitRatio,
                                                     int ticksPerHalfDistance) const {
  Snapshot s = snapshot();
  std::string out = fmt::format("{:>12} {:>14} {:>10} {:>14}\n\n", "Value", "Percentile",
                                "TotalCount", "1/(1-Percentile)");
  if (s.total == 0) {
    out += fmt::format("#[Mean    = {:12.3f}, StdDeviation   = {:12.3f}]\n", 0.0, 0.0);
    out += fmt::format("#[Max     = {:12.3f}, Total count    = {:12}]\n", 0.0, 0);
    out += footerBuckets();
    return out;
  }
  // Percentile levels: steps of 100/(2*ticks) until 50 %, then each halving of the remaining
  // distance to 100 % gets twice as many ticks (HdrHistogram's percentile iteration).
  size_t i = 0;
  uint64_t seen = 0;
  double level = 0.0;
  auto line = [&](double pct, uint64_t value, uint64_t cumulative) {
    double q = pct / 100.0;
    if (q < 1.0) {
      out += fmt::format("{:12.3f} {:14.12f} {:10} {:14.2f}\n", value / unitRatio, q, cumulative,
                         1.0 / (1.0 - q));
    } else {
      out += fmt::format("{:12.3f} {:14.12f} {:10}\n", value / unitRatio, q, cumulative);
    }
  };
  for (int lines = 0; lines < 100000; ++lines) {
    uint64_t rank = rankOf(level, s.total);
    while (seen < rank && i < kBucketCount) seen += s.counts[i++];
    uint64_t value = std::min(highestOf(i == 0 ? 0 : i - 1), s.maxValue);
    if (seen >= s.total || level >= 100.0) {
      line(100.0, s.maxValue, s.total);
      break;
    }
    line(level, value, seen);
    double halvings = std::floor(std::log2(100.0 / (100.0 - level))) + 1;
    double ticks = ticksPerHalfDistance * std::pow(2.0, halvings);
    level += 100.0 / ticks;
  }
  double meanValue = mean();
  double var = 0;
  for (size_t b = 0; b < kBucketCount; ++b) {
    if (s.counts[b] == 0) continue;
    double mid = (lowestOf(b) + highestOf(b)) / 2.0;
    var += s.counts[b] * (mid - meanValue) * (mid - meanValue);
  }
  double stddev = std::sqrt(var / s.total);
  out += fmt::format("#[Mean    = {:12.3f}, StdDeviation   = {:12.3f}]\n", meanValue / unitRatio,
                     stddev / unitRatio);
  out += fmt::format("#[Max     = {:12.3f}, Total count    = {:12}]\n", s.maxValue / unitRatio,
                     s.total);
  out += footerBuckets();
  return out;
}

}  // namespace magnetar::perf
