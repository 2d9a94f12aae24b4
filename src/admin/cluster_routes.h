// Admin REST routes of cluster mode (Pulsar's paths and JSON), answered from ZooKeeper through
// the NamespaceService: active brokers, the leader, a namespace's bundles, bundle unload (307 to
// the owner when another broker owns it), this broker's owned bundles (ownedNamespaces), the
// clusters' ClusterData (/admin/clusters/{c} in the configuration store: GET, PUT creates, POST
// updates). Added before the standalone routes of the same paths,
// which they replace (the router keeps the first of equally specific routes).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "admin/router.h"
#include "broker/cluster/namespace_service.h"
#include "broker/service/broker_service.h"

namespace magnetar::admin {

// ns and service outlive the router. Thread: before serving.
void addClusterRoutes(Router& r, broker::cluster::NamespaceService& ns,
                      broker::BrokerService& service, const std::string& clusterName);

// 307 to `webUrl` + the request's path and query with authoritative=<authoritative> (Pulsar's
// redirect to a bundle's owner).
HttpResponse clusterRedirect(const std::string& webUrl, const HttpRequest& req, bool authoritative);

// Cluster mode on each broker's local storage: the topics of namespace `nsName` in `domain`
// that any registered broker has (this broker's, plus each other's answer to GET
// /admin/v2/namespaces/{nsName}/topics?mode=...&magnetarLocalList=true, sent with
// `authorization` as its Authorization header), sorted: GET_TOPICS_OF_NAMESPACE's answer, the
// same list as the admin route's. done runs on one of the service's I/O loops. Errors: a broker
// that does not answer 200 (kIoError, naming it); the metadata store's. Thread: any.
void clusterTopicsOfNamespace(broker::cluster::NamespaceService& ns, broker::BrokerService& service,
                              const std::string& nsName, broker::TopicDomain domain,
                              const std::optional<std::string>& authorization,
                              std::function<void(Result<std::vector<std::string>>)> done);

// Cluster mode, Pulsar's validateTopicOwnership on every topic-scoped admin route
// (/admin/v2/persistent|non-persistent/{tenant}/{namespace}/{topic}...): first the topic's
// namespace and partitioned metadata are read from the configuration store (changes made through
// another broker); then, when this broker does not own the topic's bundle, the topic is looked
// up (an unowned bundle is taken or placed as a client's lookup would) and the request answered
// with 307 to the owner's web address, same path and query with authoritative=<this broker is
// the leader>. Not redirected: partitioned-topic metadata and fan-out routes (partitions,
// partitioned-stats, partitioned-internalStats), permissions, and a partitioned topic's own name.
// Blocks the pulsar-web thread for the lookup. Thread: before serving.
void installTopicOwnershipGuard(Router& r, broker::cluster::NamespaceService& ns,
                                broker::BrokerService& service);

}  // namespace magnetar::admin
