// TcpServer: accepts connections on one port and pins each to the next loop of an EventLoopGroup,
// round-robin, for its life (Pulsar's acceptor + pulsar-io model).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "net/connection.h"
#include "net/event_loop.h"

namespace magnetar::net {

// Thread: start/stop from the owner; accepts run on the `pulsar-acceptor` thread.
class TcpServer {
 public:
  using Factory =
      std::function<std::shared_ptr<Connection>(EventLoop& loop, boost::asio::ip::tcp::socket)>;
  TcpServer(EventLoopGroup& loops, Factory factory);
  ~TcpServer();
  // Binds address:port (port 0 picks a free port) and starts accepting. Errors: kIoError.
  Status start(const std::string& address, int port);
  void stop();
  int boundPort() const { return port_; }

 private:
  void doAccept();
  EventLoopGroup& loops_;
  Factory factory_;
  EventLoop acceptLoop_{"pulsar-acceptor"};
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  // After a failed accept (EMFILE, ENFILE, ENOBUFS) accepting pauses for kAcceptRetryDelay, as
  // Netty's ServerBootstrapAcceptor does, instead of spinning and flooding the log.
  boost::asio::steady_timer acceptRetry_{acceptLoop_.context()};
  int port_ = 0;
};

}  // namespace magnetar::net
