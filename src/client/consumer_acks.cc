// ConsumerImpl's acknowledgements (grouped acks, negative acks, redelivery) and requests (seek,
// last message id, unsubscribe, close). Set-up, reconnects and receiving are in consumer_impl.cc.
#include <boost/asio/post.hpp>

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "client/consumer_impl.h"
#include "client/transaction_impl.h"
#include "protocol/commands.h"

namespace magnetar::client {

using protocol::Commands;
using protocol::WireMessageId;

// ---- Acknowledgements -------------------------------------------------------------------------

Status ConsumerImpl::acknowledge(const MessageId& id) {
  bool full = acks_.addIndividual(id);
  ackAdded(full);
  return Status::ok();
}

Status ConsumerImpl::acknowledgeCumulative(const MessageId& id) {
  if (config_.subscriptionType == SubscriptionType::kShared ||
      config_.subscriptionType == SubscriptionType::kKeyShared) {
    return Status::notAllowed("cumulative acknowledgement is not allowed on Shared/Key_Shared");
  }
  acks_.addCumulative(id);
  ackAdded(/*groupFull=*/false);
  return Status::ok();
}

void ConsumerImpl::acknowledgeAsync(const MessageId& id,
                                    const std::shared_ptr<TransactionImpl>& txn,
                                    StatusCallback cb) {
  Status s = txn->beginOp();
  if (!s.isOk()) return cb(s);
  auto done = [txn, cb = std::move(cb)](const Status& s) {
    txn->endOp(s);
    cb(s);
  };
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  txn->registerSubscription(topic_, subscription_, [weak, id, txn, done](const Status& s) {
    auto self = weak.lock();
    if (!s.isOk() || !self) return done(s.isOk() ? Status::closed("consumer closed") : s);
    auto cnx = self->connection();
    if (!cnx) return done(Status::closed("consumer not connected"));
    // A batch message: the bits of the entry's other messages stay set (Pulsar's ConsumerImpl).
    std::vector<int64_t> ackSet;
    if (id.batchIndex >= 0 && id.batchSize > 0) {
      ackSet.assign((static_cast<size_t>(id.batchSize) + 63) / 64, 0);
      for (int32_t i = 0; i < id.batchSize; ++i) {
        if (i != id.batchIndex) ackSet[i / 64] |= int64_t{1} << (i % 64);
      }
    }
    uint64_t rid = self->client_->newRequestId();
    TxnID t = txn->id();
    WireMessageId w{static_cast<uint64_t>(id.ledgerId), static_cast<uint64_t>(id.entryId),
                    self->partition_, -1};
    cnx->sendRequest(
        rid,
        Commands::newAckWithTxn(self->consumerId_, proto::CommandAck::Individual, w, ackSet,
                                ackSet.empty() ? 0 : id.batchSize, t.mostBits, t.leastBits, rid),
        [done](const Status& s, const proto::BaseCommand&) { done(s); });
  });
}

void ConsumerImpl::ackAdded(bool groupFull) {
  if (groupFull || config_.ackGroupTime.count() == 0) {
    flushAcks();
  } else if (!ackTimerArmed_.exchange(true)) {
    std::weak_ptr<ConsumerImpl> weak = weak_from_this();
    client_->loopForSlot(slot_).execute([weak] {
      if (auto self = weak.lock()) self->armAckTimer();
    });
  }
}

void ConsumerImpl::armAckTimer() {
  ackTimer_.expires_after(config_.ackGroupTime);
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  ackTimer_.async_wait([weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    // Disarm first: an ack racing with this flush re-arms the timer instead of being stranded.
    self->ackTimerArmed_.store(false);
    if (!ec) self->flushAcks();
  });
}

void ConsumerImpl::flushAcks() {
  auto frames = acks_.takeFrames();
  if (frames.empty()) return;
  auto cnx = connection();
  if (!cnx) return;  // not connected: the broker redelivers what was not acked
  for (auto& f : frames) cnx->send(f);
}

void ConsumerImpl::negativeAcknowledge(const MessageId& id) {
  nacks_.add(id);
  if (!nackTimerArmed_.exchange(true)) {
    std::weak_ptr<ConsumerImpl> weak = weak_from_this();
    client_->loopForSlot(slot_).execute([weak] {
      if (auto self = weak.lock()) self->armNackTimer();
    });
  }
}

void ConsumerImpl::armNackTimer() {
  auto period = std::max(std::chrono::milliseconds(1), nacks_.delay() / 3);
  nackTimer_.expires_after(period);
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  nackTimer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->onNackTimer();
  });
}

