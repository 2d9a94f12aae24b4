// BrokerService's transaction coordinators (Pulsar's TransactionMetadataStoreService wiring):
// started with the service when transactionCoordinatorEnabled, the pulsar/system namespace and
// the assign topic created in standalone, the coordinators closed before the ml-workers stop.
#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "broker/service/local_transaction_buffer_client.h"
#include "broker/service/remote_transaction_buffer_client.h"
#include "broker/transaction/coordinator_registry.h"

namespace magnetar::broker {

namespace {
constexpr std::chrono::seconds kTransactionTickPeriod{1};
}  // namespace

void BrokerService::ensureStandaloneSystemNamespace() {
  if (!policies_.tenant("pulsar")) {
    Status s = policies_.createTenant("pulsar", TenantInfo{{}, {options_.clusterName}});
    if (!s.isOk() && s.code() != StatusCode::kAlreadyExists) {
      MLOG_WARN("cannot create tenant pulsar: {}", s.toString());
    }
  }
  if (!namespaces_.exists("pulsar/system")) {
    Status s = addNamespace("pulsar/system", NamespacePolicies{}, 0);
    if (!s.isOk() && s.code() != StatusCode::kAlreadyExists) {
      MLOG_WARN("cannot create namespace pulsar/system: {}", s.toString());
    }
  }
}

void BrokerService::startTransactions() {
  // Standalone, as Pulsar's PulsarStandalone: tenant pulsar and namespace pulsar/system exist
  // whether or not transactions are on (without them the assign topic's partitioned metadata is
  // then 0 partitions, not "Namespace not found"); the assign topic with one partition and its
  // coordinators loaded at start only with transactionCoordinatorEnabled.
  if (!ownership_) ensureStandaloneSystemNamespace();
  if (!options_.transactionCoordinatorEnabled) return;
  txnBufferClient_ = makeLocalTransactionBufferClient(*this);
  TransactionBufferClient* tb = txnBufferClient_.get();
  if (ownership_) {  // cluster mode: other brokers' topics over a broker-to-broker connection
    txnRemoteBufferClient_ = makeRemoteTransactionBufferClient(
        *this, *txnBufferClient_,
        std::chrono::milliseconds(options_.transactionBufferClientOperationTimeoutInMills),
        brokerClientSettings_);
    tb = txnRemoteBufferClient_.get();
  }
  txnCoordinators_ = std::make_unique<CoordinatorRegistry>(
      *factory_, [this](uint64_t tcId) -> net::Executor* { return &mlWorkers_->forKey(tcId); }, tb,
      options_.maxActiveTransactionsPerCoordinator, kTransactionTickPeriod);
  if (ownership_) return;  // cluster mode: loaded with the assign partitions' bundles
  auto assign = TopicName::parse(kTransactionCoordinatorAssign);
  int n = namespaces_.partitions(assign->toString()).value_or(0);
  if (n == 0) {
    Status s = createPartitionedTopic(*assign, kStandaloneTransactionCoordinators);
    if (!s.isOk()) MLOG_WARN("cannot create {}: {}", assign->toString(), s.toString());
    n = namespaces_.partitions(assign->toString()).value_or(0);
  }
  for (int i = 0; i < n; ++i) {
    txnCoordinators_->load(static_cast<uint64_t>(i), [](auto) {});
  }
}

void BrokerService::syncTransactionCoordinators() {
  if (!txnCoordinators_ || !ownership_) return;
  const TopicName assign = *TopicName::parse(kTransactionCoordinatorAssign);
  for (uint64_t id : txnCoordinators_->loadedIds()) {
    if (ownership_->owns(assign.partition(static_cast<int>(id)))) continue;
    MLOG_INFO("Transaction coordinator {}: its assign partition left this broker, closing", id);
    txnCoordinators_->unload(id);
  }
  const int n = namespaces_.partitions(assign.toString()).value_or(0);
  for (int i = 0; i < n; ++i) {
    if (!ownership_->owns(assign.partition(i))) continue;
    // Already loaded: load() answers at once. A load that ends after the bundle left again is
    // undone (the next owner fences this broker's handle on the log anyway).
    txnCoordinators_->load(static_cast<uint64_t>(i), [this, i, assign](const auto& r) {
      if (r.isOk() && !ownership_->owns(assign.partition(i))) {
        txnCoordinators_->unload(static_cast<uint64_t>(i));
      }
    });
  }
}

void BrokerService::stopTransactions() {
  if (txnCoordinators_) txnCoordinators_->closeAll();
}

}  // namespace magnetar::broker
