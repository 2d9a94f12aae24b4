#include "sequence_tracker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace magnetar::perf {
namespace {

TEST(SequenceTrackerTest, InOrderDeliveriesAreUnique) {
  SequenceTracker t(3);
  for (uint32_t c = 0; c < 5; ++c) {
    for (uint32_t d = 0; d < 3; ++d) EXPECT_EQ(t.deliver(d, c), Delivery::kUnique);
  }
  EXPECT_EQ(t.unique(), 15u);
  EXPECT_EQ(t.duplicates(), 0u);
  EXPECT_EQ(t.violations(), 0u);
  EXPECT_EQ(t.missing({5, 5, 5}), 0u);
}

TEST(SequenceTrackerTest, RedeliveriesAreDuplicates) {
  SequenceTracker t(1);
  EXPECT_EQ(t.deliver(0, 0), Delivery::kUnique);
  EXPECT_EQ(t.deliver(0, 1), Delivery::kUnique);
  EXPECT_EQ(t.deliver(0, 1), Delivery::kDuplicate);
  EXPECT_EQ(t.deliver(0, 0), Delivery::kDuplicate);
  EXPECT_EQ(t.deliver(0, 2), Delivery::kUnique);
  EXPECT_EQ(t.unique(), 3u);
  EXPECT_EQ(t.duplicates(), 2u);
  EXPECT_EQ(t.violations(), 0u);
}

TEST(SequenceTrackerTest, GapIsAnOrderingViolationAndSampled) {
  SequenceTracker t(4, /*maxSamples=*/1);
  t.deliver(2, 0);
  EXPECT_EQ(t.deliver(2, 2, "pod-1"), Delivery::kViolation);  // counter 1 skipped
  EXPECT_EQ(t.violations(), 1u);
  EXPECT_EQ(t.expected(2), 3u);
  // The skipped message arriving late is below the expectation: a duplicate, not unique.
  EXPECT_EQ(t.deliver(2, 1), Delivery::kDuplicate);
  EXPECT_EQ(t.deliver(3, 5), Delivery::kViolation);  // first message of device 3 missing
  auto samples = t.samples();
  ASSERT_EQ(samples.size(), 1u);  // capped
  EXPECT_EQ(samples[0].device, 2u);
  EXPECT_EQ(samples[0].expected, 1u);
  EXPECT_EQ(samples[0].counter, 2u);
  EXPECT_EQ(samples[0].where, "pod-1");
  EXPECT_EQ(t.violations(), 2u);
}

TEST(SequenceTrackerTest, MissingTailWithoutGapIsFoundAtTheEnd) {
  SequenceTracker t(3);
  std::vector<uint32_t> produced = {4, 2, 3};
  for (uint32_t c = 0; c < 4; ++c) t.deliver(0, c);
  t.deliver(1, 0);  // device 1 lost its last message: never a gap, only the end state shows it
  for (uint32_t c = 0; c < 3; ++c) t.deliver(2, c);
  EXPECT_EQ(t.violations(), 0u);
  EXPECT_EQ(t.missing(produced), 1u);
  EXPECT_EQ(t.beyondProduced(produced), 0u);
  t.deliver(1, 1);
  EXPECT_EQ(t.missing(produced), 0u);
  t.deliver(1, 2);  // a counter the producer never sent
  EXPECT_EQ(t.beyondProduced(produced), 1u);
}

TEST(SequenceTrackerTest, StartAtMidStream) {
  SequenceTracker t(2);
  t.startAt({10, 0});
  EXPECT_EQ(t.deliver(0, 9), Delivery::kDuplicate);
  EXPECT_EQ(t.deliver(0, 10), Delivery::kUnique);
  EXPECT_EQ(t.deliver(1, 0), Delivery::kUnique);
  EXPECT_EQ(t.missing({12, 1}), 1u);
}

TEST(SequenceTrackerTest, InvalidCounted) {
  SequenceTracker t(1);
  t.invalid();
  t.invalid();
  EXPECT_EQ(t.invalidCount(), 2u);
  EXPECT_EQ(t.unique(), 0u);
}

TEST(SequenceTrackerTest, PodsOnSeveralThreads) {
  // Four pods own disjoint device sets (as Key_Shared assigns them) and one re-delivers.
  const uint32_t devices = 4000, perDevice = 50;
  SequenceTracker t(devices);
  std::vector<std::thread> pods;
  for (uint32_t p = 0; p < 4; ++p) {
    pods.emplace_back([&, p] {
      for (uint32_t c = 0; c < perDevice; ++c) {
        for (uint32_t d = p; d < devices; d += 4) {
          t.deliver(d, c);
          if (p == 3 && c % 10 == 0) t.deliver(d, c);
        }
      }
    });
  }
  for (auto& th : pods) th.join();
  EXPECT_EQ(t.unique(), uint64_t{devices} * perDevice);
  EXPECT_EQ(t.duplicates(), uint64_t{devices / 4} * (perDevice / 10));
  EXPECT_EQ(t.violations(), 0u);
  EXPECT_EQ(t.missing(std::vector<uint32_t>(devices, perDevice)), 0u);
}

}  // namespace
}  // namespace magnetar::perf
