#include "broker/service/topic_list.h"

#include <gtest/gtest.h>


namespace magnetar::broker {
namespace {

TEST(TopicListHashTest, IsGuavaCrc32cOfSortedNamesLittleEndianHex) {
  // crc32c("123456789") = 0xE3069283; Guava's HashCode prints its bytes little-endian.
  EXPECT_EQ(topicListHash({"123456789"}), "839206e3");
  // Sorted, joined by ',' without a trailing one: crc32c("...a,...b") = 0x989E55C7.
  EXPECT_EQ(topicListHash({"persistent://public/default/b", "persistent://public/default/a"}),
            "c7559e98");
  EXPECT_EQ(topicListHash({}), "00000000");
}

TEST(TopicPatternTest, MatchesPartitionedNameWithoutScheme) {
  auto p = TopicPattern::compile("persistent://public/default/sensor-.*");
  ASSERT_TRUE(p.isOk());
  EXPECT_TRUE(p->matches("persistent://public/default/sensor-1"));
  EXPECT_TRUE(p->matches("persistent://public/default/sensor-1-partition-3"));
  EXPECT_FALSE(p->matches("persistent://public/default/other"));
  EXPECT_FALSE(p->matches("persistent://public/other/sensor-1"));
  // The whole name must match (Java's Matcher.matches), not a part of it.
  auto q = TopicPattern::compile("public/default/sen");
  ASSERT_TRUE(q.isOk());
  EXPECT_FALSE(q->matches("persistent://public/default/sensor-1"));
  auto f = p->filter({"persistent://public/default/sensor-a", "persistent://public/default/x"});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0], "persistent://public/default/sensor-a");
}

TEST(TopicPatternTest, BadPatternsAreErrors) {
  EXPECT_FALSE(TopicPattern::compile("persistent://public/default/[unclosed").isOk());
  EXPECT_FALSE(TopicPattern::compile("http://public/default/x").isOk());
  EXPECT_TRUE(TopicPattern::compile("non-persistent://public/default/x").isOk());
}

TEST(TopicEventListenersTest, NotifiesOnlyItsNamespaceUntilRemoved) {
  TopicEventListeners l;
  std::vector<std::pair<std::string, bool>> seen;
  uint64_t id = l.add("public/default", [&](const std::string& t, bool c) {
    seen.emplace_back(t, c);
  });
  l.notify("public/other", "persistent://public/other/x", true);
  l.notify("public/default", "persistent://public/default/x", true);
  l.notify("public/default", "persistent://public/default/x", false);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(std::string("persistent://public/default/x"), true));
  EXPECT_EQ(seen[1].second, false);
  l.remove(id);
  EXPECT_EQ(l.size(), 0u);
  l.notify("public/default", "persistent://public/default/y", true);
  EXPECT_EQ(seen.size(), 2u);
}

}  // namespace
}  // namespace magnetar::broker
