#include "client/handler_base.h"

#include "client/client_connection.h"
#include "client/client_impl.h"

namespace magnetar::client {

HandlerBase::HandlerBase(const std::shared_ptr<ClientImpl>& client, std::string topic, uint64_t id)
    : client_(client),
      topic_(std::move(topic)),
      handlerId_(id),
      slot_(client_->slotFor(id)),
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

void HandlerBase::startConnecting() {
  createDeadline_ = std::chrono::steady_clock::now() + client_->config().operationTimeout;
  auto self = weakHandler().lock();
  client_->loopForSlot(slot_).execute([self] { self->grabConnection(); });
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
