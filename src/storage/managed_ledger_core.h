// The managed-ledger core: what a ManagedLedger does the same way on every backend, written once
// (Pulsar's ManagedLedgerImpl / ManagedCursorImpl over BookKeeper's LedgerHandle is the shape):
// the ledger list and its position arithmetic, the entry cache, the read path (cache, then the
// backend, across ledgers up to the limits), the cursors (their state, the mark-delete rate limit
// per cursor, when their state is written), trimming of consumed ledgers under retention,
// truncation and the housekeeping tick's share of it.
//
// It also takes adds (the queue of adds waiting for a ledger, the refusals), starts closes and
// deletes (the adds waiting fail, the close callbacks wait), and terminates (Pulsar's
// asyncTerminate: the adds taken complete, then the position is stored).
//
// A backend (the embedded journal's ManagedLedgerImpl, BookKeeper's bk::BkManagedLedger, the
// in-memory MemoryManagedLedger of memory_managed_ledger.cc for broker tests) gives the core a
// LedgerBackend (ledger_backend.h: reading a ledger's entries, storing and removing cursor
// state, storing the terminated position) and, still by inheritance, the CoreHooks below:
// writing the queued adds to its ledgers, dropping ledgers, finishing a close, and its ledger
// states (open, closed, fenced). Its ledger creation and rollover mechanics, open/recovery and the
// close's final writes are its own (issue 46: the next steps move them behind LedgerBackend).
//
// Thread: everything on the executor given at construction (MAGNETAR_DCHECK_ON), except what the
// comments say. Callbacks run there too.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/dcheck.h"
#include "base/ring_queue.h"
#include "storage/cursor_state.h"
#include "storage/entry_cache.h"
#include "storage/ledger_backend.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger.h"
#include "storage/managed_ledger_config.h"
#include "storage/metadata_codec.h"

namespace magnetar::storage {

class ManagedLedgerCore;

// Milliseconds since the epoch (wall clock): ledger ages and retention, as Pulsar.
int64_t wallClockMs();
// The same from the coarse clock (CLOCK_REALTIME_COARSE: the last tick, a few ms behind; a
// fifth of the cost), for checks on a minutes scale made per add.
int64_t wallClockCoarseMs();
// Milliseconds of the monotonic clock: intervals (rate limit, retention schedule), immune to
// wall-clock steps.
int64_t steadyClockMs();

// A cursor of the core: its CursorState and the ManagedCursor API, written once. How its state is
// stored is the backend's (a subclass adds what it needs, e.g. BookKeeper's cursor ledger).
// Thread: the owning ledger's executor.
class CoreCursor : public ManagedCursor {
 public:
  CoreCursor(std::string name, ManagedLedgerCore* ml, CursorState state);

  const std::string& name() const override { return name_; }  // any thread
  Position markDeletedPosition() const override;
  void asyncMarkDelete(Position pos, StatusCallback cb) override;
  void asyncMarkDelete(Position pos, CursorProperties properties, StatusCallback cb) override;
  void asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet, StatusCallback cb) override;
  const CursorProperties& properties() const override;
  void asyncDelete(const std::vector<Position>& positions, StatusCallback cb) override;
  void asyncDeleteBatchIndexes(const std::vector<std::pair<Position, AckSet>>& acks,
                               StatusCallback cb) override;
  const AckSet* batchDeletedIndexes(Position pos) const override;
  bool isAcknowledged(Position pos) const override;
  int64_t numberOfEntriesInBacklog() const override;
  void asyncResetCursor(Position pos, StatusCallback cb) override;

  // What is stored: the mark-delete position, the first managedLedgerMaxUnackedRangesToPersist
  // ranges and managedLedgerMaxBatchDeletedIndexToPersist ack sets, the properties.
  CursorMeta snapshot() const;
  // The rate limit lets a write start at `nowSteadyMs`: someone waits for one, no limit is set,
  // or managedLedgerDefaultMarkDeleteRateLimit's interval passed since this cursor's last write
  // (Pulsar's per-cursor markDeleteLimiter).
  bool writeDue(int64_t nowSteadyMs) const;
  // The backend may start a write of this cursor now (false while one is in flight).
  virtual bool canWrite() const { return true; }

