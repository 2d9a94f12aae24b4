// Test helpers: a Connection that cuts its reads at a byte count with maxNextDelivery() and
// pauses there, and a check that it stops exactly there (plaintext and TLS tests); a blocking
// client socket.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "net/connection.h"
#include "net/tcp_server.h"
#include "net/tls.h"

namespace magnetar::net {

using boost::asio::ip::tcp;

// A blocking client socket on `io`, connected to 127.0.0.1:port.
inline tcp::socket connectLocal(boost::asio::io_context& io, int port) {
  tcp::socket s(io);
  s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  return s;
}

// Collects what it reads; cuts deliveries at `stopAt` bytes with maxNextDelivery() and pauses
// there, as the broker does at the end of a frame charged to its publish buffer.
class StopAtConnection : public Connection {
 public:
  StopAtConnection(EventLoop& l, tcp::socket s, size_t stopAt,
                   std::unique_ptr<TlsSession> tls = nullptr)
      : Connection(l, std::move(s), std::move(tls)), stopAt_(stopAt) {}
  std::promise<void> reachedStop;
  std::promise<void> reachedAll;
  size_t expectTotal = 0;
  std::atomic<size_t> received{0};
  std::atomic<size_t> largestDelivery{0};

 protected:
  bool onData(const uint8_t* data, size_t len) override {
    size_t before = received.load();
    size_t now = before + len;
    received = now;
    if (len > largestDelivery) largestDelivery = len;
    if (before < stopAt_ && now >= stopAt_) {
      pauseRead();
      reachedStop.set_value();
    }
    if (now == expectTotal) reachedAll.set_value();
    return true;
  }
  size_t maxNextDelivery() const override {
    size_t r = received.load();
    return r < stopAt_ ? stopAt_ - r : SIZE_MAX;
  }
  void onClosed() override {}

 private:
  size_t stopAt_;
};

// Sends `total` bytes into a StopAtConnection made by `make`, checks it stops at exactly
// `stopAt` while paused, then resumes it and gets the rest.
inline void expectStopsAtTheBoundary(
    EventLoopGroup& loops,
    const std::function<std::shared_ptr<StopAtConnection>(EventLoop&, tcp::socket)>& make,
    const std::function<void(tcp::socket&, const std::string&)>& sendAll, size_t stopAt,
    size_t total) {
  std::promise<std::shared_ptr<StopAtConnection>> made;
  TcpServer srv(loops, [&](EventLoop& l, tcp::socket s) {
    auto c = make(l, std::move(s));
    c->expectTotal = total;
    made.set_value(c);
    return c;
  });
  ASSERT_TRUE(srv.start("127.0.0.1", 0).isOk());
  boost::asio::io_context ctx;
  tcp::socket client = connectLocal(ctx, srv.boundPort());
  auto conn = made.get_future().get();
  std::string data(total, '\0');
  for (size_t i = 0; i < total; ++i) data[i] = static_cast<char>(i * 7);
  sendAll(client, data);
  ASSERT_EQ(conn->reachedStop.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // paused: nothing more arrives
  EXPECT_EQ(conn->received.load(), stopAt);
  EXPECT_LE(conn->largestDelivery.load(), EventLoop::kReadBufferSize);
  conn->loop().execute([conn] { conn->resumeRead(); });
  ASSERT_EQ(conn->reachedAll.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_EQ(conn->received.load(), total);
  client.close();
  conn->close();
  srv.stop();
}

}  // namespace magnetar::net
