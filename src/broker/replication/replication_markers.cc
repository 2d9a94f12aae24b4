#include "broker/replication/replication_markers.h"

#include "broker/common/wall_clock.h"
#include "protocol/commands.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {

namespace {

void setId(markers::MessageIdData* id, storage::Position p) {
  id->set_ledger_id(static_cast<uint64_t>(p.ledgerId));
  id->set_entry_id(static_cast<uint64_t>(p.entryId));
}

// Pulsar's Markers.newMessage: the metadata every marker carries, replicate_to when restricted.
Buffer markerEntry(markers::MarkerType type, const std::string& restrictTo,
                   const google::protobuf::MessageLite& payload) {
  proto::MessageMetadata md;
  md.set_producer_name(std::string(kMarkerProducerName));
  md.set_sequence_id(0);
  md.set_publish_time(static_cast<uint64_t>(wallClockMs()));
  md.set_marker_type(type);
  if (!restrictTo.empty()) md.add_replicate_to(restrictTo);
  return protocol::Commands::newEntry(md, payload.SerializeAsString());
}

template <typename M>
Status parse(std::string_view payload, M* out, const char* what) {
  if (!out->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Status::invalidArgument(std::string("unreadable ") + what + " marker");
  }
  return Status::ok();
}

}  // namespace

Buffer newSnapshotRequestMarker(const std::string& snapshotId, const std::string& sourceCluster) {
  markers::ReplicatedSubscriptionsSnapshotRequest m;
  m.set_snapshot_id(snapshotId);
  m.set_source_cluster(sourceCluster);
  return markerEntry(markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST, "", m);
}

Buffer newSnapshotResponseMarker(const std::string& snapshotId, const std::string& replyTo,
                                 const std::string& cluster, storage::Position last) {
  markers::ReplicatedSubscriptionsSnapshotResponse m;
  m.set_snapshot_id(snapshotId);
  m.mutable_cluster()->set_cluster(cluster);
  setId(m.mutable_cluster()->mutable_message_id(), last);
  return markerEntry(markers::REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE, replyTo, m);
}

Buffer newSnapshotMarker(const std::string& snapshotId, const std::string& localCluster,
                         storage::Position local, const ClusterPositions& remotes) {
  markers::ReplicatedSubscriptionsSnapshot m;
  m.set_snapshot_id(snapshotId);
  setId(m.mutable_local_message_id(), local);
  for (const auto& [cluster, pos] : remotes) {
    auto* c = m.add_clusters();
    c->set_cluster(cluster);
    setId(c->mutable_message_id(), pos);
  }
  return markerEntry(markers::REPLICATED_SUBSCRIPTION_SNAPSHOT, localCluster, m);
}

Buffer newSubscriptionUpdateMarker(const std::string& subscription,
                                   const ClusterPositions& clusters) {
  markers::ReplicatedSubscriptionsUpdate m;
  m.set_subscription_name(subscription);
  for (const auto& [cluster, pos] : clusters) {
    auto* c = m.add_clusters();
    c->set_cluster(cluster);
    setId(c->mutable_message_id(), pos);
  }
  return markerEntry(markers::REPLICATED_SUBSCRIPTION_UPDATE, "", m);
}

Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsSnapshotRequest* out) {
  return parse(payload, out, "snapshot request");
}
Status parseMarker(std::string_view payload,
                   markers::ReplicatedSubscriptionsSnapshotResponse* out) {
  Status s = parse(payload, out, "snapshot response");
  if (s.isOk() && !out->has_cluster()) return Status::invalidArgument("response without cluster");
  return s;
}
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsSnapshot* out) {
  Status s = parse(payload, out, "snapshot");
  if (s.isOk() && !out->has_local_message_id()) {
    return Status::invalidArgument("snapshot without local_message_id");
  }
  return s;
}
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsUpdate* out) {
  return parse(payload, out, "subscription update");
}

}  // namespace magnetar::broker
