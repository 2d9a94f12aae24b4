// Standalone's metadata::Store is a LocalBackend made persistent in the embedded RocksDB (the
// storage's storage::MetadataStore), as Pulsar's standalone keeps its metadata in
// RocksdbMetadataStore. Only the nodes under the given roots are kept there (topic policies,
// schemas, and ConfigurationStore::roots(): Pulsar's tenants, namespaces, partitioned topics and
// clusters),
// each as the key of its path with its value's bytes (docs/broker-metadata-format.md). Cluster
// mode keeps the same nodes in ZooKeeper. A data directory of a build that kept tenants,
// namespaces and partitioned topics in its own keys is migrated once (migrateLegacyMetadata).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/cluster/configuration_store.h"
#include "metadata/local_store.h"
#include "storage/metadata_store.h"

namespace magnetar::broker::cluster {

// A LocalPersistence over a storage::MetadataStore. Thread: load() once, then write() from the
// backend's store thread only.
class MetadataStorePersistence : public metadata::LocalPersistence {
 public:
  // store outlives this. roots: node paths (no trailing '/').
  MetadataStorePersistence(storage::MetadataStore* store, std::vector<std::string> roots)
      : store_(store), roots_(std::move(roots)) {}

  bool persists(const std::string& path) const override;
  // Each root and every key below it. Errors: the store's.
  Result<std::vector<std::pair<std::string, std::string>>> load() override;
  Status write(const std::string& path, const std::optional<std::string>& value) override;

 private:
  storage::MetadataStore* store_;
  std::vector<std::string> roots_;
};

// Rewrites what a build before stored in its own keys (/admin/magnetar/namespaces,
// /admin/magnetar/partitioned-topics, /admin/magnetar/tenants/, /admin/magnetar/policies/,
// /admin/magnetar/clusters/: docs/broker-metadata-format.md) as the configuration store's nodes
// under Pulsar's paths, and deletes the old keys, in one atomic write of `store`; nothing when
// there are none. A namespace's policies become Pulsar's Policies JSON with its bundle cut
// (o.defaultNumberOfNamespaceBundles unless kept), o.clusterName its replication cluster unless
// set; policies of a namespace that no longer exists and damaged partition counts are dropped
// (logged). Call before openLocalRecords. Errors: the store's. Thread: main, at start.
Status migrateLegacyMetadata(storage::MetadataStore* store, const ConfigurationStoreOptions& o);

// The persistent local backend over `store` for `roots` (sessions: openSession()). Errors: the
// store's. Thread: main, at start (it reads the store).
Result<std::shared_ptr<metadata::LocalBackend>> openLocalRecords(storage::MetadataStore* store,
                                                                 std::vector<std::string> roots);

}  // namespace magnetar::broker::cluster