  // ---- persistence state: the ledger and its backend only ----
  CursorState state_;
  bool dirty_ = false;                   // changed since the last write started
  bool deleted_ = false;                 // deleteCursor ran: refuses changes
  std::vector<StatusCallback> waiting_;  // complete with the next write
  // The mark-delete position stored (the restored or initial one until the first write
  // completes): trimming never passes it, so a crash cannot leave a cursor before data that is
  // gone while its own move was lost (e.g. a compaction's switch).
  Position persisted_;
  int64_t lastWriteMs_ = INT64_MIN / 2;  // steady clock, when the last write started

 protected:
  // The owning ledger's executor.
  net::Executor* executor() const;
  // Fails cb (kClosed, on the executor) and returns false when the ledger is closed or the cursor
  // deleted.
  bool checkOpen(StatusCallback& cb);
  // Fails cb (kInvalidArgument) and returns false when pos is past the last confirmed entry.
  bool checkMarkDelete(Position pos, StatusCallback& cb);

  std::string name_;
  ManagedLedgerCore* core_;
};

// The hooks a backend still gives the core by inheritance (issue 46 moves them into
// LedgerBackend). Thread: the ledger's executor.
class CoreHooks {
 public:
  virtual ~CoreHooks() = default;

 protected:
  // Makes a cursor of this backend's kind (openCursor).
  virtual std::shared_ptr<CoreCursor> makeCursor(const std::string& name, CursorState state) = 0;
  // Deletes consumed ledgers: consumedLedgersToDrop(truncate) from the ledger list and the store,
  // when the ledger's state allows.
  virtual void trimConsumedLedgers(bool truncate = false) = 0;
  // When ledger `id` closed (wall ms), 0 when not known (its creation time counts then).
  virtual int64_t ledgerClosedMs(int64_t id) const = 0;
  // The ledger is closed: reads and cursor changes are refused.
  virtual bool isClosed() const = 0;
  // Why asyncAddEntry refuses an add now (kClosed, kNotAllowed when terminated, kFenced, the
  // disk's kNoSpace), Ok to queue it.
  virtual Status addRefusal() = 0;
  // Assigns the queued adds (queued_) to the current ledger and writes them, or starts a new
  // ledger when there is none or it is full.
  virtual void drainQueued() = 0;
  // A close is under way: finishes it once nothing is in flight (the last writes, then
  // closeCbs_), and calls maybeFinishTerminate first.
  virtual void maybeFinishClose() = 0;
  // Why asyncTerminate refuses now (kClosed, kFenced), Ok otherwise.
  virtual Status terminateRefusal() const = 0;
  // Adds taken and not completed, or a ledger change under way (terminate waits for them).
  virtual bool addsPending() const = 0;
  // Why a terminate that waited for the adds fails after all (BookKeeper: fenced or closed
  // meanwhile), Ok otherwise.
  virtual Status terminateFinishRefusal() const { return Status::ok(); }
  // Why no cursor may be created or deleted now besides closing (BookKeeper: kFenced, another
  // owner has them); Ok otherwise.
  virtual Status cursorChangeRefusal() const { return Status::ok(); }
  // Cursor writes may start (the embedded store: not once closed).
  virtual bool cursorsWritable() const { return true; }
};

