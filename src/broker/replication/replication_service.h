// ReplicationService: starts and stops the replicators of this broker's topics from the
// namespaces' replication_clusters (docs/geo-replication.md), as Pulsar's
// PersistentTopic.checkReplication does at topic load and on a policy change.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/common/periodic_task.h"
#include "broker/policies/rate_policies.h"
#include "broker/service/broker_peer.h"
#include "broker/service/broker_service.h"

namespace magnetar::broker {
struct RemoteEndpoint;
}

namespace magnetar::broker {

// The topic policy (broker/policies TopicPolicies entry) of the topic-level replication
// clusters: Pulsar's TopicPolicies replicationClusters, REST path segment "replication"; a JSON
// array of cluster names (clusterListOf). The replicators follow it over the namespace's list.
inline constexpr const char* kTopicReplicationKey = "replication";

// The brokerServiceUrl of a ClusterData JSON text; nullopt when it has none or is not JSON.
std::optional<std::string> brokerServiceUrlOf(const std::string& clusterDataJson);
// The cluster names of a topic-level replication policy's JSON text (an array of strings);
// nullopt for anything else.
std::optional<std::vector<std::string>> clusterListOf(const std::string& jsonText);

// How the replicators reach a remote cluster, as Pulsar's BrokerService.getReplicationClient
// reads its ClusterData: with the ClusterData's brokerClientTlsEnabled, its brokerServiceUrlTls
// (else serviceUrlTls) and its own TLS fields (brokerClientTrustCertsFilePath,
// brokerClientCertificateFilePath, brokerClientKeyFilePath, tlsAllowInsecureConnection,
// brokerClientTlsEnabledWithKeyStore); else with the broker's brokerClientTlsEnabled, that URL
// and the broker's TLS settings; else its brokerServiceUrl (else a pulsar:// serviceUrl). The
// authentication is the ClusterData's authenticationPlugin and authenticationParameters when
// both are given, else the broker's brokerClient* ones. Host name verification is always the
// broker's tlsHostnameVerificationEnabled.
struct RemoteClusterClient {
  std::string serviceUrl;
  bool tls = false;
  bool ownSettings = false;     // options differ from the broker's (a pool of its own)
  BrokerClientOptions options;  // the connection's TLS and authentication
};
// Errors: kInvalidArgument (not a JSON object, no usable URL: the text says which).
Result<RemoteClusterClient> remoteClusterClient(const std::string& clusterDataJson,
                                                const BrokerClientOptions& broker);

// Thread: construct, start and stop from the composition root (src/app); the check runs on its
// own thread ("pulsar-replication-monitor") and hands each topic's part to its executor.
class ReplicationService {
 public:
  // `service` outlives this, and its loops run from start() until stop() returned.
  explicit ReplicationService(BrokerService& service,
                              std::chrono::milliseconds period = std::chrono::seconds(1));
  ~ReplicationService();
  // Checks every `period`: each loaded persistent topic (not a system topic "__...") gets a
  // replicator per cluster of its replication clusters other than clusterName (the topic-level
  // policy kTopicReplicationKey when set, else its namespace's replication_clusters), and
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
  // The endpoint of `cluster` now (its ClusterData read again; a pool is made again when the
  // text changed). nullopt: unknown cluster or refused settings (logged). Thread: any.
  std::optional<RemoteEndpoint> endpointOf(const std::string& cluster);
  // On the topic's executor: a replicated subscriptions controller while the topic has
  // replicators and a replicated subscription (enableReplicatedSubscriptions); `force`: also
  // without one (a remote's marker arrived, as Pulsar's receivedReplicatedSubscriptionMarker).
  // A controller once started stays while the topic replicates.
  void reconcileReplicatedSubscriptions(PersistentTopic& topic, bool force = false);

  BrokerService& service_;
  const std::chrono::milliseconds period_;
  std::unique_ptr<PeerPool> peers_;
  std::unique_ptr<PeriodicTask> monitor_;
  std::set<std::string> replicated_;  // monitor thread: topics given replicators
  struct ClusterClient {
    std::string clusterData;  // the text the endpoint was made from
    std::shared_ptr<PeerPool> peers;
    RemoteClusterClient client;
  };
  Mutex mu_;
  std::map<std::string, ClusterClient> clients_ GUARDED_BY(mu_);
  // Pools replaced after a ClusterData change: kept until stop (a connect may be under way).
  std::vector<std::shared_ptr<PeerPool>> retired_ GUARDED_BY(mu_);
  std::function<DispatchRate()> defaultRate_;
};

}  // namespace magnetar::broker
