#include "admin/stats_json.h"

#include <gtest/gtest.h>

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::ConsumerSnapshot;
using broker::PublisherSnapshot;
using broker::SubscriptionSnapshot;
using broker::TopicSnapshot;

TopicSnapshot partition(int i, int64_t backlog) {
  TopicSnapshot t;
  t.name = "persistent://t/ns/p-partition-" + std::to_string(i);
  t.namespaceName = "t/ns";
  t.msgInCounter = 10;
  t.bytesInCounter = 1000;
  t.rateIn = {2.0, 200.0};
  t.storageSize = 1000;
  t.backlogSize = 100 * backlog;
  PublisherSnapshot p;
  p.producerName = "prod";
  p.msgInCounter = 10;
  p.rateIn = {2.0, 200.0};
  t.publishers.push_back(p);
  SubscriptionSnapshot s;
  s.name = "sub";
  s.type = i == 0 ? "None" : "Shared";
  s.msgBacklog = backlog;
  s.unackedMessages = 1;
  s.rateOut = {1.0, 100.0};
  ConsumerSnapshot c;
  c.consumerName = i == 2 ? "other" : "c1";
  c.availablePermits = 5;
  c.unackedMessages = 1;
  s.consumers.push_back(c);
  t.subscriptions.push_back(s);
  return t;
}

// Pulsar's GetStatsOptions: excluded lists are empty, the sums and the subscriptions stay.
TEST(StatsJson, ExcludedPublishersAndConsumersAreEmptyListsAndTheSumsStay) {
  TopicSnapshot t = partition(1, 4);
  json::object all = topicStatsJson(t);
  ASSERT_EQ(all["publishers"].as_array().size(), 1u);
  ASSERT_EQ(all["subscriptions"].as_object()["sub"].as_object()["consumers"].as_array().size(), 1u);

  json::object o = topicStatsJson(t, StatsOptions{true, false});
  EXPECT_TRUE(o["publishers"].as_array().empty());
  EXPECT_EQ(o["subscriptions"].as_object()["sub"].as_object()["consumers"].as_array().size(), 1u);
  EXPECT_DOUBLE_EQ(o["msgRateIn"].as_double(), 2.0);
  EXPECT_EQ(o["msgInCounter"].to_number<int64_t>(), 10);

  o = topicStatsJson(t, StatsOptions{false, true});
  EXPECT_EQ(o["publishers"].as_array().size(), 1u);
  json::object& sub = o["subscriptions"].as_object()["sub"].as_object();
  EXPECT_TRUE(sub["consumers"].as_array().empty());
  EXPECT_EQ(sub["msgBacklog"].as_int64(), 4);
  EXPECT_EQ(sub["unackedMessages"].as_int64(), 1);
  EXPECT_DOUBLE_EQ(sub["msgRateOut"].as_double(), 1.0);

  std::vector<TopicSnapshot> parts{partition(0, 1), partition(1, 2)};
  o = partitionedStatsJson("persistent://t/ns/p", parts, true, StatsOptions{true, true});
  EXPECT_TRUE(o["publishers"].as_array().empty());
  EXPECT_EQ(o["subscriptions"].as_object()["sub"].as_object()["msgBacklog"].as_int64(), 3);
  for (auto& [name, part] : o["partitions"].as_object()) {
    EXPECT_TRUE(part.as_object()["publishers"].as_array().empty()) << name;
    EXPECT_TRUE(part.as_object()["subscriptions"]
                    .as_object()["sub"]
                    .as_object()["consumers"]
                    .as_array()
                    .empty())
        << name;
  }
}

TEST(StatsJson, MergesPartitions) {
  std::vector<TopicSnapshot> parts{partition(0, 1), partition(1, 2), partition(2, 3)};
  TopicSnapshot m = mergeTopicSnapshots("persistent://t/ns/p", parts);
  EXPECT_EQ(m.msgInCounter, 30u);
  EXPECT_DOUBLE_EQ(m.rateIn.msgRate, 6.0);
  EXPECT_EQ(m.storageSize, 3000);
  ASSERT_EQ(m.publishers.size(), 1u);  // same producer name on every partition
  EXPECT_EQ(m.publishers[0].msgInCounter, 30u);
  ASSERT_EQ(m.subscriptions.size(), 1u);
  const auto& s = m.subscriptions[0];
  EXPECT_EQ(s.msgBacklog, 6);
  EXPECT_EQ(s.unackedMessages, 3);
  EXPECT_EQ(s.type, "Shared");        // the first known type
  ASSERT_EQ(s.consumers.size(), 2u);  // "c1" merged, "other" separate
  EXPECT_EQ(s.consumers[0].availablePermits, 10);

  json::object o = partitionedStatsJson("persistent://t/ns/p", parts, true);
  EXPECT_EQ(o["metadata"].as_object()["partitions"].as_int64(), 3);
  EXPECT_EQ(o["partitions"].as_object().size(), 3u);
  EXPECT_EQ(o["msgInCounter"].as_uint64(), 30u);
  EXPECT_EQ(o["subscriptions"].as_object()["sub"].as_object()["msgBacklog"].as_int64(), 6);
  EXPECT_TRUE(partitionedStatsJson("x", parts, false)["partitions"].as_object().empty());
}

