// ServerCnx: END_TXN_ON_PARTITION, the coordinator's commit/abort of a transaction on one topic
// (Pulsar's ServerCnx.handleEndTxnOnPartition; the class is in server_cnx.h).
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "broker/service/server_cnx.h"
#include "protocol/commands.h"
#include "protocol/server_error.h"

namespace magnetar::broker {

using protocol::Commands;

std::string ServerCnx::notServedMessage(const std::string& topic) {
  return "Namespace bundle for topic (" + topic +
         ") not served by this instance. Please redo the lookup.";
}

Status ServerCnx::checkTcSuperUser(const TxnID& txn) const {
  if (!service_.authorization().enabled() || service_.authorization().isSuperUser(authRole_)) {
    return Status::ok();
  }
  return Status::notFound("TC client (" + authRole_ +
                          ") is not a super user, and is not allowed to operate on transaction " +
                          txn.toString());
}

void ServerCnx::whenOwned(const TopicName& name, std::function<void(bool)> then) {
  auto me = self();
  service_.topicOwnership()->confirmOwned(name, &loop(), [me, then = std::move(then)](bool owned) {
    MAGNETAR_DCHECK_ON(me->loop());
    if (!me->isClosed()) then(owned);
  });
}

void ServerCnx::handleEndTxnOnPartition(const proto::CommandEndTxnOnPartition& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  const TxnID txn{c.txnid_most_bits(), c.txnid_least_bits()};
  const proto::TxnAction action = c.txn_action();
  const auto lowWaterMark = static_cast<int64_t>(c.txnid_least_bits_of_low_watermark());
  auto me = self();
  auto answerError = [me, requestId, txn](proto::ServerError e, const std::string& msg) {
    me->send(
        Commands::newEndTxnOnPartitionResponse(requestId, txn.leastBits, txn.mostBits, e, msg));
  };
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) return answerError(proto::ServiceNotReady, name.status().message());
  if (Status s = checkTcSuperUser(txn); !s.isOk()) {
    return answerError(proto::TransactionNotFound, s.message());
  }
  const std::string& topicName = c.topic();
  // Only the topic's owner ends a txn on it (a non-owner loading it would fence the owner's
  // ledger): ServiceNotReady, and the coordinator looks the topic up again.
  if (!servesTopic(*name)) {
    return whenOwned(*name, [me, c](bool owned) {
      if (owned) return me->handleEndTxnOnPartition(c);
      me->send(Commands::newEndTxnOnPartitionResponse(c.request_id(), c.txnid_least_bits(),
                                                      c.txnid_most_bits(), proto::ServiceNotReady,
                                                      notServedMessage(c.topic())));
    });
  }
  service_.getOrCreateTopic(
      *name, /*create=*/false,
      [me, requestId, txn, action, lowWaterMark, answerError, topicName](auto r) {
        if (!r.isOk()) {
          // Pulsar: a topic never created had nothing sent in the txn: success; nor had a name
          // that cannot be a topic (kNotAllowed: partitioned, transaction-internal).
          if (r.status().code() == StatusCode::kNotFound ||
              r.status().code() == StatusCode::kNotAllowed) {
            me->send(
                Commands::newEndTxnOnPartitionResponse(requestId, txn.leastBits, txn.mostBits));
            return;
          }
          MLOG_WARN("END_TXN_ON_PARTITION {} on {} failed: {}", txn.toString(), topicName,
                    r.status().toString());
          // Pulsar: a topic its storage has that cannot be served answers this (retried).
          return answerError(proto::ServiceNotReady,
                             "The topic " + topicName + " does not exist in broker.");
        }
        auto topic = r.value();
        topic->endTxn(
            txn, action, lowWaterMark, [me, requestId, txn, answerError](const Status& s) {
              if (!s.isOk()) return answerError(protocol::toServerError(s), s.message());
              me->send(
                  Commands::newEndTxnOnPartitionResponse(requestId, txn.leastBits, txn.mostBits));
            });
      });
}

}  // namespace magnetar::broker
