#include "client/client_connection.h"

#include <boost/asio/post.hpp>
#include <vector>

#include "base/logging.h"
#include "client/consumer_impl.h"
#include "client/producer_impl.h"
#include "net/tls.h"
#include "protocol/commands.h"
#include "protocol/server_error.h"

namespace magnetar::client {

using protocol::Commands;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kTick = std::chrono::milliseconds(100);

const proto::BaseCommand& emptyCommand() {
  static const proto::BaseCommand kEmpty;
  return kEmpty;
}
}  // namespace

Status serverErrorStatus(proto::ServerError e, std::string_view message) {
  std::string msg = std::string(protocol::serverErrorName(e)) + ": " + std::string(message);
  switch (e) {
    case proto::ServiceNotReady:
    case proto::TooManyRequests:
    case proto::MetadataError:
    case proto::PersistenceError:
      return Status::closed(std::move(msg));
    case proto::ProducerBusy:
    case proto::ConsumerBusy:
    case proto::ProducerBlockedQuotaExceededError:
    case proto::ProducerBlockedQuotaExceededException:
      return Status::busy(std::move(msg));
    case proto::TopicNotFound:
    case proto::SubscriptionNotFound:
    case proto::ConsumerNotFound:
      return Status::notFound(std::move(msg));
    case proto::InvalidTopicName:
    case proto::IncompatibleSchema:
      return Status::invalidArgument(std::move(msg));
    case proto::ChecksumError:
      return Status::corruption(std::move(msg));
    case proto::UnsupportedVersionError:
      return Status::unsupported(std::move(msg));
    default:
      return Status::notAllowed(std::move(msg));
  }
}

bool isRetriable(const Status& s) {
  auto c = s.code();
  return c == StatusCode::kClosed || c == StatusCode::kIoError || c == StatusCode::kTimeout;
}

bool isFatalForReconnect(const Status& s) {
  auto c = s.code();
  return c == StatusCode::kNotAllowed || c == StatusCode::kInvalidArgument ||
         c == StatusCode::kNotFound || c == StatusCode::kUnsupported;
}

ClientConnection::ClientConnection(net::EventLoop& loop, boost::asio::ip::tcp::socket socket,
                                   std::string address, const ClientConfig& config,
                                   std::unique_ptr<net::TlsSession> tls)
    : net::Connection(loop, std::move(socket), std::move(tls)),
      address_(std::move(address)),
      config_(config),
      timer_(loop.context()) {}

ClientConnection::~ClientConnection() = default;

void ClientConnection::handshake(std::function<void(const Status&)> done, ClosedHook onClosed) {
  auto s = self();
  loop().execute([s, done = std::move(done), onClosed = std::move(onClosed)]() mutable {
    s->handshakeDone_ = std::move(done);
    s->closedHook_ = std::move(onClosed);
    s->handshakeDeadline_ = Clock::now() + s->config_.connectionTimeout;
    s->lastKeepAlive_ = Clock::now();
    s->start();
    s->send(Commands::newConnect(s->config_.clientVersion, s->config_.authMethodName,
                                 s->config_.authData));
    s->startTimer();
  });
}

void ClientConnection::sendRequest(uint64_t requestId, Buffer frame, ResponseCallback cb) {
  auto s = self();
  auto fn = [s, requestId, frame = std::move(frame), cb = std::move(cb)]() mutable {
    if (s->isClosed()) {
      cb(Status::closed("connection to " + s->address_ + " closed"), emptyCommand());
      return;
    }
    s->requests_[requestId] =
        PendingRequest{std::move(cb), Clock::now() + s->config_.operationTimeout};
    s->send(frame);
  };
  loop().dispatch(std::move(fn));
}

