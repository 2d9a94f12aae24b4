// In-memory managed ledgers: the managed-ledger core (managed_ledger_core.h: cursors, reads,
// trimming, rollover, termination, the add queue, as on the embedded journal and BookKeeper) over
// an in-memory backend. For broker tests. Data survives close/reopen within one factory (a reopen
// starts a new ledger id, as a broker restart does), never a process restart.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/thread_annotations.h"
#include "storage/entry_cache.h"
#include "storage/managed_ledger.h"
#include "storage/managed_ledger_config.h"

namespace magnetar::storage {

struct MemoryLedgerOptions {
  // Rollover to a new ledger after this many entries (Pulsar's managedLedgerMaxEntriesPerLedger).
  int64_t maxEntriesPerLedger = 50000;
  // Delete ledgers (other than the current one) once every cursor has acked all their entries.
  bool trimConsumedLedgers = true;
  // readCachedEntries answers every read at once (an entry cache holding everything); false: it
  // answers none, so every read goes through the executor as a cache miss does (tests).
  bool cachedReads = true;
  // Tests: while positive, each add fails with kIoError (as a journal or bookie write failure) and
  // takes one off. Shared, so a test sets it while ledgers are open; read on their executors.
  std::shared_ptr<std::atomic<int>> failAdds = std::make_shared<std::atomic<int>>(0);
};

struct MemoryLedgerData;
class MemoryManagedLedger;

// Thread: asyncOpen/ledgerNames/shutdown from any thread. A ledger then lives on the executor
// given to asyncOpen and is called there only (the core's rule); every callback (including
// asyncOpen's) is posted to that executor, never run inline in the caller's stack.
class MemoryManagedLedgerFactory : public ManagedLedgerFactory {
 public:
  explicit MemoryManagedLedgerFactory(MemoryLedgerOptions options = {});
  ~MemoryManagedLedgerFactory() override;

  // Opens or creates `name`. Opening a ledger that is already open returns the same instance; one
  // that is closing is answered with a new instance once the close finished.
  void asyncOpen(const std::string& name, net::Executor* executor,
                 std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) override;
  std::vector<std::string> ledgerNames() const override;
  // Every open ledger refuses adds from now on (kClosed).
  void shutdown() override;

 private:
  friend class MemoryManagedLedger;
  // asyncDelete finished: the data goes. Thread: the ledger's executor.
  void forget(const std::string& name, const MemoryManagedLedger* ml);
  // asyncClose finished (its state is back in the data): the open instance goes.
  void closed(const std::string& name, const MemoryManagedLedger* ml);

  const MemoryLedgerOptions options_;
  const ManagedLedgerConfig config_;                 // the options as the core's settings
  std::shared_ptr<EntryCacheManager> cacheManager_;  // disabled: every entry is in memory
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<MemoryLedgerData>> data_ GUARDED_BY(mu_);
  std::map<std::string, std::weak_ptr<MemoryManagedLedger>> open_ GUARDED_BY(mu_);
};

}  // namespace magnetar::storage
