// TransactionCoordinator: one coordinator id's transactions (Pulsar's MLTransactionMetadataStore
// with TransactionMetadataStoreService's end-transaction flow): a state machine per transaction
// (OPEN -> COMMITTING -> COMMITTED, OPEN -> ABORTING -> ABORTED, Pulsar's TxnStatus), each change
// logged in its TransactionLog before it is applied, recovered by replaying the log at open,
// timeouts (an OPEN transaction past its timeout is aborted), and END_TXN's fan-out to the
// transaction buffers and pending acks through a TransactionBufferClient before the final status
// is logged. Errors as Pulsar's CoordinatorException (txnServerError maps them to the wire).
//
// Thread: everything on the executor given at open (an ml-worker of the broker, the log's
// ledger executor), callbacks there too; stats() from any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TRANSACTION)
#error "broker/transaction is not below this broker part (src/broker/README.md)"
#endif

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "broker/common/txn_id.h"
#include "broker/transaction/transaction_buffer_client.h"
#include "broker/transaction/transaction_log.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {

struct TxnSubscription {
  std::string topic;
  std::string subscription;
  auto operator<=>(const TxnSubscription&) const = default;
};

// A transaction's metadata (Pulsar's TxnMeta).
struct TxnMeta {
  TxnID id;
  proto::TxnStatus status = proto::OPEN;
  std::set<std::string> producedPartitions;
  std::set<TxnSubscription> ackedPartitions;
  uint64_t timeoutMs = 0;
  uint64_t startTimeMs = 0;
  uint64_t lastModificationTimeMs = 0;
  std::string owner;                         // the creating client's role; empty without auth
  std::vector<storage::Position> positions;  // its log entries, deleted once it ended
  bool endInFlight = false;                  // fan-out of COMMITTING/ABORTING running
};

// Counters kept per coordinator for the admin stats and metrics (Pulsar's
// TransactionMetadataStoreStats and pulsar_txn_* metrics). Thread: read from any thread.
struct CoordinatorStats {
  // Upper bounds (ms) of the append latency buckets, Pulsar's pulsar_txn_tc_append_log_latency
  // (10, 20, 50, 100, 200, 500, 1000 ms, then the overflow bucket).
  static constexpr std::array<int64_t, 7> kLatencyBucketsMs = {10, 20, 50, 100, 200, 500, 1000};
  uint64_t coordinatorId = 0;
  int64_t active = 0;
  int64_t created = 0;
  int64_t committed = 0;
  int64_t aborted = 0;
  int64_t timedOut = 0;
  int64_t sequenceId = -1;  // the last sequence handed out; -1 before the first (Pulsar's)
  int64_t lowWaterMark = 0;
  std::array<int64_t, kLatencyBucketsMs.size() + 1> appendLatencyBuckets{};
  int64_t appendLatencySumMs = 0;
  int64_t appendCount = 0;
  // Upper bounds (ms) of the execution latency buckets (open to COMMITTED/ABORTED), Pulsar's
  // pulsar_txn_execution_latency_le_* (then the overflow bucket).
  static constexpr std::array<int64_t, 13> kExecutionBucketsMs = {
      10, 20, 50, 100, 500, 1000, 5000, 15000, 30000, 60000, 300000, 1500000, 3000000};
  std::array<int64_t, kExecutionBucketsMs.size() + 1> executionLatencyBuckets{};
  int64_t recoverStartTimeMs = 0;  // epoch ms, Pulsar's TransactionCoordinatorStats
  int64_t recoverEndTimeMs = 0;
  std::string state;  // Pulsar's TransactionMetadataStoreState name: Initializing, Ready, Close
};

// proto::ServerError for a coordinator error Status, as Pulsar's
// BrokerServiceException.getClientErrorCode: kNotFound -> TransactionNotFound, kNotAllowed ->
// InvalidTxnStatus, kClosed -> TransactionCoordinatorNotFound, others UnknownError.
proto::ServerError txnServerError(const Status& s);
// "Transaction coordinator with id N not found!", Pulsar's
// CoordinatorNotFoundException text.
std::string coordinatorNotFoundMessage(uint64_t tcId);

class TransactionCoordinator : public std::enable_shared_from_this<TransactionCoordinator> {
 public:
  enum class State { kInitializing, kReady, kClosed };
  using Clock = std::function<int64_t()>;  // ms since the epoch
  using OpenCallback = std::function<void(Result<std::shared_ptr<TransactionCoordinator>>)>;
  // Opens coordinator tcId: its log on `executor`, replay, then cb (on the executor) with a ready
  // coordinator; transactions found COMMITTING or ABORTING finish their fan-out again.
  // maxActive: maxActiveTransactionsPerCoordinator (0: no limit). tb outlives the coordinator;
  // null: transactions with partitions or subscriptions cannot end (kUnsupported).
  static void open(uint64_t tcId, storage::ManagedLedgerFactory& factory, net::Executor* executor,
                   TransactionBufferClient* tb, Clock clock, int64_t maxActive, OpenCallback cb);

