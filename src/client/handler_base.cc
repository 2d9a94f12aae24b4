#include "client/handler_base.h"

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"

namespace magnetar::client {

HandlerBase::HandlerBase(const std::shared_ptr<ClientImpl>& client, std::string topic, uint64_t id,
                         const char* kind)
    : client_(client),
      topic_(std::move(topic)),
      handlerId_(id),
      slot_(client_->slotFor(id)),
      kind_(kind),
      reconnectTimer_(client_->loopForSlot(slot_).context()),
      backoff_(client_->config().initialBackoff, client_->config().maxBackoff) {}

HandlerBase::AfterFailure HandlerBase::afterFailure(const Status& s, bool everConnected) const {
  bool clientClosed = client_->closed();
  if (!everConnected) {
    bool final =
        clientClosed || !isRetriable(s) || std::chrono::steady_clock::now() >= createDeadline_;
    return final ? AfterFailure::kFailCreate : AfterFailure::kRetry;
  }
  return clientClosed || isFatalForReconnect(s) ? AfterFailure::kGiveUp : AfterFailure::kRetry;
}

void HandlerBase::startConnecting(StatusCallback createCb) {
  {
    MutexLock lock(mu_);
    createCb_ = std::move(createCb);
  }
  createDeadline_ = std::chrono::steady_clock::now() + client_->config().operationTimeout;
  auto self = weakHandler().lock();
  client_->loopForSlot(slot_).execute([self] { self->grabConnection(); });
}

bool HandlerBase::connecting() const {
  MutexLock lock(mu_);
  return state_ == State::kConnecting;
}

void HandlerBase::connectFailed(const Status& s) {
  StatusCallback createCb;
  std::function<void()> afterUnlock;
  AfterFailure next;
  {
    MutexLock lock(mu_);
    if (state_ != State::kConnecting) return;
    next = afterFailure(s, everConnected_);
    if (next != AfterFailure::kRetry) state_ = State::kFailed;
    if (next == AfterFailure::kFailCreate) {
      createCb = std::move(createCb_);
      createCb_ = nullptr;
    } else if (next == AfterFailure::kGiveUp) {
      afterUnlock = gaveUpLocked(s);
    }
  }
  if (next == AfterFailure::kRetry) {
    MLOG_DEBUG("{} on {}: (re)connect failed, retrying: {}", kind_, topic_, s.toString());
    scheduleReconnect();
  }
  if (afterUnlock) afterUnlock();
  if (createCb) createCb(s);
}

bool HandlerBase::registrationFailed(ClientConnection& cnx, const Status& s) {
  if (s.isOk()) return false;
  unregisterFrom(cnx, /*closeOnBroker=*/false);
  connectFailed(s);
  return true;
}

bool HandlerBase::readyLocked(const std::shared_ptr<ClientConnection>& cnx,
                              StatusCallback* createCb) {
  if (state_ != State::kConnecting) {
    unregisterFrom(*cnx, /*closeOnBroker=*/true);
    return false;
  }
  everConnected_ = true;
  cnx_ = cnx;
  state_ = State::kReady;
  *createCb = std::move(createCb_);
  createCb_ = nullptr;
  return true;
}

bool HandlerBase::dropConnectionLocked(ClientConnection* cnx, bool* reconnect) {
  if (cnx_.get() != cnx) return false;
  cnx_.reset();
  if (state_ == State::kReady) {
    state_ = State::kConnecting;
    *reconnect = true;
  }
  return true;
}

void HandlerBase::grabConnection() {
  if (!connecting()) return;
  if (client_->closed()) {
    connectFailed(Status::closed("client closed"));
    return;
  }
  std::weak_ptr<HandlerBase> weak = weakHandler();
  client_->connectionForTopic(topic_, slot_, [weak](Result<std::shared_ptr<ClientConnection>> r) {
    auto self = weak.lock();
    if (!self) return;
    if (!r) {
      self->connectFailed(r.status());
    } else {
      self->connectionReady(std::move(*r));
    }
  });
}

void HandlerBase::scheduleReconnect() {
  std::weak_ptr<HandlerBase> weak = weakHandler();
  client_->loopForSlot(slot_).dispatch([weak] {
    auto self = weak.lock();
    if (!self) return;
    self->reconnectTimer_.expires_after(self->backoff_.next());
    self->reconnectTimer_.async_wait([weak](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->grabConnection();
    });
  });
}

}  // namespace magnetar::client
