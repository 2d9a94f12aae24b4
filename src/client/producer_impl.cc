#include "client/producer_impl.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "protocol/commands.h"
#include "protocol/constants.h"

namespace magnetar::client {

using protocol::Commands;

ProducerImpl::ProducerImpl(const std::shared_ptr<ClientImpl>& client, std::string topic,
                           int partition, ProducerConfig config)
    : HandlerBase(client, std::move(topic), client->newProducerId(), "producer"),
      partition_(partition),
      config_(std::move(config)),
      producerId_(handlerId_),
      timer_(client_->loopForSlot(slot_).context()),
      batch_(std::max(1, config_.batchingMaxMessages),
             std::max<size_t>(1, config_.batchingMaxBytes), config_.batchingGroupByKey) {
  producerName_ = config_.producerName;
  size_t max = static_cast<size_t>(std::max(0, config_.maxPendingMessages));
  notifyBelow_ = max - max / 4;
}

ProducerImpl::~ProducerImpl() {
  // Dropped without close(): release the producer on the broker (fire and forget).
  if (state_ == State::kReady && cnx_) {
    cnx_->send(Commands::newCloseProducer(producerId_, client_->newRequestId()));
  }
}

std::string ProducerImpl::producerName() const {
  MutexLock lock(mu_);
  return producerName_;
}

int64_t ProducerImpl::lastSequenceId() const {
  MutexLock lock(mu_);
  return lastSequenceReceipted_;
}

bool ProducerImpl::isConnected() const {
  MutexLock lock(mu_);
  return state_ == State::kReady && cnx_ != nullptr;
}

size_t ProducerImpl::pendingMessages() const {
  MutexLock lock(mu_);
  return pendingMessages_;
}

void ProducerImpl::start(StatusCallback cb) { startConnecting(std::move(cb)); }

// ---- Connecting ---------------------------------------------------------------------------

void ProducerImpl::connectionReady(std::shared_ptr<ClientConnection> cnx) {
  proto::CommandProducer cmd;
  uint64_t requestId = client_->newRequestId();
  {
    MutexLock lock(mu_);
    if (state_ != State::kConnecting) return;
    cmd.set_topic(topic_);
    cmd.set_producer_id(producerId_);
    cmd.set_request_id(requestId);
    if (!producerName_.empty()) cmd.set_producer_name(producerName_);
    cmd.set_user_provided_producer_name(!config_.producerName.empty());
    cmd.set_producer_access_mode(static_cast<proto::ProducerAccessMode>(config_.accessMode));
    cmd.set_epoch(epoch_);
  }
  cnx->addProducer(producerId_, weak_from_this());
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  cnx->sendRequest(requestId, Commands::newProducer(cmd), [weak, cnx](const Status& s,
                                                                      const proto::BaseCommand& c) {
    auto self = weak.lock();
    if (!self || self->registrationFailed(*cnx, s)) return;
    const auto& ps = c.producer_success();
    StatusCallback createCb;
    bool needFlush = false;
    bool arm = false;
    {
      MutexLock lock(self->mu_);
      bool first = !self->everConnected_;
      // Closed while the PRODUCER was in flight: undone on the broker.
      if (!self->readyLocked(cnx, &createCb)) return;
      self->producerName_ = ps.producer_name();
      self->md_.set_producer_name(self->producerName_);
      if (first) {
        if (self->config_.initialSequenceId) {
          self->nextSequenceId_ = *self->config_.initialSequenceId;
        } else if (ps.last_sequence_id() >= 0) {
          self->nextSequenceId_ = static_cast<uint64_t>(ps.last_sequence_id()) + 1;
        }
        self->lastSequenceReceipted_ = static_cast<int64_t>(self->nextSequenceId_) - 1;
      }
      ++self->epoch_;
      // Re-send every frame not yet receipted, in order.
      self->flushedTo_ = self->headOffset_;
      needFlush = self->needFlushLocked();
      if (!self->timerArmed_ && (!self->pending_.empty() || !self->batch_.empty())) {
        self->timerArmed_ = arm = true;
      }
    }
    self->resetBackoff();
    MLOG_DEBUG("producer {} on {} ready on {}", ps.producer_name(), self->topic_, cnx->address());
    if (needFlush) self->flush();
    if (arm) self->armTimer();
    if (createCb) createCb(Status::ok());
  });
}

void ProducerImpl::unregisterFrom(ClientConnection& cnx, bool closeOnBroker) {
  cnx.removeProducer(producerId_);
  if (closeOnBroker) cnx.send(Commands::newCloseProducer(producerId_, client_->newRequestId()));
}

void ProducerImpl::connectionClosed(ClientConnection* cnx) { lostConnection(cnx, false); }

void ProducerImpl::lostConnection(ClientConnection* cnx, bool byBroker) {
  std::vector<SendCallback> failed;
  Completion done;
  bool reconnect = false;
  {
    MutexLock lock(mu_);
    if (!dropConnectionLocked(cnx, &reconnect)) return;
    if (state_ == State::kClosing) {
      // Closing and the connection is gone: what is pending cannot be receipted any more.
      encodeBatchLocked();
      failAllLocked(Status::closed("producer closed"), &failed, &done);
    }
  }
  if (reconnect) {
    MLOG_INFO("producer {} on {}: {}, reconnecting", producerName(), topic_,
              byBroker ? "closed by the broker" : "connection lost");
    scheduleReconnect();
  }
  for (auto& cb : failed) cb(Status::closed("producer closed"), MessageId{});
  for (auto& [cb, st] : done) cb(st);
}

void ProducerImpl::closedByBroker(ClientConnection* cnx) { lostConnection(cnx, true); }

std::function<void()> ProducerImpl::gaveUpLocked(const Status& s) {
  MLOG_ERROR("producer {} on {}: giving up reconnecting: {}", producerName_, topic_, s.toString());
  // Every pending send fails with s.
  auto failed = std::make_shared<std::vector<SendCallback>>();
  auto done = std::make_shared<Completion>();
  encodeBatchLocked();
  failAllLocked(s, failed.get(), done.get());
  return [failed, done, s] {
    for (auto& cb : *failed) cb(s, MessageId{});
    for (auto& [cb, st] : *done) cb(st);
  };
}

// ---- Flush and close ------------------------------------------------------------------------

void ProducerImpl::flushAsync(StatusCallback cb) {
  bool needFlush = false;
  StatusCallback doneNow;
  {
    MutexLock lock(mu_);
    encodeBatchLocked();
    needFlush = needFlushLocked();
    if (completed_ >= enqueued_) {
      doneNow = std::move(cb);
    } else {
      flushWaiters_.push_back(FlushWaiter{enqueued_, std::move(cb)});
    }
  }
  if (needFlush) postFlush();
  if (doneNow) doneNow(Status::ok());
}

void ProducerImpl::closeAsync(StatusCallback cb) {
  std::vector<SendCallback> failed;
  Completion done;
  StatusCallback createCb;
  StatusCallback finishNow;
  bool waitPending = false;
  {
    MutexLock lock(mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) {
      finishNow = std::move(cb);
    } else {
      closeCbs_.push_back(std::move(cb));
      if (state_ == State::kClosing) return;
      bool connected = state_ == State::kReady && cnx_ != nullptr;
      state_ = State::kClosing;
      encodeBatchLocked();
      if (!connected) {
        failAllLocked(Status::closed("producer closed"), &failed, &done);
        createCb = std::move(createCb_);
        createCb_ = nullptr;
      } else {
        waitPending = true;
      }
    }
  }
  if (finishNow) {
    finishNow(Status::ok());
    return;
  }
  for (auto& f : failed) f(Status::closed("producer closed"), MessageId{});
  for (auto& [c, st] : done) c(st);
  if (createCb) createCb(Status::closed("producer closed"));
  if (!waitPending) {
    finishClose(Status::ok());
    return;
  }
  // Wait for the pending messages, then close on the broker.
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  flushAsync([weak](const Status&) {
    auto self = weak.lock();
    if (!self) return;
    std::shared_ptr<ClientConnection> cnx;
    {
      MutexLock lock(self->mu_);
      cnx = self->cnx_;
    }
    if (!cnx) {
      self->finishClose(Status::ok());
      return;
    }
    uint64_t id = self->client_->newRequestId();
    cnx->sendRequest(id, Commands::newCloseProducer(self->producerId_, id),
                     [weak, cnx](const Status& s, const proto::BaseCommand&) {
                       auto self = weak.lock();
                       if (!self) return;
                       cnx->removeProducer(self->producerId_);
                       self->finishClose(Status::ok());
                     });
  });
}

void ProducerImpl::finishClose(const Status& s) {
  std::vector<StatusCallback> cbs;
  std::vector<SendCallback> failed;
  Completion done;
  {
    MutexLock lock(mu_);
    state_ = State::kClosed;
    cnx_.reset();
    failAllLocked(Status::closed("producer closed"), &failed, &done);
    cbs.swap(closeCbs_);
  }
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  client_->loopForSlot(slot_).execute([weak] {
    if (auto self = weak.lock()) {
      self->timer_.cancel();
      self->cancelReconnect();
    }
  });
  for (auto& f : failed) f(Status::closed("producer closed"), MessageId{});
  for (auto& [c, st] : done) c(st);
  for (auto& c : cbs) c(s);
}

}  // namespace magnetar::client
