#include "admin/http_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <chrono>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "net/tls.h"
#include "net/tls_peer.h"

namespace magnetar::admin {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kIdleTimeout = std::chrono::seconds(60);
// Beast's default header limit (8 KB, Pulsar's httpMaxRequestHeaderSize default).
constexpr size_t kMaxHeaderBytes = 8192;

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One client connection: read a request, route it, write the response, repeat while keep-alive.
// Stream: PlainStream (webServicePort) or TlsStream (webServicePortTls, handshake first).
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  // ioc: the server's io_context; a pending answer keeps it alive (see onRead). streamArgs: the
  // socket, and for TLS the asio::ssl::context.
  template <typename... StreamArgs>
  Session(std::shared_ptr<const Router> router, std::shared_ptr<UpgradeHook> upgrade,
          size_t maxBody, std::weak_ptr<asio::io_context> ioc, StreamArgs&&... streamArgs)
      : stream_(std::forward<StreamArgs>(streamArgs)...),
        router_(std::move(router)),
        upgrade_(std::move(upgrade)),
        maxBody_(maxBody),
        ioc_(std::move(ioc)) {}

  void start() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (std::is_same_v<Stream, TlsStream>) {
        self->handshake();
      } else {
        self->doRead();
      }
    });
  }

 private:
  auto& lowest() { return beast::get_lowest_layer(stream_); }

  // Netty's 10 s handshake timeout, as on brokerServicePortTls; failures count as there.
  void handshake() {
    lowest().expires_after(net::kTlsHandshakeTimeout);
    stream_.async_handshake(
        asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
          if (!ec) {
            self->peerCommonName_ =
                net::peerCommonNameOf(self->stream_.native_handle()).value_or("");
            return self->doRead();
          }
          net::TlsError e = net::TlsError::kHandshakeFailed;
          if (ec == beast::error::timeout) {
            e = net::TlsError::kHandshakeTimeout;
          } else if (ec.category() == asio::error::get_ssl_category() &&
                     (ERR_GET_REASON(ec.value()) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
                      ERR_GET_REASON(ec.value()) == SSL_R_CERTIFICATE_VERIFY_FAILED)) {
            e = net::TlsError::kUntrustedCert;
          }
          net::TlsErrorStats::record(e);
          self->close();
        });
  }

  void doRead() {
    parser_.emplace();
    parser_->body_limit(maxBody_);
    lowest().expires_after(kIdleTimeout);
    readHeader();
  }

  // Reads until the buffer holds the request's header section, puts a CR before each bare LF
  // in it (Jetty takes a bare LF as a line end; Beast does not), refuses a folded line (400, as
  // Jetty), then lets Beast parse the request from the buffer. A header that does not end within
  // kMaxHeaderBytes is Beast's to refuse (header_limit).
  void readHeader() {
    const std::string_view bytes(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    if (auto end = headerSectionEnd(bytes)) {
      std::string header = withCrlfLineEnds(bytes.substr(0, *end));
      // Jetty refuses an obsolete line folding (a line starting with a space or tab); Beast
      // would join it to the line before.
      if (header.find("\n ") != std::string::npos || header.find("\n\t") != std::string::npos) {
        HttpServerStats::record(HttpBadRequest::kMalformed);
        keepAlive_ = false;
        return write(HttpResponse::error(400, "Bad request: obsolete line folding"));
      }
      if (header.size() != *end) {
        std::string rest(bytes.substr(*end));
        buffer_.consume(buffer_.size());
        for (const std::string* part : {&header, &rest}) {
          buffer_.commit(asio::buffer_copy(buffer_.prepare(part->size()), asio::buffer(*part)));
        }
      }
      return parseRequest();
    }
    if (buffer_.size() >= kMaxHeaderBytes) return parseRequest();
    if (!bytes.empty()) {
      // Bytes that already break the request (a TLS hello on the plain port, a bad method) are
      // answered at once, as Jetty answers them, not after the idle timeout: a scratch parser
      // sees what Beast will.
      http::request_parser<http::empty_body> probe;
      beast::error_code ec;
      const std::string sofar = withCrlfLineEnds(bytes);
      probe.put(asio::buffer(sofar), ec);
      if (ec && ec != http::error::need_more && ec != http::error::header_limit) {
        HttpServerStats::record(HttpBadRequest::kMalformed);
        keepAlive_ = false;
        return write(HttpResponse::error(400, "Bad request: " + ec.message()));
      }
    }
    stream_.async_read_some(
        buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
          self->buffer_.commit(n);
          if (!ec) return self->readHeader();
          if (ec == beast::error::timeout && self->buffer_.size() > 0) {
            HttpServerStats::record(HttpBadRequest::kTimeout);
          }
          self->onReadError(ec == beast::error::timeout ? ec : http::error::end_of_stream);
        });
  }

  void parseRequest() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->onRead(ec); });
  }

  void onRead(beast::error_code ec) {
    if (ec) {
      onReadError(ec);
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
    if (auto it = req.find(http::field::authorization); it != req.end()) {
      r.authorization = std::string(it->value());
    }
    if (auto it = req.find("X-Pulsar-ListenerName"); it != req.end()) {
      r.listenerName = std::string(it->value());
    }
    r.body = std::move(req.body());
    r.peerCommonName = peerCommonName_;
    if (upgrade_ && beast::websocket::is_upgrade(req) && upgrade_->accepts(r)) {
      return handOver(std::move(req), std::move(r));
    }
    auto self = this->shared_from_this();
    // Handlers answer from broker threads, possibly while the server stops. The session and its
    // io_context wait in a slot that also keeps the io_context alive until the answer: the first
    // answer takes both out (later copies of `respond` own nothing), posts the write with the
    // session moved into it, and drops its io_context reference last, so neither the session nor
    // a post outlives the io_context (found by fuzz_http: UBSan invalid vptr in ~Session and
    // in post() on a broker thread after the server stopped).
    struct Slot {  // members in this order: a dropped slot frees the session, then the ioc
      std::mutex mu;
      std::shared_ptr<asio::io_context> ioc;
      std::shared_ptr<Session> session;
    };
    auto slot = std::make_shared<Slot>();
    slot->ioc = ioc_.lock();
    if (!slot->ioc) return;  // the server is being destroyed
    slot->session = std::move(self);
    router_->dispatch(r, [slot](HttpResponse resp) {
      std::shared_ptr<asio::io_context> ioc;
      std::shared_ptr<Session> self;
      {
        std::lock_guard<std::mutex> lock(slot->mu);
        ioc = std::move(slot->ioc);
        self = std::move(slot->session);
      }
      if (!self) return;  // a handler answered twice: keep the first
      if (resp.status == 400) HttpServerStats::record(HttpBadRequest::kBadRequest);
      auto executor = self->stream_.get_executor();
      asio::post(executor, [self = std::move(self), resp = std::move(resp)]() mutable {
        self->write(std::move(resp));
      });
    });
  }

  // The connection goes to the upgrade hook (this session ends): no timer, no further read.
  void handOver(http::request<http::string_body>&& req, HttpRequest&& parsed) {
    lowest().expires_never();
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      upgrade_->takeTls(std::move(stream_), std::move(req), std::move(parsed));
    } else {
      upgrade_->takePlain(std::move(stream_), std::move(req), std::move(parsed));
    }
  }

  // A request that could not be read: answer what Jetty (Pulsar's HTTP server) answers, then
  // close, since the rest of the stream cannot be trusted.
  void onReadError(beast::error_code ec) {
    keepAlive_ = false;
    if (ec == http::error::body_limit) {
      HttpServerStats::record(HttpBadRequest::kBodyTooLarge);
      write(HttpResponse::error(413, "Request body too large"));
    } else if (ec == http::error::header_limit) {
      HttpServerStats::record(HttpBadRequest::kHeaderTooLarge);
      write(HttpResponse::error(431, "Request header fields too large"));
    } else if (ec == beast::error::timeout) {
      if (parser_ && parser_->got_some()) HttpServerStats::record(HttpBadRequest::kTimeout);
      close();
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
               ec != http::error::end_of_stream && ec != http::error::partial_message) {
      HttpServerStats::record(HttpBadRequest::kMalformed);
      write(HttpResponse::error(400, "Bad request: " + ec.message()));
    } else {  // end_of_stream, reset, a request cut short: the client is gone
      close();
    }
  }

  void write(HttpResponse resp) {
    res_ = http::response<http::string_body>(static_cast<http::status>(resp.status), version_);
    res_.set(http::field::server, "magnetar");
    if (!resp.contentType.empty()) res_.set(http::field::content_type, resp.contentType);
    for (auto& [name, value] : resp.headers) res_.set(name, value);
    res_.body() = std::move(resp.body);
    res_.keep_alive(keepAlive_);
    res_.prepare_payload();
    lowest().expires_after(kIdleTimeout);
    http::async_write(stream_, res_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->keepAlive_) {
                          self->close();
                          return;
                        }
                        self->doRead();
                      });
  }

  void close() {
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().socket().close(ignored);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::shared_ptr<const Router> router_;
  std::shared_ptr<UpgradeHook> upgrade_;
  size_t maxBody_;
  std::weak_ptr<asio::io_context> ioc_;
  bool keepAlive_ = false;
  unsigned version_ = 11;
  std::string peerCommonName_;  // TLS: the client certificate's CN ("" without one or no CN)
};

}  // namespace

