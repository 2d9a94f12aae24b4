#include "net/tcp_server.h"

#include "base/logging.h"

namespace magnetar::net {

using boost::asio::ip::tcp;

namespace {
constexpr auto kAcceptRetryDelay = std::chrono::seconds(1);  // Netty's acceptor pause
}  // namespace

TcpServer::TcpServer(EventLoopGroup& loops, Factory factory)
    : loops_(loops), factory_(std::move(factory)) {}

TcpServer::~TcpServer() { stop(); }

Status TcpServer::start(const std::string& address, int port) {
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(address, ec);
  if (ec) return Status::invalidArgument("bad bind address '" + address + "': " + ec.message());
  acceptor_ = std::make_unique<tcp::acceptor>(acceptLoop_.context());
  tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(1024, ec);
  if (ec) {
    return Status::ioError("cannot listen on " + address + ":" + std::to_string(port) + ": " +
                           ec.message());
  }
  port_ = acceptor_->local_endpoint().port();
  acceptLoop_.start();
  acceptLoop_.execute([this] { doAccept(); });
  return Status::ok();
}

void TcpServer::doAccept() {
  EventLoop& target = loops_.next();
  acceptor_->async_accept(target.context(), [this, &target](const boost::system::error_code& ec,
                                                            tcp::socket socket) {
    if (ec == boost::asio::error::operation_aborted) return;
    if (!ec) {
      auto conn = factory_(target, std::move(socket));
      if (conn) conn->start();
    } else {
      MLOG_WARN("accept failed: {}; accepting again in 1 s", ec.message());
      acceptRetry_.expires_after(kAcceptRetryDelay);
      acceptRetry_.async_wait([this](const boost::system::error_code& e) {
        if (!e && acceptor_ && acceptor_->is_open()) doAccept();
      });
      return;
    }
    if (acceptor_ && acceptor_->is_open()) doAccept();
  });
}

void TcpServer::stop() {
  if (acceptor_) {
    acceptLoop_.execute([this] {
      boost::system::error_code ec;
      acceptor_->close(ec);
      acceptRetry_.cancel();
    });
  }
  acceptLoop_.stop();
  acceptor_.reset();
}

}  // namespace magnetar::net
