// Transaction: Pulsar's client transaction API (PIP-31) for Magnetar's C++ client. A transaction
// groups sends (OutgoingMessage::txn) and acks (Consumer::acknowledgeAsync with a transaction)
// that take effect together on commit, or not at all on abort.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "client/message.h"

namespace magnetar::client {

class TransactionImpl;

// Pulsar's TxnID: mostBits = the coordinator id (partition of
// persistent://pulsar/system/transaction_coordinator_assign), leastBits = its sequence number.
struct TxnID {
  uint64_t mostBits = 0;
  uint64_t leastBits = 0;
  bool operator==(const TxnID&) const = default;
  // "(most,least)", as Pulsar's TxnID.toString.
  std::string toString() const;
};

// States of Pulsar's TransactionImpl.State.
enum class TransactionState { kOpen, kCommitting, kAborting, kCommitted, kAborted, kError };

// A handle to a transaction opened by Client::newTransaction; cheap to copy. Thread: any; the
// synchronous calls must not be made on a client I/O thread.
class Transaction {
 public:
  Transaction() = default;
  explicit Transaction(std::shared_ptr<TransactionImpl> impl) : impl_(std::move(impl)) {}

  TxnID id() const;
  TransactionState state() const;

  // Waits for the transaction's sends and acks to complete, then END_TXN(COMMIT) (Pulsar's
  // TransactionImpl.commit). Errors: kNotAllowed "InvalidTxnStatus..." when the transaction is
  // not open; when a send or ack of it failed, the transaction is aborted and the commit fails
  // with kNotAllowed "TransactionHasOperationFailed: ..."; the coordinator's error
  // (TransactionNotFound, InvalidTxnStatus after a timeout: state kError) otherwise.
  Status commit();
  void commitAsync(StatusCallback cb);
  // END_TXN(ABORT) once the pending sends and acks completed (their failures are ignored).
  Status abort();
  void abortAsync(StatusCallback cb);

  explicit operator bool() const { return impl_ != nullptr; }
  const std::shared_ptr<TransactionImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<TransactionImpl> impl_;
};

}  // namespace magnetar::client
