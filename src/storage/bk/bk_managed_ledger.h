// BkManagedLedger and BkManagedCursor (internal to storage/bk; users open them through
// BkManagedLedgerFactory). Files: bk_managed_ledger.cc (adds, rollover, reads, trimming, close,
// delete), bk_ml_open.cc (open: recovery of the last ledger, the new ledger, cursor recovery),
// bk_cursor.cc (cursor state and its persistence).
//
// Thread: everything on the executor given at open (executor_), except what the comments say.
// BookKeeper handles are used on their own loop (h->loop()); their completions, and the metadata
// store's, come back through gated_ (see gate.h).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/dcheck.h"
#include "storage/bk/bk_storage.h"
#include "storage/bk/gate.h"
#include "storage/cursor_state.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger_core.h"

namespace magnetar::storage::bk {

using bookkeeper::BkResult;
using bookkeeper::LedgerHandle;
using HandlePtr = std::shared_ptr<LedgerHandle>;

// A named Status for a BookKeeper result: LedgerFenced -> kFenced, NoSuchLedger -> kNotFound,
// ClientClosed -> kClosed, Timeout -> kTimeout, the rest kIoError; the message names `what`.
Status bkStatus(BkResult rc, const std::string& what);
inline int64_t wallMs() { return wallClockMs(); }
inline int64_t steadyMs() { return steadyClockMs(); }  // intervals: immune to wall-clock steps

class BkManagedLedger;

// The core's cursor (CoreCursor: state, ManagedCursor API, rate limit) with Pulsar's persistence.
class BkManagedCursor : public CoreCursor, public std::enable_shared_from_this<BkManagedCursor> {
 public:
  BkManagedCursor(std::string name, BkManagedLedger* ml, CursorState state);

  std::pair<int64_t, int64_t> cursorLedger() const override;
  // No write in flight, not closing.
  bool canWrite() const override { return !writing_ && !closing_; }

 private:
  friend class BkManagedLedger;
  // Pulsar's flow (ManagedCursorImpl): a new cursor's first write creates its znode (cursor ledger
  // -1, the position in the znode); later writes append a PositionInfo to the cursor ledger,
  // created on demand (and replaced after managedLedgerCursorMaxEntriesPerLedger entries or
  // managedLedgerCursorRolloverTimeInSeconds) by: create, append, point the znode at it (CAS),
  // delete the old one. An append that fails falls back to the znode (-1 and the whole state).
  // One write in flight at a time; changes meanwhile go together in the next one.
  void persist();
  void appendToLedger(std::vector<StatusCallback> cbs);
  // Appends the state's PositionInfo to ledger_ (not null); then(ledger_, result) on its loop.
  void appendState(std::function<void(const HandlePtr&, BkResult)> then);
  // The cursor ledgers (writable and stale) forgotten: their ids, to delete.
  std::vector<int64_t> takeLedgers();
  void switchLedger(std::vector<StatusCallback> cbs);
  // The whole state into the znode (no cursor ledger), then dropLedger (may be null) deleted.
  void writeZnode(std::vector<StatusCallback> cbs, const HandlePtr& dropLedger);
  // The znode by CAS on its version (creating it): pointing at `next`, a new cursor ledger holding
  // the state at `mark`, or with `next` null holding the whole state. Written: the cursor ledgers
  // before and dropLedger are deleted, `next` becomes the cursor ledger. Failed: `next` deleted,
  // BadVersion fences the managed ledger (kFenced). Then persisted().
  void putZnode(Position mark, std::vector<StatusCallback> cbs, const HandlePtr& next,
                const HandlePtr& dropLedger);
  void persisted(const Status& s, Position mark, const std::vector<StatusCallback>& cbs);
  // After the write in flight: the last state in the znode (or, with many ranges, in the ledger),
  // the cursor ledger closed or deleted. done on the executor.
  void close(const StatusCallback& done);
  // Removes the znode and the cursor ledgers (deleteCursor, managed ledger delete).
  void removeAll(const StatusCallback& done);
  // The ledger's bytes for the current state.
  std::string positionInfoBytes() const;

  BkManagedLedger* ml_;
  std::map<std::string, std::string> cursorProperties_;  // StringProperty, kept as read
  metadata::Version znodeVersion_ = metadata::kNotExists;
  HandlePtr ledger_;             // writable cursor ledger, or null
  int64_t ledgerEntries_ = 0;    // entries appended to ledger_
  int64_t ledgerCreatedMs_ = 0;  // when ledger_ was created
  int64_t staleLedgerId_ = -1;   // a recovered (read-only) cursor ledger, deleted at the switch
  bool writing_ = false;         // a write in flight
  bool closing_ = false;         // the managed ledger closes: its last write is under way
  std::vector<std::function<void()>> idle_;  // run when no write is in flight
  int64_t lastActiveMs_ = 0;
  bool closeMadeLedger_ = false;  // close() started a cursor ledger for the last state
};

// BookKeeper's backend of the managed-ledger core (managed_ledger_core.h): the core owns the
// ledger list, cache, cursors, reads, trimming rules and retention.
class BkManagedLedger : private LedgerBackend, public ManagedLedgerCore {
 public:
  // createIfMissing false: open() fails with kNotFound, writing nothing, when the znode does not
  // exist (Pulsar's ManagedLedgerConfig.createIfMissing).
  BkManagedLedger(BkManagedLedgerFactory* factory, std::string name, net::Executor* executor,
                  bool createIfMissing = true);
  ~BkManagedLedger() override;

