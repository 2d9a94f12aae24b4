// Pure helpers behind the message, expiry, broker-info and namespace policy routes.
#include <gtest/gtest.h>

#include "admin/broker_info_routes.h"
#include "admin/topic_policy_routes.h"
#include "admin/topic_routes.h"
#include "broker/topic/message_expiry.h"

namespace magnetar::admin {
namespace {

using storage::LedgerStats;
using storage::Position;

TEST(MessageExpiry, EntryExpiresStrictlyAfterPublishTimePlusTtl) {
  EXPECT_FALSE(
      broker::isEntryExpired(1000, 3000, 2));  // now == publish + ttl: not yet (Pulsar's '>')
  EXPECT_TRUE(broker::isEntryExpired(1000, 3001, 2));
  EXPECT_TRUE(broker::isEntryExpired(1000, 1001, 0));
  EXPECT_FALSE(broker::isEntryExpired(5000, 1000, 0));  // published "in the future" (clock skew)
}

TEST(BacklogSize, LedgersAfterThePositionCountWholeItsOwnPartly) {
  std::vector<LedgerStats> ledgers = {{1, 10, 1000}, {2, 4, 400}, {3, 0, 0}};
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{1, 0}), 1400);
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{1, 5}), 500 + 400);
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{2, 3}), 100);
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{2, 9}), 0);
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{9, 0}), 0);
  EXPECT_EQ(estimatedBacklogSize(ledgers, Position{-1, -1}), 1400);  // before everything
}

TEST(PreviousPosition, CrossesLedgerBoundariesAndSkipsEmptyLedgers) {
  std::vector<LedgerStats> ledgers = {{1, 3, 30}, {2, 0, 0}, {3, 2, 20}};
  EXPECT_EQ(previousPosition(ledgers, Position{3, 1}), (Position{3, 0}));
  EXPECT_EQ(previousPosition(ledgers, Position{3, 0}), (Position{1, 2}));
  EXPECT_EQ(previousPosition(ledgers, Position{1, 0}), (Position{-1, -1}));
}

TEST(Bundles, TopicsMapToOneOfPulsarsFourDefaultBundles) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    seen.insert(bundleOf("persistent://t/ns/topic-" + std::to_string(i)));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"0x00000000_0x40000000", "0x40000000_0x80000000",
                                         "0x80000000_0xc0000000", "0xc0000000_0xffffffff"}));
  EXPECT_EQ(bundleOf("persistent://t/ns/x"), bundleOf("persistent://t/ns/x"));
}

broker::AutoTopicCreationOverride parse(const char* text, std::string* error) {
  broker::AutoTopicCreationOverride o;
  *error = validateAutoTopicCreation(boost::json::parse(text), &o);
  return o;
}

TEST(AutoTopicCreation, ValidatesLikePulsar) {
  std::string e;
  auto o = parse(R"({"allowAutoTopicCreation":false})", &e);
  EXPECT_EQ(e, "");
  EXPECT_FALSE(o.allowAutoTopicCreation);
  o = parse(R"({"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":4})",
            &e);
  EXPECT_EQ(e, "");
  EXPECT_EQ(o.topicType, "partitioned");
  EXPECT_EQ(o.defaultNumPartitions, 4);
  parse(R"({"allowAutoTopicCreation":true,"topicType":"non-partitioned"})", &e);
  EXPECT_EQ(e, "");
  parse(R"({"allowAutoTopicCreation":true})", &e);
  EXPECT_EQ(e, "Missing topicType field");
  parse(R"({"allowAutoTopicCreation":true,"topicType":"partitioned"})", &e);
  EXPECT_NE(e, "");
  parse(R"({"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":0})",
        &e);
  EXPECT_NE(e, "");
  parse(R"({"allowAutoTopicCreation":true,"topicType":"non-partitioned","defaultNumPartitions":2})",
        &e);
  EXPECT_EQ(e, "Field defaultNumPartitions must be null for non-partitioned topic");
  parse(R"({"allowAutoTopicCreation":true,"topicType":"both"})", &e);
  EXPECT_NE(e, "");
  parse(R"({"topicType":"partitioned"})", &e);
  EXPECT_NE(e, "");
  parse(R"([1])", &e);
  EXPECT_NE(e, "");
}

}  // namespace
}  // namespace magnetar::admin