void ClientConnection::addProducer(uint64_t id, std::weak_ptr<ProducerImpl> p) {
  producers_[id] = std::move(p);
}
void ClientConnection::removeProducer(uint64_t id) { producers_.erase(id); }
void ClientConnection::addConsumer(uint64_t id, std::weak_ptr<ConsumerImpl> c) {
  consumers_[id] = std::move(c);
}
void ClientConnection::removeConsumer(uint64_t id) { consumers_.erase(id); }

bool ClientConnection::onData(const uint8_t* data, size_t len) {
  receivedSinceTick_ = true;
  Status s = decoder_.feed(data, len, *this);
  flushReceipts();
  if (!s.isOk()) {
    MLOG_WARN("client connection to {}: closing on bad input: {}", address_, s.toString());
    close();
    return false;
  }
  return true;
}

void ClientConnection::completeRequest(uint64_t requestId, const Status& s,
                                       const proto::BaseCommand& cmd, bool keepPending) {
  auto it = requests_.find(requestId);
  if (it == requests_.end()) {
    MLOG_DEBUG("client connection to {}: response to unknown request {}", address_, requestId);
    return;
  }
  if (keepPending) {
    it->second.cb(s, cmd);
    return;
  }
  auto cb = std::move(it->second.cb);
  requests_.erase(it);
  cb(s, cmd);
}

void ClientConnection::addReceipt(const proto::CommandSendReceipt& r) {
  uint64_t id = r.producer_id();
  if (!receipts_.empty() && id != receiptsProducerId_) flushReceipts();
  if (receipts_.empty()) {
    auto it = producers_.find(id);
    if (it == producers_.end()) return;
    receiptsProducer_ = it->second.lock();
    if (!receiptsProducer_) return;
    receiptsProducerId_ = id;
  }
  receipts_.push_back(Receipt{r.sequence_id(), r.highest_sequence_id(),
                              static_cast<int64_t>(r.message_id().ledgerid()),
                              static_cast<int64_t>(r.message_id().entryid())});
}

void ClientConnection::flushReceipts() {
  if (receipts_.empty()) return;
  auto producer = std::move(receiptsProducer_);
  receiptsProducer_.reset();
  producer->receiptsReceived(receipts_);
  receipts_.clear();
}

Status ClientConnection::onFrame(const proto::BaseCommand& cmd, Buffer entry) {
  using T = proto::BaseCommand;
  if (cmd.type() == T::SEND_RECEIPT) {
    addReceipt(cmd.send_receipt());
    return Status::ok();
  }
  flushReceipts();
  switch (cmd.type()) {
    case T::MESSAGE:
      if (auto c = consumerOf(cmd.message().consumer_id())) {
        c->messageReceived(cmd.message(), entry);
      }
      break;
    case T::SEND_ERROR:
      if (auto p = producerOf(cmd.send_error().producer_id())) {
        p->sendErrorReceived(cmd.send_error(), this);
      }
      break;
    case T::CONNECTED:
      handleConnected(cmd.connected());
      break;
    case T::PING:
      send(Commands::newPong());
      break;
    case T::PONG:
      waitingForPong_ = false;
      break;
    case T::ACTIVE_CONSUMER_CHANGE:
      if (auto c = consumerOf(cmd.active_consumer_change().consumer_id())) {
        c->activeConsumerChanged(cmd.active_consumer_change().is_active());
      }
      break;
    case T::CLOSE_PRODUCER:
      if (auto p = takeProducer(cmd.close_producer().producer_id())) p->closedByBroker(this);
      break;
    case T::CLOSE_CONSUMER:
      if (auto c = takeConsumer(cmd.close_consumer().consumer_id())) c->closedByBroker(this);
      break;
    case T::REACHED_END_OF_TOPIC:
      if (auto c = consumerOf(cmd.reachedendoftopic().consumer_id())) c->reachedEndOfTopic();
      break;
    default:
      if (!handleResponse(cmd)) {
        MLOG_WARN("client connection to {}: ignoring unexpected command {}", address_,
                  proto::BaseCommand::Type_Name(cmd.type()));
      }
      break;
  }
  return Status::ok();
}

