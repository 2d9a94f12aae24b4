// SharedConfig: the configuration metadata store as the broker sees it: tenants, clusters,
// namespaces with their policies, and partitioned-topic metadata (cluster::ConfigurationStore
// keeps them under Pulsar's paths: in ZooKeeper in cluster mode, shared by every broker; in
// standalone in the persistent local metadata store). The broker's
// PolicyRegistry and NamespaceResources stay its in-memory view: a change goes to the store first
// and is applied to them once stored; changes made through other brokers reach them through the
// store's watches (BrokerService::applyShared*).
//
// The write calls block until the store answered (at most metadataStoreOperationTimeoutSeconds):
// call them off the I/O loops (admin threads). Errors: kAlreadyExists (create of an existing
// one), kNotFound, kNotAllowed (delete of a tenant that still has namespaces), and the store's
// (kTimeout, kClosed, kIoError, kCorruption naming the znode).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_POLICIES)
#error "broker/policies is not below this broker part (src/broker/README.md)"
#endif

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "broker/common/topic_name.h"
#include "broker/policies/policies.h"
#include "net/executor.h"

namespace magnetar::broker {

class SharedConfig {
 public:
  virtual ~SharedConfig() = default;

  virtual Status createTenant(const std::string& name, const TenantInfo& info) = 0;
  virtual Status updateTenant(const std::string& name, const TenantInfo& info) = 0;
  virtual Status deleteTenant(const std::string& name) = 0;

  // Pulsar's ClusterData JSON of a cluster (/admin/clusters/{name}). Errors: createCluster
  // kAlreadyExists, updateCluster/deleteCluster kNotFound.
  virtual Status createCluster(const std::string& name, const std::string& clusterData) = 0;
  virtual Status updateCluster(const std::string& name, const std::string& clusterData) = 0;
  virtual Status deleteCluster(const std::string& name) = 0;

  // Pulsar's ResourceGroup JSON of a resource group (/admin/resourcegroups/{name};
  // docs/broker-metadata-format.md). putResourceGroup creates or replaces it; deleteResourceGroup
  // errors: kNotFound.
  virtual Status putResourceGroup(const std::string& name, const std::string& json) = 0;
  virtual Status deleteResourceGroup(const std::string& name) = 0;

  // "tenant/ns" with its first policies; numBundles > 0 cuts it in that many bundles, else
  // defaultNumberOfNamespaceBundles.
  virtual Status createNamespace(const std::string& ns, const NamespacePolicies& policies,
                                 int numBundles) = 0;
  // Read-modify-write of the namespace's policies (retried when another broker wrote in
  // between); returns the policies stored.
  virtual Result<NamespacePolicies> updateNamespacePolicies(
      const std::string& ns, const std::function<void(NamespacePolicies&)>& change) = 0;
  virtual Status deleteNamespace(const std::string& ns) = 0;

  // Partitioned-topic metadata of a full topic name.
  virtual Status createPartitioned(const std::string& topic, int partitions) = 0;
  // Returns the count before.
  virtual Result<int> updatePartitioned(const std::string& topic, int partitions) = 0;
  // Returns the count it had.
  virtual Result<int> deletePartitioned(const std::string& topic) = 0;
  // Non-blocking delete (the inactive-topic monitor, on a topic's executor): done(the count it
  // had, or kNotFound / the store's error) on the store's loop.
  virtual void deletePartitionedAsync(const std::string& topic,
                                      std::function<void(Result<int>)> done) = 0;
  // Non-blocking create (auto-creation on an I/O loop): the broker applied it locally already;
  // when another broker created it first, its count is applied instead.
  virtual void createPartitionedAsync(const std::string& topic, int partitions) = 0;

  // Non-blocking: reads the store's current namespace and partitioned metadata of `topic` into
  // the broker's view (what a watch would bring a moment later), then runs done on ex with ok or
  // the store's error (the view then stays as it was: ZooKeeper unreachable). For the binary
  // protocol's PARTITIONED_METADATA, so a topic just created through another broker is known.
  virtual void refresh(const TopicName& topic, net::Executor* ex,
                       std::function<void(Status)> done) = 0;
  // Blocking form of refresh for one namespace (and its tenant): the admin routes' read-through
  // before answering 404.
  virtual void refreshNamespace(const std::string& ns) = 0;
  virtual void refreshTenant(const std::string& tenant) = 0;
};

// The broker's in-memory view that the configuration store applies its state to, at load and on
// its watches (nullopt: deleted). BrokerService implements it; cluster::ConfigurationStore calls
// it, so the cluster part does not depend on the service part. Thread: any.
class SharedConfigView {
 public:
  virtual ~SharedConfigView() = default;
  // A namespace whose policies change has them re-applied to its loaded topics; partitions added
  // or removed are announced to topic-list watchers.
  virtual void applySharedTenant(const std::string& name,
                                 const std::optional<TenantInfo>& info) = 0;
  virtual void applySharedNamespace(const std::string& ns,
                                    const std::optional<NamespacePolicies>& p) = 0;
  virtual void applySharedPartitioned(const std::string& topic, std::optional<int> partitions) = 0;
  virtual void applySharedCluster(const std::string& name,
                                  const std::optional<std::string>& clusterData) = 0;
  // A resource group's ResourceGroup JSON (nullopt: deleted); its quotas apply at once.
  virtual void applySharedResourceGroup(const std::string& name,
                                        const std::optional<std::string>& json) = 0;
  // Forgets tenants, clusters, namespaces, policies and partitioned topics (before a full load).
  virtual void clearShared() = 0;
  // What the view holds (the load's log line).
  virtual size_t sharedTenantCount() const = 0;
  virtual size_t sharedNamespaceCount() const = 0;
};

}  // namespace magnetar::broker
