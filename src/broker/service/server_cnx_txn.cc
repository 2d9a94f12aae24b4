// ServerCnx: the transaction coordinator's commands (PIP-31; Pulsar's ServerCnx
// handleTcClientConnectRequest, handleNewTxn, handleAddPartitionToTxn,
// handleAddSubscriptionToTxn, handleEndTxn): each runs on its coordinator's executor and is
// answered from there through the connection's thread-safe send.
#include <algorithm>

#include "base/dcheck.h"
#include "broker/service/broker_service.h"
#include "broker/service/server_cnx.h"
#include "broker/transaction/coordinator_registry.h"

namespace magnetar::broker {

using protocol::Commands;

namespace {

TxnID txnOf(uint64_t most, uint64_t least) { return TxnID{most, least}; }

}  // namespace

bool ServerCnx::checkTransactionsEnabled(uint64_t requestId) {
  if (service_.options().transactionCoordinatorEnabled && service_.transactionCoordinators()) {
    return true;
  }
  // Pulsar's checkTransactionEnableAndSendError: a plain ERROR, not the command's response.
  sendError(requestId, proto::NotAllowedError, "Transactions are not enabled.");
  return false;
}

void ServerCnx::handleTcClientConnect(const proto::CommandTcClientConnectRequest& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  if (!checkTransactionsEnabled(requestId)) return;
  const uint64_t tcId = c.tc_id();
  // Only the assign topic's partitions are coordinators: any other id would create (and keep
  // open) a transaction log of its own per request, and in cluster mode one above INT_MAX was
  // taken for a partition of another index (Pulsar casts it to int).
  const auto coordinators =
      service_.partitionsOf(*TopicName::parse(kTransactionCoordinatorAssign), false);
  if (!coordinators.isOk() || tcId >= static_cast<uint64_t>(std::max(0, *coordinators))) {
    send(Commands::newTcClientConnectResponse(requestId, proto::TransactionCoordinatorNotFound,
                                              coordinatorNotFoundMessage(tcId)));
    return;
  }
  auto* ownership = service_.topicOwnership();
  if (!ownership || service_.transactionCoordinators()->get(tcId)) return loadCoordinator(c);
  // Cluster mode, as Pulsar 4.2's TransactionMetadataStoreService.handleTcClientConnect: a
  // coordinator not loaded here loads only on the owner of its assign partition's bundle.
  const TopicName partition =
      TopicName::parse(kTransactionCoordinatorAssign)->partition(static_cast<int>(tcId));
  if (ownership->owns(partition)) return loadCoordinator(c);
  auto me = self();
  ownership->confirmOwned(partition, &loop(), [me, c, partition, requestId](bool owned) {
    MAGNETAR_DCHECK_ON(me->loop());
    if (me->isClosed()) return;
    if (owned) return me->loadCoordinator(c);
    // BrokerService.checkTopicNsOwnership's ServiceUnitNotReadyException: ServiceNotReady, and
    // the client looks the assign partition up again.
    const std::string ns = partition.namespaceName();
    me->send(Commands::newTcClientConnectResponse(
        requestId, proto::ServiceNotReady,
        "Namespace bundle (" + ns + "/" +
            me->service_.topicOwnership()->bundleOf(ns, partition.toString()) + ") for topic (" +
            partition.toString() + ") not served by this instance:" + me->service_.brokerId() +
            ". Please redo the lookup."));
  });
}

void ServerCnx::loadCoordinator(const proto::CommandTcClientConnectRequest& c) {
  const uint64_t requestId = c.request_id();
  auto me = self();
  service_.transactionCoordinators()->load(
      c.tc_id(), [me, requestId](const Result<std::shared_ptr<TransactionCoordinator>>& r) {
        if (r.isOk()) return me->send(Commands::newTcClientConnectResponse(requestId));
        me->send(Commands::newTcClientConnectResponse(requestId, txnServerError(r.status()),
                                                      r.status().message()));
      });
}

void ServerCnx::handleNewTxn(const proto::CommandNewTxn& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  const uint64_t tcId = c.tc_id();
  if (!checkTransactionsEnabled(requestId)) return;
  auto tc = service_.transactionCoordinators()->get(tcId);
  if (!tc) {
    send(Commands::newNewTxnErrorResponse(requestId, tcId, proto::TransactionCoordinatorNotFound,
                                          coordinatorNotFoundMessage(tcId)));
    return;
  }
  auto me = self();
  // Pulsar passes txn_ttl_seconds on as the timeout in milliseconds (what clients send there).
  tc->executor()->execute([tc, me, requestId, tcId, ttl = c.txn_ttl_seconds(), owner = authRole_] {
    tc->newTransaction(ttl, owner, [me, requestId, tcId](const Result<TxnID>& r) {
      if (r.isOk()) {
        me->send(Commands::newNewTxnResponse(requestId, r->leastBits, r->mostBits));
      } else {
        me->send(Commands::newNewTxnErrorResponse(requestId, tcId, txnServerError(r.status()),
                                                  r.status().message()));
      }
    });
  });
}

void ServerCnx::withOwnedTxn(const TxnID& txn, const std::function<void(Status)>& answer,
                             TxnOp op) {
  auto tc = service_.transactionCoordinators()->get(txn.mostBits);
  if (!tc) return answer(Status::closed(coordinatorNotFoundMessage(txn.mostBits)));
  std::string role = authRole_;
  bool superUser = !role.empty() && service_.authorization().isSuperUser(role);
  tc->executor()->execute([tc, txn, role, superUser, answer, op = std::move(op)] {
    // Pulsar's verifyTxnOwnership: a txn with an owner is the owner's and super users'.
    const TxnMeta* meta = tc->find(txn);
    if (meta && !meta->owner.empty() && meta->owner != role && !superUser) {
      return answer(Status::notFound("Client (" + role +
                                     ") is neither the owner of the transaction " + txn.toString() +
                                     " nor a super user"));
    }
    op(*tc, answer);
  });
}

void ServerCnx::handleAddPartitionToTxn(const proto::CommandAddPartitionToTxn& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  if (!checkTransactionsEnabled(requestId)) return;
  const TxnID txn = txnOf(c.txnid_most_bits(), c.txnid_least_bits());
  std::vector<std::string> partitions(c.partitions().begin(), c.partitions().end());
  auto me = self();
  withOwnedTxn(
      txn,
      [me, requestId, txn](const Status& s) {
        me->send(
            s.isOk()
                ? Commands::newAddPartitionToTxnResponse(requestId, txn.leastBits, txn.mostBits)
                : Commands::newAddPartitionToTxnResponse(requestId, txn.leastBits, txn.mostBits,
                                                         txnServerError(s), s.message()));
      },
      [txn, partitions = std::move(partitions)](TransactionCoordinator& tc, auto answer) {
        tc.addProducedPartitions(txn, partitions, answer);
      });
}

void ServerCnx::handleAddSubscriptionToTxn(const proto::CommandAddSubscriptionToTxn& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  if (!checkTransactionsEnabled(requestId)) return;
  const TxnID txn = txnOf(c.txnid_most_bits(), c.txnid_least_bits());
  std::vector<TxnSubscription> subs;
  for (const auto& s : c.subscription()) subs.push_back({s.topic(), s.subscription()});
  auto me = self();
  withOwnedTxn(
      txn,
      [me, requestId, txn](const Status& s) {
        me->send(
            s.isOk()
                ? Commands::newAddSubscriptionToTxnResponse(requestId, txn.leastBits, txn.mostBits)
                : Commands::newAddSubscriptionToTxnResponse(requestId, txn.leastBits, txn.mostBits,
                                                            txnServerError(s), s.message()));
      },
      [txn, subs = std::move(subs)](TransactionCoordinator& tc, auto answer) {
        tc.addAckedSubscriptions(txn, subs, answer);
      });
}

void ServerCnx::handleEndTxn(const proto::CommandEndTxn& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  if (!checkTransactionsEnabled(requestId)) return;
  const TxnID txn = txnOf(c.txnid_most_bits(), c.txnid_least_bits());
  const proto::TxnAction action = c.txn_action();
  auto me = self();
  withOwnedTxn(
      txn,
      [me, requestId, txn](const Status& s) {
        me->send(s.isOk() ? Commands::newEndTxnResponse(requestId, txn.leastBits, txn.mostBits)
                          : Commands::newEndTxnResponse(requestId, txn.leastBits, txn.mostBits,
                                                        txnServerError(s), s.message()));
      },
      [txn, action](TransactionCoordinator& tc, auto answer) {
        tc.endTransaction(txn, action, answer);
      });
}

}  // namespace magnetar::broker