void ConsumerImpl::onNackTimer() {
  auto due = nacks_.takeDue();
  if (!due.empty()) sendRedeliver(due);
  if (nacks_.size() > 0) {
    armNackTimer();
    return;
  }
  nackTimerArmed_.store(false);
  if (nacks_.size() > 0 && !nackTimerArmed_.exchange(true)) armNackTimer();
}

void ConsumerImpl::sendRedeliver(const std::vector<WireMessageId>& ids) {
  if (config_.subscriptionType == SubscriptionType::kExclusive ||
      config_.subscriptionType == SubscriptionType::kFailover) {
    // Pulsar: a single active consumer gets everything unacked again, in order.
    redeliverUnacknowledgedMessages();
    return;
  }
  auto cnx = connection();
  if (cnx) cnx->send(Commands::newRedeliverUnacknowledgedMessages(consumerId_, ids));
}

void ConsumerImpl::redeliverUnacknowledgedMessages() {
  // Cleared here, before returning, so the caller's next receive() gets a redelivered message.
  size_t cleared = queue_->removeFrom(this);
  uint64_t epoch = epoch_.load();
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  auto fn = [weak, cleared, epoch] {
    auto self = weak.lock();
    if (!self) return;
    auto cnx = self->connection();
    if (!cnx) return;
    self->flushAcks();  // what was acked must not come back
    cnx->send(Commands::newRedeliverUnacknowledgedMessages(self->consumerId_));
    // The cleared messages' permits go back so the broker can redeliver them.
    if (cleared > 0) self->messageProcessed(epoch, static_cast<uint32_t>(cleared));
  };
  auto& loop = client_->loopForSlot(slot_);
  loop.dispatch(std::move(fn));
}

// ---- Requests: seek, last message id, unsubscribe, close ------------------------------------

void ConsumerImpl::sendRequest(const std::function<Buffer(uint64_t)>& build,
                               std::function<void(const Status&, const proto::BaseCommand&)> cb) {
  auto cnx = connection();
  if (!cnx) {
    cb(Status::closed("consumer not connected"), proto::BaseCommand());
    return;
  }
  uint64_t id = client_->newRequestId();
  cnx->sendRequest(id, build(id), std::move(cb));
}

void ConsumerImpl::seekAsync(const MessageId& id, StatusCallback cb) {
  WireMessageId w{static_cast<uint64_t>(id.ledgerId), static_cast<uint64_t>(id.entryId), -1, -1};
  uint64_t rid = client_->newRequestId();
  seek(Commands::newSeek(consumerId_, rid, w), rid, std::move(cb));
}

void ConsumerImpl::seekAsync(uint64_t publishTimeMs, StatusCallback cb) {
  uint64_t rid = client_->newRequestId();
  seek(Commands::newSeekByTimestamp(consumerId_, rid, publishTimeMs), rid, std::move(cb));
}