  // Pulsar's newTransaction: the next sequence, a NEW entry logged. timeoutMs: the client's
  // txn_ttl_seconds field (the clients send milliseconds there, as Pulsar reads it).
  // Errors: kClosed (not ready), kBusy (maxActive reached), the log's.
  void newTransaction(uint64_t timeoutMs, std::string owner, std::function<void(Result<TxnID>)> cb);
  // ADD_PARTITION_TO_TXN / ADD_SUBSCRIPTION_TO_TXN. Errors: kNotFound (unknown txn),
  // kNotAllowed (not OPEN), kClosed, the log's.
  void addProducedPartitions(const TxnID& txn, std::vector<std::string> partitions,
                             std::function<void(Status)> cb);
  void addAckedSubscriptions(const TxnID& txn, std::vector<TxnSubscription> subscriptions,
                             std::function<void(Status)> cb);
  // END_TXN (Pulsar's TransactionMetadataStoreService.endTransaction): OPEN -> COMMITTING or
  // ABORTING logged, each produced partition and acked subscription ended through the client,
  // then COMMITTED/ABORTED logged and the txn forgotten; cb then. Repeating the action of a
  // txn already COMMITTING/ABORTING runs the fan-out again. A failed fan-out answers the error
  // and is retried at the next tick(). Errors: kNotFound, kNotAllowed (other action under
  // way), kUnsupported (unknown action), kClosed, the client's and log's.
  void endTransaction(const TxnID& txn, proto::TxnAction action, std::function<void(Status)> cb);
  // Aborts OPEN transactions past their timeout and retries failed fan-outs. Called
  // periodically by the registry.
  void tick();
  // The metadata of an ongoing txn, or null. Valid until the next change.
  const TxnMeta* find(const TxnID& txn) const;
  // Every ongoing txn (admin slowTransactions). Executor only; valid until the next change.
  const std::map<TxnID, TxnMeta>& transactions() const { return txns_; }
  // Every txn of this coordinator with a sequence <= it has ended (Pulsar's getLowWaterMark: the
  // first ongoing sequence - 1, so -1 while txn 0 is open; 0 when nothing is ongoing). A NEW
  // entry still being logged counts as ongoing.
  int64_t lowWaterMark() const;
  State state() const { return state_.load(); }
  uint64_t id() const { return tcId_; }
  net::Executor* executor() const { return log_->executor(); }
  // Its log's managed ledger (admin coordinatorInternalStats; read it on the executor).
  storage::ManagedLedger& logLedger() const { return *log_->ledger(); }
  CoordinatorStats stats() const;
  // Closes the log; later calls answer kClosed. cb on the executor.
  void close(std::function<void(Status)> cb);

 private:
  TransactionCoordinator(uint64_t tcId, std::unique_ptr<TransactionLog> log,
                         TransactionBufferClient* tb, Clock clock, int64_t maxActive);
  void replayEntry(storage::Position pos, const proto::TransactionMetadataEntry& e);
  void finishRecovery();
  Status checkReady() const;
  void appendTimed(const proto::TransactionMetadataEntry& e,
                   std::function<void(Status, storage::Position)> cb);
  void updateStatus(const TxnID& txn, proto::TxnStatus newStatus, proto::TxnStatus expected,
                    std::function<void(Status)> cb);
  void fanOut(const TxnID& txn, proto::TxnAction action, std::function<void(Status)> cb);
  void forget(const TxnID& txn);
  void recordLatency(int64_t ms);
  void recordExecution(const TxnID& txn);

  const uint64_t tcId_;
  std::unique_ptr<TransactionLog> log_;
  TransactionBufferClient* tb_;
  Clock clock_;
  const int64_t maxActive_;
  std::atomic<State> state_{State::kInitializing};
  int64_t sequence_ = -1;          // the last sequence handed out (Pulsar's starts at -1)
  std::set<int64_t> newing_;       // sequences whose NEW entry is being logged
  std::map<TxnID, TxnMeta> txns_;  // ordered by id: the first is the low water mark's
  std::set<TxnID> retry_;          // fan-outs to run again at the next tick

  // Stats, written on the executor, read from anywhere.
  std::atomic<int64_t> created_{0}, committed_{0}, aborted_{0}, timedOut_{0}, active_{0};
  std::atomic<int64_t> seqStat_{-1}, lowWaterMarkStat_{0};
  std::array<std::atomic<int64_t>, CoordinatorStats::kLatencyBucketsMs.size() + 1> latency_{};
  std::atomic<int64_t> latencySumMs_{0}, appendCount_{0};
  std::array<std::atomic<int64_t>, CoordinatorStats::kExecutionBucketsMs.size() + 1> execution_{};
  std::atomic<int64_t> recoverStartMs_{0}, recoverEndMs_{0};
};

}  // namespace magnetar::broker
