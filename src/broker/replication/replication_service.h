// ReplicationService: starts and stops the replicators of this broker's topics from the
// namespaces' replication_clusters (docs/geo-replication.md), as Pulsar's
// PersistentTopic.checkReplication does at topic load and on a policy change.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "broker/common/periodic_task.h"
#include "broker/policies/rate_policies.h"
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
  // The broker defaults behind the replicatorDispatchRate policies
  // (dispatchThrottlingRatePerReplicatorInMsg / InByte, dynamic: read at each check; any
  // thread). Unset: no limit. Call before start().
  void setDefaultDispatchRate(std::function<DispatchRate()> defaults);

 private:
  void check();
  // The remote clusters a topic replicates to (none for non-persistent and "__" topics).
  std::set<std::string> wantedFor(const TopicName& name);
  // The replicatorDispatchRate in force for a topic, as the other rate policies resolve
  // (docs/rate-limits.md): its topic policy (a partition: its partitioned topic's), else its
  // namespace's entry for this cluster, else the broker defaults. Any thread.
  DispatchRate dispatchRateFor(const TopicName& name);
  // On the topic's executor: make its replicators those of `wanted`, each paced by `rate`.
  void reconcile(PersistentTopic& topic, const std::set<std::string>& wanted,
                 const DispatchRate& rate);

  BrokerService& service_;
  const std::chrono::milliseconds period_;
  std::unique_ptr<PeerPool> peers_;
  std::unique_ptr<PeriodicTask> monitor_;
  std::set<std::string> replicated_;  // monitor thread: topics given replicators
  std::function<DispatchRate()> defaultRate_;
};

}  // namespace magnetar::broker
