// Admin REST routes of cluster mode (Pulsar's paths and JSON), answered from ZooKeeper through
// the NamespaceService: active brokers, the leader, a namespace's bundles, bundle unload (307 to
// the owner when another broker owns it). Added before the standalone routes of the same paths,
// which they replace (the router keeps the first of equally specific routes).
#pragma once

#include "admin/router.h"
#include "broker/broker_service.h"
#include "broker/cluster/namespace_service.h"

namespace magnetar::admin {

// ns and service outlive the router. Thread: before serving.
void addClusterRoutes(Router& r, broker::cluster::NamespaceService& ns,
                      broker::BrokerService& service, const std::string& clusterName);

}  // namespace magnetar::admin
