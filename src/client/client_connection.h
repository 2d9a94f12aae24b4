// ClientConnection: the client side of one TCP connection to a broker (pulsar-client-cpp's
// ClientConnection). Internal to src/client.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/client_config.h"
#include "client/producer_impl.h"
#include "net/connection.h"
#include "protocol/frame.h"

namespace magnetar::client {

class ProducerImpl;
class ConsumerImpl;

// Status of a failed request from the broker's ServerError. Errors after which Pulsar clients retry
// (ServiceNotReady, TooManyRequests, ...) become kClosed, like a lost connection; see isRetriable.
Status serverErrorStatus(proto::ServerError e, std::string_view message);
// True for failures a create/subscribe/lookup retries after a back-off: lost or not yet ready
// connections (kClosed, kIoError) and timeouts.
bool isRetriable(const Status& s);
// True for failures after which a producer/consumer stops reconnecting (fenced, terminated, not
// allowed, topic gone): kNotAllowed, kInvalidArgument, kNotFound, kUnsupported.
bool isFatalForReconnect(const Status& s);

// Thread: lives on its client I/O loop. sendRequest() and the inherited send()/write() from any
// thread; add*/remove* and everything else on the loop.
class ClientConnection final : public net::Connection, public protocol::FrameHandler {
 public:
  // Runs once on the loop: the response (OK, `cmd` is it), an ERROR or failed response (status,
  // `cmd` is it), or a timeout / closed connection (status, `cmd` is an empty command).
  using ResponseCallback = std::function<void(const Status&, const proto::BaseCommand& cmd)>;
  using ClosedHook = std::function<void(ClientConnection*)>;

  // tls: a client TlsSession for pulsar+ssl://, else null.
  ClientConnection(net::EventLoop& loop, boost::asio::ip::tcp::socket socket, std::string address,
                   const ClientConfig& config, std::unique_ptr<net::TlsSession> tls);
  ~ClientConnection() override;

  // Starts reading, sends CONNECT and calls done on the loop when CONNECTED arrives (OK), or the
  // connection fails or connectionTimeout passes (error; the connection is then closed).
  // onClosed runs on the loop once the connection is closed after a successful handshake.
  void handshake(std::function<void(const Status&)> done, ClosedHook onClosed);

  // Sends `frame` and routes the answer with `requestId` to cb (timeout: operationTimeout).
  // Any thread.
  void sendRequest(uint64_t requestId, Buffer frame, ResponseCallback cb);

  // Route SEND_RECEIPT/SEND_ERROR/CLOSE_PRODUCER and MESSAGE/ACTIVE_CONSUMER_CHANGE/
  // CLOSE_CONSUMER frames by id. Loop thread.
  void addProducer(uint64_t id, std::weak_ptr<ProducerImpl> p);
  void removeProducer(uint64_t id);
  void addConsumer(uint64_t id, std::weak_ptr<ConsumerImpl> c);
  void removeConsumer(uint64_t id);

  // "host:port" of the broker.
  const std::string& address() const { return address_; }
  bool ready() const { return ready_ && !isClosed(); }
  int serverProtocolVersion() const { return serverProtocolVersion_; }
  // The broker's max_message_size (CONNECTED), kDefaultMaxMessageSize when not announced.
  int maxMessageSize() const { return maxMessageSize_; }

 protected:
  bool onData(const uint8_t* data, size_t len) override;
  void onClosed() override;
  Status onFrame(const proto::BaseCommand& cmd, Buffer entry) override;

 private:
  struct PendingRequest {
    ResponseCallback cb;
    std::chrono::steady_clock::time_point deadline;
  };
  // SEND_RECEIPTs are collected per producer and handed over in one call (flushReceipts) before
  // any other frame is handled and at the end of each read.
  void addReceipt(const proto::CommandSendReceipt& r);
  void flushReceipts();
  void completeRequest(uint64_t requestId, const Status& s, const proto::BaseCommand& cmd,
                       bool keepPending = false);
  void handleConnected(const proto::CommandConnected& c);
  // Completes the request a response frame answers; false when `cmd` is not a response.
  bool handleResponse(const proto::BaseCommand& cmd);
  // The producer/consumer registered under `id` (null: none, or already gone); take* also
  // unregisters it.
  std::shared_ptr<ProducerImpl> producerOf(uint64_t id) const;
  std::shared_ptr<ConsumerImpl> consumerOf(uint64_t id) const;
  std::shared_ptr<ProducerImpl> takeProducer(uint64_t id);
  std::shared_ptr<ConsumerImpl> takeConsumer(uint64_t id);
  void startTimer();
  void onTimer();
  std::shared_ptr<ClientConnection> self() {
    return std::static_pointer_cast<ClientConnection>(shared_from_this());
  }

  const std::string address_;
  const ClientConfig& config_;
  protocol::FrameDecoder decoder_;
  boost::asio::steady_timer timer_;
  std::function<void(const Status&)> handshakeDone_;
  std::chrono::steady_clock::time_point handshakeDeadline_;
  ClosedHook closedHook_;
  bool ready_ = false;
  int serverProtocolVersion_ = 0;
  int maxMessageSize_ = 0;
  std::unordered_map<uint64_t, PendingRequest> requests_;
  std::unordered_map<uint64_t, std::weak_ptr<ProducerImpl>> producers_;
  std::unordered_map<uint64_t, std::weak_ptr<ConsumerImpl>> consumers_;
  std::vector<Receipt> receipts_;
  uint64_t receiptsProducerId_ = 0;
  std::shared_ptr<ProducerImpl> receiptsProducer_;
  // Keep-alive (loop thread): anything received since the last tick, PING outstanding.
  bool receivedSinceTick_ = true;
  bool waitingForPong_ = false;
  std::chrono::steady_clock::time_point lastKeepAlive_;
};

}  // namespace magnetar::client
