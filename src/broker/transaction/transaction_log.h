// TransactionLog: a coordinator's durable log (Pulsar's MLTransactionLogImpl): a managed ledger
// of the broker's storage named `pulsar/system/persistent/__transaction_log_{tcId}`, entries are
// TransactionMetadataEntry protobuf bytes (transaction_metadata.proto), one cursor
// `transaction.subscription` whose acknowledged entries are those of ended transactions.
// docs/transactions.md has the format.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TRANSACTION)
#error "broker/transaction is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "broker/transaction/transaction_metadata.pb.h"
#include "net/executor.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

class TransactionLog {
 public:
  // The ledger and cursor names, as Pulsar's (MLTransactionLogImpl.TRANSACTION_LOG_PREFIX,
  // TRANSACTION_SUBSCRIPTION_NAME).
  static constexpr const char* kLogPrefix = "__transaction_log_";
  static constexpr const char* kCursorName = "transaction.subscription";
  // The cursor property holding the highest sequence handed out (Pulsar's
  // MLTransactionSequenceIdGenerator.MAX_LOCAL_TXN_ID), so ids are never reused after the
  // entries that carried them are trimmed.
  static constexpr const char* kMaxLocalTxnId = "max_local_txn_id";
  // "pulsar/system/persistent/__transaction_log_{tcId}".
  static std::string ledgerName(uint64_t tcId);
  // True for a storage name of a transaction log (not a topic: never loaded or listed as one).
  static bool isLogLedger(const std::string& storageName);

  using OpenCallback = std::function<void(Result<std::unique_ptr<TransactionLog>>)>;
  // Opens (creating if needed) the log of coordinator tcId on `executor`; cb on it. Errors: the
  // storage's.
  static void open(storage::ManagedLedgerFactory& factory, uint64_t tcId, net::Executor* executor,
                   OpenCallback cb);

  using EntryFn = std::function<void(storage::Position, const proto::TransactionMetadataEntry&)>;
  // Reads every entry after the cursor's mark-delete position that is not acknowledged, in log
  // order, calling onEntry for each, then done(status). An entry that does not parse is
  // skipped with a warning. Thread: the executor; callbacks there.
  void replay(EntryFn onEntry, std::function<void(Status)> done);
  // The highest sequence recorded in the cursor's properties (-1 when none: Pulsar's
  // MLTransactionSequenceIdGenerator starts there, so the first txn is (tcId, 0)).
  int64_t storedMaxLocalTxnId() const;
  // Appends entry; cb(status, position) on the executor once durable.
  void append(const proto::TransactionMetadataEntry& entry,
              std::function<void(Status, storage::Position)> cb);
  // Acknowledges the positions of an ended transaction and records maxLocalTxnId in the same
  // cursor write. Errors are logged (the positions are replayed again after a restart, where
  // the ended transaction deletes them again).
  void deletePositions(const std::vector<storage::Position>& positions, int64_t maxLocalTxnId);
  // Closes the ledger; cb on the executor.
  void close(std::function<void(Status)> cb);
  net::Executor* executor() const { return ledger_->executor(); }
  const std::shared_ptr<storage::ManagedLedger>& ledger() const { return ledger_; }

 private:
  TransactionLog(std::shared_ptr<storage::ManagedLedger> ledger, storage::ManagedCursor* cursor)
      : ledger_(std::move(ledger)), cursor_(cursor) {}
  void replayFrom(storage::Position from, const std::shared_ptr<EntryFn>& onEntry,
                  std::function<void(Status)> done);

  std::shared_ptr<storage::ManagedLedger> ledger_;
  storage::ManagedCursor* cursor_;
};

}  // namespace magnetar::broker
