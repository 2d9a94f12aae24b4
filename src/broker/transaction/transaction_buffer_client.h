// TransactionBufferClient: how a coordinator ends a transaction on the topics it produced to and
// the subscriptions it acked on (Pulsar's TransactionBufferClient: commitTxnOnTopic,
// abortTxnOnTopic, commitTxnOnSubscription, abortTxnOnSubscription). The broker's own
// implementation (service/local_transaction_buffer_client.cc) calls PersistentTopic::endTxn and
// PersistentTopic::endTxnOnSubscription; unit tests use a fake.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TRANSACTION)
#error "broker/transaction is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "broker/common/txn_id.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {

class TransactionBufferClient {
 public:
  using Done = std::function<void(Status)>;
  virtual ~TransactionBufferClient() = default;
  // Writes the commit or abort marker of `txn` on `topic` (a full name, a partition's own):
  // Pulsar's END_TXN_ON_PARTITION. lowWaterMark: the coordinator's, every txn of it with a
  // sequence <= it has ended (-1: none yet; the wire's uint64 read as Pulsar's signed long).
  // done(status) on any thread, once; a call for a txn already ended there answers Ok (retries are
  // idempotent). Errors: kNotFound (topic absent), kIoError etc. (retried by the coordinator).
  // Thread: any.
  virtual void endTxnOnTopic(const std::string& topic, const TxnID& txn, proto::TxnAction action,
                             int64_t lowWaterMark, Done done) = 0;
  // Commits or aborts the acks of `txn` on `subscription` of `topic`: Pulsar's
  // END_TXN_ON_SUBSCRIPTION. The rest as endTxnOnTopic.
  virtual void endTxnOnSubscription(const std::string& topic, const std::string& subscription,
                                    const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
                                    Done done) = 0;
};

}  // namespace magnetar::broker
