#include "app/topic_storage.h"

#include <filesystem>

#include "base/logging.h"

namespace magnetar::app {

void TopicStorage::shutdown() {
  if (durable) durable->shutdown();
  if (bkFactory) bkFactory->shutdown();
  if (bk) bk->close();
}

storage::bk::BkStorageOptions bkStorageOptionsFrom(const config::ServiceConfiguration& cfg) {
  storage::bk::BkStorageOptions o;
  o.managedLedgerDefaultEnsembleSize = cfg.managedLedgerDefaultEnsembleSize();
  o.managedLedgerDefaultWriteQuorum = cfg.managedLedgerDefaultWriteQuorum();
  o.managedLedgerDefaultAckQuorum = cfg.managedLedgerDefaultAckQuorum();
  o.managedLedgerMaxEntriesPerLedger = cfg.managedLedgerMaxEntriesPerLedger();
  o.managedLedgerMaxSizePerLedgerMbytes = cfg.managedLedgerMaxSizePerLedgerMbytes();
  o.managedLedgerMinLedgerRolloverTimeMinutes = cfg.managedLedgerMinLedgerRolloverTimeMinutes();
  o.managedLedgerMaxLedgerRolloverTimeMinutes = cfg.managedLedgerMaxLedgerRolloverTimeMinutes();
  o.managedLedgerMaxUnackedRangesToPersist = cfg.managedLedgerMaxUnackedRangesToPersist();
  o.managedLedgerMaxUnackedRangesToPersistInMetadataStore =
      cfg.managedLedgerMaxUnackedRangesToPersistInMetadataStore();
  o.managedLedgerMaxBatchDeletedIndexToPersist = cfg.managedLedgerMaxBatchDeletedIndexToPersist();
  o.managedLedgerCursorMaxEntriesPerLedger = cfg.managedLedgerCursorMaxEntriesPerLedger();
  o.managedLedgerCursorRolloverTimeInSeconds = cfg.managedLedgerCursorRolloverTimeInSeconds();
  o.managedLedgerCacheSizeMB = cfg.managedLedgerCacheSizeMB();
  o.defaultRetentionTimeInMinutes = cfg.defaultRetentionTimeInMinutes();
  o.defaultRetentionSizeInMB = cfg.defaultRetentionSizeInMB();
  o.retentionCheckIntervalInSeconds = cfg.retentionCheckIntervalInSeconds();
  return o;
}

Result<TopicStorage> openTopicStorage(const config::ServiceConfiguration& cfg,
                                      const storage::StorageOptions& durableOptions,
                                      metadata::Store* clusterStore) {
  TopicStorage t;
  const std::string uri = cfg.bookkeeperMetadataServiceUri();
  if (uri.empty()) {
    auto opened = storage::DurableManagedLedgerFactory::open(durableOptions);
    if (!opened.isOk()) return opened.status();
    t.durable = std::move(*opened);
    t.factory = t.durable;
    t.metadata = t.durable->metadataStore();
    t.setCacheSizeMB = [d = t.durable](int64_t mb) { d->setCacheSizeMB(mb); };
    t.stats = [d = t.durable] { return d->stats(); };
    return t;
  }
  if (!clusterStore) {
    return Status::invalidArgument("bookkeeperMetadataServiceUri=" + uri +
                                   ": topics on BookKeeper need cluster mode (`magnetar broker` "
                                   "with metadataStoreUrl=zk:...)");
  }
  if (cfg.managedLedgerDigestType() != "CRC32C") {
    return Status::invalidArgument("managedLedgerDigestType=" + cfg.managedLedgerDigestType() +
                                   ": Magnetar writes BookKeeper entries with CRC32C only");
  }
  auto o = bkStorageOptionsFrom(cfg);
  if (o.managedLedgerDefaultAckQuorum > o.managedLedgerDefaultWriteQuorum ||
      o.managedLedgerDefaultWriteQuorum > o.managedLedgerDefaultEnsembleSize) {
    return Status::invalidArgument(
        "managedLedgerDefaultAckQuorum <= managedLedgerDefaultWriteQuorum <= "
        "managedLedgerDefaultEnsembleSize is required");
  }
  bookkeeper::ClientConfig bc;
  bc.metadataServiceUri = uri;
  bc.numIoThreads = cfg.bookkeeperClientNumIoThreads();
  bc.zkSessionTimeoutMs = static_cast<int>(cfg.metadataStoreSessionTimeoutMillis());
  bc.password = cfg.managedLedgerPassword();
  auto client = bookkeeper::BookKeeperClient::open(bc);
  if (!client.isOk()) return client.status();
  t.bk = std::move(*client);
  std::error_code ec;
  std::filesystem::create_directories(durableOptions.metadataDirectory, ec);
  if (ec) {
    return Status::ioError("creating " + durableOptions.metadataDirectory + ": " + ec.message());
  }
  auto local = storage::RocksDbMetadataStore::open(durableOptions.metadataDirectory,
                                                   durableOptions.journalSyncData);
  if (!local.isOk()) return local.status();
  t.localMetadata = std::move(*local);
  t.metadata = t.localMetadata.get();
  t.bkFactory = std::make_shared<storage::bk::BkManagedLedgerFactory>(o, t.bk.get(), clusterStore);
  t.factory = t.bkFactory;
  t.setCacheSizeMB = [f = t.bkFactory](int64_t mb) { f->cacheManager().setMaxBytes(mb << 20); };
  t.stats = [f = t.bkFactory] { return f->stats(); };  // pulsar_ml_cache_used_size, ...
  t.onBookKeeper = true;
  MLOG_INFO("topics on BookKeeper at {} (E={} Qw={} Qa={}, {} bookkeeper-io threads)", uri,
            o.managedLedgerDefaultEnsembleSize, o.managedLedgerDefaultWriteQuorum,
            o.managedLedgerDefaultAckQuorum, bc.numIoThreads);
  return t;
}

}  // namespace magnetar::app