void ClientConnection::handleConnected(const proto::CommandConnected& c) {
  ready_ = true;
  serverProtocolVersion_ = c.protocol_version();
  maxMessageSize_ = c.has_max_message_size() ? c.max_message_size()
                                             : static_cast<int>(protocol::kDefaultMaxMessageSize);
  if (auto done = std::move(handshakeDone_)) {
    handshakeDone_ = nullptr;
    done(Status::ok());
  }
}

namespace {
// The status a lookup-style response carries: OK unless its `response` field says Failed.
template <typename R>
Status failedResponseStatus(const R& r) {
  if (!r.has_response() || r.response() != R::Failed) return Status::ok();
  return serverErrorStatus(r.has_error() ? r.error() : proto::UnknownError, r.message());
}

// The status of a response with optional `error` and `message` fields (ACK_RESPONSE and the
// transaction responses): OK unless error is set.
template <typename R>
Status errorStatus(const R& r) {
  if (!r.has_error()) return Status::ok();
  return serverErrorStatus(r.error(), r.message());
}
}  // namespace

bool ClientConnection::handleResponse(const proto::BaseCommand& cmd) {
  using T = proto::BaseCommand;
  switch (cmd.type()) {
    case T::SUCCESS:
      completeRequest(cmd.success().request_id(), Status::ok(), cmd);
      return true;
    case T::ERROR:
      completeRequest(cmd.error().request_id(),
                      serverErrorStatus(cmd.error().error(), cmd.error().message()), cmd);
      return true;
    case T::PRODUCER_SUCCESS: {
      const auto& ps = cmd.producer_success();
      // WaitForExclusive: a first answer with producer_ready=false, the real one later.
      bool ready = !ps.has_producer_ready() || ps.producer_ready();
      completeRequest(ps.request_id(), Status::ok(), cmd, !ready);
      return true;
    }
    case T::LOOKUP_RESPONSE:
      completeRequest(cmd.lookuptopicresponse().request_id(),
                      failedResponseStatus(cmd.lookuptopicresponse()), cmd);
      return true;
    case T::PARTITIONED_METADATA_RESPONSE:
      completeRequest(cmd.partitionmetadataresponse().request_id(),
                      failedResponseStatus(cmd.partitionmetadataresponse()), cmd);
      return true;
    case T::GET_LAST_MESSAGE_ID_RESPONSE:
      completeRequest(cmd.getlastmessageidresponse().request_id(), Status::ok(), cmd);
      return true;
    case T::GET_TOPICS_OF_NAMESPACE_RESPONSE:
      completeRequest(cmd.gettopicsofnamespaceresponse().request_id(), Status::ok(), cmd);
      return true;
    case T::CONSUMER_STATS_RESPONSE:
      completeRequest(cmd.consumerstatsresponse().request_id(), Status::ok(), cmd);
      return true;
    case T::ACK_RESPONSE:
      if (cmd.ackresponse().has_request_id()) {
        completeRequest(cmd.ackresponse().request_id(), errorStatus(cmd.ackresponse()), cmd);
      }
      return true;
    case T::TC_CLIENT_CONNECT_RESPONSE:
      completeRequest(cmd.tcclientconnectresponse().request_id(),
                      errorStatus(cmd.tcclientconnectresponse()), cmd);
      return true;
    case T::NEW_TXN_RESPONSE:
      completeRequest(cmd.newtxnresponse().request_id(), errorStatus(cmd.newtxnresponse()), cmd);
      return true;
    case T::ADD_PARTITION_TO_TXN_RESPONSE:
      completeRequest(cmd.addpartitiontotxnresponse().request_id(),
                      errorStatus(cmd.addpartitiontotxnresponse()), cmd);
      return true;
    case T::ADD_SUBSCRIPTION_TO_TXN_RESPONSE:
      completeRequest(cmd.addsubscriptiontotxnresponse().request_id(),
                      errorStatus(cmd.addsubscriptiontotxnresponse()), cmd);
      return true;
    case T::END_TXN_RESPONSE:
      completeRequest(cmd.endtxnresponse().request_id(), errorStatus(cmd.endtxnresponse()), cmd);
      return true;
    default:
      return false;
  }
}