// Cluster mode merges the partitions' TopicStats JSON (some from other brokers): the same
// answer as the merge of snapshots.
TEST(StatsJson, MergesPartitionJsonAsSnapshots) {
  std::vector<TopicSnapshot> parts{partition(0, 1), partition(1, 2), partition(2, 3)};
  std::vector<json::value> jsons;
  std::vector<std::string> names;
  for (const auto& p : parts) {
    jsons.emplace_back(topicStatsJson(p));
    names.push_back(p.name);
  }
  json::object fromJson = partitionedStatsFromJson("persistent://t/ns/p", names, jsons, true);
  json::object fromSnapshots = partitionedStatsJson("persistent://t/ns/p", parts, true);
  EXPECT_EQ(json::serialize(fromJson), json::serialize(fromSnapshots));
  // A partition that could not be read (null) counts as empty; its name is left out.
  jsons[1] = nullptr;
  json::object partial = partitionedStatsFromJson("persistent://t/ns/p", names, jsons, true);
  EXPECT_EQ(partial["msgInCounter"].as_uint64(), 20u);
  EXPECT_EQ(partial["subscriptions"].as_object()["sub"].as_object()["msgBacklog"].as_int64(), 4);
  EXPECT_EQ(partial["partitions"].as_object().size(), 2u);
  EXPECT_EQ(partial["metadata"].as_object()["partitions"].as_int64(), 3);
}

TEST(StatsJson, TopicStatsFieldNames) {
  json::object o = topicStatsJson(partition(1, 4));
  for (const char* f :
       {"msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "msgInCounter",
        "bytesInCounter", "storageSize", "backlogSize", "publishers", "subscriptions"}) {
    EXPECT_TRUE(o.contains(f)) << f;
  }
  EXPECT_DOUBLE_EQ(o["averageMsgSize"].as_double(), 100.0);
  const auto& sub = o["subscriptions"].as_object().at("sub").as_object();
  EXPECT_EQ(sub.at("type").as_string(), "Shared");
  const auto& c = sub.at("consumers").as_array().at(0).as_object();
  EXPECT_EQ(c.at("availablePermits").as_int64(), 5);
  EXPECT_FALSE(c.contains("keyHashRanges"));
}

// A remote cluster's replicator producing here (Pulsar's name "pulsar.repl.{remote}-->{local}")
// is the inbound side of its cluster's "replication" entry, not a publisher (Pulsar's
// PersistentTopic stats); an entry is made for a cluster this topic does not replicate to.
TEST(StatsJson, ReplicatorProducersAreTheInboundSide) {
  TopicSnapshot t = partition(1, 0);
  broker::ReplicatorStats out;
  out.connected = true;
  out.outboundConnection = "pulsar://c2:6650";
  out.msgOutCount = 7;
  t.replication["c2"] = out;
  PublisherSnapshot in2;
  in2.producerName = "pulsar.repl.c2-->c1";
  in2.address = "/10.0.0.2:4000";
  in2.connectedSinceMs = 1000;
  in2.rateIn = {3.0, 300.0};
  t.publishers.push_back(in2);
  PublisherSnapshot in3;
  in3.producerName = "pulsar.repl.c3";  // an older Magnetar's name: cluster c3
  in3.address = "/10.0.0.3:4000";
  t.publishers.push_back(in3);
  json::object o = topicStatsJson(t);
  const auto& pubs = o["publishers"].as_array();
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].as_object().at("producerName").as_string(), "prod");
  const auto& rep = o["replication"].as_object();
  ASSERT_EQ(rep.size(), 2u);
  const auto& c2 = rep.at("c2").as_object();
  EXPECT_EQ(c2.at("msgOutCount").as_int64(), 7);
  EXPECT_EQ(c2.at("outboundConnection").as_string(), "pulsar://c2:6650");
  EXPECT_EQ(c2.at("inboundConnection").as_string(), "/10.0.0.2:4000");
  EXPECT_TRUE(c2.contains("inboundConnectedSince"));
  EXPECT_DOUBLE_EQ(c2.at("msgRateIn").as_double(), 3.0);
  EXPECT_DOUBLE_EQ(c2.at("msgThroughputIn").as_double(), 300.0);
  const auto& c3 = rep.at("c3").as_object();
  EXPECT_FALSE(c3.at("connected").as_bool());
  EXPECT_FALSE(c3.contains("outboundConnection"));
  EXPECT_EQ(c3.at("inboundConnection").as_string(), "/10.0.0.3:4000");
  EXPECT_FALSE(c3.contains("inboundConnectedSince"));  // not known: left out
}

