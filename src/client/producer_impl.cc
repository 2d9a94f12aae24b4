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
using Clock = std::chrono::steady_clock;


ProducerImpl::ProducerImpl(std::shared_ptr<ClientImpl> client, std::string topic, int partition,
                           ProducerConfig config)
    : client_(std::move(client)),
      topic_(std::move(topic)),
      partition_(partition),
      config_(std::move(config)),
      producerId_(client_->newProducerId()),
      slot_(client_->slotFor(producerId_)),
      reconnectTimer_(client_->loopForSlot(slot_).context()),
      timer_(client_->loopForSlot(slot_).context()),
      backoff_(client_->config().initialBackoff, client_->config().maxBackoff),
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

void ProducerImpl::start(StatusCallback cb) {
  {
    MutexLock lock(mu_);
    createCb_ = std::move(cb);
    createDeadline_ = Clock::now() + client_->config().operationTimeout;
  }
  auto self = shared_from_this();
  client_->loopForSlot(slot_).execute([self] { self->connect(); });
}

// ---- Connecting ---------------------------------------------------------------------------

void ProducerImpl::connect() {
  {
    MutexLock lock(mu_);
    if (state_ != State::kConnecting) return;
  }
  if (client_->closed()) {
    createFailed(Status::closed("client closed"));
    return;
  }
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  client_->connectionForTopic(topic_, slot_, [weak](Result<std::shared_ptr<ClientConnection>> r) {
    auto self = weak.lock();
    if (!self) return;
    if (!r) {
      self->createFailed(r.status());
    } else {
      self->connectionReady(std::move(*r));
    }
  });
}

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
    if (!self) return;
    if (!s.isOk()) {
      cnx->removeProducer(self->producerId_);
      self->createFailed(s);
      return;
    }
    const auto& ps = c.producer_success();
    StatusCallback createCb;
    bool needFlush = false;
    bool arm = false;
    {
      MutexLock lock(self->mu_);
      if (self->state_ != State::kConnecting) {
        // Closed while the PRODUCER was in flight: undo it on the broker.
        cnx->removeProducer(self->producerId_);
        uint64_t id = self->client_->newRequestId();
        cnx->send(Commands::newCloseProducer(self->producerId_, id));
        return;
      }
      self->producerName_ = ps.producer_name();
      self->md_.set_producer_name(self->producerName_);
      if (!self->everConnected_) {
        self->everConnected_ = true;
        if (self->config_.initialSequenceId) {
          self->nextSequenceId_ = *self->config_.initialSequenceId;
        } else if (ps.last_sequence_id() >= 0) {
          self->nextSequenceId_ = static_cast<uint64_t>(ps.last_sequence_id()) + 1;
        }
        self->lastSequenceReceipted_ = static_cast<int64_t>(self->nextSequenceId_) - 1;
      }
      self->cnx_ = cnx;
      self->state_ = State::kReady;
      ++self->epoch_;
      // Re-send every frame not yet receipted, in order.
      self->flushedTo_ = self->headOffset_;
      needFlush = self->needFlushLocked();
      if (!self->timerArmed_ && (!self->pending_.empty() || !self->batch_.empty())) {
        self->timerArmed_ = arm = true;
      }
      createCb = std::move(self->createCb_);
      self->createCb_ = nullptr;
    }
    self->backoff_.reset();
    MLOG_DEBUG("producer {} on {} ready on {}", ps.producer_name(), self->topic_, cnx->address());
    if (needFlush) self->flush();
    if (arm) self->armTimer();
    if (createCb) createCb(Status::ok());
  });
}

void ProducerImpl::createFailed(const Status& s) {
  StatusCallback createCb;
  std::vector<SendCallback> failed;
  Completion done;
  bool retry = false;
  {
    MutexLock lock(mu_);
    if (state_ != State::kConnecting) return;
    bool clientClosed = client_->closed();
    if (!everConnected_) {
      if (clientClosed || !isRetriable(s) || Clock::now() >= createDeadline_) {
        state_ = State::kFailed;
        createCb = std::move(createCb_);
        createCb_ = nullptr;
      } else {
        retry = true;
      }
    } else if (clientClosed || isFatalForReconnect(s)) {
      MLOG_ERROR("producer {} on {}: giving up reconnecting: {}", producerName_, topic_,
                 s.toString());
      state_ = State::kFailed;
      encodeBatchLocked();
      failAllLocked(s, &failed, &done);
    } else {
      retry = true;
    }
  }
  if (retry) {
    MLOG_DEBUG("producer on {}: (re)connect failed, retrying: {}", topic_, s.toString());
    scheduleReconnect();
  }
  for (auto& cb : failed) cb(s, MessageId{});
  for (auto& [cb, st] : done) cb(st);
  if (createCb) createCb(s);
}

void ProducerImpl::scheduleReconnect() {
  auto& loop = client_->loopForSlot(slot_);
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  auto arm = [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->reconnectTimer_.expires_after(self->backoff_.next());
    self->reconnectTimer_.async_wait([weak](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->connect();
    });
  };
  loop.dispatch(std::move(arm));
}

void ProducerImpl::connectionClosed(ClientConnection* cnx) { lostConnection(cnx, false); }

void ProducerImpl::lostConnection(ClientConnection* cnx, bool byBroker) {
  std::vector<SendCallback> failed;
  Completion done;
  bool reconnect = false;
  {
    MutexLock lock(mu_);
    if (cnx_.get() != cnx) return;
    cnx_.reset();
    if (state_ == State::kReady) {
      state_ = State::kConnecting;
      reconnect = true;
    } else if (state_ == State::kClosing) {
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

// ---- Flush and close ------------------------------------------------------------------------

void ProducerImpl::flushAsync(StatusCallback cb) {
  bool needFlush = false;
  bool now = false;
  {
    MutexLock lock(mu_);
    encodeBatchLocked();
    needFlush = needFlushLocked();
    if (completed_ >= enqueued_) {
      now = true;
    } else {
      flushWaiters_.push_back(FlushWaiter{enqueued_, std::move(cb)});
    }
  }
  if (needFlush) postFlush();
  if (now) cb(Status::ok());
}

void ProducerImpl::closeAsync(StatusCallback cb) {
  std::vector<SendCallback> failed;
  Completion done;
  StatusCallback createCb;
  bool finishNow = false;
  bool waitPending = false;
  {
    MutexLock lock(mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) {
      finishNow = true;
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
    cb(Status::ok());
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
      self->reconnectTimer_.cancel();
    }
  });
  for (auto& f : failed) f(Status::closed("producer closed"), MessageId{});
  for (auto& [c, st] : done) c(st);
  for (auto& c : cbs) c(s);
}

}  // namespace magnetar::client
