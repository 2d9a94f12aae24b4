#include "storage/entry_cache.h"

#include <gtest/gtest.h>

#include "storage/tests/test_executor.h"

namespace magnetar::storage {
namespace {

TEST(EntryCacheTest, ServesSuffixAndEvictsConsumed) {
  EntryCacheManager m(1 << 20);
  auto c = m.newCache();
  for (int i = 0; i < 10; i++) c->insert(Position{1, i}, Buffer::copyOf(std::string(10, 'a' + i)));
  EXPECT_EQ(m.size(), 100);
  std::vector<Entry> out;
  EXPECT_TRUE(c->read(Position{1, 3}, 4, 1000, &out));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].position, (Position{1, 3}));
  EXPECT_EQ(out[0].data.view(), std::string(10, 'd'));
  out.clear();
  EXPECT_TRUE(c->read(Position{1, 0}, 100, 25, &out));
  EXPECT_EQ(out.size(), 2u);  // byte limit
  c->evictUpTo(Position{1, 4});
  EXPECT_EQ(m.size(), 50);
  out.clear();
  EXPECT_FALSE(c->read(Position{1, 2}, 10, 1000, &out));  // before the cached suffix
  EXPECT_TRUE(c->read(Position{1, 5}, 10, 1000, &out));
  EXPECT_EQ(out.size(), 5u);
}

// Positions before the cached suffix are left to storage; those in its range that it lacks are
// not in the log (neither found nor left); far and near positions are both found.
TEST(EntryCacheTest, ReadPositionsSplitsCachedFromUncached) {
  EntryCacheManager m(1 << 20);
  auto c = m.newCache();
  for (int i = 0; i < 100; i++) c->insert(Position{1, i}, Buffer::copyOf(std::to_string(i)));
  for (int i = 0; i < 5; i++) c->insert(Position{3, i}, Buffer::copyOf("n" + std::to_string(i)));
  c->evictUpTo(Position{1, 9});
  std::vector<Position> want{{1, 2},   {1, 9}, {1, 10}, {1, 11}, {1, 60}, {1, 99},
                             {1, 100}, {2, 0}, {3, 0},  {3, 4},  {3, 5}};
  std::vector<Entry> found;
  std::vector<Position> uncached;
  c->readPositions(want, &found, &uncached);
  EXPECT_EQ(uncached, (std::vector<Position>{{1, 2}, {1, 9}}));
  std::vector<Position> got;
  for (const Entry& e : found) got.push_back(e.position);
  EXPECT_EQ(got, (std::vector<Position>{{1, 10}, {1, 11}, {1, 60}, {1, 99}, {3, 0}, {3, 4}}));
  EXPECT_EQ(found[2].data.view(), "60");
  EXPECT_EQ(found[5].data.view(), "n4");
  found.clear();
  uncached.clear();
  EntryCacheManager off(0);
  auto empty = off.newCache();
  empty->readPositions(want, &found, &uncached);
  EXPECT_TRUE(found.empty());
  EXPECT_EQ(uncached, want);
}

TEST(EntryCacheTest, GlobalLimitEvictsOldestAcrossCaches) {
  EntryCacheManager m(1000);
  auto a = m.newCache();
  auto b = m.newCache();
  for (int i = 0; i < 8; i++) a->insert(Position{1, i}, Buffer::copyOf(std::string(100, 'a')));
  for (int i = 0; i < 4; i++) b->insert(Position{2, i}, Buffer::copyOf(std::string(100, 'b')));
  EXPECT_LE(m.size(), 1000);
  EXPECT_GE(m.evictions(), 1u);
  std::vector<Entry> out;
  EXPECT_FALSE(a->read(Position{1, 0}, 10, 10000, &out));  // the oldest went first
  EXPECT_TRUE(a->read(Position{1, 7}, 10, 10000, &out));
  EXPECT_EQ(m.size(), a->bytes() + b->bytes());
  a.reset();
  EXPECT_EQ(m.size(), b->bytes());
}

TEST(EntryCacheTest, DisabledCacheHoldsNothing) {
  EntryCacheManager m(0);
  auto c = m.newCache();
  c->insert(Position{1, 0}, Buffer::copyOf("x"));
  std::vector<Entry> out;
  EXPECT_FALSE(c->read(Position{1, 0}, 1, 10, &out));
  EXPECT_EQ(m.size(), 0);
}

}  // namespace
}  // namespace magnetar::storage