TEST(StatsJson, KeySharedDrainingFields) {
  TopicSnapshot t = partition(1, 4);
  SubscriptionSnapshot& s = t.subscriptions[0];
  s.type = "Key_Shared";
  s.keySharedMode = "AUTO_SPLIT";
  s.drainingHashesCount = 2;
  s.drainingHashesClearedTotal = 7;
  s.drainingHashesUnackedMessages = 5;
  s.drainingBlockedEntries = 3;
  s.drainingBlockedAttemptsTotal = 9;
  ConsumerSnapshot& c = s.consumers[0];
  c.keyHashRanges = {{0, 99}, {200, 65535}};
  c.drainingHashesCount = 2;
  c.drainingHashesClearedTotal = 7;
  c.drainingHashesUnackedMessages = 5;
  c.drainingHashes = {{17, 4, 2}, {300, 1, 0}};
  json::object o = topicStatsJson(t);
  const auto& sub = o["subscriptions"].as_object().at("sub").as_object();
  EXPECT_EQ(sub.at("drainingHashesCount").as_int64(), 2);
  EXPECT_EQ(sub.at("drainingHashesClearedTotal").as_uint64(), 7u);
  EXPECT_EQ(sub.at("drainingHashesUnackedMessages").as_int64(), 5);
  EXPECT_EQ(sub.at("drainingBlockedEntries").as_int64(), 3);
  EXPECT_EQ(sub.at("drainingBlockedAttemptsTotal").as_uint64(), 9u);
  const auto& co = sub.at("consumers").as_array().at(0).as_object();
  EXPECT_EQ(co.at("keyHashRanges").as_array().at(1).as_string(), "[200, 65535]");
  const auto& arrays = co.at("keyHashRangeArrays").as_array();
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays.at(1).as_array().at(0).as_int64(), 200);
  EXPECT_EQ(arrays.at(1).as_array().at(1).as_int64(), 65535);
  EXPECT_EQ(co.at("drainingHashesCount").as_int64(), 2);
  const auto& first = co.at("drainingHashes").as_array().at(0).as_object();
  EXPECT_EQ(first.at("hash").as_int64(), 17);
  EXPECT_EQ(first.at("unackMsgs").as_int64(), 4);
  EXPECT_EQ(first.at("blockedAttempts").as_uint64(), 2u);
}

TEST(StatsJson, InternalStatsPositionsAndRanges) {
  broker::InternalStatsSnapshot s;
  s.entriesAddedCounter = 6;
  s.lastConfirmedEntry = {3, 5};
  s.state = "LedgerOpened";
  s.ledgers = {{2, 4, 400}, {3, 6, 600}};
  broker::CursorSnapshot c;
  c.name = "sub";
  c.markDeletePosition = {3, 0};
  c.readPosition = {3, 1};
  c.individuallyDeleted = {{{3, 1}, {3, 3}}, {{3, 4}, {3, 5}}};
  s.cursors.push_back(c);
  json::object o = internalStatsJson(s);
  EXPECT_EQ(o["lastConfirmedEntry"].as_string(), "3:5");
  EXPECT_EQ(o["ledgers"].as_array().size(), 2u);
  EXPECT_EQ(o["ledgers"].as_array()[1].as_object()["size"].as_int64(), 600);
  const auto& cur = o["cursors"].as_object()["sub"].as_object();
  EXPECT_EQ(cur.at("markDeletePosition").as_string(), "3:0");
  EXPECT_EQ(cur.at("readPosition").as_string(), "3:1");
  EXPECT_EQ(cur.at("individuallyDeletedMessages").as_string(), "[(3:1..3:3], (3:4..3:5]]");
}

TEST(StatsJson, IsoTime) {
  EXPECT_EQ(isoTime(0), "");
  EXPECT_EQ(isoTime(1700000000123), "2023-11-14T22:13:20.123Z");
}

}  // namespace
}  // namespace magnetar::admin
