#include "broker/subscription.h"

namespace magnetar::broker {

Subscription::Subscription(std::string name, storage::ManagedLedger& ledger,
                           storage::ManagedCursor& cursor, const BrokerOptions& options,
                           std::string topicName, int partitionIndex, bool durable)
    : name_(std::move(name)), ledger_(ledger), cursor_(cursor), options_(options),
      topicName_(std::move(topicName)), partitionIndex_(partitionIndex), durable_(durable) {}

size_t Subscription::consumerCount() const {
  return dispatcher_ ? dispatcher_->consumers().size() : 0;
}

Status Subscription::addConsumer(const std::shared_ptr<Consumer>& c) {
  if (dispatcher_ && dispatcher_->type() != c->subType()) {
    if (!dispatcher_->consumers().empty()) {
      return Status::busy("Subscription is of different type");
    }
    dispatcher_.reset();
  }
  if (!dispatcher_) {
    dispatcher_ = std::make_unique<Dispatcher>(c->subType(), ledger_, cursor_, options_,
                                               topicName_, partitionIndex_);
  }
  return dispatcher_->addConsumer(c);
}

void Subscription::removeConsumer(Consumer* c) {
  if (dispatcher_) dispatcher_->removeConsumer(c);
}

void Subscription::acknowledge(Consumer* c, const std::vector<storage::Position>& positions,
                               storage::StatusCallback cb) {
  if (dispatcher_) dispatcher_->acked(c, positions);
  cursor_.asyncDelete(positions, std::move(cb));
}

void Subscription::acknowledgeCumulative(Consumer* c, storage::Position pos,
                                         storage::StatusCallback cb) {
  if (dispatcher_ && (dispatcher_->type() == proto::CommandSubscribe::Shared ||
                      dispatcher_->type() == proto::CommandSubscribe::Key_Shared)) {
    cb(Status::notAllowed("Cumulative ack is not supported for Shared subscription"));
    return;
  }
  if (dispatcher_) dispatcher_->ackedCumulative(c, pos);
  if (pos <= cursor_.markDeletedPosition()) {
    cb(Status::ok());
    return;
  }
  cursor_.asyncMarkDelete(pos, std::move(cb));
}

void Subscription::resetCursor(storage::Position pos, storage::StatusCallback cb) {
  cursor_.asyncResetCursor(pos, [this, cb = std::move(cb)](Status s) {
    if (s.isOk() && dispatcher_) dispatcher_->rewind();
    cb(s);
  });
}

}  // namespace magnetar::broker
