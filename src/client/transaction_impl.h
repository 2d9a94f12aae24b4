// The client side of Pulsar's transactions: the coordinator client (TcClient, one TcHandler per
// coordinator) and TransactionImpl (what a Transaction handle drives). Internal to src/client.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "client/message.h"
#include "client/transaction.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

class ClientImpl;
class ClientConnection;

// persistent://pulsar/system/transaction_coordinator_assign (Pulsar's
// TopicName.TRANSACTION_COORDINATOR_ASSIGN); partition i is coordinator i.
inline constexpr std::string_view kTcAssignTopic =
    "persistent://pulsar/system/transaction_coordinator_assign";

// The error a coordinator response (TC_CLIENT_CONNECT/NEW_TXN/ADD_*_TO_TXN/END_TXN_RESPONSE)
// carries, or UnknownError when `cmd` is none of them or has no error.
proto::ServerError tcResponseError(const proto::BaseCommand& cmd);
// Pulsar's TransactionMetaStoreHandler retries a request after this error
// (checkIfNeedRetryByError).
inline bool isCoordinatorNotFound(const proto::BaseCommand& cmd) {
  return tcResponseError(cmd) == proto::TransactionCoordinatorNotFound;
}

using TcResponseCallback = std::function<void(const Status&, const proto::BaseCommand&)>;

// One coordinator (Pulsar's TransactionMetaStoreHandler): its connection is the pooled connection
// to the broker owning partition tcId of the assign topic, announced with
// TC_CLIENT_CONNECT_REQUEST. Thread: any; callbacks run on a client I/O thread.
class TcHandler : public std::enable_shared_from_this<TcHandler> {
 public:
  TcHandler(std::shared_ptr<ClientImpl> client, uint64_t tcId, std::string assignTopic);

  uint64_t tcId() const { return tcId_; }
  // Connects (lookup, connection, TC_CLIENT_CONNECT_REQUEST); cb(OK) once connected.
  void connect(StatusCallback cb);
  // Sends build(requestId) and calls cb with the response (OK) or the failure. After
  // TransactionCoordinatorNotFound or a lost connection the handler reconnects and the request
  // is re-sent after a back-off (initialBackoff doubling to maxBackoff / 10, as Pulsar) until
  // operationTimeout since the call; then kTimeout.
  void request(std::function<Buffer(uint64_t)> build, TcResponseCallback cb);

 private:
  struct Op;
  void withConnection(std::function<void(Result<std::shared_ptr<ClientConnection>>)> cb);
  void startConnect();
  void connected(Result<std::shared_ptr<ClientConnection>> r);
  void send(const std::shared_ptr<Op>& op);
  void retryLater(const std::shared_ptr<Op>& op, const Status& why);

  const std::shared_ptr<ClientImpl> client_;
  const uint64_t tcId_;
  const std::string assignTopic_;
  const int slot_;
  Mutex mu_;
  std::shared_ptr<ClientConnection> cnx_ GUARDED_BY(mu_);
  bool connecting_ GUARDED_BY(mu_) = false;
  std::vector<std::function<void(Result<std::shared_ptr<ClientConnection>>)>> waiters_
      GUARDED_BY(mu_);
};

// Pulsar's TransactionCoordinatorClientImpl: started once (partitioned metadata of the assign
// topic, one TcHandler per partition, all connected); new transactions go round-robin over the
// coordinators. Thread: any.
class TcClient : public std::enable_shared_from_this<TcClient> {
 public:
  explicit TcClient(std::shared_ptr<ClientImpl> client) : client_(std::move(client)) {}
  // Starts on the first call; cb once started (or failed; a failed start is retried by the next
  // call).
  void ensureStarted(StatusCallback cb);
  // NEW_TXN on the next coordinator; ttl is the transaction's timeout (Pulsar's
  // transactionTimeout; the coordinator aborts it after that).
  void newTransaction(std::chrono::milliseconds ttl,
                      std::function<void(Result<std::shared_ptr<TransactionImpl>>)> cb);

 private:
  void started(const Status& s);

  const std::shared_ptr<ClientImpl> client_;
  Mutex mu_;
  enum class State { kNone, kStarting, kReady } state_ GUARDED_BY(mu_) = State::kNone;
  std::vector<StatusCallback> startWaiters_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<TcHandler>> handlers_;  // set before kReady, constant after
  std::atomic<uint64_t> next_{0};
};

// Pulsar's TransactionImpl. Registration of produced partitions and acked subscriptions happens
// once per transaction (ADD_PARTITION_TO_TXN before the first send to a partition,
// ADD_SUBSCRIPTION_TO_TXN before the first ack on a subscription); operations arriving while it
// is under way wait for it, in order. Thread: any.
class TransactionImpl : public std::enable_shared_from_this<TransactionImpl> {
 public:
  TransactionImpl(std::shared_ptr<TcHandler> tc, TxnID id) : tc_(std::move(tc)), id_(id) {}

  TxnID id() const { return id_; }
  TransactionState state() const;

  // An operation (send or ack) of this transaction starts; kNotAllowed "InvalidTxnStatus" when
  // the transaction is no longer open. Each successful beginOp() is matched by one endOp().
  Status beginOp();
  void endOp(const Status& s);

  // Runs then(OK) once `partition` is registered (at once, on this thread, when it already is),
  // then(error) when registering failed.
  void registerPartition(const std::string& partition, StatusCallback then);
  // True once `partition` is registered and every operation that waited for it has run.
  bool partitionRegistered(const std::string& partition) const;
  void registerSubscription(const std::string& topic, const std::string& subscription,
                            StatusCallback then);

  // END_TXN after the pending operations completed; see Transaction::commit/abort.
  void end(bool commit, StatusCallback cb);

 private:
  struct Registration {
    bool done = false;
    bool running = false;
    Status result;
    std::vector<StatusCallback> waiters;
  };
  void registerOnce(const std::string& key, std::function<Buffer(uint64_t)> build,
                    StatusCallback then);
  void registered(const std::string& key, const Status& s);
  void sendEnd(bool commit, StatusCallback cb);

  const std::shared_ptr<TcHandler> tc_;
  const TxnID id_;
  mutable Mutex mu_;
  TransactionState state_ GUARDED_BY(mu_) = TransactionState::kOpen;
  std::unordered_map<std::string, Registration> registrations_ GUARDED_BY(mu_);
  int64_t pendingOps_ GUARDED_BY(mu_) = 0;
  Status firstOpError_ GUARDED_BY(mu_);
  std::function<void()> onOpsDone_ GUARDED_BY(mu_);
};

}  // namespace magnetar::client
