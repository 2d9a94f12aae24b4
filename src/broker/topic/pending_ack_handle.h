// PendingAckHandle: the acks of open transactions on one subscription, held until the coordinator
// ends them (Pulsar's PendingAckHandleImpl), and their log, Pulsar's pending-ack managed ledger
// (MLPendingAckStore; entries are PendingAckMetadataEntry, docs/transactions.md).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "broker/common/txn_id.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Pulsar's MLPendingAckStore suffix: the log of subscription S of topic T is the managed ledger
// "{T's persistence name}-{S, URL-encoded}__transaction_pending_ack". Never a topic.
inline constexpr const char* kPendingAckLedgerSuffix = "__transaction_pending_ack";
// The name of subscription `sub`'s pending-ack log on the topic stored as `persistenceName`.
std::string pendingAckLedgerName(const std::string& persistenceName, const std::string& sub);
bool isPendingAckLedgerName(const std::string& ledgerName);

// How a topic reaches its subscriptions' pending-ack logs (the broker's factory). open: with
// createIfMissing false a log that does not exist answers kNotFound and nothing is created;
// the callback runs on the topic's executor. deleted: the log was deleted (may be null).
struct PendingAckStoreOpener {
  using Opened = std::function<void(Result<std::shared_ptr<storage::ManagedLedger>>)>;
  std::function<void(const std::string& name, bool createIfMissing, Opened)> open;
  std::function<void(const std::string& name)> deleted;
  // transactionPendingAckLogIndexMinLag: the log's cursor moves on (shortening the replay) at
  // most once per this many entries written (1: whenever nothing is held).
  int64_t logIndexMinLag = 1;
};

// One entry of PendingAckMetadataEntry (Pulsar's TransactionPendingAck.proto; field numbers in
// docs/transactions.md). op: Pulsar's PendingAckOp (ACK 1, COMMIT 2, ABORT 3); ackType: CommandAck
// AckType (Individual 0, Cumulative 1). Never renumber.
struct PendingAckLogEntry {
  struct Position {
    storage::Position pos;
    storage::AckSet ackSet;  // empty: the whole entry
    int32_t batchSize = 0;   // 0: not a batch (Pulsar writes the client's batch_size)
  };
  int op = 1;
  int ackType = 0;
  TxnID txn;
  std::vector<Position> positions;
};
Buffer encodePendingAckEntry(const PendingAckLogEntry& e);
// Errors: kCorruption for bytes that are not a PendingAckMetadataEntry.
Result<PendingAckLogEntry> decodePendingAckEntry(std::string_view bytes);

// Pulsar's TransactionPendingAckStats plus the held-ack counts, captured on the executor.
struct PendingAckStats {
  std::string state;            // Pulsar's PendingAckHandleState: None, Initializing, Ready, Error
  int64_t ongoingTxnCount = 0;  // transactions holding acks now
  int64_t heldPositions = 0;    // entries (wholly or partly) held by individual acks
  std::string cumulativeTxn;    // "(most,least)" of the txn holding a cumulative ack, or ""
  std::string cumulativeAckPosition;  // Pulsar's TransactionInPendingAckStats form "L:E[:i]"
  uint64_t committedCount = 0;
  uint64_t abortedCount = 0;
};

// Pulsar's PendingAckHandleStatsImpl counts (the pulsar_txn_tp_* metrics): ends of a txn on the
// subscription (END_TXN_ON_SUBSCRIPTION, also when nothing was held) that succeeded or failed, and
// the latency of each successful commit, from the call to its answer, in microseconds (Pulsar's
// commitTxn start to its future's completion).
struct PendingAckMetrics {
  uint64_t commitSucceeded = 0;
  uint64_t commitFailed = 0;
  uint64_t abortSucceeded = 0;
  uint64_t abortFailed = 0;
  uint64_t latencyCount = 0;
  double latencySumMicros = 0;
  // The latencies of the last 10 minutes (Pulsar's Summary window), the newest 1000 at most.
  std::vector<double> recentLatencyMicros;
};

// Thread: the topic's executor only. The cursor outlives the handle (its subscription's).
// Errors given to callbacks: kAlreadyExists = Pulsar's TransactionConflictException (the client
// sees TransactionConflict with Pulsar's message), kNotAllowed = NotAllowedException, kBusy =
// ServiceUnitNotReady (log not replayed), others from the log's writes.
class PendingAckHandle {
 public:
  enum class State { kNone, kInitializing, kReady, kError };
  using Position = storage::Position;
  using IndividualAck = PendingAckLogEntry::Position;
  // What the end of a transaction does to the cursor (commit) or hands back (abort).
  struct Ended {
    std::vector<Position> whole;                              // individual acks of whole entries
    std::vector<std::pair<Position, storage::AckSet>> batch;  // batch-index acks
    std::optional<std::pair<Position, storage::AckSet>> cumulative;
  };

  // topic: the full name, sub: the subscription (both for Pulsar's conflict messages); logName:
  // pendingAckLedgerName(...). opener may be empty (acks held in memory only: unit tests).
  PendingAckHandle(std::string topic, std::string sub, std::string logName,
                   storage::ManagedCursor& cursor, PendingAckStoreOpener opener);
  ~PendingAckHandle();
  PendingAckHandle(const PendingAckHandle&) = delete;
  PendingAckHandle& operator=(const PendingAckHandle&) = delete;

  // Subscription load: opens the log if it exists and replays it (Pulsar's replay rules: an ack
  // of a position already acked in the cursor is dropped); requests queue meanwhile.
  // done(status) after the replay (Ok with no log).
  void recover(const std::function<void(Status)>& done = {});

