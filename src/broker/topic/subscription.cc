#include "broker/topic/subscription.h"

#include <chrono>

#include "broker/common/wall_clock.h"

namespace magnetar::broker {

Subscription::Subscription(std::string name, storage::ManagedLedger& ledger,
                           storage::ManagedCursor& cursor, const BrokerOptions& options,
                           std::string topicName, int partitionIndex, bool durable)
    : name_(std::move(name)),
      ledger_(ledger),
      cursor_(cursor),
      options_(options),
      topicName_(std::move(topicName)),
      partitionIndex_(partitionIndex),
      durable_(durable) {
  markActive();
}

void Subscription::markActive() { lastActiveMs_ = wallClockMs(); }

size_t Subscription::consumerCount() const {
  return dispatcher_ ? dispatcher_->consumers().size() : 0;
}

Status Subscription::addConsumer(const std::shared_ptr<Consumer>& c) {
  markActive();
  if (dispatcher_ && dispatcher_->type() != c->subType()) {
    if (!dispatcher_->consumers().empty()) {
      return Status::busy("Subscription is of different type");
    }
    dispatcher_.reset();
  }
  if (!dispatcher_) {
    dispatcher_ = std::make_unique<Dispatcher>(c->subType(), ledger_, cursor_, options_, topicName_,
                                               partitionIndex_);
    dispatcher_->setUnackedLimits(maxUnackedPerConsumer_, maxUnackedPerSubscription_);
    if (delayedDelivery_) dispatcher_->setDelayedDelivery(*delayedDelivery_);
    dispatcher_->setCompactor(compactor_);
    dispatcher_->setTransactionBuffer(txnBuffer_);
  }
  return dispatcher_->addConsumer(c);
}

void Subscription::setUnackedLimits(std::optional<int> perConsumer,
                                    std::optional<int> perSubscription) {
  maxUnackedPerConsumer_ = perConsumer;
  maxUnackedPerSubscription_ = perSubscription;
  if (dispatcher_) dispatcher_->setUnackedLimits(perConsumer, perSubscription);
}

void Subscription::setDelayedDelivery(const DelayedDeliveryPolicies& p) {
  delayedDelivery_ = p;
  if (dispatcher_) dispatcher_->setDelayedDelivery(p);
}

int64_t Subscription::msgDelayed() const {
  return dispatcher_ ? dispatcher_->delayedMessages() : 0;
}

void Subscription::removeConsumer(Consumer* c) {
  markActive();
  if (dispatcher_) dispatcher_->removeConsumer(c);
}

void Subscription::acknowledge(Consumer* c, const std::vector<storage::Position>& positions,
                               storage::StatusCallback cb, const BatchIndexAcks& batchIndexes) {
  markActive();
  if (batchIndexes.empty()) {
    if (dispatcher_) dispatcher_->acked(c, positions);
    cursor_.asyncDelete(positions, std::move(cb));
    return;
  }
  if (dispatcher_) dispatcher_->acked(c, positions);
  if (!cb) {
    // Nobody waits: no callback, so the cursor writes keep managedLedgerDefaultMarkDeleteRateLimit
    // (a callback asks for a write in this pass).
    cursor_.asyncDelete(positions, nullptr);
    cursor_.asyncDeleteBatchIndexes(batchIndexes, nullptr);
  } else {
    // Two cursor updates; cb once both are persisted, with the first error.
    struct Join {
      int left = 2;
      Status status;
      storage::StatusCallback cb;
    };
    auto join = std::make_shared<Join>();
    join->cb = std::move(cb);
    auto part = [join](const Status& s) {
      if (!s.isOk() && join->status.isOk()) join->status = s;
      if (--join->left == 0) join->cb(join->status);
    };
    cursor_.asyncDelete(positions, part);
    cursor_.asyncDeleteBatchIndexes(batchIndexes, part);
  }
  if (dispatcher_) {
    std::vector<storage::Position> touched;
    touched.reserve(batchIndexes.size());
    for (const auto& [p, set] : batchIndexes) touched.push_back(p);
    dispatcher_->batchIndexesAcked(c, touched);
  }
}

void Subscription::acknowledgeCumulative(Consumer* c, storage::Position pos,
                                         storage::StatusCallback cb,
                                         const storage::AckSet& ackSet) {
  markActive();
  if (dispatcher_ && (dispatcher_->type() == proto::CommandSubscribe::Shared ||
                      dispatcher_->type() == proto::CommandSubscribe::Key_Shared)) {
    // Pulsar's Consumer.messageAcked: "Received cumulative ack on shared subscription, ignoring".
    if (cb) cb(Status::ok());
    return;
  }
  if (!ackSet.empty()) {
    if (pos <= cursor_.markDeletedPosition()) {
      if (cb) cb(Status::ok());
      return;
    }
    cursor_.asyncMarkDeleteWithAckSet(pos, ackSet, std::move(cb));
    if (dispatcher_) {
      dispatcher_->ackedCumulative(c, cursor_.markDeletedPosition());
      dispatcher_->batchIndexesAcked(c, {pos});
    }
    return;
  }
  if (dispatcher_) dispatcher_->ackedCumulative(c, pos);
  if (pos <= cursor_.markDeletedPosition()) {
    if (cb) cb(Status::ok());
    return;
  }
  cursor_.asyncMarkDelete(pos, std::move(cb));
}

Subscription::~Subscription() { *alive_ = false; }

void Subscription::resetCursor(storage::Position pos, storage::StatusCallback cb) {
  cursor_.asyncResetCursor(pos, [this, alive = alive_, cb = std::move(cb)](const Status& s) {
    if (!*alive) return cb(s);  // unsubscribed while the reset was in flight
    if (s.isOk() && dispatcher_) {
      dispatcher_->rewind();
      // Consumers that subscribed again while the reset was in flight read from the new position.
      dispatcher_->onNewEntries();
    }
    cb(s);
  });
}

void Subscription::skipEntries(int64_t n, storage::StatusCallback cb) {
  storage::Position lac = ledger_.lastConfirmedEntry();
  std::vector<storage::Position> positions;
  for (storage::Position p = ledger_.nextValidPosition(cursor_.markDeletedPosition());
       static_cast<int64_t>(positions.size()) < n && p <= lac && p.entryId >= 0;
       p = ledger_.nextValidPosition(p)) {
    if (!cursor_.isAcknowledged(p)) positions.push_back(p);
  }
  if (positions.empty()) return cb(Status::ok());
  cursor_.asyncDelete(positions, std::move(cb));
}

void Subscription::clearBacklog(storage::StatusCallback cb) {
  storage::Position lac = ledger_.lastConfirmedEntry();
  if (lac.entryId < 0 || lac <= cursor_.markDeletedPosition()) return cb(Status::ok());
  if (dispatcher_) dispatcher_->clearDelayedMessages();
  cursor_.asyncMarkDelete(lac, std::move(cb));
}

}  // namespace magnetar::broker
