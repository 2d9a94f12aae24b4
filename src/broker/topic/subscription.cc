#include "broker/topic/subscription.h"

#include <algorithm>
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
      durable_(durable),
      nonPersistent_(topicName_.rfind("non-persistent://", 0) == 0) {
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
    dispatcher_->setSnapshotMarkerHook(snapshotMarkerHook_);
    dispatcher_->setPendingAck(pendingAck_.get());
    if (nonPersistent_) dispatcher_->setNonPersistent();
    dispatcher_->setDispatchRateLimiters(topicDispatchRate_, &subDispatchRate_, brokerDispatchRate_,
                                         rateOnNonBacklog_);
  }
  return dispatcher_->addConsumer(c);
}

namespace {
constexpr const char* kReplicatedProperty = "pulsar.replicated.subscription";
}  // namespace

bool Subscription::isReplicated() const {
  const auto& props = cursor_.properties();
  auto it = props.find(kReplicatedProperty);
  return it != props.end() && it->second == 1;
}

void Subscription::setReplicated(bool replicated, storage::StatusCallback cb) {
  if (!durable_ || nonPersistent_ || replicated == isReplicated()) {
    if (cb) cb(Status::ok());
    return;
  }
  storage::CursorProperties props = cursor_.properties();
  if (replicated) {
    props[kReplicatedProperty] = 1;
  } else {
    props.erase(kReplicatedProperty);
  }
  cursor_.asyncMarkDelete(cursor_.markDeletedPosition(), std::move(props), std::move(cb));
}

void Subscription::setSnapshotMarkerHook(std::function<void(const storage::Entry&)> hook) {
  snapshotMarkerHook_ = std::move(hook);
  if (dispatcher_) dispatcher_->setSnapshotMarkerHook(snapshotMarkerHook_);
}

void Subscription::setUnackedLimits(std::optional<int> perConsumer,
                                    std::optional<int> perSubscription) {
  maxUnackedPerConsumer_ = perConsumer;
  maxUnackedPerSubscription_ = perSubscription;
  if (dispatcher_) dispatcher_->setUnackedLimits(perConsumer, perSubscription);
}

void Subscription::setDispatchRateLimiters(MessageRateLimiter* topic, MessageRateLimiter* broker,
                                           const DynamicSetting<bool>* onNonBacklog) {
  topicDispatchRate_ = topic;
  brokerDispatchRate_ = broker;
  rateOnNonBacklog_ = onNonBacklog;
  if (dispatcher_) {
    dispatcher_->setDispatchRateLimiters(topic, &subDispatchRate_, broker, onNonBacklog);
  }
}

