// /admin/v2/brokers and /admin/v2/clusters routes that describe this broker (Pulsar's BrokersBase
// and ClustersBase), and /admin/v2/broker-stats (BrokerStatsBase).
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"
#include "broker/cluster/load_data.h"

namespace magnetar::admin {

// GET /admin/v2/brokers/leaderBroker: this broker ({"serviceUrl","brokerId"}; one broker is its
// own leader). GET /admin/v2/brokers/version: the server version as text.
// GET /admin/v2/brokers/internal-configuration: Pulsar's InternalConfigurationData (the metadata
// store URL; no ZooKeeper or BookKeeper).
// GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces: the bundles of every namespace with a
// loaded topic, as NamespaceOwnershipStatus; 404 for another cluster, 412 for a broker that is
// not this one (Pulsar redirects there; Magnetar has no other broker).
// GET /admin/v2/clusters/{cluster}/peers: 204 (no peer clusters configured), 404 unknown cluster.
// Thread: HTTP threads; ownedNamespaces reads the topic table only (no topic state).
void addBrokerInfoRoutes(Router& router, const AdminContext& ctx);

// GET /admin/v2/broker-stats/topics: namespace -> bundle -> "persistent" -> topic -> TopicStats.
// GET /admin/v2/broker-stats/metrics: Pulsar's per-namespace dimension metrics (brk_*).
// GET /admin/v2/broker-stats/load-report: Pulsar's LocalBrokerData, the load manager's
// generateLoadReport() (without one: from the topic snapshots).
// Each snapshot is taken on the topics' executors.
void addBrokerStatsRoutes(Router& router, const AdminContext& ctx);

// This broker's topics' figures by bundle ("tenant/ns/0x..._0x...", Pulsar's
// BrokerService.getBundleStats) from the rates the pulsar-stats thread last took
// (TopicRates::load, every 2 s): no topic executor is asked. Thread: any.
broker::cluster::BundleStatsMap bundleStats(broker::BrokerService& service);

// Pulsar's bundle of a topic among the default 4 bundles of a namespace
// ("0x00000000_0x40000000", ...): CRC32 of the full topic name (broker/cluster/bundles.h).
std::string bundleOf(const std::string& fullTopicName);

}  // namespace magnetar::admin