std::optional<size_t> headerSectionEnd(std::string_view bytes) {
  for (size_t i = bytes.find('\n'); i != std::string_view::npos; i = bytes.find('\n', i + 1)) {
    if (i + 1 < bytes.size() && bytes[i + 1] == '\n') return i + 2;
    if (i + 2 < bytes.size() && bytes[i + 1] == '\r' && bytes[i + 2] == '\n') return i + 3;
  }
  return std::nullopt;
}

std::string withCrlfLineEnds(std::string_view header) {
  std::string out;
  out.reserve(header.size() + 16);
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == '\n' && (i == 0 || header[i - 1] != '\r')) out += '\r';
    out += header[i];
  }
  return out;
}

const char* HttpServerStats::label(HttpBadRequest e) {
  switch (e) {
    case HttpBadRequest::kMalformed: return "malformed";
    case HttpBadRequest::kHeaderTooLarge: return "header_too_large";
    case HttpBadRequest::kBodyTooLarge: return "body_too_large";
    case HttpBadRequest::kTimeout: return "timeout";
    case HttpBadRequest::kBadRequest: return "bad_request";
    case HttpBadRequest::kCount: break;
  }
  return "other";
}

struct HttpServer::Impl {
  Impl(std::shared_ptr<const Router> r, Options o, std::shared_ptr<net::TlsContext> t)
      : router(std::move(r)),
        options(std::move(o)),
        tls(std::move(t)),
        ioc(std::make_shared<asio::io_context>(std::max(options.numThreads, 1))) {}

