#include "broker/topic/delayed_delivery_tracker.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace magnetar::broker {
namespace {

using storage::Position;

TEST(EntryIdRunsTest, KeepsOrderRunsAndDuplicates) {
  EntryIdRuns r;
  for (int64_t id : {3, 4, 5, 9, 20, 21}) EXPECT_TRUE(r.add(id));
  EXPECT_FALSE(r.add(4));
  EXPECT_FALSE(r.add(21));
  EXPECT_TRUE(r.add(7));  // below the largest: re-encoded
  EXPECT_EQ(r.size(), 7);
  EXPECT_EQ(r.toVector(), (std::vector<int64_t>{3, 4, 5, 7, 9, 20, 21}));
  std::vector<int64_t> got;
  EXPECT_EQ(r.take(2, [&](int64_t id) { got.push_back(id); }), 2u);
  EXPECT_EQ(got, (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(r.add(22));
  EXPECT_TRUE(r.add(5 - 5));  // lower than everything taken and held
  got.clear();
  r.take(100, [&](int64_t id) { got.push_back(id); });
  EXPECT_EQ(got, (std::vector<int64_t>{0, 5, 7, 9, 20, 21, 22}));
  EXPECT_TRUE(r.empty());
  // Empty again: ids below the ones taken start a fresh set.
  EXPECT_TRUE(r.add(1));
  EXPECT_TRUE(r.add(2));
  EXPECT_EQ(r.toVector(), (std::vector<int64_t>{1, 2}));
}

TEST(EntryIdRunsTest, MatchesASetUnderRandomAddsAndTakes) {
  std::mt19937_64 rng(7);
  EntryIdRuns r;
  std::set<int64_t> model;
  int64_t next = 0;
  for (int i = 0; i < 20000; ++i) {
    int op = static_cast<int>(rng() % 10);
    if (op < 7) {
      next += static_cast<int64_t>(rng() % 3);  // mostly increasing, with runs
      EXPECT_EQ(r.add(next), model.insert(next).second);
    } else if (op == 7) {
      int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(next + 1));
      EXPECT_EQ(r.add(id), model.insert(id).second);
    } else {
      size_t k = rng() % 50;
      std::vector<int64_t> got;
      r.take(k, [&](int64_t id) { got.push_back(id); });
      for (int64_t id : got) {
        ASSERT_FALSE(model.empty());
        EXPECT_EQ(id, *model.begin());
        model.erase(model.begin());
      }
      EXPECT_EQ(got.size(), std::min(k, got.size() + model.size()));
    }
    ASSERT_EQ(r.size(), static_cast<int64_t>(model.size()));
  }
  EXPECT_EQ(r.toVector(), std::vector<int64_t>(model.begin(), model.end()));
}

TEST(EntryIdRunsTest, ConsecutiveIdsCostAlmostNothing) {
  EntryIdRuns r;
  for (int64_t id = 0; id < 1000000; ++id) r.add(id);
  EXPECT_LT(r.memoryBytes(), 128u);
  EntryIdRuns sparse;  // every 1000th id: a 2-byte gap each
  for (int64_t id = 0; id < 1000000; id += 1000) sparse.add(id);
  EXPECT_LE(sparse.memoryBytes(), sizeof(EntryIdRuns) + 4 * 1000u);
}

TEST(DelayedDeliveryTrackerTest, HoldsUntilDueNeverEarlyWhenStrict) {
  DelayedDeliveryTracker t(1000, /*strict=*/true);
  const int64_t now = 1'000'000;
  EXPECT_FALSE(t.addMessage({1, 0}, now - 5, now));  // due already: dispatch at once
  EXPECT_FALSE(t.addMessage({1, 1}, now, now));
  EXPECT_TRUE(t.addMessage({1, 2}, now + 3000, now));
  EXPECT_TRUE(t.addMessage({1, 3}, now + 1500, now));
  EXPECT_TRUE(t.addMessage({1, 3}, now + 1500, now));  // again: counted once
  EXPECT_EQ(t.getNumberOfDelayedMessages(), 2);
  EXPECT_FALSE(t.hasMessageAvailable(now + 1499));
  std::vector<Position> out;
  EXPECT_EQ(t.getScheduledMessages(now + 1499, 10, &out), 0u);
  ASSERT_TRUE(t.nextDueTime().has_value());
  EXPECT_GE(*t.nextDueTime(), now + 1500);
  EXPECT_LT(*t.nextDueTime(), now + 1500 + 512);  // bucket width: 512 ms for a 1000 ms tick
  EXPECT_EQ(t.getScheduledMessages(*t.nextDueTime(), 10, &out), 1u);
  EXPECT_EQ(out, (std::vector<Position>{{1, 3}}));
  EXPECT_EQ(t.getScheduledMessages(now + 10000, 10, &out), 1u);
  EXPECT_EQ(out.back(), (Position{1, 2}));
  EXPECT_EQ(t.getNumberOfDelayedMessages(), 0);
  EXPECT_FALSE(t.nextDueTime().has_value());
}

TEST(DelayedDeliveryTrackerTest, NotStrictMayDeliverOneTickEarly) {
  DelayedDeliveryTracker t(1000, /*strict=*/false);
  const int64_t now = 1'000'000;
  EXPECT_FALSE(t.addMessage({1, 0}, now + 900, now));  // within a tick: at once (Pulsar)
  EXPECT_TRUE(t.addMessage({1, 1}, now + 5000, now));
  EXPECT_FALSE(t.hasMessageAvailable(now + 3000));
  EXPECT_TRUE(t.hasMessageAvailable(now + 4000 + 512));
}

TEST(DelayedDeliveryTrackerTest, NotStrictWakesAtTheFirstDeliverAtAndIsAtMostOneTickEarly) {
  // Pulsar 4.2's rules for a 1000 ms tick (bucket width 512): buckets rounded down, due when
  // start <= now + 1000 - 511.
  DelayedDeliveryTracker t(1000, /*strict=*/false);
  const int64_t now = 1'000'000;
  const int64_t first = now + 3300;  // not on a bucket boundary
  ASSERT_NE(first % 512, 0);
  EXPECT_TRUE(t.addMessage({1, 1}, first, now));
  EXPECT_TRUE(t.addMessage({1, 2}, first + 200, now));
  EXPECT_TRUE(t.addMessage({1, 3}, first + 5000, now));
  // The timer wakes at the first entry's own time, not a tick (or a bucket) before it.
  ASSERT_TRUE(t.nextDueTime().has_value());
  EXPECT_EQ(*t.nextDueTime(), first);
  EXPECT_TRUE(t.hasMessageAvailable(first));
  // Pulsar's due rule (a read for another reason): every entry of a due bucket has
  // deliverAt <= now + tick.
  const int64_t start = first / 512 * 512;
  EXPECT_FALSE(t.hasMessageAvailable(start - 1000 + 511 - 1));
  EXPECT_TRUE(t.hasMessageAvailable(start - 1000 + 511));
  std::vector<Position> out;
  const int64_t at = start - 1000 + 511;
  t.getScheduledMessages(at, 10, &out);
  EXPECT_EQ(out, (std::vector<Position>{{1, 1}, {1, 2}}));  // same bucket
  EXPECT_GE(first + 200, at);
  EXPECT_LE(first + 200 - at, 1000);
  EXPECT_EQ(*t.nextDueTime(), first + 5000);
  // A policy tick below the bucket width: the wake-up waits until the bucket is due.
  t.resetTickTime(100);
  EXPECT_EQ(*t.nextDueTime(), (first + 5000) / 512 * 512 - 100 + 511);
  EXPECT_TRUE(t.hasMessageAvailable(*t.nextDueTime()));
  EXPECT_FALSE(t.hasMessageAvailable(*t.nextDueTime() - 1));
}

TEST(DelayedDeliveryTrackerTest, PollsByBucketThenPositionAcrossLedgersWithALimit) {
  DelayedDeliveryTracker t(1, /*strict=*/true);
  const int64_t now = 0;
  t.addMessage({2, 5}, 100, now);
  t.addMessage({1, 7}, 100, now);
  t.addMessage({1, 6}, 100, now);
  t.addMessage({1, 1}, 50, now);
  std::vector<Position> out;
  EXPECT_EQ(t.getScheduledMessages(100, 2, &out), 2u);
  EXPECT_EQ(out, (std::vector<Position>{{1, 1}, {1, 6}}));
  out.clear();
  EXPECT_EQ(t.getScheduledMessages(100, 10, &out), 2u);
  EXPECT_EQ(out, (std::vector<Position>{{1, 7}, {2, 5}}));
  EXPECT_EQ(t.getNumberOfDelayedMessages(), 0);
  t.addMessage({3, 1}, 500, now);
  t.clear();
  EXPECT_EQ(t.getNumberOfDelayedMessages(), 0);
  EXPECT_FALSE(t.hasMessageAvailable(1000));
}

TEST(DelayedDeliveryTrackerTest, AMillionRandomDelaysTakeAFewBytesEach) {
  DelayedDeliveryTracker t(1000, false);
  std::mt19937_64 rng(1);
  const int64_t now = 0;
  const int n = 1'000'000;
  for (int i = 0; i < n; ++i) {
    t.addMessage({10, i}, 2000 + static_cast<int64_t>(rng() % 3'600'000), now);
  }
  EXPECT_EQ(t.getNumberOfDelayedMessages(), n);
  double perMessage = static_cast<double>(t.memoryBytes()) / n;
  EXPECT_LT(perMessage, 8.0) << perMessage;
  std::vector<Position> out;
  size_t total = 0;
  for (int64_t at = 0; at <= 3'700'000; at += 1000) {
    out.clear();
    total += t.getScheduledMessages(at, SIZE_MAX, &out);
    // Each poll gives what fell due since the last one, in position order per bucket.
    for (size_t i = 1; i < out.size(); ++i) ASSERT_NE(out[i - 1], out[i]);
  }
  EXPECT_EQ(total, static_cast<size_t>(n));
}

}  // namespace
}  // namespace magnetar::broker
