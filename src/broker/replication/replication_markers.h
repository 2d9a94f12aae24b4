// Replicated subscriptions' marker entries, as Pulsar's Markers
// (docs/replication-markers-format.md): an entry whose MessageMetadata has marker_type set
// (producer "pulsar.marker", sequence id 0, publish time now) and whose payload is one of the
// messages of protocol/pulsar_markers.proto. Markers are server-only: never delivered to consumers.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <map>
#include <string>
#include <string_view>

#include "base/buffer.h"
#include "base/status.h"
#include "protocol/pulsar_markers.pb.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

namespace markers = proto::markers;

// The producer name of every marker entry (Pulsar's Markers.newMessage).
inline constexpr std::string_view kMarkerProducerName = "pulsar.marker";

// A position of one cluster's topic per cluster name (sorted by name, as Pulsar's TreeMap).
using ClusterPositions = std::map<std::string, storage::Position>;

// Entry builders (the bytes stored in the ledger: [0x0e01][crc32c][size][metadata][payload]).
// Request: replicated to every remote cluster (no replicate_to).
Buffer newSnapshotRequestMarker(const std::string& snapshotId, const std::string& sourceCluster);
// Response: replicate_to = the asking cluster only; carries `cluster`'s last position.
Buffer newSnapshotResponseMarker(const std::string& snapshotId, const std::string& replyTo,
                                 const std::string& cluster, storage::Position last);
// Snapshot: replicate_to = the local cluster (never leaves it); `local` is the position of the
// last response in the local topic, `remotes` each remote's position from its response.
Buffer newSnapshotMarker(const std::string& snapshotId, const std::string& localCluster,
                         storage::Position local, const ClusterPositions& remotes);
// Update: replicated to every remote cluster; the position each cluster moves `subscription` to.
Buffer newSubscriptionUpdateMarker(const std::string& subscription,
                                   const ClusterPositions& clusters);

// Payload parsers (the entry's payload, after the metadata). Errors: kInvalidArgument when the
// bytes are not the message (or lack a required field).
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsSnapshotRequest* out);
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsSnapshotResponse* out);
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsSnapshot* out);
Status parseMarker(std::string_view payload, markers::ReplicatedSubscriptionsUpdate* out);

inline storage::Position positionOf(const markers::MessageIdData& id) {
  return {static_cast<int64_t>(id.ledger_id()), static_cast<int64_t>(id.entry_id())};
}

}  // namespace magnetar::broker
