// Replicated subscriptions: the marker codec (Pulsar's PulsarMarkers.proto bytes in Pulsar's
// entry layout) and the per-subscription snapshot cache.
#include "broker/replication/replicated_subscriptions.h"

#include <gtest/gtest.h>

#include "broker/replication/replication_markers.h"
#include "protocol/frame.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {
namespace {

using storage::Position;

struct Decoded {
  proto::MessageMetadata md;
  std::string payload;
};

Decoded decode(const Buffer& entry) {
  Decoded d;
  EXPECT_TRUE(protocol::parseMetadata(entry, &d.md).isOk());
  auto p = protocol::payloadOf(entry);
  EXPECT_TRUE(p.isOk());
  if (p.isOk()) d.payload = std::string(*p);
  return d;
}

TEST(ReplicationMarkersTest, RequestIsReplicatedEverywhere) {
  Decoded d = decode(newSnapshotRequestMarker("snap-1", "c1"));
  EXPECT_EQ(d.md.marker_type(), markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST);
  EXPECT_EQ(d.md.producer_name(), "pulsar.marker");
  EXPECT_EQ(d.md.sequence_id(), 0u);
  EXPECT_GT(d.md.publish_time(), 0u);
  EXPECT_EQ(d.md.replicate_to_size(), 0);
  markers::ReplicatedSubscriptionsSnapshotRequest r;
  ASSERT_TRUE(parseMarker(d.payload, &r).isOk());
  EXPECT_EQ(r.snapshot_id(), "snap-1");
  EXPECT_EQ(r.source_cluster(), "c1");
}

TEST(ReplicationMarkersTest, ResponseGoesToTheAskingClusterOnly) {
  Decoded d = decode(newSnapshotResponseMarker("snap-1", "c1", "c2", Position{7, 41}));
  EXPECT_EQ(d.md.marker_type(), markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE);
  ASSERT_EQ(d.md.replicate_to_size(), 1);
  EXPECT_EQ(d.md.replicate_to(0), "c1");
  markers::ReplicatedSubscriptionsSnapshotResponse r;
  ASSERT_TRUE(parseMarker(d.payload, &r).isOk());
  EXPECT_EQ(r.cluster().cluster(), "c2");
  EXPECT_EQ(positionOf(r.cluster().message_id()), (Position{7, 41}));
}

TEST(ReplicationMarkersTest, SnapshotStaysLocalAndKeepsEmptyLedgerPositions) {
  ClusterPositions remotes{{"c3", Position{9, -1}}, {"c2", Position{5, 3}}};
  Decoded d = decode(newSnapshotMarker("snap-2", "c1", Position{4, 10}, remotes));
  EXPECT_EQ(d.md.marker_type(), markers::REPLICATED_SUBSCRIPTION_SNAPSHOT);
  ASSERT_EQ(d.md.replicate_to_size(), 1);
  EXPECT_EQ(d.md.replicate_to(0), "c1");
  markers::ReplicatedSubscriptionsSnapshot s;
  ASSERT_TRUE(parseMarker(d.payload, &s).isOk());
  EXPECT_EQ(positionOf(s.local_message_id()), (Position{4, 10}));
  ASSERT_EQ(s.clusters_size(), 2);
  EXPECT_EQ(s.clusters(0).cluster(), "c2");  // sorted by name, as Pulsar's TreeMap
  EXPECT_EQ(positionOf(s.clusters(1).message_id()), (Position{9, -1}));
}

TEST(ReplicationMarkersTest, UpdateAndBadPayloads) {
  Decoded d = decode(newSubscriptionUpdateMarker("sub", {{"c2", Position{1, 2}}}));
  EXPECT_EQ(d.md.marker_type(), markers::REPLICATED_SUBSCRIPTION_UPDATE);
  EXPECT_EQ(d.md.replicate_to_size(), 0);
  markers::ReplicatedSubscriptionsUpdate u;
  ASSERT_TRUE(parseMarker(d.payload, &u).isOk());
  EXPECT_EQ(u.subscription_name(), "sub");
  ASSERT_EQ(u.clusters_size(), 1);
  EXPECT_EQ(positionOf(u.clusters(0).message_id()), (Position{1, 2}));
  // A response without its cluster, and bytes that are no marker, are refused.
  markers::ReplicatedSubscriptionsSnapshotResponse empty;
  empty.set_snapshot_id("x");
  markers::ReplicatedSubscriptionsSnapshotResponse r;
  EXPECT_FALSE(parseMarker(empty.SerializeAsString(), &r).isOk());
  markers::ReplicatedSubscriptionsUpdate bad;
  EXPECT_FALSE(parseMarker(std::string("\xff\xff\xff", 3), &bad).isOk());
}

SnapshotCache::Snapshot snap(int64_t entry, int64_t remote) {
  return {Position{1, entry}, {{"c2", Position{2, remote}}}};
}

SnapshotCache cacheOf(int max) {
  return SnapshotCache(max, [](Position a, Position b) { return b.entryId - a.entryId - 1; });
}

TEST(SnapshotCacheTest, MarkDeletePicksTheNewestPassedSnapshot) {
  SnapshotCache c = cacheOf(10);
  c.add(snap(10, 100));
  c.add(snap(20, 200));
  c.add(snap(30, 300));
  EXPECT_FALSE(c.advancedMarkDeletePosition(Position{1, 9}));
  auto s = c.advancedMarkDeletePosition(Position{1, 25});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->local, (Position{1, 20}));
  EXPECT_EQ(s->clusters.at("c2"), (Position{2, 200}));
  EXPECT_EQ(c.size(), 1u);  // the one at 10 went with it
  EXPECT_FALSE(c.advancedMarkDeletePosition(Position{1, 25}));
  EXPECT_TRUE(c.advancedMarkDeletePosition(Position{1, 30}));
  EXPECT_EQ(c.size(), 0u);
}

TEST(SnapshotCacheTest, OlderSnapshotRestartsTheCache) {
  SnapshotCache c = cacheOf(10);
  c.add(snap(10, 100));
  c.add(snap(20, 200));
  c.add(snap(15, 150));  // the subscription was reset
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.snapshots()[0].local, (Position{1, 15}));
}

TEST(SnapshotCacheTest, PruningKeepsEndsAndDropsTheClosestInner) {
  SnapshotCache c = cacheOf(3);
  c.add(snap(10, 1));
  c.add(snap(50, 2));
  c.add(snap(52, 3));
  c.add(snap(100, 4));  // over the limit: 50 (neighbours 10..52) or 52 (50..100)
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.snapshots()[0].local.entryId, 10);
  EXPECT_EQ(c.snapshots()[1].local.entryId, 52);  // dropping 50 loses 41 entries, 52 loses 49
  EXPECT_EQ(c.snapshots()[2].local.entryId, 100);
  SnapshotCache tooSmall = cacheOf(1);  // Pulsar's minimum is 3
  for (int i = 1; i <= 4; ++i) tooSmall.add(snap(i * 10, i));
  EXPECT_EQ(tooSmall.size(), 3u);
}

}  // namespace
}  // namespace magnetar::broker
