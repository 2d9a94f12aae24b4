// The transactions admin API (Pulsar 4.2's /admin/v3/transactions, `pulsar-admin transactions`)
// and Pulsar's transaction coordinator metrics.
#pragma once

#include <string>
#include <vector>

#include "admin/prometheus.h"
#include "admin/rest_util.h"
#include "admin/router.h"
#include "broker/transaction/transaction_coordinator.h"

namespace magnetar::admin {

// /admin/v3/transactions (Pulsar's Transactions resource; with transactionCoordinatorEnabled off
// every route but transactionBufferInternalStats answers 503 "This Broker is not configured with
// transactionCoordinatorEnabled=true."):
//   GET coordinators: [{"id","brokerServiceUrl"}] per assign partition (its lookup's owner URL;
//     standalone this broker's);
//   GET coordinatorInternalStats/{id}: {"transactionLogStats": {"managedLedgerName",
//     "managedLedgerInternalStats"}} of the coordinator's log; 404 as coordinatorStats;
//   GET transactionBufferInternalStats/{t}/{ns}/{topic}: {"snapshotType": "Single",
//     "singleSnapshotSystemTopicInternalStats": {...}} of the topic's own ledger (its
//     pulsar.txn-buffer cursor holds the snapshot; Pulsar's is the namespace's
//     __transaction_buffer_snapshot topic); 404 "Transaction buffer Snapshot for the topic does
//     not exist" with transactions off;
//   GET pendingAckInternalStats/{t}/{ns}/{topic}/{sub}: {"pendingAckLogStats": {...}} of the
//     subscription's pending-ack log; 404 "{topic} not found subscription : {sub}", 503 "Pending
//     ack have not init success!" before its first txn ack;
//   POST transactionCoordinator/replicas (int body): more partitions for the assign topic, 204;
//     406 unless above the current count (Pulsar's text), 400 for a body that is not an int;
//   GET coordinatorStats[?coordinatorId=N]: {"N": TransactionCoordinatorStats} of the coordinators
//     this broker serves, or one ({"state","leastSigBits","lowWaterMark","ongoingTxnSize",
//     "recoverStartTime","recoverEndTime"}); 404 "Transaction coordinator not found! coordinator
//     id : N";
//   GET transactionMetadata/{most}/{least}: TransactionMetadata ({"txnId","status",
//     "openTimestamp","timeoutAt","owner","producedPartitions": {topic: TransactionInBufferStats},
//     "ackedPartitions": {topic: {sub: TransactionInPendingAckStats}}}); 404 unknown txn or
//     coordinator (the coordinator's texts);
//   GET slowTransactions/{timeout}[?coordinatorId=N]: {"(m,l)": TransactionMetadata} of the
//     ongoing txns whose timeout (ms) is above `timeout` (Pulsar's getSlowTransactions);
//   GET transactionInBufferStats/{t}/{ns}/{topic}/{most}/{least}: {"startPosition","aborted"};
//   GET transactionInPendingAckStats/{t}/{ns}/{topic}/{sub}/{most}/{least}:
//     {"cumulativeAckPosition"} (only when that txn holds the subscription's cumulative ack);
//   GET transactionBufferStats/{t}/{ns}/{topic}[?lowWaterMarks=true]: TransactionBufferStats;
//   GET pendingAckStats/{t}/{ns}/{topic}/{sub}: {"state","ongoingTxnSize"}.
// Null fields are left out, as Pulsar's admin JSON (?metadata=true's ledger metadata is not
// given). Topic routes answer 404 "Topic not found {topic}" for a missing topic, 404 "Subscription
// not found". Coordinator state is read on the coordinator's executor, topic state on the topic's.
void addTransactionRoutes(Router& router, const AdminContext& ctx);

// pulsar_txn_active_count, _created_total, _committed_total, _aborted_total, _timeout_total,
// _append_log_total and pulsar_txn_execution_latency_le_{10..3000000,overflow} per coordinator
// (labels cluster, coordinator_id), as Pulsar's TransactionAggregator.
void writeTransactionMetrics(PrometheusWriter& w, const std::string& cluster,
                             const std::vector<broker::CoordinatorStats>& coordinators);

}  // namespace magnetar::admin