// Owned by shared_ptr (enable_shared_from_this: callbacks keep the ledger alive).
class ManagedLedgerCore : public ManagedLedger,
                          protected CoreHooks,
                          public std::enable_shared_from_this<ManagedLedgerCore> {
 public:
  // `cacheManager` (may be null when it outlives the ledger anyway) is kept until `cache` goes.
  // `backend` (not owned; usually the subclass itself) is only called after construction.
  ManagedLedgerCore(std::string name, net::Executor* executor, const ManagedLedgerConfig& config,
                    std::shared_ptr<EntryCacheManager> cacheManager,
                    std::shared_ptr<EntryCache> cache, LedgerBackend* backend);
  ~ManagedLedgerCore() override;

  const std::string& name() const override { return name_; }  // any thread
  // asyncClose or asyncDelete was called. Thread: any.
  bool isClosing() const { return closing_.load(); }
  net::Executor* executor() const override { return executor_; }  // any thread
  const ManagedLedgerConfig& config() const { return config_; }   // any thread
  const LedgerSet& ledgers() const { return ledgers_; }

  // Adds: refused at once (addRefusal), else queued and drained by the backend. Callbacks in
  // add order on the executor (ManagedLedger's contract).
  void asyncAddEntry(Buffer data, AddEntryCallback cb) override;
  // The adds waiting for a ledger fail (kClosed); closeCbs_ run when the backend finished.
  void asyncClose(StatusCallback cb) override;
  // As asyncClose, then everything of the ledger is deleted.
  void asyncDelete(StatusCallback cb) override;
  // Pulsar's asyncTerminate (ManagedLedger's contract): refused per terminateRefusal; once the
  // adds taken completed, the last confirmed entry is stored (LedgerBackend::storeTerminated).
  void asyncTerminate(std::function<void(Status, Position)> cb) override;
  bool isTerminated() const override;

  // Reads: the entry cache, else the backend, ledger after ledger (ManagedLedger's contract).
  void asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                        ReadEntriesCallback cb) override;
  bool readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                         std::vector<Entry>* out) override;
  void readCachedPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                           std::vector<Position>* uncached) override;
  Position lastConfirmedEntry() const override;
  Position nextValidPosition(Position p) const override;
  Position firstPosition() const override;
  int64_t numberOfEntriesBetween(Position from, Position to) const override;
  int64_t numberOfEntries() const override;
  int64_t totalSizeBytes() const override;
  std::vector<LedgerStats> ledgerStats() const override;

  // Cursors. A new cursor's first state is written at once (lost in a crash, a Latest
  // subscription made again would skip what was published meanwhile).
  Result<ManagedCursor*> openCursor(const std::string& name, InitialPosition initial) override;
  Status deleteCursor(const std::string& name) override;
  std::vector<ManagedCursor*> cursors() const override;
  // Retention of consumed ledgers (ManagedLedger's contract); trims at once.
  void setRetention(int32_t retentionTimeInMinutes, int64_t retentionSizeInMB) override;
  // Pulsar's asyncTruncate: every cursor to the last entry (stored), then every ledger but the
  // current one deleted whatever the retention. Errors: kClosed, the cursor writes'.
  void asyncTruncate(StatusCallback cb) override;

  // A cursor's state changed: its write starts in a later pass of this executor when due (a
  // waiter, or the rate limit's interval passed), else on a later tick (flushCursors); cb runs
  // once it is stored. A moved mark-delete evicts the cache up to the slowest cursor.
  void cursorChanged(CoreCursor* c, StatusCallback cb, bool markDeleteMoved);
  // Starts the writes of the dirty cursors that are due, or (all) of every dirty one.
  void flushCursors(bool all = false);

 protected:
  // The ledger as its backend's type, to keep it alive in callbacks.
  template <class Backend>
  std::shared_ptr<Backend> selfAs() {
    return std::static_pointer_cast<Backend>(shared_from_this());
  }
  // Where postTask runs tasks: the executor, or a wrapper of it that drops tasks after the
  // backend's shutdown (BookKeeper's GatedExecutor). Thread: the constructor.
  void setTaskExecutor(net::Executor* tasks) { tasks_ = tasks; }
  // Runs fn on the executor in a later pass (through the task executor), keeping the ledger
  // alive until then.
  void postTask(std::function<void()> fn);
  // Every add waiting for a ledger fails with s, in order.
  void failQueued(const Status& s);
  // The add at `pos` (the current ledger's next entry) completed: counts it and caches it while
  // some cursor may read it (else the cache is emptied: it must stay a gap-free suffix of the log).
  void entryConfirmed(Position pos, const Buffer& data);
  // Terminate's second half once nothing is pending: stores the position, runs the callbacks.
  void maybeFinishTerminate();
  // Reads from the backend (LedgerBackend::read) in start.ledgerId from `start` on (an entry the
  // ledger list holds), up to maxEntries - acc.size() entries and about maxBytes counting acc's
  // (an entry past it only when acc is empty), then goes on with continueRead; cb(error, {}) on
  // a read error.
  void readFromBackend(Position start, int maxEntries, size_t maxBytes, std::vector<Entry> acc,
                       ReadEntriesCallback cb);
  // A read went as far as acc's last entry: on into the next ledger (cache, then the backend)
  // until the limits, else cb(ok, acc).
  void continueRead(std::vector<Entry> acc, int maxEntries, size_t maxBytes,
                    ReadEntriesCallback cb);
  Position minMarkDelete() const;
  // As minMarkDelete, over the stored mark-delete positions (what trimming may drop up to).
  Position minPersistedMarkDelete() const;
  // Pulsar's rules: a ledger goes when every cursor is past it (with no cursor, every ledger but
  // the current one is consumed) and it closed longer than the retention time ago or the
  // consumed data kept would exceed the retention size; -1/-1 keeps everything; truncate: every
  // consumed ledger. Oldest first; never the current ledger.
  std::vector<int64_t> consumedLedgersToDrop(bool truncate) const;
  // Pulsar's currentLedgerIsFull for a ledger with `entries` entries and `bytes` bytes created at
  // `createdMs` (wall): full by entries or size, once the minimum age passed (no minimum: at
  // once, so a wall clock stepped back cannot hold the rollover).
  bool ledgerFull(int64_t entries, int64_t bytes, int64_t createdMs) const;
  // The maximum age (managedLedgerMaxLedgerRolloverTimeMinutes) of a non-empty ledger passed.
  bool ledgerTooOld(int64_t entries, int64_t createdMs) const;
  // The tick's cache and retention share: evicts the cache up to the slowest cursor, trims on
  // retentionCheckIntervalInSeconds (monotonic, as Pulsar's scheduleAtFixedRate), or at every
  // tick while there is no cursor and more than one ledger.
  void tickCacheAndRetention();

  const std::string name_;
  net::Executor* const executor_;
  const ManagedLedgerConfig& config_;
  std::shared_ptr<EntryCacheManager> cacheManager_;  // outlives cache_
  std::shared_ptr<EntryCache> cache_;
  LedgerBackend* const backend_;  // the subclass (issue 46: a separate object later)
  LedgerSet ledgers_;             // confirmed entries of the active ledgers
  std::map<std::string, std::shared_ptr<CoreCursor>> cursors_;
  int32_t retentionMinutes_;  // setRetention, else defaultRetentionTimeInMinutes
  int64_t retentionSizeMB_;   // setRetention, else defaultRetentionSizeInMB
  RingQueue<std::pair<Buffer, AddEntryCallback>> queued_;  // waiting for a ledger (no node churn)
  std::atomic<bool> closing_{false};  // asyncClose/asyncDelete called (read on any thread)
  bool deleting_ = false;
  std::vector<StatusCallback> closeCbs_;
  // asyncTerminate: adds refused from the call on; the position once stored (or as recovered).
  bool terminating_ = false;
  std::optional<Position> terminatedAt_;
  std::vector<std::function<void(Status, Position)>> terminateCbs_;

 private:
  friend class CoreCursor;
  net::Executor* tasks_;  // executor_ unless setTaskExecutor
  bool flushScheduled_ = false;
  int64_t nextRetentionCheckMs_ = 0;
};

}  // namespace magnetar::storage
