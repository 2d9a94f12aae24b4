// The durable managed-ledger storage (the embedded default): DurableManagedLedgerFactory opens
// topics' ManagedLedgers over one group-committed journal (journal.h), per-ledger indexes
// (ledger_index.h) checkpointed into a MetadataStore (RocksDB by default), an entry cache
// (entry_cache.h) and storage-read-N threads (read_pool.h). See src/storage/README.md.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
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
  std::optional<Position> terminatedAt;  // asyncTerminate's position (/ml-terminated/<name>)
};

// Storage counters (any thread), for /metrics.
struct StorageStats {
  uint64_t journalGroups = 0, journalEntries = 0, journalBytes = 0;
  uint64_t diskReads = 0, cacheEvictions = 0;
  int64_t cacheBytes = 0;
  uint64_t segmentsDeleted = 0, ledgersDeleted = 0;
  // Journal segment compaction: segments compacted, bytes of live records copied forward.
  uint64_t segmentsCompacted = 0, compactedBytes = 0;
  uint64_t journalWriteErrors = 0, metadataWriteErrors = 0;
  uint64_t publishesRefused = 0;  // adds refused at once (disk full or above the watermark)
  bool writable = true;           // publishes accepted now
  double diskUsage = 0;           // fraction in use of the fuller of journal / metadata disks
  // Journal records of live ledgers whose location is held in memory (a record holds the entries
  // of one ledger written together; about 160 B each, docs/memory-limits.md).
  int64_t indexRuns = 0;
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
  // Writes the cursor state of every open ledger that managedLedgerDefaultMarkDeleteRateLimit held
  // back and waits for the writes, at most `timeout`; false when some did not finish in time. For
  // a clean stop, before the ledgers' executors stop (they run the flush). Thread: any other.
  bool flushCursors(std::chrono::milliseconds timeout);

  // The metadata store (also the broker's, for tenants/namespaces/topics). Thread: any.
  MetadataStore* metadataStore() const { return meta_; }
  StorageStats stats() const;
  // Resizes the entry cache (managedLedgerCacheSizeMB changed at run time; 0 disables it);
  // trims it at once when it holds more. Thread: any.
  void setCacheSizeMB(int64_t mb);
  // Journal segment files currently on disk (for tests and metrics).
  std::vector<uint64_t> segments() const;
  // Compacts now every journal segment before the last checkpoint whose live fraction is below
  // `threshold` (0..1): live records are copied to the journal's end, the index moved to them,
  // then the segment is deleted. Blocking; rate-limited by compactionRateByBytes. Runs on the
  // storage-gc thread at minor/majorCompactionInterval; tests call it directly. Thread: any
  // except storage-bg and the ledgers' executors. Returns the number of segments compacted.
  Result<int> compactSegments(double threshold);
  // Ok, or why publishes are refused now (kNoSpace: the journal's disk is full, or fuller than
  // diskUsageThreshold). While the journal's disk is full it looks again (statvfs) at most every
  // kNoSpaceRecheck, so writes resume within that of space coming back. Thread: any.
  Status writeRefusal() const;
  static constexpr std::chrono::milliseconds kNoSpaceRecheck{100};

 private:
  friend class ManagedLedgerImpl;
  explicit DurableManagedLedgerFactory(const StorageOptions& options);

  // storage_recovery.cc; runs before the ledgers are shared, so mu_ is not taken. recover() runs
  // the phases in order; each returns the store's or the environment's error, or kCorruption.
  struct Recovery;
  Status recover() NO_THREAD_SAFETY_ANALYSIS;
  Status recoverCheckpoint(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;    // checkpoint, next ledger id
  Status recoverLedgerLists(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;   // managed ledgers' ledgers
  Status recoverTerminations(Recovery& r) NO_THREAD_SAFETY_ANALYSIS;  // asyncTerminate's keys
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
  void bgCheckDisk();
  // The journal's disk has room for a few groups again: clears the journal's no-space state.
  // Thread: any.
  bool journalHasRoomAgain() const;
  // Writes ops; on success also records a new live ledger (newLedgerId >= 0) of `owner`.
  Status bgWrite(std::vector<MetadataOp> ops, int64_t newLedgerId = -1,
                 const std::string& owner = {});
  void bgAddRun(const JournalRun& r);

  // Compaction (storage-gc thread, or a compactSegments caller).
  struct Relocation {
    JournalRun from;  // as indexed now
    uint64_t segment = 0, offset = 0;
  };
  void gcLoop();
  Status compactSegment(uint64_t segment, std::vector<JournalRun> runs);
  // compactSegment's steps. Reads runs[*next...] (about 1 MiB of whole records, each checked:
  // length, CRC-32C, run header) into *recs and *batch, adds their size to *bytes.
  // Errors: the file's, kCorruption.
  Status readCompactionBatch(RandomAccessFile& file, uint64_t segment,
                             const std::vector<JournalRun>& runs, size_t* next,
                             std::vector<JournalRun>* batch, RelocatedRecords* recs, size_t* bytes);
  // Points the index (one synced metadata write) and then the open ledgers at the copies;
  // again for the ledgers that closed meanwhile (at most 100 times: kBusy). kClosed at shutdown.
  Status applyRelocations(std::vector<Relocation> moved);
  // True (and the caller returns kClosed) once the factory stops compaction.
  bool gcStopping();
  // On storage-bg: saves the new locations, moves the segment references, relocates dormant
  // ledgers' indexes; returns the open ledgers still to update with their relocations.
  std::vector<std::pair<std::shared_ptr<ManagedLedgerImpl>, std::vector<Relocation>>>
  bgApplyRelocations(const std::vector<Relocation>& moved, Status* status);
  // Runs fn on storage-bg and waits for it (false if the factory stopped first).
  bool onBg(const std::function<void()>& fn);
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
  std::map<uint64_t, std::map<uint64_t, JournalRun>> segmentRuns_;  // live runs by offset
  std::map<int64_t, std::string> ledgerOwner_;                      // live ledger -> its ML
  std::set<uint64_t> compacting_;      // not deleted by bgReclaim while being compacted
  std::vector<MetadataOp> failedOps_;  // of a recovery whose final write failed (full disk)
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
  std::atomic<int64_t> liveRuns_{0};  // entries of segmentRuns_
  std::atomic<uint64_t> segmentsCompacted_{0}, compactedBytes_{0}, metadataWriteErrors_{0};
  std::atomic<uint64_t> writesRefused_{0};
  // Disk check (storage-bg writes, any thread reads): above the watermark, usage in 1e-6 units.
  std::atomic<bool> aboveWatermark_{false};
  std::atomic<int64_t> diskUsagePpm_{0};
  std::chrono::steady_clock::time_point nextDiskCheck_;  // storage-bg
  // writeRefusal's last look at a full journal disk (steady_clock ticks); any thread.
  mutable std::atomic<int64_t> lastNoSpaceCheck_{0};
  std::chrono::steady_clock::time_point nextLedgerTick_;  // storage-bg: every tickIntervalMs

  Mutex gcMu_;  // one compaction at a time
  std::mutex gcWaitMu_;
  std::condition_variable gcCv_;
  bool gcStop_ = false;  // under gcWaitMu_
  std::thread gc_;
};

}  // namespace magnetar::storage
