// The durable ManagedLedger (internal to storage; users see the interfaces in managed_ledger.h and
// open ledgers through DurableManagedLedgerFactory). Its cursor: managed_cursor_impl.h.
//
// Add path: asyncAddEntry assigns (ledger, entry) and queues the bytes to the journal; the journal
// thread hands back ONE task per group for this ledger (JournalSink) that confirms the entries,
// records the runs in the index, fills the cache and runs the callbacks in order. A failed write
// fences the ledger: its later entries fail too and the next add rolls to a new ledger.
// Thread: everything on the executor given at open, except what the comments say.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/dcheck.h"
#include "storage/durable_storage.h"
#include "storage/ledger_set.h"
#include "storage/managed_cursor_impl.h"

namespace magnetar::storage {

class ManagedLedgerImpl : public ManagedLedger,
                          public std::enable_shared_from_this<ManagedLedgerImpl> {
 public:
  // `state` already holds the new current ledger (the last one, empty).
  ManagedLedgerImpl(DurableManagedLedgerFactory* factory, std::string name, net::Executor* executor,
                    ManagedLedgerState state);
  ~ManagedLedgerImpl() override;
  // Completes construction (needs shared_from_this). Thread: any, before the ledger is shared.
  void init();

  const std::string& name() const override { return name_; }  // any thread
  void asyncAddEntry(Buffer data, AddEntryCallback cb) override;
  Status writeRefusal() const override;
  void asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                        ReadEntriesCallback cb) override;
  bool readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                         std::vector<Entry>* out) override;
  void readCachedPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                           std::vector<Position>* uncached) override;
  Position lastConfirmedEntry() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.lastConfirmed();
  }
  Position nextValidPosition(Position p) const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.next(p);
  }
  Position firstPosition() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.first();
  }
  int64_t numberOfEntriesBetween(Position from, Position to) const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.count(from, to);
  }
  int64_t numberOfEntries() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.totalEntries();
  }
  int64_t totalSizeBytes() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.totalBytes();
  }
  std::vector<LedgerStats> ledgerStats() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return ledgers_.stats();
  }
  Result<ManagedCursor*> openCursor(const std::string& name, InitialPosition initial) override;
  Status deleteCursor(const std::string& name) override;
  std::vector<ManagedCursor*> cursors() const override;
  void asyncClose(StatusCallback cb) override;
  void asyncDelete(StatusCallback cb) override;
  void setRetention(int32_t retentionTimeInMinutes, int64_t retentionSizeInMB) override;
  void asyncTruncate(StatusCallback cb) override;
  void asyncTerminate(std::function<void(Status, Position)> cb) override;
  bool isTerminated() const override {
    MAGNETAR_DCHECK_ON(*executor_);
    return terminatedAt_.has_value();
  }
  // Compaction moved these runs: points the index at the copies. False when the ledger is closed
  // (its state went back to the factory, which relocates it there).
  bool relocateRuns(const std::vector<DurableManagedLedgerFactory::Relocation>& moved);

  // Thread: any.
  net::Executor* executor() const override { return executor_; }
  // Writes what the mark-delete rate limit held back now; done after the write (at once when
  // nothing is held back or the ledger is closed). Thread: the executor.
  void flushDeferredCursors(StatusCallback done);
  bool closing() const { return closing_.load(); }

  // Periodic housekeeping (time-based rollover, retention, cache); posted by storage-bg.
  void onTick();
  // One group's outcome for this ledger's next `n` appends (posted by the journal sink).
  void onJournalWritten(const Status& s, const std::vector<JournalRun>& runs, size_t n,
                        bool retryable);

 private:
  friend class ManagedCursorImpl;
  enum class State { kOpen, kCreatingLedger, kNeedLedger, kClosed };
  struct PendingAdd {
    Position pos;
    Buffer data;
    AddEntryCallback cb;
    uint64_t epoch = 0;  // epoch_ when assigned: a failure rewinds once per epoch
  };

  void post(StatusCallback cb, Status s);
  void drainQueued();
  bool needsRollover() const;
  void startRollover();
  void onLedgerCreated(const Status& s, int64_t ledgerId, int64_t createdMs);
  void activateUpTo(int64_t ledgerId);
  void activateLedger();
  void fence(int64_t ledgerId, const Status& s);
  std::vector<LedgerMeta> ledgerList() const;
  void readFromDisk(Position start, int maxEntries, size_t maxBytes, std::vector<Entry> acc,
                    ReadEntriesCallback cb);
  void continueRead(std::vector<Entry> acc, int maxEntries, size_t maxBytes,
                    ReadEntriesCallback cb);
  void cursorChanged(ManagedCursorImpl* c, StatusCallback cb, bool markDeleteMoved);
  // Queues flushCursors() for this executor pass unless one is queued.
  void scheduleCursorFlush();
  void flushCursors();
  // A flush's write completed: the cursors' persisted positions move, trimming may follow.
  void cursorsPersisted(const std::vector<std::pair<std::string, Position>>& written);
  Position minMarkDelete() const;
  // As minMarkDelete, over the persisted mark-delete positions (what trimming may drop up to).
  Position minPersistedMarkDelete() const;
  // Deletes consumed ledgers that retention lets go (truncate: all before the current one that
  // every cursor is past, whatever the retention).
  void maybeTrim(bool truncate = false);
  void maybeFinishClose();
  // asyncTerminate's second half, once the adds it waits for completed: stores the position.
  void maybeFinishTerminate();
  ManagedLedgerState exportState();

  DurableManagedLedgerFactory* factory_;
  const std::string name_;
  net::Executor* const executor_;
  const StorageOptions& opts_;
  std::shared_ptr<JournalClient> sink_;
  std::shared_ptr<EntryCache> cache_;

  LedgerSet ledgers_;                   // confirmed entries of activated ledgers
  std::map<int64_t, LedgerMeta> meta_;  // every ledger, including one not yet activated
  std::map<int64_t, LedgerIndex> index_;
  std::map<std::string, std::unique_ptr<ManagedCursorImpl>> cursors_;

  State state_ = State::kOpen;
  int64_t curLedger_ = -1;  // ledger new adds go to
  int64_t curAssigned_ = 0;
  int64_t curAssignedBytes_ = 0;
  int64_t fencedLedger_ = -1;
  int32_t retentionMinutes_;  // setRetention, else defaultRetentionTimeInMinutes
  int64_t retentionSizeMB_;   // setRetention, else defaultRetentionSizeInMB
  int64_t nextRetentionCheckMs_ = 0;
  uint64_t epoch_ = 0;  // grows at each rewind after a retryable failed write
  Status fenceStatus_;
  std::deque<PendingAdd> inflight_;                         // in the journal, in order
  std::deque<std::pair<Buffer, AddEntryCallback>> queued_;  // waiting for a ledger
  bool flushScheduled_ = false;
  // Dirty cursors left to a later write by the mark-delete rate limit, and when the last write
  // was taken (steady clock, ms).
  bool cursorFlushDeferred_ = false;
  int64_t lastCursorFlushMs_ = INT64_MIN / 2;
  std::atomic<bool> closing_{false};
  bool deleting_ = false;
  std::vector<StatusCallback> closeCbs_;
  // asyncTerminate: adds refused from the call on; the position once stored (or as recovered).
  bool terminating_ = false;
  std::optional<Position> terminatedAt_;
  std::vector<std::function<void(Status, Position)>> terminateCbs_;
  size_t readKey_;
};

}  // namespace magnetar::storage
