// Managed ledgers on Apache BookKeeper, in Pulsar's formats
// (docs/managed-ledger-bookkeeper-format.md): a topic is the znode
// /managed-ledgers/{tenant}/{ns}/persistent/{topic} (ManagedLedgerInfo: its BookKeeper ledgers) and
// the ledgers themselves; each cursor is a ManagedCursorInfo znode under it plus a cursor ledger of
// PositionInfo entries. A Pulsar broker and Magnetar read each other's.
//
// Ownership: opening a managed ledger recovers its last ledger (fencing a previous owner that may
// still write) and starts a new one; the previous owner's next add then fails with kFenced and it
// must close the topic. Receipts (add callbacks) go out once Qa bookies acknowledged.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "bookkeeper/client.h"
#include "metadata/store.h"
#include "setting_defaults.h"
#include "storage/bk/ml_formats.h"
#include "storage/compacted_ledger.h"
#include "storage/durable_storage.h"
#include "storage/entry_cache.h"
#include "storage/managed_ledger.h"
#include "storage/task_thread.h"

namespace magnetar::storage::bk {

class Gate;
class BkManagedLedger;

// Every knob, with Pulsar's key names; defaults are Pulsar's broker.conf defaults. The
// managed-ledger settings (rollover, cursors, cache, retention, tick) are ManagedLedgerConfig's.
struct BkStorageOptions : ManagedLedgerConfig {
  // Ensemble, write and ack quorum of data and cursor ledgers (managedLedgerDefaultEnsembleSize,
  // managedLedgerDefaultWriteQuorum, managedLedgerDefaultAckQuorum; Pulsar uses the same values
  // for cursor ledgers). Digest: CRC32C (managedLedgerDigestType); the password
  // (managedLedgerPassword) is the BookKeeper client's.
  int managedLedgerDefaultEnsembleSize = setting_defaults::managedLedgerDefaultEnsembleSize;
  int managedLedgerDefaultWriteQuorum = setting_defaults::managedLedgerDefaultWriteQuorum;
  int managedLedgerDefaultAckQuorum = setting_defaults::managedLedgerDefaultAckQuorum;
  // Cursors: when closing, more ranges than ...InMetadataStore go to the cursor ledger instead
  // of the znode. A cursor ledger is replaced after managedLedgerCursorMaxEntriesPerLedger entries
  // or managedLedgerCursorRolloverTimeInSeconds.
  int managedLedgerMaxUnackedRangesToPersistInMetadataStore =
      setting_defaults::managedLedgerMaxUnackedRangesToPersistInMetadataStore;
  int64_t managedLedgerCursorMaxEntriesPerLedger =
      setting_defaults::managedLedgerCursorMaxEntriesPerLedger;
  int managedLedgerCursorRolloverTimeInSeconds =
      setting_defaults::managedLedgerCursorRolloverTimeInSeconds;
  // Root of the managed-ledger znodes: Pulsar's, "/managed-ledgers". Tests give each factory its
  // own root so that they do not see each other's ledgers.
  std::string root = kManagedLedgersRoot;
};

// Thread: asyncOpen / ledgerNames / shutdown from any thread. A ledger lives on the executor of
// its first asyncOpen; its BookKeeper work runs on the client's bookkeeper-io loops and ZooKeeper
// calls on the store's threads, every completion handed back to that executor. Runs one thread,
// `bk-ml-tick` (housekeeping ticks). `bk` and `store` must outlive the factory, and the factory
// every ledger it opened.
class BkManagedLedgerFactory : public ManagedLedgerFactory {
 public:
  // `store` holds /managed-ledgers (Pulsar's metadataStoreUrl; usually the ZooKeeper of `bk`).
  BkManagedLedgerFactory(BkStorageOptions options, bookkeeper::BookKeeperClient* bk,
                         metadata::Store* store);
  ~BkManagedLedgerFactory() override;

