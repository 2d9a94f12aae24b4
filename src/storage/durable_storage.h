// The durable managed-ledger storage (the embedded default): DurableManagedLedgerFactory opens
// topics' ManagedLedgers over one group-committed journal (journal.h), per-ledger indexes
// (ledger_index.h) checkpointed into a MetadataStore (RocksDB by default), an entry cache
// (entry_cache.h) and storage-read-N threads (read_pool.h). See src/storage/README.md.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "storage/entry_cache.h"
#include "storage/env.h"
#include "storage/journal.h"
#include "storage/ledger_index.h"
#include "storage/managed_ledger.h"
#include "storage/metadata_codec.h"
#include "storage/metadata_store.h"
#include "storage/read_pool.h"
#include "storage/storage_options.h"
#include "storage/task_thread.h"

namespace magnetar::storage {

class ManagedLedgerImpl;

// A managed ledger's stored state while it is not open (loaded at recovery, handed back at close).
struct StoredLedger {
  LedgerMeta meta;
  LedgerIndex index;
};
struct ManagedLedgerState {
  std::map<int64_t, StoredLedger> ledgers;
  std::map<std::string, CursorMeta> cursors;
};

// Storage counters (any thread), for /metrics.
struct StorageStats {
  uint64_t journalGroups = 0, journalEntries = 0, journalBytes = 0;
  uint64_t diskReads = 0, cacheEvictions = 0;
  int64_t cacheBytes = 0;
  uint64_t segmentsDeleted = 0, ledgersDeleted = 0;
};

// Thread: asyncOpen/ledgerNames/stats from any thread; shutdown() from the owner. Runs the threads
// `journal`, `storage-read-N` and `storage-bg` (metadata writes, checkpoints, reclaim, ticks).
// Must outlive every ledger it opened.
class DurableManagedLedgerFactory : public ManagedLedgerFactory {
 public:
  // Recovers (index from the last checkpoint plus the journal after it; a torn tail is cut) and
  // starts the threads. Errors: kIoError/kNoSpace (files), kCorruption (metadata).
  static Result<std::unique_ptr<DurableManagedLedgerFactory>> open(const StorageOptions& options);
  ~DurableManagedLedgerFactory() override;

  // Opens or creates a ledger; every (re)open starts a new ledger id. cb runs on `executor`.
  // Opening a ledger that is already open returns the same instance.
  void asyncOpen(const std::string& name, net::Executor* executor,
                 std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) override;
  std::vector<std::string> ledgerNames() const override;
  // Flushes the journal, takes a checkpoint and stops the threads. Ledgers must not be used after.
  void shutdown() override;

  // The metadata store (also the broker's, for tenants/namespaces/topics). Thread: any.
  MetadataStore* metadataStore() const { return meta_; }
  StorageStats stats() const;
  // Resizes the entry cache (managedLedgerCacheSizeMB changed at run time; 0 disables it);
  // trims it at once when it holds more. Thread: any.
  void setCacheSizeMB(int64_t mb);
  // Journal segment files currently on disk (for tests and metrics).
  std::vector<uint64_t> segments() const;

 private:
  friend class ManagedLedgerImpl;
  friend class ManagedCursorImpl;
  explicit DurableManagedLedgerFactory(const StorageOptions& options);

  // storage_recovery.cc; runs before the ledgers are shared, so mu_ is not taken. recover() runs
  // the phases in order; each returns the store's or the environment's error, or kCorruption.
  struct Recovery;
  Status recover() NO_THREAD_SAFETY_ANALYSIS;
  Status recoverCheckpoint(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;   // checkpoint, next ledger id
  Status recoverLedgerLists(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;  // managed ledgers' ledgers
  Status recoverCursors(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;
  Status recoverIndexRuns(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;  // saved by checkpoints
  Status replayJournal(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;     // after the checkpoint
  Status finishRecovery(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;    // segment refs, checkpoint
  Status start();

  // Background-thread (storage-bg) work.
  void bgOpen(const std::string& name, net::Executor* executor,
              std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb);
  void bgCheckpoint(JournalCheckpoint cp);
  void bgForgetLedgers(const std::vector<int64_t>& ids);
  void bgReclaim();
  void bgTick();
  // Writes ops; on success also records a new live ledger (newLedgerId >= 0).
  Status bgWrite(std::vector<MetadataOp> ops, int64_t newLedgerId = -1);
  void post(std::function<void()> t) { bg_->post(std::move(t)); }

  int64_t allocateLedgerId() { return nextLedgerId_.fetch_add(1); }
  // Called by a ledger at close (state back to dormant) and at delete (forgotten).
  void released(const std::string& name, ManagedLedgerImpl* ml, ManagedLedgerState state);
  void deleted(const std::string& name, ManagedLedgerImpl* ml);

  StorageOptions options_;
  Env* env_;
  std::unique_ptr<MetadataStore> ownedMeta_;
  MetadataStore* meta_ = nullptr;
  std::unique_ptr<EntryCacheManager> cache_;
  std::unique_ptr<ReadPool> readPool_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<TaskThread> bg_;
  std::atomic<int64_t> nextLedgerId_{1};
  uint64_t firstSegment_ = 1;  // where the journal starts writing (after recovery)

  // storage-bg only (and recovery, before the threads start).
  uint64_t persistedNextLedgerId_ = 0;
  std::set<int64_t> liveLedgers_;
  std::map<uint64_t, std::set<int64_t>> segmentLedgers_;
  std::map<int64_t, std::set<uint64_t>> ledgerSegments_;
  std::set<uint64_t> knownSegments_;
  uint64_t checkpointSegment_ = 0;
  std::vector<JournalRun> failedRuns_;  // of a checkpoint whose write failed

  mutable Mutex mu_;
  std::map<std::string, ManagedLedgerState> dormant_ GUARDED_BY(mu_);
  // Open ledgers stay referenced until closed or deleted (as Pulsar's factory cache).
  std::map<std::string, std::shared_ptr<ManagedLedgerImpl>> open_ GUARDED_BY(mu_);
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::atomic<bool> stopped_{false};  // shutdown() began: ledgers refuse new work
  std::atomic<uint64_t> segmentsDeleted_{0}, ledgersDeleted_{0};
};

}  // namespace magnetar::storage
