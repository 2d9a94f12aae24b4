#include "ws_producers.h"

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <mutex>

namespace magnetar::perf {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

// One producer session. Its reads, writes and `failed` run on its strand (the stream's
// executor); `out` and `writing` are shared with send() under `mu`.
struct Session {
  explicit Session(net::io_context& ioc) : ws(net::make_strand(ioc)) {}
  websocket::stream<beast::tcp_stream> ws;
  std::mutex mu;
  std::deque<std::string> out;  // GUARDED_BY(mu); front() is on the wire while writing
  bool writing = false;         // GUARDED_BY(mu)
  bool failed = false;          // strand only
  beast::flat_buffer in;        // strand only
};

// The value of "context":"..." in an ack ("" when absent; contexts here are digits only).
std::string_view contextOf(std::string_view ack) {
  constexpr std::string_view kKey = "\"context\":\"";
  size_t at = ack.find(kKey);
  if (at == std::string_view::npos) return {};
  at += kKey.size();
  size_t end = ack.find('"', at);
  return end == std::string_view::npos ? std::string_view{} : ack.substr(at, end - at);
}

}  // namespace

struct WsProducers::Impl {
  explicit Impl(AckHandler h) : onAck(std::move(h)) {}

  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Session>> sessions;  // grows in open() only
  AckHandler onAck;
  std::atomic<bool> closing{false};

  void readNext(const std::shared_ptr<Session>& s) {
    s->ws.async_read(s->in, [this, s](beast::error_code ec, size_t) {
      if (ec) return fail(*s, ec);
      std::string_view text(static_cast<const char*>(s->in.data().data()), s->in.size());
      onAck(contextOf(text), text.find("\"result\":\"ok\"") != std::string_view::npos, text);
      s->in.consume(s->in.size());
      readNext(s);
    });
  }

  // On the session's strand, with writing set and out not empty.
  void writeNext(const std::shared_ptr<Session>& s) {
    const std::string* frame;
    {
      std::lock_guard<std::mutex> lock(s->mu);
      frame = &s->out.front();  // a deque keeps references across push_back
    }
    s->ws.async_write(net::buffer(*frame), [this, s](beast::error_code ec, size_t) {
      bool more;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->out.pop_front();
        more = !ec && !s->out.empty();
        s->writing = more;
      }
      if (ec) return fail(*s, ec);
      if (more) writeNext(s);
    });
  }

  // A session's first error, reported once (not while closing).
  void fail(Session& s, const beast::error_code& ec) {
    if (closing.load() || s.failed) return;
    s.failed = true;
    onAck({}, false, ec.message());
  }
};

WsProducers::WsProducers(int ioThreads, AckHandler onAck)
    : impl_(std::make_unique<Impl>(std::move(onAck))) {
  for (int i = 0; i < ioThreads; ++i) {
    impl_->threads.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), fmt::format("gw-ws-{}", i).c_str());
      impl_->ioc.run();
    });
  }
}

WsProducers::~WsProducers() { close(); }

Result<size_t> WsProducers::open(const std::string& webServiceUrl, const std::string& path) {
  std::string_view rest = webServiceUrl;
  constexpr std::string_view kScheme = "http://";
  if (rest.substr(0, kScheme.size()) != kScheme) {
    return Status::invalidArgument("webServiceUrl must be http://host:port: " + webServiceUrl);
  }
  rest.remove_prefix(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) {
    return Status::invalidArgument("webServiceUrl has no port: " + webServiceUrl);
  }
  const std::string host(rest.substr(0, colon));
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  const int port = std::atoi(std::string(rest.substr(colon + 1)).c_str());
  if (ec || port <= 0 || port > 65535) {
    return Status::invalidArgument("webServiceUrl needs a numeric host and port: " + webServiceUrl);
  }
  auto s = std::make_shared<Session>(impl_->ioc);
  tcp::socket& socket = beast::get_lowest_layer(s->ws).socket();
  socket.connect(tcp::endpoint(address, static_cast<uint16_t>(port)), ec);
  if (!ec) socket.set_option(tcp::no_delay(true), ec);
  if (!ec) s->ws.handshake(std::string(rest), path, ec);
  if (ec)
    return Status::ioError(fmt::format("WebSocket {}{}: {}", webServiceUrl, path, ec.message()));
  s->ws.text(true);
  s->ws.auto_fragment(false);
  impl_->sessions.push_back(s);
  net::post(s->ws.get_executor(), [impl = impl_.get(), s] { impl->readNext(s); });
  return impl_->sessions.size() - 1;
}

void WsProducers::send(size_t session, std::string frame) {
  const std::shared_ptr<Session>& s = impl_->sessions[session];
  bool start;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->out.push_back(std::move(frame));
    start = !s->writing;
    s->writing = true;
  }
  if (start) net::post(s->ws.get_executor(), [impl = impl_.get(), s] { impl->writeNext(s); });
}

void WsProducers::close() {
  if (!impl_ || impl_->closing.exchange(true)) return;
  for (auto& s : impl_->sessions) {
    net::post(s->ws.get_executor(), [s] {
      beast::error_code ignored;
      tcp::socket& socket = beast::get_lowest_layer(s->ws).socket();
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    });
  }
  impl_->work.reset();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

std::string WsProducers::topicPath(std::string_view topic) {
  const size_t at = topic.find("://");
  if (at == std::string_view::npos) return "persistent/public/default/" + std::string(topic);
  return std::string(topic.substr(0, at)) + "/" + std::string(topic.substr(at + 3));
}

}  // namespace magnetar::perf
