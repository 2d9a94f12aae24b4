// CoordinatorRegistry: the coordinators this broker serves (Pulsar's
// TransactionMetadataStoreService): one TransactionCoordinator per coordinator id (a partition
// of persistent://pulsar/system/transaction_coordinator_assign), each on the executor the caller
// picks for it (an ml-worker); loads on demand (TC_CLIENT_CONNECT_REQUEST, or all at start in
// standalone), and a `transaction-timeout` tick that aborts timed-out transactions and retries
// failed END_TXN fan-outs. Thread: any; the coordinators' calls on their executors.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TRANSACTION)
#error "broker/transaction is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/common/periodic_task.h"
#include "broker/transaction/transaction_coordinator.h"

namespace magnetar::broker {

// The partitioned topic whose partition i is coordinator i (Pulsar's
// SystemTopicNames.TRANSACTION_COORDINATOR_ASSIGN); Pulsar's standalone creates it with one
// partition, `initialize-transaction-coordinator-metadata` with
// --initial-num-transaction-coordinators.
inline constexpr const char* kTransactionCoordinatorAssign =
    "persistent://pulsar/system/transaction_coordinator_assign";
inline constexpr int kStandaloneTransactionCoordinators = 1;

// Names that are the transactions' own storage, never topics (Pulsar's
// SystemTopicNames.isTransactionInternalName): the assign topic, coordinator logs
// (__transaction_log_), pending-ack stores (suffix __transaction_pending_ack). Takes a full topic
// name or a storage name ("tenant/ns/persistent/local").
bool isTransactionInternalName(const std::string& name);

class CoordinatorRegistry {
 public:
  // The coordinators' log on `factory`; executorFor(tcId) gives a coordinator its executor;
  // tb outlives the registry. maxActive: maxActiveTransactionsPerCoordinator (0: none).
  // tickPeriod: how often timeouts are checked, on the `transaction-timeout` thread (0: no
  // thread; tests call tickAll()). clock: ms since the epoch (null: the wall clock).
  CoordinatorRegistry(storage::ManagedLedgerFactory& factory,
                      std::function<net::Executor*(uint64_t)> executorFor,
                      TransactionBufferClient* tb, int64_t maxActive,
                      std::chrono::milliseconds tickPeriod,
                      TransactionCoordinator::Clock clock = nullptr);
  ~CoordinatorRegistry();

  using CoordinatorCallback = std::function<void(Result<std::shared_ptr<TransactionCoordinator>>)>;
  // The ready coordinator tcId, opening (and recovering) it first if needed; cb on the
  // coordinator's executor when ready, on any thread with an error (the open's).
  void load(uint64_t tcId, CoordinatorCallback cb);
  // The ready coordinator, or null (not loaded, or still recovering).
  std::shared_ptr<TransactionCoordinator> get(uint64_t tcId) const;
  // Closes and forgets coordinator tcId (its partition's bundle left this broker).
  void unload(uint64_t tcId);
  // The ids of the coordinators loaded or loading, ascending.
  std::vector<uint64_t> loadedIds() const;
  // Closes all (broker stop); blocks until closed or 5 s passed. Not on a coordinator's executor.
  void closeAll();
  // Every loaded coordinator's counters.
  std::vector<CoordinatorStats> stats() const;
  // tick() on each coordinator's executor.
  void tickAll();

 private:
  storage::ManagedLedgerFactory& factory_;
  std::function<net::Executor*(uint64_t)> executorFor_;
  TransactionBufferClient* tb_;
  const int64_t maxActive_;
  TransactionCoordinator::Clock clock_;
  mutable Mutex mu_;
  std::map<uint64_t, std::shared_ptr<TransactionCoordinator>> ready_ GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<CoordinatorCallback>> loading_ GUARDED_BY(mu_);
  std::unique_ptr<PeriodicTask> ticker_;
};

}  // namespace magnetar::broker
