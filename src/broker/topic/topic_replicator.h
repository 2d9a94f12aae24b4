// What a PersistentTopic knows of geo-replication (docs/geo-replication.md): the replicators
// attached to it (src/broker/replication makes them), told of new entries and closed with the
// topic, and the names Pulsar gives the replication cursor and producer.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "base/buffer.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Pulsar's replicatorPrefix: the replication cursor of remote cluster R is "pulsar.repl.R", the
// producer a replicator of cluster L opens on R's topic is "pulsar.repl.L-->R" (Pulsar's name).
inline constexpr std::string_view kReplicatorPrefix = "pulsar.repl";

inline std::string replicationCursorName(const std::string& remoteCluster) {
  return std::string(kReplicatorPrefix) + "." + remoteCluster;
}
// A cursor or producer name of a replicator (Pulsar: startsWith(replicatorPrefix)).
inline bool isReplicatorName(std::string_view name) {
  return name.substr(0, kReplicatorPrefix.size()) == kReplicatorPrefix;
}
// The sending cluster of a replicator's producer name, as Pulsar's Producer parses it:
// "pulsar.repl.c2-->c1" and "pulsar.repl.c2" are c2's; "" for a name without the prefix.
inline std::string replicatorProducerCluster(std::string_view name) {
  if (name.size() <= kReplicatorPrefix.size() + 1 || !isReplicatorName(name)) return "";
  std::string_view rest = name.substr(kReplicatorPrefix.size() + 1);
  return std::string(rest.substr(0, rest.find("-->")));
}

// One remote cluster's entry of topic stats "replication" (Pulsar's ReplicatorStatsImpl names).
struct ReplicatorStats {
  double msgRateOut = 0;        // messages/s sent to the remote (last interval of >= 1 s)
  double msgThroughputOut = 0;  // bytes/s
  int64_t msgOutCount = 0;      // messages the remote acknowledged, since the replicator started
  int64_t bytesOutCount = 0;
  int64_t replicationBacklog = 0;        // entries after the cursor's mark-delete position
  bool connected = false;                // the producer on the remote is ready
  std::string outboundConnection;        // the remote broker's URL while connected
  std::string outboundConnectedSince;    // ISO-8601 time of the connection ("" when not)
  double replicationDelayInSeconds = 0;  // age of the oldest entry not yet acknowledged
};

// A replicator as its topic drives it. Thread: the topic's executor for every call.
class TopicReplicator {
 public:
  virtual ~TopicReplicator() = default;
  // Entries were added to the topic's ledger (once per publish pass).
  virtual void entriesAdded() = 0;
  // Stops for good (topic closing, or the cluster removed from the list): the producer on the
  // remote is closed, nothing more is read from the cursor. The cursor stays.
  virtual void close() = 0;
  virtual ReplicatorStats stats() const = 0;
  // The producer on the remote is ready (replicated subscriptions start no snapshot otherwise).
  virtual bool isConnected() const { return true; }
};

// Replicated subscriptions (src/broker/replication/replicated_subscriptions.h, Pulsar's
// ReplicatedSubscriptionsController) as the topic and its replicators drive them.
// Thread: the topic's executor for every call.
class TopicReplicatedSubscriptions {
 public:
  virtual ~TopicReplicatedSubscriptions() = default;
  // Subscription `subscription`'s dispatcher read (and acked through) the snapshot marker
  // (marker_type 12) stored at `pos`; `entry` is the stored entry.
  virtual void snapshotMarkerRead(const std::string& subscription, storage::Position pos,
                                  const Buffer& entry) = 0;
  // The replicator to cluster R read a marker that R replicated here (replicated_from == R) at
  // `pos`: its marker_type and payload (Pulsar's checkReplicatedSubscriptionMarker).
  virtual void remoteMarker(storage::Position pos, int markerType, std::string_view payload) = 0;
  // Stops for good (topic closing, or no replicated subscription / replication left).
  virtual void close() = 0;
};

}  // namespace magnetar::broker