  // Opens or creates `name` ("tenant/ns/persistent/topic"; znode named with the local name
  // URL-encoded, as Pulsar). Recovers the last ledger (fencing its writer), creates a new ledger,
  // writes the ManagedLedgerInfo by version CAS and recovers the cursors. A ledger already open
  // (or opening) in this factory is returned as is. cb on `executor`. Errors: kIoError (bookies,
  // ZooKeeper), kCorruption (znodes that do not parse), kUnsupported (compressed znodes),
  // kFenced (another owner wrote the znode meanwhile), kClosed (after shutdown).
  void asyncOpen(const std::string& name, net::Executor* executor,
                 std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) override;
  // asyncOpen without creating: when the managed-ledger znode does not exist (never created, or
  // deleted through another broker after the caller checked), kNotFound and no znode written
  // (Pulsar's createIfMissing=false). A ledger open (or opening) here is returned as asyncOpen
  // does; an asyncOpen that joins an opening that finds nothing opens again, creating.
  void asyncOpenExisting(const std::string& name, net::Executor* executor,
                         std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) override;
  // Storage names of the managed ledgers under the root that hold at least one ledger (walks the
  // znode tree; blocks on ZooKeeper: not from an event loop that ZooKeeper completions need).
  std::vector<std::string> ledgerNames() const override;
  bool sharedBetweenBrokers() const override { return true; }
  // The managed-ledger znode exists (any value: Pulsar creates it empty first). Errors:
  // ZooKeeper's; kClosed after shutdown.
  void asyncExists(const std::string& name, net::Executor* executor,
                   std::function<void(Result<bool>)> cb) override;
  // The children of <root>/<prefix> URL-decoded (a child that does not decode is skipped with a
  // warning). Errors: ZooKeeper's; kClosed after shutdown.
  void asyncLedgerNamesUnder(const std::string& prefix, net::Executor* executor,
                             std::function<void(Result<std::vector<std::string>>)> cb) override;
  // Refuses new work and drops completions still to come (no callback runs after it returns);
  // does not close the ledgers in BookKeeper (the next owner recovers them). Close ledgers first
  // (asyncClose) for a clean handover.
  void shutdown() override;
  // Pulsar's compacted ledgers (plain BookKeeper ledgers of RawMessage entries,
  // bk_compacted_ledger.cc), for the broker's compactor. Created once, lives as the factory.
  std::shared_ptr<CompactedLedgerStore> compactedLedgerStore() override;

  const BkStorageOptions& options() const { return options_; }
  bookkeeper::BookKeeperClient& bookkeeper() const { return *bk_; }
  metadata::Store& store() const { return *store_; }
  EntryCacheManager& cacheManager() { return *cache_; }
  // Counters for /metrics (the embedded storage's StorageStats; what BookKeeper has no use for
  // stays 0, `writable` true): cacheBytes (pulsar_ml_cache_used_size), ledgersDeleted (ledgers
  // removed by trimming, truncate and deletes). Thread: any.
  StorageStats stats() const;

 private:
  friend class BkManagedLedger;
  struct Waiter {
    net::Executor* executor;
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb;
    bool create;  // asyncOpen (true) or asyncOpenExisting
  };
  struct Slot {
    std::shared_ptr<BkManagedLedger> ml;
    bool ready = false;
    std::vector<Waiter> waiters;
    // Opens asked for while `ml` closes: a new instance opens for them once it has closed (its
    // last cursor states written), never concurrently with the close.
    std::vector<Waiter> reopen;
  };
  void open(const std::string& name, net::Executor* executor,
            std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb, bool create);
  void opened(const std::string& name, const Status& s);
  // A ledger closed or was deleted: a later asyncOpen opens it anew.
  void released(const std::string& name, const BkManagedLedger* ml);
  void tick();

  BkStorageOptions options_;
  bookkeeper::BookKeeperClient* bk_;
  metadata::Store* store_;
  std::shared_ptr<Gate> gate_;
  std::shared_ptr<EntryCacheManager> cache_;  // shared with the ledgers' caches
  mutable Mutex mu_;
  std::map<std::string, Slot> open_ GUARDED_BY(mu_);
  std::shared_ptr<CompactedLedgerStore> compacted_ GUARDED_BY(mu_);
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> ledgersDeleted_{0};
  std::unique_ptr<TaskThread> tick_;
};

}  // namespace magnetar::storage::bk
