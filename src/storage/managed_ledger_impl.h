// The durable ManagedLedger (internal to storage; users see the interfaces in managed_ledger.h and
// open ledgers through DurableManagedLedgerFactory): the embedded journal's backend of the
// managed-ledger core (managed_ledger_core.h), which owns the ledger list, cache, cursors,
// reads, trimming rules and retention; its cursors are the core's CoreCursor.
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
#include "base/ring_queue.h"
#include "storage/durable_storage.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger_core.h"

namespace magnetar::storage {

class ManagedLedgerImpl : private LedgerBackend, public ManagedLedgerCore {
 public:
  // `state` already holds the new current ledger (the last one, empty), unless terminated (then
  // the last ledger is the closed one the terminated position names).
  ManagedLedgerImpl(DurableManagedLedgerFactory* factory, std::string name, net::Executor* executor,
                    ManagedLedgerState state);
  ~ManagedLedgerImpl() override;
  // Completes construction (needs shared_from_this). Thread: any, before the ledger is shared.
  void init();

  Status writeRefusal() const override;
  // Compaction moved these runs: points the index at the copies. False when the ledger is closed
  // (its state went back to the factory, which relocates it there).
  bool relocateRuns(const std::vector<DurableManagedLedgerFactory::Relocation>& moved);

  // Writes what the mark-delete rate limit held back now; done after the write (at once when
  // nothing is held back or the ledger is closed). Thread: the executor.
  void flushDeferredCursors(StatusCallback done);

  // Periodic housekeeping (time-based rollover, retention, cache); posted by storage-bg.
  void onTick();
  // One group's outcome for this ledger's next `n` appends (posted by the journal sink).
  void onJournalWritten(const Status& s, const std::vector<JournalRun>& runs, size_t n,
                        bool retryable);

 private:
  enum class State { kOpen, kCreatingLedger, kNeedLedger, kClosed };
  struct PendingAdd {
    Position pos;
    Buffer data;
    AddEntryCallback cb;
    uint64_t epoch = 0;  // epoch_ when assigned: a failure rewinds once per epoch
  };

  std::shared_ptr<ManagedLedgerImpl> selfPtr() { return selfAs<ManagedLedgerImpl>(); }

  // ---- adds and rollover (CoreHooks: addRefusal, drainQueued, isClosed) ----
  // Closed, stopped, terminated, or the journal's disk refusing writes (counted).
  Status addRefusal() override;
  // Assigns the queued adds to curLedger_ and appends them to the journal.
  void drainQueued() override;
  bool isClosed() const override { return state_ == State::kClosed; }
  bool needsRollover() const;
  void startRollover();
  void onLedgerCreated(const Status& s, int64_t ledgerId, int64_t createdMs);
  void activateUpTo(int64_t ledgerId);
  void activateLedger();
  void fence(int64_t ledgerId, const Status& s);
  std::vector<LedgerMeta> ledgerList() const;

  // ---- reads (LedgerBackend) ----
  // One ledger's entries from the journal, read on a storage-read-N thread.
  void read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
            ReadEntriesCallback cb) override;

  // ---- cursors (LedgerBackend: storeCursors, removeCursor; the rest CoreHooks) ----
  // The cursors of this backend are the core's own.
  std::shared_ptr<CoreCursor> makeCursor(const std::string& name, CursorState state) override;
  // One metadata write (storage-bg) for all of them.
  void storeCursors(const std::vector<CoreCursor*>& due) override;
  // The cursor's key, deleted on storage-bg.
  void removeCursor(std::shared_ptr<CoreCursor> c) override;
  bool cursorsWritable() const override { return state_ != State::kClosed; }
  // A cursor write completed: the cursors' persisted positions move, trimming may follow.
  void cursorsPersisted(const std::vector<std::pair<std::string, Position>>& written);

  // ---- trimming (CoreHooks) ----
  // The ledger list without them and their index runs, in one metadata write; then the journal
  // segments they leave unused are reclaimed.
  void trimConsumedLedgers(bool truncate = false) override;
  int64_t ledgerClosedMs(int64_t id) const override;

  // ---- close and terminate (CoreHooks) ----
  // Once the adds in flight completed and no ledger is being created: the ledger list and the
  // cursors written (or everything removed when deleting), the state handed to the factory.
  void maybeFinishClose() override;
  ManagedLedgerState exportState();
  Status terminateRefusal() const override;
  bool addsPending() const override;
  // LedgerBackend: the /ml-terminated key (storage-bg).
  void storeTerminated(Position at, StatusCallback done) override;

  DurableManagedLedgerFactory* factory_;
  std::shared_ptr<JournalClient> sink_;

  std::map<int64_t, LedgerMeta> meta_;  // every ledger, including one not yet activated
  std::map<int64_t, LedgerIndex> index_;

  State state_ = State::kOpen;
  int64_t curLedger_ = -1;  // ledger new adds go to
  int64_t curAssigned_ = 0;
  int64_t curAssignedBytes_ = 0;
  int64_t fencedLedger_ = -1;
  uint64_t epoch_ = 0;  // grows at each rewind after a retryable failed write
  Status fenceStatus_;
  RingQueue<PendingAdd> inflight_;  // in the journal, in order (no node churn per add)
  size_t readKey_;
};

}  // namespace magnetar::storage
