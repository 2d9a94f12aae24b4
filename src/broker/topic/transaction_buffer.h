// TransactionBuffer: a topic's side of transactions (Pulsar's TopicTransactionBuffer with the
// single-snapshot aborted-txn processor). Transactional entries are stored at once; the buffer
// tracks the ongoing transactions (the first position of each), the topic's max read position
// (dispatch, readers, GET_LAST_MESSAGE_ID and compaction never pass the first position of an
// ongoing transaction), the aborted-transaction index, and writes the commit/abort markers.
// Durable state: a snapshot in the properties of the ledger's hidden cursor kTxnBufferCursorName
// plus a replay of the log after it (docs/transactions.md, "Transaction buffer").
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "broker/common/txn_id.h"
#include "protocol/pulsar_api.pb.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

struct EntryMetadataPeek;

// The hidden cursor whose properties hold the snapshot (not a subscription).
inline constexpr char kTxnBufferCursorName[] = "pulsar.txn-buffer";
// PulsarMarkers.proto MarkerType.
inline constexpr int32_t kTxnCommitMarker = 20;
inline constexpr int32_t kTxnAbortMarker = 21;

// Pulsar's TransactionBufferStats (admin transactionBufferStats), captured on the executor.
struct TransactionBufferStats {
  std::string state;                   // "None" (transactions off), "NoSnapshot", "Ready"
  std::string maxReadPosition;         // "ledger:entry"
  int64_t lastSnapshotTimestamps = 0;  // epoch ms of the last snapshot, 0: none
  LowWaterMarks lowWaterMarks;         // coordinator id -> low water mark
  int64_t ongoingTxnSize = 0;
  int64_t recoverStartTime = 0;  // epoch ms
  int64_t recoverEndTime = 0;    // epoch ms
  std::string snapshotType = "Single";
  int64_t totalAbortedTransactions = 0;  // in the aborted index now
  // Counters since load (Pulsar's getCommittedTxnCount / getAbortedTxnCount).
  int64_t committedTxnCount = 0;
  int64_t abortedTxnCount = 0;
};

// Pulsar's TransactionInBufferStats (admin transactionInBufferStats) of one txn on this topic.
struct TransactionInBufferStats {
  std::optional<std::string> startPosition;  // "ledger:entry" of its first entry while ongoing
  bool aborted = false;                      // in the aborted index
};

// Thread: the topic's executor (the ledger's), for every method and callback.
class TransactionBuffer {
 public:
  // enabled: transactionCoordinatorEnabled; off, every transactional call is refused as Pulsar's
  // TransactionBufferDisable does. snapshotEvery: transactionBufferSnapshotMaxTransactionCount,
  // a snapshot once that many commits/aborts changed the state (0: after each); the rest waits
  // for snapshotIfChanged (the broker's timer, a clean close).
  TransactionBuffer(storage::ManagedLedger& ledger, bool enabled, std::string topicName,
                    int64_t snapshotEvery = 0);
  ~TransactionBuffer() { *alive_ = false; }

  bool enabled() const { return enabled_; }
  // At topic load: reads the snapshot (if the cursor exists: the topic has had transactions) and
  // replays the entries after its max read position. done(status) once ready.
  void recover(std::function<void(Status)> done);
  // Why a SEND of txn must be refused (nullopt: store it): off -> NotAllowed "Transaction buffer
  // disable!"; txn at or below its coordinator's low water mark -> NotAllowed "Transaction
  // [(m,l)] has been ended. Please use a new transaction to send message." (Pulsar's texts).
  std::optional<Status> appendRefusal(const TxnID& txn) const;
  // A transactional entry of txn was stored at pos (in add order): txn becomes ongoing unless it
  // is ongoing or aborted already. The first one creates the snapshot cursor.
  void appended(const TxnID& txn, storage::Position pos);
  // Writes the commit (action COMMIT) or abort marker for txn, then makes its entries readable
  // (commit) or skipped for good (abort), records lowWaterMark for txn's coordinator (ongoing
  // txns of it at or below are aborted, Pulsar's handleLowWaterMark) and snapshots.
  // done(ok) once stored; errors: kNotAllowed (off), the ledger's add error. An abort on a topic
  // that never had a transactional entry, or of a txn already aborted, writes nothing (ok).
  // `moved` runs after the max read position may have moved (the topic wakes dispatchers).
  void endTxn(const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
              std::function<void(Status)> done);
  void setMaxReadMovedHandler(std::function<void()> fn) { onMoved_ = std::move(fn); }

  // Inclusive limit for readers: nullopt when no transaction is ongoing (read to the end), else
  // the position before the first entry of the oldest ongoing txn (may have entryId -1).
  std::optional<storage::Position> maxReadPosition() const;
  // Whether an entry with this metadata is hidden from consumers and acked through: a commit or
  // abort marker, or an entry of an aborted transaction (Pulsar's isTxnMarker / isTxnAborted).
  bool hides(const EntryMetadataPeek& md) const;
  bool isAborted(const TxnID& txn) const { return aborted_.count(txn) > 0; }
  size_t ongoingCount() const { return ongoingByTxn_.size(); }
  TransactionBufferStats stats(bool lowWaterMarks) const;
  // Pulsar's TopicTransactionBuffer.getTransactionInBufferStats.
  TransactionInBufferStats txnStats(const TxnID& txn) const;
  // Writes the snapshot now if the state changed since the last one (clean close, and every
  // transactionBufferSnapshotMinTimeInMillis: Pulsar's takeSnapshotByTimeout).
  void snapshotIfChanged();
  // The ledger closes or is deleted: no snapshot is written after this.
  void stop() { cursor_ = nullptr; }

 private:
  void writeMarker(const TxnID& txn, bool commit, int64_t lowWaterMark,
                   std::function<void(Status)> done);
  void markerStored(const TxnID& txn, bool commit, storage::Position pos, int64_t lowWaterMark);
  void removeOngoing(const TxnID& txn);
  // Applies one replayed entry (recovery).
  void replayEntry(const EntryMetadataPeek& md, storage::Position pos);
  // Drops aborted txns whose marker's ledger is gone (trimmed), as trimExpiredAbortedTxns.
  void trimAborted();
  void takeSnapshot();
  void openCursor();

  storage::ManagedLedger& ledger_;
  const bool enabled_;
  const std::string topicName_;
  storage::ManagedCursor* cursor_ = nullptr;    // null until the topic has a transactional entry
  std::map<storage::Position, TxnID> ongoing_;  // first position -> txn, position order
  std::unordered_map<TxnID, storage::Position, TxnIDHash> ongoingByTxn_;
  std::map<TxnID, int64_t> aborted_;  // txn -> ledger id of its abort marker
  LowWaterMarks lowWaterMarks_;
  const int64_t snapshotEvery_;
  int64_t endsSinceSnapshot_ = 0;  // commits/aborts not in the last snapshot
  bool changed_ = false;           // state differs from the last snapshot
  int64_t lastSnapshotMs_ = 0;
  int64_t recoverStartMs_ = 0;
  int64_t recoverEndMs_ = 0;
  int64_t committed_ = 0;
  int64_t abortedCount_ = 0;
  std::function<void()> onMoved_;
  // False once destroyed: marker add callbacks check it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
