// ServerCnx: ACK with a txnid and END_TXN_ON_SUBSCRIPTION (transaction pending acks; Pulsar's
// Consumer.individualAckWithTransaction / transactionCumulativeAcknowledge and
// ServerCnx.handleEndTxnOnSubscription). The held acks live in each subscription's
// PendingAckHandle (src/broker/topic/pending_ack_handle.h).
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "broker/service/server_cnx.h"
#include "protocol/commands.h"

namespace magnetar::broker {

using protocol::Commands;

namespace {

// Pulsar's BrokerService.getClientErrorCode for what a pending-ack call fails with.
proto::ServerError pendingAckError(const Status& s) {
  switch (s.code()) {
    case StatusCode::kAlreadyExists:
      return proto::TransactionConflict;
    case StatusCode::kNotAllowed:
      return proto::NotAllowedError;
    case StatusCode::kBusy:
      return proto::ServiceNotReady;
    case StatusCode::kIoError:
    case StatusCode::kNoSpace:
    case StatusCode::kClosed:
      return proto::PersistenceError;
    default:
      return proto::UnknownError;
  }
}

}  // namespace

void ServerCnx::handleTxnAck(const proto::CommandAck& c) {
  MAGNETAR_DCHECK_ON(loop());
  const TxnID txn{c.txnid_most_bits(), c.txnid_least_bits()};
  const bool cumulative = c.ack_type() == proto::CommandAck::Cumulative;
  std::vector<PendingAckHandle::IndividualAck> acks;
  for (const auto& id : c.message_id()) {
    PendingAckHandle::IndividualAck a;
    a.pos = {static_cast<int64_t>(id.ledgerid()), static_cast<int64_t>(id.entryid())};
    a.ackSet.assign(id.ack_set().begin(), id.ack_set().end());
    a.batchSize = id.has_batch_size() ? id.batch_size() : 0;
    acks.push_back(std::move(a));
  }
  const bool wantResponse = c.has_request_id();
  const uint64_t requestId = c.request_id();
  const uint64_t consumerId = c.consumer_id();
  auto me = self();
  withConsumer(consumerId, [=, acks = std::move(acks)](ConsumerRef& ref) mutable {
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([=, acks = std::move(acks)]() mutable {
      auto answer = [=](const Status& s) {
        if (!wantResponse) return;
        if (s.isOk()) return me->send(Commands::newAckResponse(consumerId, requestId));
        me->send(Commands::newAckResponse(consumerId, requestId, pendingAckError(s), s.message()));
      };
      Subscription* s = topic->subscription(sub);
      if (!s) return answer(Status::internal("Subscription not found"));
      if (!cumulative) {
        return s->transactionIndividualAcknowledge(consumer.get(), txn, std::move(acks), answer);
      }
      // Pulsar's Consumer.messageAcked: a cumulative ack of more than one id is ignored.
      if (acks.size() != 1) return answer(Status::ok());
      s->transactionCumulativeAcknowledge(txn, acks[0].pos, std::move(acks[0].ackSet), answer);
    });
  });
}

void ServerCnx::handleEndTxnOnSubscription(const proto::CommandEndTxnOnSubscription& c) {
  MAGNETAR_DCHECK_ON(loop());
  const uint64_t requestId = c.request_id();
  const TxnID txn{c.txnid_most_bits(), c.txnid_least_bits()};
  const std::string topicName = c.subscription().topic();
  const std::string subName = c.subscription().subscription();
  const proto::TxnAction action = c.txn_action();
  const auto lowWaterMark = static_cast<int64_t>(c.txnid_least_bits_of_low_watermark());
  auto me = self();
  auto fail = [me, requestId, txn](const std::string& message) {
    me->send(Commands::newEndTxnOnSubscriptionResponse(requestId, txn.leastBits, txn.mostBits,
                                                       proto::UnknownError, message));
  };
  auto name = TopicName::parse(topicName);
  if (!name.isOk()) return fail("The topic " + topicName + " is not exist in broker.");
  if (Status s = checkTcSuperUser(txn); !s.isOk()) {
    return me->send(Commands::newEndTxnOnSubscriptionResponse(
        requestId, txn.leastBits, txn.mostBits, proto::TransactionNotFound, s.message()));
  }
  if (!servesTopic(*name)) {  // as END_TXN_ON_PARTITION: only the owner loads the topic
    return whenOwned(*name, [me, c](bool owned) {
      if (owned) return me->handleEndTxnOnSubscription(c);
      me->send(Commands::newEndTxnOnSubscriptionResponse(
          c.request_id(), c.txnid_least_bits(), c.txnid_most_bits(), proto::ServiceNotReady,
          notServedMessage(c.subscription().topic())));
    });
  }
  auto done = [me, requestId, txn] {
    me->send(Commands::newEndTxnOnSubscriptionResponse(requestId, txn.leastBits, txn.mostBits));
  };
  service_.getOrCreateTopic(*name, false, [=](Result<std::shared_ptr<PersistentTopic>> r) {
    // Pulsar 4.2.4's handleEndTxnOnSubscription: a topic never created (or deleted) and a
    // missing subscription answer success (nothing to end, so the coordinator's end completes);
    // a topic its storage has but cannot load answers ServiceNotReady (the coordinator retries).
    // So does a name that cannot be a topic (kNotAllowed: partitioned, transaction-internal).
    if (!r.isOk() && (r.status().code() == StatusCode::kNotFound ||
                      r.status().code() == StatusCode::kNotAllowed)) {
      return done();
    }
    if (!r.isOk()) {
      return me->send(Commands::newEndTxnOnSubscriptionResponse(
          requestId, txn.leastBits, txn.mostBits, proto::ServiceNotReady,
          "The topic " + topicName + " does not exist in broker."));
    }
    auto topic = r.value();
    topic->endTxnOnSubscription(subName, txn, action, lowWaterMark, [=](const Status& s) {
      if (s.code() == StatusCode::kNotFound) return done();
      if (!s.isOk()) {
        MLOG_WARN("end of {} on {} {} failed: {}", txn.toString(), topicName, subName,
                  s.toString());
        return fail("Handle end txn on subscription failed.");
      }
      done();
    });
  });
}

}  // namespace magnetar::broker
