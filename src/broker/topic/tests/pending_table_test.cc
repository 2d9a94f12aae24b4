// PendingTable (broker/draining_hashes.h): the Key_Shared per-hash pending counts, checked against
// std::map under random inserts and erases, including the probe runs that erase must keep
// reachable.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "broker/topic/internal/draining_hashes.h"

namespace magnetar::broker {
namespace {

Consumer* fake(uintptr_t n) { return reinterpret_cast<Consumer*>(n * 16); }

void expectSame(const PendingTable& t, const std::map<int32_t, int>& ref) {
  ASSERT_EQ(t.size(), ref.size());
  size_t seen = 0;
  t.forEach([&](int32_t hash, const PendingSlot& s) {
    ++seen;
    auto it = ref.find(hash);
    ASSERT_NE(it, ref.end()) << hash;
    EXPECT_EQ(s.count, it->second) << hash;
    EXPECT_EQ(s.holder, fake(static_cast<uintptr_t>(hash) + 1)) << hash;
  });
  EXPECT_EQ(seen, ref.size());
  for (const auto& [hash, count] : ref) {
    const PendingSlot* s = t.find(hash);
    ASSERT_NE(s, nullptr) << hash;
    EXPECT_EQ(s->count, count);
  }
}

TEST(PendingTable, EmptyFindsNothing) {
  PendingTable t;
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(65535), nullptr);
  t.erase(7);  // absent: no-op
  EXPECT_EQ(t.size(), 0u);
}

TEST(PendingTable, InsertReturnsTheSameEntryAgain) {
  PendingTable t;
  PendingSlot& a = t.insert(42);
  EXPECT_EQ(a.holder, nullptr);
  EXPECT_EQ(a.count, 0);
  a.holder = fake(1);
  a.count = 3;
  EXPECT_EQ(&t.insert(42), &a);
  EXPECT_EQ(t.find(42)->count, 3);
  EXPECT_EQ(t.size(), 1u);
  t.erase(42);
  EXPECT_EQ(t.find(42), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

TEST(PendingTable, InsertOfAPresentHashAtTheLimitDoesNotGrow) {
  PendingTable t;
  const size_t cap = t.capacity();
  for (int32_t h = 0; static_cast<size_t>(h) * 4 < cap * 3; ++h) t.insert(h).count = 1;
  ASSERT_EQ(t.capacity(), cap);  // exactly 3/4 full
  PendingSlot* before = t.find(0);
  EXPECT_EQ(&t.insert(0), before);
  EXPECT_EQ(t.capacity(), cap);
  t.insert(1000);  // a new hash grows it
  EXPECT_EQ(t.capacity(), cap * 2);
  EXPECT_EQ(t.find(0)->count, 1);
}

TEST(PendingTable, RandomOpsMatchAMap) {
  for (int range : {64, 4096, 65536}) {  // dense collisions, then sparse
    PendingTable t;
    std::map<int32_t, int> ref;
    std::mt19937 rng(static_cast<unsigned>(range));
    std::uniform_int_distribution<int32_t> pick(0, range - 1);
    for (int step = 0; step < 200000; ++step) {
      const int32_t h = pick(rng);
      // Grow for the first half, shrink for the second: exercises both rehash directions.
      const bool add = (step < 100000) ? (rng() % 3 != 0) : (rng() % 3 == 0);
      if (add) {
        PendingSlot& s = t.insert(h);
        s.holder = fake(static_cast<uintptr_t>(h) + 1);
        s.count++;
        ref[h]++;
      } else if (PendingSlot* s = t.find(h)) {
        ASSERT_TRUE(ref.count(h));
        if (--s->count == 0) t.erase(h);
        if (--ref[h] == 0) ref.erase(h);
      } else {
        ASSERT_FALSE(ref.count(h)) << h;
      }
      if (step % 20000 == 0) expectSame(t, ref);
    }
    expectSame(t, ref);
    // At most 3/4 full, and shrunk back once mostly empty.
    EXPECT_LE(t.size() * 4, t.capacity() * 3);
    while (!ref.empty()) {
      t.erase(ref.begin()->first);
      ref.erase(ref.begin());
    }
    EXPECT_EQ(t.size(), 0u);
    EXPECT_LE(t.capacity(), 32u);
  }
}

TEST(PendingTable, AllHashesAtOnce) {
  PendingTable t;
  for (int32_t h = 0; h < 65536; ++h) t.insert(h).count = h + 1;
  EXPECT_EQ(t.size(), 65536u);
  EXPECT_LE(t.capacity(), 131072u);  // 16 bytes a slot: at most 2 MiB
  for (int32_t h = 0; h < 65536; h += 2) t.erase(h);
  for (int32_t h = 0; h < 65536; ++h) {
    const PendingSlot* s = t.find(h);
    if (h % 2 == 0) {
      EXPECT_EQ(s, nullptr) << h;
    } else {
      ASSERT_NE(s, nullptr) << h;
      EXPECT_EQ(s->count, h + 1);
    }
  }
}

}  // namespace
}  // namespace magnetar::broker
