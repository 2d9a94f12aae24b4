// Standalone's metadata::Store is a LocalBackend made persistent in the embedded RocksDB (the
// storage's storage::MetadataStore), as Pulsar's standalone keeps its metadata in
// RocksdbMetadataStore. Only the nodes under the given roots are kept there (topic policies and
// schemas: /admin/magnetar/topic-policies, /admin/magnetar/schemas), each as the key of its path
// with its value's bytes: the keys and record formats of docs/broker-metadata-format.md, so a
// data directory written before loads unchanged. Cluster mode keeps the same nodes in ZooKeeper.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// The persistent local backend over `store` for `roots` (sessions: openSession()). Errors: the
// store's. Thread: main, at start (it reads the store).
Result<std::shared_ptr<metadata::LocalBackend>> openLocalRecords(storage::MetadataStore* store,
                                                                 std::vector<std::string> roots);

}  // namespace magnetar::broker::cluster
