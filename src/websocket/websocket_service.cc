#include "websocket/websocket_service.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <deque>
#include <mutex>

#include "admin/rest_util.h"
#include "base/logging.h"
#include "broker/common/topic_name.h"
#include "broker/service/broker_service.h"
#include "client/client.h"
#include "websocket/endpoints.h"
#include "websocket/ws_protocol.h"

namespace magnetar::websocket {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ws = beast::websocket;

struct WebSocketService::Impl {
  Impl(broker::BrokerService& b, WebSocketOptions o) : broker(b), options(std::move(o)) {
    client::ClientConfig c;
    c.ioThreads = std::max(options.numIoThreads, 1);
    c.connectionsPerBroker = std::max(options.connectionsPerBroker, 1);
    c.authMethodName = options.authMethodName;
    c.authData = options.authData;
    c.clientVersion = "magnetar-websocket";
    client = std::make_shared<client::Client>(options.brokerServiceUrl, c);
  }

  broker::BrokerService& broker;
  const WebSocketOptions options;
  std::mutex mu;                           // guards client's reset in stop()
  std::shared_ptr<client::Client> client;  // null once stopped
  bool stopped = false;
};

namespace {

// An HTTP answer instead of the handshake (Pulsar's response.sendError in the handlers).
struct Refusal {
  int status;
  std::string reason;
};

// Pulsar's AbstractWebSocketHandler.getErrorCode for a failed create/subscribe.
int statusOfCreateError(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kBusy:
      return 409;
    case StatusCode::kNotAllowed:
      return 403;
    case StatusCode::kTimeout:
      return 504;
    case StatusCode::kClosed:
      return 503;
    default:
      return 500;
  }
}

// The role of the request (Pulsar's checkAuth): the token of the Authorization header or, as
// WebSocketHttpServletRequestWrapper, of the `token` query parameter; then the produce or
// consume permission; a consumer's `subscription` as Pulsar's ConsumerHandler checks it
// (canConsumeAsync: the subscription's role list, subscription_auth_mode Prefix; a reader's is
// not checked). nullopt: allowed.
std::optional<Refusal> checkAccess(broker::BrokerService& b, const admin::HttpRequest& req,
                                   const broker::TopicName& topic, EndpointKind kind,
                                   const std::string& subscription) {
  const auto& authn = b.authentication();
  std::string role;
  if (authn.enabled()) {
    std::optional<std::string> authorization = req.authorization;
    if (!authorization) {
      if (auto token = admin::queryParam(req, "token")) authorization = "Bearer " + *token;
    }
    auto who = authn.authenticateHttp(authorization, req.peerCommonName);
    if (!who) return Refusal{401, "Failed to authenticate"};
    role = who->role;
  }
  auto& authz = b.authorization();
  if (!authz.enabled()) return std::nullopt;
  auto op = kind == EndpointKind::kProducer ? broker::TopicOperation::kProduce
                                            : broker::TopicOperation::kConsume;
  const std::string sub = kind == EndpointKind::kConsumer ? subscription : std::string();
  if (authz.allowTopicOperation(topic, role, op, sub)) return std::nullopt;
  broker::AuthorizationStats::record(op);
  // Prefix mode: Pulsar's check throws, and Jetty answers the handshake 500.
  if (authz.subscriptionPrefixError(topic, role, sub)) return Refusal{500, "Server error"};
  return Refusal{403, "Not authorized"};
}

template <typename Stream>
class Session final : public Channel, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(std::shared_ptr<WebSocketService::Impl> service, Stream stream,
          admin::UpgradeHook::Request req, admin::HttpRequest parsed)
      : service_(std::move(service)),
        ws_(std::move(stream)),
        req_(std::move(req)),
        parsed_(std::move(parsed)),
        pingTimer_(ws_.get_executor()) {}

