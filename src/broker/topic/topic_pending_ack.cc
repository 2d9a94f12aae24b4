// The topic's side of pending acks (pending_ack_handle.h): each subscription's handle and the
// coordinator's END_TXN_ON_SUBSCRIPTION.
#include "base/dcheck.h"
#include "broker/topic/topic.h"

namespace magnetar::broker {

void PersistentTopic::attachPendingAck(Subscription& sub, bool recover) {
  if (!options_.transactionCoordinatorEnabled) return;
  // A reader's acks are held in memory only (its subscription ends with its consumer).
  PendingAckStoreOpener opener = sub.durable() ? pendingAckOpener_ : PendingAckStoreOpener{};
  sub.enablePendingAck(pendingAckLedgerName(name_.persistenceName(), sub.name()), std::move(opener),
                       recover && sub.durable());
}

void PersistentTopic::endTxnOnSubscription(const std::string& subscription, const TxnID& txn,
                                           proto::TxnAction action, int64_t lowWaterMark,
                                           std::function<void(Status)> done) {
  MAGNETAR_DCHECK_ON(executor_);
  Subscription* sub = this->subscription(subscription);
  if (!sub) {
    done(Status::notFound("Topic " + name_.toString() + " subscription " + subscription +
                          " is not exist."));
    return;
  }
  sub->endTxn(txn, action == proto::TxnAction::COMMIT, lowWaterMark, std::move(done));
}

}  // namespace magnetar::broker
