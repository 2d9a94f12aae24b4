// Where the broker's topics are stored: the embedded journal (standalone, and cluster mode without
// bookkeeperMetadataServiceUri) or Apache BookKeeper in Pulsar's formats (cluster mode with it:
// docs/managed-ledger-bookkeeper-format.md). Wiring only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "bookkeeper/client.h"
#include "broker/cluster/configuration_store.h"
#include "config/service_configuration.h"
#include "metadata/local_store.h"
#include "metadata/store.h"
#include "storage/bk/bk_storage.h"
#include "storage/durable_storage.h"
#include "storage/rocksdb_metadata_store.h"

namespace magnetar::app {

struct TopicStorage {
  // What the broker opens topics with.
  std::shared_ptr<storage::ManagedLedgerFactory> factory;
  // The broker's own local metadata (RocksDB), either way: standalone's local records.
  storage::MetadataStore* metadata = nullptr;
  // managedLedgerCacheSizeMB changed at run time.
  std::function<void(int64_t mb)> setCacheSizeMB;
  // The embedded storage's counters for /metrics; empty on BookKeeper.
  std::function<storage::StorageStats()> stats;
  bool onBookKeeper = false;

  // Standalone: opens localRecordStore, the persistent metadata::Store over `metadata` of topic
  // policies, schemas, tenants, clusters, namespaces and partitioned topics
  // (broker/cluster/local_records.h), after migrating a data directory of the keys a build before
  // used (o: the cluster name and bundle count of migrated namespaces). Errors: the store's.
  // Thread: main.
  Status openLocalRecords(const broker::cluster::ConfigurationStoreOptions& o);
  // Stops the factory (and the BookKeeper client) after the local record store wrote everything
  // it was given. Thread: main, after the broker stopped.
  void shutdown();

  std::shared_ptr<storage::DurableManagedLedgerFactory> durable;
  std::unique_ptr<bookkeeper::BookKeeperClient> bk;
  std::unique_ptr<storage::RocksDbMetadataStore> localMetadata;
  std::shared_ptr<storage::bk::BkManagedLedgerFactory> bkFactory;
  // Standalone's record store (after the stores above: it goes first).
  std::shared_ptr<metadata::LocalBackend> localRecords;
  std::unique_ptr<metadata::Store> localRecordStore;
};

// Whether any "host:port" of a ZooKeeper host list ("h1:p1,h2:p2[/chroot]") accepts a TCP
// connection within timeoutMs (each server tried in turn).
bool anyZkServerAccepts(const std::string& hosts, int timeoutMs = 1000);

// Opens the topics' storage. With bookkeeperMetadataServiceUri set (cluster mode: clusterStore
// is the metadataStoreUrl session, which also holds /managed-ledgers) the BookKeeper client
// connects and the broker's local metadata stays in RocksDB at durableOptions.metadataDirectory;
// otherwise the embedded storage opens. The BookKeeper client waits for its ZooKeeper up to
// metadataStoreSessionTimeoutMillis (Pulsar's zkTimeout of the broker's BookKeeper client),
// saying at once which servers it waits for when none accepts connections, and trying them
// again until then (blocking). Errors: kInvalidArgument for settings this build refuses (a digest
// other than CRC32C, the URI without cluster mode), kTimeout naming the servers when BookKeeper's
// ZooKeeper never answered, kIoError when BookKeeper or the disk cannot be reached.
Result<TopicStorage> openTopicStorage(const config::ServiceConfiguration& cfg,
                                      const storage::StorageOptions& durableOptions,
                                      metadata::Store* clusterStore);

}  // namespace magnetar::app