  // The open sequence (bk_ml_open.cc). done on the executor.
  void open(const StatusCallback& done);
  // Housekeeping (posted by the factory's tick thread).
  void onTick();
  // Factory shutdown: refuse new work. Thread: any.
  void markStopped() { stopped_ = true; }
  bool createsIfMissing() const { return createIfMissing_; }

  Status writeRefusal() const override;
  void asyncRelease(StatusCallback cb) override;

  // The BookKeeper ledger currently written (tests). Thread: executor.
  int64_t currentLedgerId() const { return current_ ? current_->id() : -1; }
  // Times adds in flight were taken back from a broken ledger for a resend (tests). Executor.
  int64_t resentLedgers() const { return resentLedgers_; }
  // The wait before creating the next ledger after `streak` ledgers in a row broke (an add
  // failed, or creating the ledger did) with no add confirmed since: none for the first, then
  // 100 ms doubling up to 5 s. Without it, bookies that are registered but down make a topic
  // create and drop ledgers as fast as the failures come back (hundreds a second, each resending
  // every add in flight). Our choice: Pulsar has no such wait, its BookKeeper client quarantines
  // the bookies instead (ours does too, but only picks them last).
  static std::chrono::milliseconds rolloverBackoff(int streak);

 private:
  friend class BkManagedCursor;
  std::shared_ptr<BkManagedLedger> selfPtr() { return selfAs<BkManagedLedger>(); }
  static BkManagedCursor* bkCursor(const std::shared_ptr<CoreCursor>& c) {
    return static_cast<BkManagedCursor*>(c.get());
  }

  enum class State {
    kInitializing,  // open() running
    kOpen,          // adds go to current_
    kRollover,      // closing the old ledger / creating the next one; adds queue
    kNeedLedger,    // no ledger (creating one failed): the next add tries again
    kFenced,        // another owner took over: adds fail with kFenced
    kTerminated,    // the znode has terminatedPosition: no adds
    kClosed,
  };
  struct PendingAdd {
    Position pos;
    Buffer data;
    AddEntryCallback cb;
  };
  // Add completions of one ledger, collected on its loop and handed over once per loop pass.
  struct AddSink {
    std::vector<std::pair<int64_t, BkResult>> done;  // the loop's thread only
    bool scheduled = false;                          // the loop's thread only
  };

  // ---- adds and rollover (bk_managed_ledger.cc; CoreHooks: addRefusal, drainQueued) ----
  // writeRefusal().
  Status addRefusal() override;
  // Assigns the queued adds to current_; one hand-over per pass to its loop (flushSends).
  void drainQueued() override;
  bool isClosed() const override { return state_ == State::kClosed; }
  void flushSends();
  void onAddsCompleted(int64_t ledgerId, const std::vector<std::pair<int64_t, BkResult>>& done);
  // Whether an add that failed with rc goes to the next ledger (a broken ledger: bookie errors,
  // NotEnoughBookies, timeouts) rather than failing (fenced, refused entry, client closed).
  static bool resendable(BkResult rc);
  // Every add in flight back to the head of queued_, in entry order.
  void requeueInflight();
  bool needsRollover() const;
  void startRollover();
  // The create step of a rollover (after rolloverBackoff()).
  void createNextLedger();
  void closeOldLedgerIfDrained();
  void onOldLedgerClosed(BkResult rc);
  void onNewLedger(BkResult rc, HandlePtr h);
  void maybeFinishRollover();
  // The new ledger is in the znode: it becomes current.
  void activate(HandlePtr h, int64_t createdMs);
  void fence(const std::string& why, bool log = true);
  // Every add in flight and queued fails with s.
  void failAll(const Status& s);
  void sendTo(const HandlePtr& h, std::vector<Buffer> data);

  // ---- ManagedLedgerInfo znode ----
  mledger::ManagedLedgerInfo infoMessage() const;
  // Writes infoMessage() by CAS on version_; serialised (a write asked for while one is in flight
  // goes after it with the state of then). BadVersion fences the ledger. cb on the executor.
  void writeInfo(StatusCallback cb);
  void startInfoWrite();

