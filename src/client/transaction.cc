// The transaction parts of the public handles: Transaction, Client::newTransaction and
// Consumer::acknowledge within a transaction.
#include "client/transaction.h"

#include <future>

#include "base/blocking_wait.h"
#include "client/client.h"
#include "client/client_impl.h"
#include "client/consumer_impl.h"
#include "client/transaction_impl.h"

namespace magnetar::client {

namespace {
Status awaitStatus(const std::function<void(StatusCallback)>& start) {
  auto pr = std::make_shared<std::promise<Status>>();
  auto f = pr->get_future();
  start([pr](const Status& s) { pr->set_value(s); });
  return blockingGet(f, "Transaction commit/abort or Consumer::acknowledge(txn)");
}

Status noTransaction() { return Status::invalidArgument("empty transaction handle"); }
}  // namespace

TxnID Transaction::id() const { return impl_ ? impl_->id() : TxnID{}; }

TransactionState Transaction::state() const {
  return impl_ ? impl_->state() : TransactionState::kError;
}

void Transaction::commitAsync(StatusCallback cb) {
  if (!impl_) return cb(noTransaction());
  impl_->end(true, std::move(cb));
}

void Transaction::abortAsync(StatusCallback cb) {
  if (!impl_) return cb(noTransaction());
  impl_->end(false, std::move(cb));
}

Status Transaction::commit() {
  return awaitStatus([this](StatusCallback cb) { commitAsync(std::move(cb)); });
}

Status Transaction::abort() {
  return awaitStatus([this](StatusCallback cb) { abortAsync(std::move(cb)); });
}

void Client::newTransactionAsync(std::chrono::milliseconds timeout,
                                 std::function<void(Result<Transaction>)> cb) {
  if (!status_.isOk()) return cb(status_);
  if (!impl_->config().enableTransaction) {
    return cb(Status::notAllowed("transactions are not enabled (ClientConfig::enableTransaction)"));
  }
  auto tc = impl_->tcClient();
  if (!tc) return cb(Status::closed("client closed"));
  tc->newTransaction(timeout, [cb = std::move(cb)](Result<std::shared_ptr<TransactionImpl>> r) {
    if (!r) return cb(r.status());
    cb(Transaction(std::move(*r)));
  });
}

Result<Transaction> Client::newTransaction(std::chrono::milliseconds timeout) {
  auto pr = std::make_shared<std::promise<Result<Transaction>>>();
  auto f = pr->get_future();
  newTransactionAsync(timeout, [pr](Result<Transaction> r) { pr->set_value(std::move(r)); });
  return blockingGet(f, "Client::newTransaction");
}

void Consumer::acknowledgeAsync(const MessageId& id, const Transaction& txn, StatusCallback cb) {
  if (!impl_) return cb(Status::invalidArgument("empty consumer handle"));
  if (!txn) return cb(noTransaction());
  impl_->acknowledgeAsync(id, txn.impl(), std::move(cb));
}

Status Consumer::acknowledge(const MessageId& id, const Transaction& txn) {
  return awaitStatus([&](StatusCallback cb) { acknowledgeAsync(id, txn, std::move(cb)); });
}

}  // namespace magnetar::client