  // On the connection's strand: checks the request, creates the producer or consumer, then
  // completes the handshake (or answers the HTTP error Pulsar answers).
  void start() {
    auto ep = parseEndpoint(parsed_.path);
    if (!ep.isOk()) {
      // Pulsar: no servlet 404; a bad path under a servlet fails the handler's constructor
      // (500), the consumer's subscription check 400.
      int status = ep.status().code() == StatusCode::kNotFound ? 404 : 500;
      if (parsed_.path.rfind("/ws/v2/consumer/", 0) == 0) status = 400;
      return refuse({status, ep.status().message()});
    }
    endpoint_ = std::move(*ep);
    auto topic = broker::TopicName::parse(endpoint_.topic);
    if (!topic.isOk()) return refuse({500, topic.status().message()});
    auto lookup = [this](std::string_view name) { return admin::queryParam(parsed_, name); };
    if (endpoint_.kind == EndpointKind::kProducer) {
      if (auto r = checkAccess(service_->broker, parsed_, *topic, endpoint_.kind, {}))
        return refuse(*r);
      auto config = producerParams(lookup);
      if (!config.isOk()) return refuse({400, config.status().message()});
      return createProducer(*config);
    }
    const bool reader = endpoint_.kind == EndpointKind::kReader;
    auto params = consumerParams(lookup, reader);
    if (!params.isOk()) return refuse({400, params.status().message()});
    if (auto r = checkAccess(service_->broker, parsed_, *topic, endpoint_.kind,
                             endpoint_.subscription)) {
      return refuse(*r);
    }
    std::string subscription = endpoint_.subscription;
    if (reader) subscription = "reader-" + randomSuffix();
    subscribe(subscription, std::move(*params));
  }

  void sendText(std::string text) override {
    if (closing_) return;
    outbox_.push_back(std::move(text));
    if (!writing_ && open_) doWrite();
  }

  void closeSession(uint16_t code, std::string reason) override {
    if (closing_ || !open_) return;
    closing_ = true;
    if (reason.size() > 120) reason.resize(120);  // a close frame's reason: at most 123 bytes
    closeReason_ = ws::close_reason(static_cast<ws::close_code>(code), reason);
    if (!writing_) doClose();
  }

  void runOnStrand(std::function<void()> fn) override {
    asio::post(ws_.get_executor(), [self = this->shared_from_this(), fn = std::move(fn)] { fn(); });
  }