  // ACK with a txnid, individual (whole entries, or batch indexes with an ack set where bit i
  // set = index i not acked). Conflicts as Pulsar: the entry (or an index) is acked in the cursor
  // ("... already acked before."), or held by another txn ("... in pending ack status.").
  // Accepted acks are held at once; cb after the log write.
  void individualAck(const TxnID& txn, std::vector<IndividualAck> acks, storage::StatusCallback cb);
  // ACK Cumulative with a txnid up to pos (with ackSet: inside batch pos). Conflicts: pos at or
  // before the mark-delete position, or another txn's (or a later) cumulative ack is held.
  void cumulativeAck(const TxnID& txn, Position pos, storage::AckSet ackSet,
                     storage::StatusCallback cb);
  // END_TXN_ON_SUBSCRIPTION: logs COMMIT/ABORT, forgets txn's acks and hands them to the commit
  // handler (ack them in the cursor) or the abort handler (redeliver them), then done(Ok). A txn
  // with nothing held: done(Ok) at once (a retried end is a no-op). A failed log write keeps the
  // acks held (the coordinator retries). lowWaterMark (Pulsar's): held txns of txn's coordinator
  // with a sequence <= it ended there long ago and are aborted here too.
  void endTxn(const TxnID& txn, bool commit, int64_t lowWaterMark, storage::StatusCallback done);
  // What commit and abort do with released acks (the subscription's cursor and dispatcher). The
  // commit handler also runs for a COMMIT replayed at recovery (its cursor write may be lost); it
  // calls its callback once the cursor's write of those acks is durable (or failed): until then
  // the log keeps the COMMIT (trimLog), so a crash in between replays it (Pulsar's
  // MLPendingAckStore trims only below the subscription's persisted mark-delete).
  using CommitHandler = std::function<void(Ended, storage::StatusCallback)>;
  void setHandlers(CommitHandler onCommit, std::function<void(Ended)> onAbort) {
    onCommit_ = std::move(onCommit);
    onAbort_ = std::move(onAbort);
  }

  // Dispatch: the entry is wholly held by an individual txn ack (never sent to a consumer).
  bool isWhollyHeld(Position pos, int32_t batchSize) const;
  // The held ack set of a batch entry (bit set = not held), or null.
  const storage::AckSet* heldAckSet(Position pos) const;
  bool empty() const { return individual_.empty() && !cumulative_; }
  State state() const { return state_; }
  PendingAckStats stats() const;
  PendingAckMetrics metrics() const;
  // The log's managed ledger, null until the first txn ack created (or recovery opened) it
  // (admin pendingAckInternalStats), and the entries appended to it since then.
  storage::ManagedLedger* log() const { return log_.get(); }
  uint64_t logAppends() const { return logAppends_; }
  // Deletes the log (unsubscribe, topic delete); cb on the executor.
  void deleteLog(storage::StatusCallback cb);

 private:
  struct Held {
    storage::AckSet ackSet;  // empty: whole entry
    int32_t batchSize = 0;
  };
  struct Cumulative {
    TxnID txn;
    Position pos;
    storage::AckSet ackSet;
  };
  // Runs fn now when ready, else queues it (Pulsar's acceptQueue).
  void whenReady(std::function<void()> fn);
  void drainQueue();
  // Writes e to the log, opening (creating) it first if needed; cb with the write's status.
  void append(const PendingAckLogEntry& e, storage::StatusCallback cb);
  void openedForAppend(Result<std::shared_ptr<storage::ManagedLedger>> r);
  void replayFrom(Position from, const std::function<void(Status)>& done);
  void applyEntry(const PendingAckLogEntry& e);
  // The conflict message for one individual ack, or "" when it may be held.
  std::string individualConflict(const TxnID& txn, const IndividualAck& a) const;
  void holdIndividual(const TxnID& txn, const std::vector<IndividualAck>& acks);
  Ended release(const TxnID& txn);
  void handleLowWaterMark(const TxnID& txn, int64_t lowWaterMark);
  // Moves the log's cursor to its last entry when nothing is held and no commit's cursor write
  // is still in flight (replay starts after it).
  void trimLog();
  std::string prefix(const TxnID& txn) const;
  using Clock = std::chrono::steady_clock;
  // Counts an ended endTxn call in metrics_ (a commit's latency from `start`).
  void recordEnd(bool commit, bool ok, Clock::time_point start);

  std::string topic_;
  std::string sub_;
  std::string logName_;
  storage::ManagedCursor& cursor_;
  PendingAckStoreOpener opener_;
  std::shared_ptr<storage::ManagedLedger> log_;
  State state_ = State::kReady;
  bool opening_ = false;
  std::deque<std::function<void()>> queue_;
  std::vector<std::pair<PendingAckLogEntry, storage::StatusCallback>> waitingForLog_;
  // Per txn its individually held acks (Pulsar's individualAckOfTransaction), and per entry the
  // union held by all txns (individualAckPositions).
  std::map<TxnID, std::map<Position, Held>> individual_;
  std::map<Position, Held> held_;
  std::optional<Cumulative> cumulative_;
  LowWaterMarks lowWaterMarks_;  // coordinator id -> low water mark
  CommitHandler onCommit_;
  std::function<void(Ended)> onAbort_;
  Position lastLogPos_{-1, -1};  // the last entry written to or replayed from the log
  uint64_t logAppends_ = 0;
  uint64_t appendsAtTrim_ = 0;  // logAppends_ when the cursor last moved
  uint64_t committed_ = 0;
  uint64_t aborted_ = 0;
  PendingAckMetrics metrics_;  // recentLatencyMicros unused: latencies_ holds them
  std::deque<std::pair<Clock::time_point, double>> latencies_;
  int commitsNotDurable_ = 0;       // commits whose acks the cursor has not yet written
  bool commitWriteFailed_ = false;  // the last finished one failed: no trim until one succeeds
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
