#include "net/connection.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <future>

#include "net/tcp_server.h"
#include "net/tests/stop_at_connection.h"

namespace magnetar::net {

using boost::asio::ip::tcp;

namespace {

// Echoes each read back as: the bytes, then a shared Buffer suffix, through the write path.
class EchoConnection : public Connection {
 public:
  EchoConnection(EventLoop& l, tcp::socket s, Buffer suffix)
      : Connection(l, std::move(s)), suffix_(std::move(suffix)) {}
  std::promise<void> closed;

 protected:
  bool onData(const uint8_t* data, size_t len) override {
    write([&](FrameBatch& b) {
      b.appendBytes(data, len);
      b.appendBuffer(suffix_);
    });
    return true;
  }
  void onClosed() override { closed.set_value(); }

 private:
  Buffer suffix_;
};

}  // namespace

TEST(ConnectionTest, MaxNextDeliveryStopsReadsAtABoundary) {
  EventLoopGroup loops("io", 1);
  loops.start();
  const size_t stopAt = 100003;  // not a multiple of the read size
  expectStopsAtTheBoundary(
      loops,
      [&](EventLoop& l, tcp::socket s) {
        return std::make_shared<StopAtConnection>(l, std::move(s), stopAt);
      },
      [](tcp::socket& c, const std::string& d) { boost::asio::write(c, boost::asio::buffer(d)); },
      stopAt, 300000);
  loops.stop();
}

TEST(ConnectionTest, EchoWithSharedBuffersAndCrossThreadWrites) {
  EventLoopGroup loops("io", 2);
  loops.start();
  Buffer suffix = Buffer::copyOf("|");
  std::shared_ptr<EchoConnection> server;
  std::promise<void> accepted;
  TcpServer srv(loops, [&](EventLoop& l, tcp::socket s) {
    server = std::make_shared<EchoConnection>(l, std::move(s), suffix);
    accepted.set_value();
    return server;
  });
  ASSERT_TRUE(srv.start("127.0.0.1", 0).isOk());
  ASSERT_GT(srv.boundPort(), 0);

  boost::asio::io_context ctx;
  tcp::socket client(ctx);
  client.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), srv.boundPort()));
  accepted.get_future().wait();
  boost::asio::write(client, boost::asio::buffer(std::string("abc")));
  std::string got(4, '\0');
  boost::asio::read(client, boost::asio::buffer(got));
  EXPECT_EQ(got, "abc|");

  // Many writes from a foreign thread arrive complete and in order.
  std::string expected;
  for (int i = 0; i < 2000; ++i) {
    std::string piece = std::to_string(i) + ",";
    expected += piece;
    server->send(Buffer::copyOf(piece));
  }
  std::string big(expected.size(), '\0');
  boost::asio::read(client, boost::asio::buffer(big));
  EXPECT_EQ(big, expected);
  // Far fewer writev calls than frames: writes coalesce.
  EXPECT_LT(server->stats().writevCalls.load(), 2000u);

  client.close();
  auto f = server->closed.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(server->isClosed());
  srv.stop();
  loops.stop();
}

TEST(FrameBatchTest, MergesAdjacentBytesAndKeepsBuffers) {
  FrameBatch a;
  a.appendBytes("ab", 2);
  a.appendBytes("cd", 2);
  a.appendBuffer(Buffer::copyOf("XYZ"));
  a.appendBytes("e", 1);
  EXPECT_EQ(a.segmentCount(), 3u);
  EXPECT_EQ(a.totalBytes(), 8u);
  FrameBatch b;
  b.appendBytes("f", 1);
  b.append(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.totalBytes(), 9u);
  std::string flat;
  for (auto& s : b.segments()) {
    flat += s.buffer ? std::string(s.buffer.view()) : b.bytes().substr(s.offset, s.length);
  }
  EXPECT_EQ(flat, "fabcdXYZe");
}

}  // namespace magnetar::net