  // ---- reads (LedgerBackend) ----
  // Reads from the bookies (the writer's handle, or a reader handle kept per ledger), as many
  // entries as maxBytes allows at the ledger's mean entry size (one more), cut at maxBytes.
  void read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
            ReadEntriesCallback cb) override;
  // A handle to read ledgerId from: the current writer's, a cached reader, or one opened now.
  void withReadHandle(int64_t ledgerId, std::function<void(Status, HandlePtr)> fn);
  void forgetReader(int64_t ledgerId);

  // ---- cursors (bk_cursor.cc's persistence; LedgerBackend: storeCursors, removeCursor) ----
  // BkManagedCursor: a CoreCursor with a znode and a cursor ledger.
  std::shared_ptr<CoreCursor> makeCursor(const std::string& name, CursorState state) override;
  // Each cursor's own write (BkManagedCursor::persist).
  void storeCursors(const std::vector<CoreCursor*>& due) override;
  // Its znode and cursor ledgers (BkManagedCursor::removeAll).
  void removeCursor(std::shared_ptr<CoreCursor> c) override;
  // kFenced once another owner took the ledger over.
  Status cursorChangeRefusal() const override;
  void cursorPersisted();
  CursorPersistLimits limits() const;

  // ---- trimming, close and terminate (CoreHooks) ----
  // The ledger list without them (znode CAS), then the ledgers deleted from BookKeeper.
  void trimConsumedLedgers(bool truncate = false) override;
  int64_t ledgerClosedMs(int64_t id) const override;
  // Once nothing is in flight (adds, rollover, znode writes, a trim): finishClose.
  void maybeFinishClose() override;
  void finishClose();
  void deleteLedgers(const std::vector<int64_t>& ids);
  // writeRefusal() unless terminated or terminating.
  Status terminateRefusal() const override;
  bool addsPending() const override;
  // kFenced or kClosed when that happened while the adds completed.
  Status terminateFinishRefusal() const override;
  // LedgerBackend: terminatedPosition in the ManagedLedgerInfo znode (writeInfo).
  void storeTerminated(Position at, StatusCallback done) override;

  // ---- open (bk_ml_open.cc) ----
  void loadInfo(const StatusCallback& done);
  void recoverLastLedger(const StatusCallback& done);
  void createFirstLedger(const StatusCallback& done);
  void recoverCursors(const StatusCallback& done);
  void recoverCursor(const std::string& cursor, const StatusCallback& done);
  void addRecoveredCursor(const std::string& cursor, const CursorMeta& meta,
                          const mledger::ManagedCursorInfo& info, metadata::Version version);

  BkManagedLedgerFactory* factory_;
  const BkStorageOptions& opts_;
  bookkeeper::BookKeeperClient* bk_;
  metadata::Store* store_;
  const std::string pulsarName_;  // Pulsar's managed-ledger name (local name URL-encoded)
  const std::string path_;        // its znode
  const bool createIfMissing_;
  std::shared_ptr<Gate> gate_;  // keeps gated_ alive
  GatedExecutor* gated_;        // completions to executor_

  State state_ = State::kInitializing;
  std::map<int64_t, mledger::ManagedLedgerInfo::LedgerInfo> info_;  // the znode's ledger list
  mledger::ManagedLedgerInfo base_;  // the znode as read (properties, terminatedPosition)
  metadata::Version version_ = 0;    // the znode's version
  HandlePtr current_;                // the ledger adds go to
  std::shared_ptr<AddSink> sink_;    // current_'s completions
  int64_t curAssigned_ = 0;          // entries handed to current_
  int64_t curAssignedBytes_ = 0;
  int64_t curCreatedMs_ = 0;
  RingQueue<PendingAdd> inflight_;  // sent, in entry order (no node churn per add)
  std::vector<Buffer> toSend_;      // for current_, sent once per pass
  bool sendScheduled_ = false;
  int64_t resentLedgers_ = 0;
  int brokenStreak_ = 0;  // ledgers broken in a row (rolloverBackoff), 0 once an add confirms
  // Rollover: the ledger being closed and the one being created.
  HandlePtr rollingOld_;
  bool oldCloseStarted_ = false;
  HandlePtr rollingNew_;
  int rolloverSteps_ = 0;  // of {close old, create new} still running
  Status rolloverError_;
  std::vector<int64_t> emptyLedgers_;  // dropped from the list: deleted once the znode says so
  // Znode writes.
  bool infoWriting_ = false;
  std::vector<StatusCallback> infoWriters_;  // waiting for the write after the one in flight
  bool trimming_ = false;
  // Reads.
  std::map<int64_t, HandlePtr> readers_;
  std::map<int64_t, std::vector<std::function<void(Status, HandlePtr)>>> openingReaders_;
  // Close / delete.
  bool closeStarted_ = false;
  std::atomic<bool> stopped_{false};
};

}  // namespace magnetar::storage::bk
