#include "admin/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>

#include "base/dcheck.h"

namespace magnetar::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::optional<ParsedUrl> parseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) return std::nullopt;
  size_t hostStart = scheme.size();
  size_t slash = url.find_first_of("/?", hostStart);
  std::string authority =
      url.substr(hostStart, slash == std::string::npos ? std::string::npos : slash - hostStart);
  ParsedUrl out;
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos) {
    out.host = authority;
    out.port = "80";
  } else {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  }
  if (out.host.empty() || out.port.empty()) return std::nullopt;
  out.target = slash == std::string::npos ? "/" : url.substr(slash);
  if (out.target[0] == '?') out.target = "/" + out.target;
  return out;
}

namespace {

// One exchange (and its redirects). Lives in shared_ptrs held by its pending operations.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(net::EventLoop& loop, HttpClientRequest req,
       std::function<void(Result<HttpClientResponse>)> done)
      : loop_(loop),
        req_(std::move(req)),
        done_(std::move(done)),
        resolver_(loop.context()),
        stream_(loop.context()),
        deadline_(loop.context()) {}

  void start() {
    MAGNETAR_DCHECK_ON(loop_);
    deadline_.expires_after(std::chrono::milliseconds(req_.timeoutMs));
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: finished in time
      self->finish(
          Status::error(StatusCode::kTimeout, "no answer from " + self->req_.url + " within " +
                                                  std::to_string(self->req_.timeoutMs) + " ms"));
    });
    send(req_.url);
  }

 private:
  void send(const std::string& url) {
    url_ = url;
    auto parsed = parseHttpUrl(url);
    if (!parsed) return finish(Status::invalidArgument("not an http:// URL: " + url));
    target_ = *parsed;
    resolver_.async_resolve(
        target_.host, target_.port,
        [self = shared_from_this()](beast::error_code ec,
                                    const asio::ip::tcp::resolver::results_type& results) {
          if (ec) return self->fail("resolve", ec);
          self->stream_.async_connect(
              results, [self](beast::error_code ec2, const asio::ip::tcp::endpoint&) {
                if (ec2) return self->fail("connect", ec2);
                self->write();
              });
        });
  }

  void write() {
    request_ = {};
    request_.method_string(req_.method);
    request_.target(target_.target);
    request_.version(11);
    request_.set(http::field::host, target_.host + ":" + target_.port);
    request_.set(http::field::user_agent, "magnetar-broker");
    request_.set(http::field::accept, "application/json");
    if (req_.authorization) request_.set(http::field::authorization, *req_.authorization);
    if (!req_.body.empty()) {
      request_.set(http::field::content_type,
                   req_.contentType.empty() ? "application/json" : req_.contentType);
    }
    request_.body() = req_.body;
    request_.prepare_payload();
    request_.keep_alive(false);
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail("write", ec);
      self->read();
    });
  }

  void read() {
    response_ = {};
    buffer_.clear();
    http::async_read(stream_, buffer_, response_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->fail("read", ec);
                       self->onResponse();
                     });
  }

  void onResponse() {
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_.close();
    int status = static_cast<int>(response_.result_int());
    if (status == 301 || status == 302 || status == 307 || status == 308) {
      auto it = response_.find(http::field::location);
      if (it == response_.end()) {
        return finish(Status::invalidArgument(url_ + " answered " + std::to_string(status) +
                                              " without Location"));
      }
      if (++redirects_ > req_.maxRedirects) {
        return finish(Status::ioError("too many redirects from " + req_.url));
      }
      return send(std::string(it->value()));
    }
    HttpClientResponse out;
    out.status = status;
    out.body = std::move(response_.body());
    out.url = url_;
    finish(std::move(out));
  }

  void fail(const char* what, const beast::error_code& ec) {
    finish(Status::ioError(std::string(what) + " " + url_ + ": " + ec.message()));
  }

  void finish(Result<HttpClientResponse> r) {
    if (finished_) return;
    finished_ = true;
    deadline_.cancel();
    resolver_.cancel();
    stream_.close();
    auto done = std::move(done_);
    done(std::move(r));
  }

  net::EventLoop& loop_;
  HttpClientRequest req_;
  std::function<void(Result<HttpClientResponse>)> done_;
  asio::ip::tcp::resolver resolver_;
  beast::tcp_stream stream_;
  asio::steady_timer deadline_;
  ParsedUrl target_;
  std::string url_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  beast::flat_buffer buffer_;
  int redirects_ = 0;
  bool finished_ = false;
};

}  // namespace

void httpCall(net::EventLoop& loop, HttpClientRequest request,
              std::function<void(Result<HttpClientResponse>)> done) {
  auto call = std::make_shared<Call>(loop, std::move(request), std::move(done));
  loop.execute([call] { call->start(); });
}

}  // namespace magnetar::admin
