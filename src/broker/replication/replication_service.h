// ReplicationService: starts and stops the replicators of this broker's topics from the
// namespaces' replication_clusters (docs/geo-replication.md), as Pulsar's
// PersistentTopic.checkReplication does at topic load and on a policy change.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "broker/common/periodic_task.h"
#include "broker/service/broker_peer.h"
#include "broker/service/broker_service.h"

namespace magnetar::broker {

// The brokerServiceUrl of a ClusterData JSON text; nullopt when it has none or is not JSON.
std::optional<std::string> brokerServiceUrlOf(const std::string& clusterDataJson);

// Thread: construct, start and stop from the composition root (src/app); the check runs on its
// own thread ("pulsar-replication-monitor") and hands each topic's part to its executor.
class ReplicationService {
 public:
  // `service` outlives this, and its loops run from start() until stop() returned.
  explicit ReplicationService(BrokerService& service,
                              std::chrono::milliseconds period = std::chrono::seconds(1));
  ~ReplicationService();
  // Checks every `period`: each loaded persistent topic (not a system topic "__...") gets a
  // replicator per cluster of its namespace's replication_clusters other than clusterName, and
  // loses those of clusters no longer listed (their cursors deleted). The remote's URL is its
  // ClusterData's brokerServiceUrl. Errors: kInvalidArgument from the brokerClient* settings
  // (the connection's TLS and credentials).
  Status start();
  // Stops the check and closes every replicator (waits for the topics' executors, at most
  // `timeout`). Idempotent.
  void stop(std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  void check();
  // The remote clusters a topic replicates to (none for non-persistent and "__" topics).
  std::set<std::string> wantedFor(const TopicName& name);
  // On the topic's executor: make its replicators those of `wanted`.
  void reconcile(PersistentTopic& topic, const std::set<std::string>& wanted);
  // On the topic's executor: a replicated subscriptions controller while the topic has
  // replicators and a replicated subscription (enableReplicatedSubscriptions).
  void reconcileReplicatedSubscriptions(PersistentTopic& topic);

  BrokerService& service_;
  const std::chrono::milliseconds period_;
  std::unique_ptr<PeerPool> peers_;
  std::unique_ptr<PeriodicTask> monitor_;
  std::set<std::string> replicated_;  // monitor thread: topics given replicators
};

}  // namespace magnetar::broker
