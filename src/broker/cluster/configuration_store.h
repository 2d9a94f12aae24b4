// ConfigurationStore: tenants, clusters, namespaces (with their policies) and partitioned-topic
// metadata in the configuration metadata store, under Pulsar's paths and JSON:
//   /admin/policies/{tenant}                                TenantInfo
//   /admin/policies/{tenant}/{ns}                           Policies
//   /admin/partitioned-topics/{tenant}/{ns}/{domain}/{enc}  PartitionedTopicMetadata
//   /admin/clusters/{cluster}                               ClusterData
//   /admin/resourcegroups/{name}                            ResourceGroup
// Cluster mode: ZooKeeper (configurationMetadataStoreUrl, else metadataStoreUrl), so every broker
// of the cluster (and Pulsar's own tools) sees one set (docs/cluster-mode.md). Standalone: the
// persistent local store (broker/cluster/local_records.h), the same code path. The broker's own
// registries are the cache: start() loads everything into them, watches keep them current (a
// change made through another broker reaches this one milliseconds later), and every write goes
// to the store first (BrokerService then applies it).
// Deleting a namespace also deletes its /admin/local-policies node from the local store.
//
// A new ZooKeeper session (the old one expired) has none of the old one's watches: on
// kSessionReestablished every node is listed and read again (watches set anew), what went meanwhile
// is forgotten (as Pulsar's metadata caches invalidate everything on SessionReestablished).
//
// Thread: its own loop `configuration-store` runs the watches and the loading; the blocking
// SharedConfig calls wait on it from the caller's thread (not an I/O loop, never this loop).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/policies/shared_config.h"
#include "metadata/store.h"
#include "net/event_loop.h"
#include "setting_defaults.h"

namespace magnetar::broker::cluster {

struct ConfigurationStoreOptions {
  std::string clusterName;
  int defaultNumberOfNamespaceBundles = setting_defaults::defaultNumberOfNamespaceBundles;
  int operationTimeoutMs = setting_defaults::metadataStoreOperationTimeoutSeconds * 1000;
};

class ConfigurationStore : public SharedConfig {
 public:
  // config: the configuration store; local: the local metadata store (may be the same); both
  // outlive this.
  ConfigurationStore(metadata::Store* config, metadata::Store* local,
                     ConfigurationStoreOptions options);
  ~ConfigurationStore() override;

  // The roots of the trees it keeps (/admin/policies, /admin/partitioned-topics,
  // /admin/clusters).
  static std::vector<std::string> roots();

  // Replaces the tenants, clusters, namespaces, policies and partitioned topics of `view` (the
  // broker's: BrokerService; outlives this, or stop() first) with what the store holds and
  // starts watching. Damaged znodes are logged (naming the path) and skipped. Blocks until
  // loaded. Call once, before any other call. Errors: the store's (kTimeout, kClosed, kIoError).
  // Thread: main.
  Status start(SharedConfigView* view);
  void stop();

  Status createTenant(const std::string& name, const TenantInfo& info) override;
  Status updateTenant(const std::string& name, const TenantInfo& info) override;
  Status deleteTenant(const std::string& name) override;
  Status createCluster(const std::string& name, const std::string& clusterData) override;
  Status updateCluster(const std::string& name, const std::string& clusterData) override;
  Status deleteCluster(const std::string& name) override;
  Status putResourceGroup(const std::string& name, const std::string& json) override;
  Status deleteResourceGroup(const std::string& name) override;
  Status createNamespace(const std::string& ns, const NamespacePolicies& policies,
                         int numBundles) override;
  Result<NamespacePolicies> updateNamespacePolicies(
      const std::string& ns, const std::function<void(NamespacePolicies&)>& change) override;
  Status deleteNamespace(const std::string& ns) override;
  Status createPartitioned(const std::string& topic, int partitions) override;
  Result<int> updatePartitioned(const std::string& topic, int partitions) override;
  Result<int> deletePartitioned(const std::string& topic) override;
  void deletePartitionedAsync(const std::string& topic,
                              std::function<void(Result<int>)> done) override;
  void createPartitionedAsync(const std::string& topic, int partitions) override;
  void refresh(const TopicName& topic, net::Executor* ex,
               std::function<void(Status)> done) override;
  void refreshNamespace(const std::string& ns) override;
  void refreshTenant(const std::string& tenant) override;

 private:
  enum class Tree { kPolicies, kPartitioned, kClusters, kResourceGroups };
  static constexpr Tree kTrees[] = {Tree::kPolicies, Tree::kPartitioned, Tree::kClusters,
                                    Tree::kResourceGroups};
  static const char* rootOf(Tree tree);
  // Whether a node `depth` levels below the tree's root holds data / has children to list.
  static bool isData(Tree tree, int depth);
  static bool isContainer(Tree tree, int depth);
  // Loop only: lists `path`'s children (setting a child watch) and loads the new ones, forgets
  // the gone ones. depth: of path below its tree's root (0 for the root). all: read and list
  // every child again, not only the new ones (a new session: the watches must be set again).
  void listChildren(Tree tree, const std::string& path, int depth, bool all = false);
  // Loop only: on a new session, lists and reads everything again.
  void resync();
  // Loop only: (re)reads a data node (tenant, namespace, partitioned topic) and applies it.
  void readNode(Tree tree, const std::string& path, int depth);
  // Applies a data node's value (nullopt: gone) to the broker. Thread: any.
  void applyNode(Tree tree, const std::string& path, int depth,
                 const std::optional<std::string>& value);
  Result<std::vector<uint64_t>> newNamespaceCut(const NamespacePolicies& policies,
                                                int numBundles) const;
  void forget(Tree tree, const std::string& path, int depth);
  void onNotification(const metadata::Notification& n);
  // Loop only: the start() bookkeeping of outstanding reads.
  void begin();
  void end();

  // Blocking helpers: one store call, waited for (operationTimeoutMs + 5 s at most).
  Result<std::optional<metadata::GetResult>> getSync(metadata::Store* s, const std::string& path);
  Result<metadata::Stat> putSync(metadata::Store* s, const std::string& path,
                                 const std::string& value, std::optional<metadata::Version> v);
  Result<std::vector<std::string>> childrenSync(metadata::Store* s, const std::string& path);
  Status removeSync(metadata::Store* s, const std::string& path,
                    std::optional<metadata::Version> v);

  // Applies a namespace znode's value (nullopt: deleted) to the broker. Thread: any.
  void applyNamespaceValue(const std::string& ns, const std::string& path,
                           const std::optional<std::string>& value);

  metadata::Store* config_;
  metadata::Store* local_;
  SharedConfigView* service_ = nullptr;  // set by start()
  ConfigurationStoreOptions options_;
  net::EventLoop loop_{"configuration-store"};
  std::optional<uint64_t> listener_;
  std::optional<uint64_t> sessionListener_;
  bool stopped_ = false;

  // Loop only: children last listed, by path.
  std::map<std::string, std::set<std::string>> children_;
  // The Policies text last applied per namespace (refreshes of unchanged ones cost nothing).
  std::mutex appliedMu_;
  std::map<std::string, std::string> applied_;
  // start(): reads outstanding and the first error.
  std::mutex loadMu_;
  std::condition_variable loadCv_;
  int loading_ = 0;
  Status loadError_;
};

}  // namespace magnetar::broker::cluster