namespace {

// The live handler registered under `id`, or null.
template <class Handler>
std::shared_ptr<Handler> handlerOf(const std::unordered_map<uint64_t, std::weak_ptr<Handler>>& m,
                                   uint64_t id) {
  auto it = m.find(id);
  return it == m.end() ? nullptr : it->second.lock();
}

// handlerOf(), and `id` unregistered.
template <class Handler>
std::shared_ptr<Handler> takeHandler(std::unordered_map<uint64_t, std::weak_ptr<Handler>>& m,
                                     uint64_t id) {
  auto it = m.find(id);
  if (it == m.end()) return nullptr;
  auto h = it->second.lock();
  m.erase(it);
  return h;
}

}  // namespace

std::shared_ptr<ProducerImpl> ClientConnection::producerOf(uint64_t id) const {
  return handlerOf(producers_, id);
}

std::shared_ptr<ConsumerImpl> ClientConnection::consumerOf(uint64_t id) const {
  return handlerOf(consumers_, id);
}

std::shared_ptr<ProducerImpl> ClientConnection::takeProducer(uint64_t id) {
  return takeHandler(producers_, id);
}

std::shared_ptr<ConsumerImpl> ClientConnection::takeConsumer(uint64_t id) {
  return takeHandler(consumers_, id);
}

void ClientConnection::startTimer() {
  timer_.expires_after(kTick);
  auto s = self();
  timer_.async_wait([s](const boost::system::error_code& ec) {
    if (ec || s->isClosed()) return;
    s->onTimer();
  });
}

void ClientConnection::onTimer() {
  auto now = Clock::now();
  if (!ready_ && now >= handshakeDeadline_) {
    MLOG_WARN("client connection to {}: no CONNECTED within {} ms", address_,
              config_.connectionTimeout.count());
    close();
    return;
  }
  // Request timeouts.
  std::vector<uint64_t> expired;
  for (const auto& [id, r] : requests_) {
    if (r.deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    completeRequest(id, Status::error(StatusCode::kTimeout, "request timed out"), emptyCommand());
  }
  // Keep-alive: PING after an idle interval, close when the PING stays unanswered.
  if (ready_ && now - lastKeepAlive_ >= config_.keepAliveInterval) {
    lastKeepAlive_ = now;
    if (waitingForPong_ && !receivedSinceTick_) {
      MLOG_WARN("client connection to {}: no PONG within {} ms, closing", address_,
                config_.keepAliveInterval.count());
      close();
      return;
    }
    if (!receivedSinceTick_) {
      waitingForPong_ = true;
      send(Commands::newPing());
    }
    receivedSinceTick_ = false;
  }
  startTimer();
}

void ClientConnection::onClosed() {
  timer_.cancel();
  Status closed = Status::closed("connection to " + address_ + " closed");
  if (auto done = std::move(handshakeDone_)) {
    handshakeDone_ = nullptr;
    done(closed);
  }
  auto requests = std::move(requests_);
  requests_.clear();
  for (auto& [id, r] : requests) r.cb(closed, emptyCommand());
  auto producers = std::move(producers_);
  producers_.clear();
  auto consumers = std::move(consumers_);
  consumers_.clear();
  if (auto hook = std::move(closedHook_)) {
    closedHook_ = nullptr;
    hook(this);
  }
  for (auto& [id, w] : producers) {
    if (auto p = w.lock()) p->connectionClosed(this);
  }
  for (auto& [id, w] : consumers) {
    if (auto c = w.lock()) c->connectionClosed(this);
  }
}

}  // namespace magnetar::client