void Subscription::dispatchRateChanged() {
  if (dispatcher_) dispatcher_->dispatchRateChanged();
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
  if (nonPersistent_) {  // nothing is kept, so nothing to ack (Pulsar's NonPersistentSubscription)
    if (cb) cb(Status::ok());
    return;
  }
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
  if (nonPersistent_ ||
      (dispatcher_ && (dispatcher_->type() == proto::CommandSubscribe::Shared ||
                       dispatcher_->type() == proto::CommandSubscribe::Key_Shared))) {
    // Non-persistent: nothing kept. Pulsar's Consumer.messageAcked: "Received cumulative ack on
    // shared subscription, ignoring".
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

void Subscription::enablePendingAck(std::string logName, PendingAckStoreOpener opener,
                                    bool recover) {
  pendingAck_ = std::make_unique<PendingAckHandle>(topicName_, name_, std::move(logName), cursor_,
                                                   std::move(opener));
  pendingAck_->setHandlers(
      [this](PendingAckHandle::Ended e, storage::StatusCallback durable) {
        commitReleased(std::move(e), std::move(durable));
      },
      [this](const PendingAckHandle::Ended& e) { abortReleased(e); });
  if (dispatcher_) dispatcher_->setPendingAck(pendingAck_.get());
  if (recover) pendingAck_->recover();
}

void Subscription::transactionIndividualAcknowledge(
    Consumer* c, const TxnID& txn, std::vector<PendingAckHandle::IndividualAck> acks,
    storage::StatusCallback cb) {
  markActive();
  if (!pendingAck_) return cb(Status::notAllowed("Server don't support transaction ack!"));
  std::vector<std::pair<storage::Position, int32_t>> touched;
  touched.reserve(acks.size());
  for (const auto& a : acks) touched.emplace_back(a.pos, a.batchSize);
  pendingAck_->individualAck(
      txn, std::move(acks),
      [this, alive = alive_, c, touched = std::move(touched), cb = std::move(cb)](const Status& s) {
        if (*alive && dispatcher_ && s.code() != StatusCode::kAlreadyExists) {
          // Held (the log write's outcome aside): the consumer no longer owes these acks.
          std::vector<storage::Position> held;
          for (const auto& [p, batchSize] : touched) {
            if (pendingAck_->isWhollyHeld(p, std::max(1, batchSize))) held.push_back(p);
          }
          if (!held.empty()) dispatcher_->acked(c, held);
        }
        cb(s);
      });
}

void Subscription::transactionCumulativeAcknowledge(const TxnID& txn, storage::Position pos,
                                                    storage::AckSet ackSet,
                                                    storage::StatusCallback cb) {
  markActive();
  if (dispatcher_ && (dispatcher_->type() == proto::CommandSubscribe::Shared ||
                      dispatcher_->type() == proto::CommandSubscribe::Key_Shared)) {
    return cb(Status::ok());  // "Received cumulative ack on shared subscription, ignoring"
  }
  if (!pendingAck_) return cb(Status::notAllowed("Server don't support transaction ack!"));
  pendingAck_->cumulativeAck(txn, pos, std::move(ackSet), std::move(cb));
}

void Subscription::endTxn(const TxnID& txn, bool commit, int64_t lowWaterMark,
                          storage::StatusCallback done) {
  if (!pendingAck_) return done(Status::ok());
  pendingAck_->endTxn(txn, commit, lowWaterMark, std::move(done));
}

void Subscription::commitReleased(PendingAckHandle::Ended e, storage::StatusCallback durable) {
  // durable(status) once every cursor write below completed (each asks for its receipt, so none
  // waits for managedLedgerDefaultMarkDeleteRateLimit); the first error wins.
  struct Join {
    int left = 1;
    Status status = Status::ok();
    storage::StatusCallback done;
    void finish(const Status& s) {
      if (!s.isOk() && status.isOk()) status = s;
      if (--left == 0 && done) done(status);
    }
  };
  auto join = std::make_shared<Join>();
  join->done = std::move(durable);
  auto part = [join] {
    ++join->left;
    return [join](const Status& s) { join->finish(s); };
  };
  if (!e.whole.empty()) cursor_.asyncDelete(e.whole, part());
  if (!e.batch.empty()) cursor_.asyncDeleteBatchIndexes(e.batch, part());
  if (e.cumulative) {
    Consumer* active = dispatcher_ ? dispatcher_->activeConsumer() : nullptr;
    auto [pos, set] = std::move(*e.cumulative);
    if (active) {
      acknowledgeCumulative(active, pos, part(), set);
    } else if (pos > cursor_.markDeletedPosition()) {
      if (set.empty()) {
        cursor_.asyncMarkDelete(pos, part());
      } else {
        cursor_.asyncMarkDeleteWithAckSet(pos, set, part());
      }
    }
  }
  join->finish(Status::ok());
}

void Subscription::abortReleased(const PendingAckHandle::Ended& e) {
  if (!dispatcher_) return;  // no consumer: the next one reads them from the cursor
  std::vector<storage::Position> positions = e.whole;
  for (const auto& [p, set] : e.batch) positions.push_back(p);
  if (positions.empty() && !e.cumulative) return;
  dispatcher_->redeliverReleased(positions);
}

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
