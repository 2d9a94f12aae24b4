#include "admin/http_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <latch>
#include <optional>
#include <thread>
#include <vector>

#include "base/logging.h"

namespace magnetar::admin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(60);

// One client connection: read a request, route it, write the response, repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<const Router> router, size_t maxBody)
      : stream_(std::move(socket)), router_(std::move(router)), maxBody_(maxBody) {}

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->doRead(); });
  }

 private:
  void doRead() {
    parser_.emplace();
    parser_->body_limit(maxBody_);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->onRead(ec); });
  }

  void onRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keepAlive_ = false;
      write(HttpResponse::error(413, "Request body too large"));
      return;
    }
    if (ec) {  // end_of_stream, timeout, reset: the client is gone
      close();
      return;
    }
    http::request<http::string_body> req = parser_->release();
    keepAlive_ = req.keep_alive();
    version_ = req.version();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    size_t q = r.target.find('?');
    r.path = r.target.substr(0, q);
    if (q != std::string::npos) r.query = r.target.substr(q + 1);
    r.contentType = std::string(req[http::field::content_type]);
    r.host = std::string(req[http::field::host]);
    r.body = std::move(req.body());
    auto self = shared_from_this();
    auto responded = std::make_shared<std::atomic<bool>>(false);
    router_->dispatch(r, [self, responded](HttpResponse resp) {
      if (responded->exchange(true)) return;  // a handler answered twice: keep the first
      asio::post(self->stream_.get_executor(),
                 [self, resp = std::move(resp)]() mutable { self->write(std::move(resp)); });
    });
  }

  void write(HttpResponse resp) {
    res_ = http::response<http::string_body>(static_cast<http::status>(resp.status), version_);
    res_.set(http::field::server, "magnetar");
    if (!resp.contentType.empty()) res_.set(http::field::content_type, resp.contentType);
    for (auto& [name, value] : resp.headers) res_.set(name, value);
    res_.body() = std::move(resp.body);
    res_.keep_alive(keepAlive_);
    res_.prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->keepAlive_) {
        self->close();
        return;
      }
      self->doRead();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::shared_ptr<const Router> router_;
  size_t maxBody_;
  bool keepAlive_ = false;
  unsigned version_ = 11;
};

}  // namespace

struct HttpServer::Impl {
  Impl(std::shared_ptr<const Router> r, Options o)
      : router(std::move(r)), options(std::move(o)), ioc(std::max(options.numThreads, 1)) {}

  void accept() {
    acceptor->async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        std::make_shared<Session>(std::move(s), router, options.maxBodyBytes)->start();
      } else {
        MLOG_WARN("HTTP accept failed: {}", ec.message());
      }
      accept();
    });
  }

  std::shared_ptr<const Router> router;
  Options options;
  asio::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  uint16_t boundPort = 0;
  bool stopped = false;
};

HttpServer::HttpServer(std::shared_ptr<const Router> router, Options options)
    : impl_(std::make_unique<Impl>(std::move(router), std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  Impl& m = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(m.options.bindAddress, ec);
  if (ec) {
    return Status::invalidArgument(
        fmt::format("bad bind address '{}': {}", m.options.bindAddress, ec.message()));
  }
  tcp::endpoint ep(address, m.options.port);
  m.acceptor.emplace(m.ioc);
  m.acceptor->open(ep.protocol(), ec);
  if (!ec) m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(ep, ec);
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    m.acceptor.reset();
    return Status::ioError(fmt::format("cannot listen on {}:{} (webServicePort): {}",
                                       m.options.bindAddress, m.options.port, ec.message()));
  }
  m.boundPort = m.acceptor->local_endpoint().port();
  m.accept();
  int n = std::max(m.options.numThreads, 1);
  std::latch named(n);  // return only once every thread carries its name
  for (int i = 0; i < n; ++i) {
    std::string name = n == 1 ? "pulsar-web" : fmt::format("pulsar-web-{}", i);
    m.threads.emplace_back([this, name, &named] {
      setThreadName(name);
      named.count_down();
      impl_->ioc.run();
    });
  }
  named.wait();
  return Status::ok();
}

uint16_t HttpServer::port() const { return impl_->boundPort; }

void HttpServer::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  m.ioc.stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  if (m.acceptor) {  // no thread runs the io_context any more
    beast::error_code ignored;
    m.acceptor->close(ignored);
  }
  // Sessions still queued in the io_context are destroyed with it (closing their sockets).
}

}  // namespace magnetar::admin