 private:
  static std::string randomSuffix() {
    static std::atomic<uint64_t> counter{0};
    uint64_t v =
        (static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) << 8) ^
        counter.fetch_add(1);
    return fmt::format("{:010x}", v & 0xffffffffffULL);
  }

  // The service's client (shared: stop() may run meanwhile); null once stopped.
  std::shared_ptr<client::Client> clientOrNull() {
    std::lock_guard<std::mutex> lock(service_->mu);
    return service_->client;
  }

  void createProducer(const client::ProducerConfig& config) {
    std::shared_ptr<client::Client> c = clientOrNull();
    if (!c) return refuse({503, "WebSocket service stopped"});
    auto self = this->shared_from_this();
    c->createProducerAsync(endpoint_.topic, config, [self](Result<client::Producer> p) {
      self->runOnStrand([self, p = std::move(p)]() mutable {
        if (!p.isOk()) return self->refuseCreate(p.status());
        self->handler_ = makeProducerEndpoint(self->weak_from_this(), std::move(*p));
        self->accept();
      });
    });
  }

  void subscribe(const std::string& subscription, ConsumerParams params) {
    std::shared_ptr<client::Client> c = clientOrNull();
    if (!c) return refuse({503, "WebSocket service stopped"});
    auto self = this->shared_from_this();
    const bool reader = endpoint_.kind == EndpointKind::kReader;
    c->subscribeAsync(endpoint_.topic, subscription, params.config,
                      [self, params, reader](Result<client::Consumer> consumer) {
                        self->runOnStrand([self, params, reader, consumer]() mutable {
                          if (!consumer.isOk()) return self->refuseCreate(consumer.status());
                          self->handler_ = makeConsumerEndpoint(
                              self->weak_from_this(), std::move(*consumer),
                              params.config.receiverQueueSize, params.pullMode, reader);
                          self->accept();
                        });
                      });
  }

  void refuseCreate(const Status& s) {
    refuse({statusOfCreateError(s), "Failed to create producer/consumer: " + s.message()});
  }

  // Pulsar (Jetty) answers an HTML error page; the status and reason are what clients read.
  void refuse(const Refusal& r) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), req_.version());
    res->set(http::field::server, "magnetar");
    res->set(http::field::content_type, "text/plain;charset=utf-8");
    res->body() = fmt::format("Error {} {}\n", r.status, r.reason);
    res->keep_alive(false);
    res->prepare_payload();
    auto& stream = ws_.next_layer();
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    http::async_write(stream, *res,
                      [self = this->shared_from_this(), res](beast::error_code, size_t) {
                        beast::error_code ignored;
                        beast::get_lowest_layer(self->ws_).socket().shutdown(
                            asio::ip::tcp::socket::shutdown_both, ignored);
                        beast::get_lowest_layer(self->ws_).close();
                      });
  }

  void accept() {
    const WebSocketOptions& o = service_->options;
    ws::stream_base::timeout t;
    t.handshake_timeout = std::chrono::seconds(30);
    t.idle_timeout =
        o.sessionIdleTimeout.count() > 0
            ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(o.sessionIdleTimeout)
            : ws::stream_base::none();
    t.keep_alive_pings = false;
    ws_.set_option(t);
    ws_.read_message_max(o.maxTextFrameSize);
    ws_.set_option(ws::stream_base::decorator(
        [](ws::response_type& res) { res.set(http::field::server, "magnetar"); }));
    ws_.async_accept(req_, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->ended();
      self->open_ = true;
      self->handler_->onOpen();
      if (!self->outbox_.empty() && !self->writing_) self->doWrite();
      self->schedulePing();
      self->doRead();
    });
  }

  void doRead() {
    ws_.async_read(buffer_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->ended();
      if (!self->closing_ && self->handler_) {
        const auto data = self->buffer_.data();
        std::string_view text(static_cast<const char*>(data.data()), data.size());
        self->handler_->onText(text);
      }
      self->buffer_.consume(self->buffer_.size());
      self->doRead();
    });
  }

  void doWrite() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(outbox_.front()),
                    [self = this->shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      if (ec) return self->ended();
                      self->outbox_.pop_front();
                      if (self->closing_) return self->doClose();
                      if (!self->outbox_.empty()) self->doWrite();
                    });
  }

  void doClose() {
    outbox_.clear();
    ws_.async_close(closeReason_,
                    [self = this->shared_from_this()](beast::error_code) { self->ended(); });
  }

  // webSocketPingDurationSeconds: a PING every period while the session is open.
  void schedulePing() {
    int period = service_->options.pingDurationSeconds;
    if (period <= 0 || ended_) return;
    pingTimer_.expires_after(std::chrono::seconds(period));
    pingTimer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->ended_ || self->closing_) return;
      self->ws_.async_ping("PING", [self](beast::error_code e) {
        if (!e) self->schedulePing();
      });
    });
  }

  // The session is over (closed by either side, an error, or a frame too large): the
  // producer or consumer goes.
  void ended() {
    if (ended_) return;
    ended_ = true;
    open_ = false;
    pingTimer_.cancel();
    if (handler_) handler_->onClose();
    handler_.reset();
  }

  std::shared_ptr<WebSocketService::Impl> service_;
  ws::stream<Stream> ws_;
  admin::UpgradeHook::Request req_;
  admin::HttpRequest parsed_;
  Endpoint endpoint_;
  std::shared_ptr<EndpointHandler> handler_;
  beast::flat_buffer buffer_;
  std::deque<std::string> outbox_;
  ws::close_reason closeReason_;
  asio::steady_timer pingTimer_;
  bool open_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool ended_ = false;
};

template <typename Stream>
void startSession(const std::shared_ptr<WebSocketService::Impl>& impl, Stream stream,
                  admin::UpgradeHook::Request req, admin::HttpRequest parsed) {
  std::make_shared<Session<Stream>>(impl, std::move(stream), std::move(req), std::move(parsed))
      ->start();
}

}  // namespace

WebSocketService::WebSocketService(broker::BrokerService& broker, WebSocketOptions options)
    : impl_(std::make_shared<Impl>(broker, std::move(options))) {}

WebSocketService::~WebSocketService() { stop(); }

bool WebSocketService::accepts(const admin::HttpRequest& request) const {
  return request.path.rfind("/ws/", 0) == 0;
}

void WebSocketService::takePlain(PlainStream stream, Request request, admin::HttpRequest parsed) {
  startSession(impl_, std::move(stream), std::move(request), std::move(parsed));
}

void WebSocketService::takeTls(TlsStream stream, Request request, admin::HttpRequest parsed) {
  startSession(impl_, std::move(stream), std::move(request), std::move(parsed));
}

void WebSocketService::stop() {
  std::shared_ptr<client::Client> client;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    client = std::move(impl_->client);
  }
  if (client) (void)client->close();
}

}  // namespace magnetar::websocket