void ConsumerImpl::seek(Buffer frame, uint64_t requestId, StatusCallback cb) {
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  auto fn = [weak, frame = std::move(frame), requestId, cb = std::move(cb)]() mutable {
    auto self = weak.lock();
    if (!self) return;
    auto cnx = self->connection();
    if (!cnx) {
      cb(Status::closed("consumer not connected"));
      return;
    }
    // Messages that arrive until the answer come from the old position: drop them (Pulsar's
    // duringSeek).
    // Acks still grouped go first: sent after the seek they would ack the new position's
    // messages (Pulsar's client flushes its ack tracker before a seek too).
    self->flushAcks();
    self->seeking_ = true;
    const uint64_t epochAtSeek = self->epoch_.load();
    cnx->sendRequest(
        requestId, std::move(frame),
        [weak, epochAtSeek, cb = std::move(cb)](const Status& s, const proto::BaseCommand&) {
          auto self = weak.lock();
          if (!self) return;
          self->seeking_ = false;
          // The broker closes the consumer on a seek, and the answer can come after
          // the resubscription: then the queue already holds messages from the new
          // position, which must stay.
          if (s.isOk() && self->epoch_.load() == epochAtSeek) {
            size_t cleared = self->queue_->removeFrom(self.get());
            self->acks_.clearBatches();
            self->nacks_.clear();
            if (cleared > 0) {
              self->messageProcessed(self->epoch_.load(), static_cast<uint32_t>(cleared));
            }
          }
          cb(s);
        });
  };
  client_->loopForSlot(slot_).execute(std::move(fn));
}

void ConsumerImpl::getLastMessageIdAsync(std::function<void(Result<MessageId>)> cb) {
  uint64_t consumerId = consumerId_;
  int partition = partition_;
  sendRequest([consumerId](uint64_t rid) { return Commands::newGetLastMessageId(consumerId, rid); },
              [cb = std::move(cb), partition](const Status& s, const proto::BaseCommand& c) {
                if (!s.isOk()) {
                  cb(s);
                  return;
                }
                const auto& m = c.getlastmessageidresponse().last_message_id();
                MessageId id;
                id.ledgerId = static_cast<int64_t>(m.ledgerid());
                id.entryId = static_cast<int64_t>(m.entryid());
                id.partition = partition;
                id.batchIndex = m.batch_index();
                cb(id);
              });
}

void ConsumerImpl::unsubscribeAsync(StatusCallback cb) {
  flushAcks();
  uint64_t consumerId = consumerId_;
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  sendRequest([consumerId](uint64_t rid) { return Commands::newUnsubscribe(consumerId, rid); },
              [weak, cb = std::move(cb)](const Status& s, const proto::BaseCommand&) {
                auto self = weak.lock();
                if (self && s.isOk()) {
                  if (auto cnx = self->connection()) cnx->removeConsumer(self->consumerId_);
                  self->finishClose(Status::ok(), true);
                }
                cb(s);
              });
}

void ConsumerImpl::closeAsync(StatusCallback cb) {
  std::shared_ptr<ClientConnection> cnx;
  StatusCallback createCb;
  {
    MutexLock lock(mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) {
      state_ = State::kClosed;
    } else {
      closeCbs_.push_back(std::move(cb));
      if (state_ == State::kClosing) return;
      if (state_ == State::kReady) cnx = cnx_;
      state_ = State::kClosing;
      createCb = std::move(createCb_);
      createCb_ = nullptr;
      cb = nullptr;
    }
  }
  if (cb) {
    cb(Status::ok());
    return;
  }
  if (createCb) createCb(Status::closed("consumer closed"));
  if (!cnx) {
    finishClose(Status::ok(), false);
    return;
  }
  flushAcks();
  uint64_t id = client_->newRequestId();
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  cnx->sendRequest(id, Commands::newCloseConsumer(consumerId_, id),
                   [weak, cnx](const Status&, const proto::BaseCommand&) {
                     auto self = weak.lock();
                     if (!self) return;
                     cnx->removeConsumer(self->consumerId_);
                     self->finishClose(Status::ok(), false);
                   });
}

void ConsumerImpl::finishClose(const Status& s, bool unsubscribed) {
  std::vector<StatusCallback> cbs;
  {
    MutexLock lock(mu_);
    state_ = State::kClosed;
    cnx_.reset();
    cbs.swap(closeCbs_);
  }
  epoch_.fetch_add(1);
  if (owner_.expired()) {
    queue_->close();
  } else {
    queue_->removeFrom(this);
  }
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  client_->loopForSlot(slot_).execute([weak] {
    if (auto self = weak.lock()) {
      self->cancelReconnect();
      self->ackTimer_.cancel();
      self->nackTimer_.cancel();
    }
  });
  (void)unsubscribed;
  for (auto& c : cbs) c(s);
}

}  // namespace magnetar::client