  void accept() {
    acceptor->async_accept(asio::make_strand(*ioc), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        if (tls) {
          // The certificates current at accept time (refreshed by the TlsContext); asio's
          // context only wraps a reference, the SSL object keeps its own.
          std::shared_ptr<ssl_ctx_st> current = tls->current();
          SSL_CTX_up_ref(current.get());
          asio::ssl::context sslContext(current.get());
          std::make_shared<Session<TlsStream>>(router, options.upgrade, options.maxBodyBytes, ioc,
                                               std::move(s), sslContext)
              ->start();
        } else {
          std::make_shared<Session<PlainStream>>(router, options.upgrade, options.maxBodyBytes, ioc,
                                                 std::move(s))
              ->start();
        }
      } else {
        // EMFILE and the like: pause accepting for a second (as Jetty and Netty do) rather
        // than spin and flood the log.
        MLOG_WARN("HTTP accept failed: {}; accepting again in 1 s", ec.message());
        acceptRetry.expires_after(std::chrono::seconds(1));
        acceptRetry.async_wait([this](beast::error_code e) {
          if (!e && acceptor && acceptor->is_open()) accept();
        });
        return;
      }
      accept();
    });
  }

  std::shared_ptr<const Router> router;
  Options options;
  std::shared_ptr<net::TlsContext> tls;  // null: plain HTTP
  // Shared: a request still being answered on a broker thread keeps it alive (Session::onRead).
  std::shared_ptr<asio::io_context> ioc;
  asio::steady_timer acceptRetry{*ioc};
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  uint16_t boundPort = 0;
  bool stopped = false;
};

HttpServer::HttpServer(std::shared_ptr<const Router> router, Options options,
                       std::shared_ptr<net::TlsContext> tls)
    : impl_(std::make_unique<Impl>(std::move(router), std::move(options), std::move(tls))) {}

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
  m.acceptor.emplace(*m.ioc);
  m.acceptor->open(ep.protocol(), ec);
  if (!ec) m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(ep, ec);
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    m.acceptor.reset();
    return Status::ioError(
        fmt::format("cannot listen on {}:{} ({}): {}", m.options.bindAddress, m.options.port,
                    m.tls ? "webServicePortTls" : "webServicePort", ec.message()));
  }
  m.boundPort = m.acceptor->local_endpoint().port();
  m.accept();
  int n = std::max(m.options.numThreads, 1);
  std::latch named(n);  // return only once every thread carries its name
  for (int i = 0; i < n; ++i) {
    std::string base = m.tls ? "pulsar-web-tls" : "pulsar-web";
    std::string name = n == 1 ? base : fmt::format("{}-{}", base, i);
    m.threads.emplace_back([this, name, &named] {
      setThreadName(name);
      named.count_down();
      impl_->ioc->run();
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
  m.ioc->stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  if (m.acceptor) {  // no thread runs the io_context any more
    beast::error_code ignored;
    m.acceptor->close(ignored);
  }
  // Sessions still queued in the io_context are destroyed with it (closing their sockets).
}

}  // namespace magnetar::admin
