#include "net/connection.h"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

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

// Counts onWritable() calls; reads nothing of interest.
class WatermarkConnection : public Connection {
 public:
  using Connection::Connection;
  std::atomic<int> writableCalls{0};

 protected:
  bool onData(const uint8_t*, size_t) override { return true; }
  void onClosed() override {}
  void onWritable() override { writableCalls.fetch_add(1); }
};

// Pauses reading at its first read and keeps no other owner (as MQTT's connection, whose sink
// holds it weakly); counts the bytes it takes.
class PausingConnection : public Connection {
 public:
  using Connection::Connection;
  std::atomic<size_t> bytes{0};
  std::atomic<bool> closed{false};

 protected:
  bool onData(const uint8_t*, size_t len) override {
    bytes.fetch_add(len);
    if (!pausedOnce_) {
      pausedOnce_ = true;
      pauseRead();
    }
    return true;
  }
  void onClosed() override { closed.store(true); }

 private:
  bool pausedOnce_ = false;
};

bool waitFor(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

TEST(ConnectionTest, WatermarksHoldBackAndCallBackOnceDrained) {
  EventLoopGroup loops("io", 1);
  loops.start();
  std::shared_ptr<WatermarkConnection> server;
  std::promise<void> accepted;
  TcpServer srv(loops, [&](EventLoop& l, tcp::socket s) {
    s.set_option(boost::asio::socket_base::send_buffer_size(4096));
    server = std::make_shared<WatermarkConnection>(l, std::move(s));
    server->setWriteWatermarks(8 * 1024, 64 * 1024);
    accepted.set_value();
    return server;
  });
  ASSERT_TRUE(srv.start("127.0.0.1", 0).isOk());
  boost::asio::io_context ctx;
  tcp::socket client(ctx);
  client.open(tcp::v4());
  client.set_option(boost::asio::socket_base::receive_buffer_size(4096));
  client.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), srv.boundPort()));
  accepted.get_future().wait();

  EXPECT_TRUE(server->isWritable());
  // 4 MiB queued to a peer that reads nothing: the kernel takes a little, the rest waits.
  const size_t total = 4 * 1024 * 1024;
  Buffer chunk = Buffer::copyOf(std::string(64 * 1024, 'x'));
  for (size_t i = 0; i < total / chunk.size(); ++i) server->send(chunk);
  EXPECT_GT(server->pendingWriteBytes(), 64u * 1024);
  EXPECT_FALSE(server->isWritable());
  EXPECT_FALSE(server->isWritable());  // asking twice arms one call, not two
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server->writableCalls.load(), 0);

  // The peer reads everything: one call back, at the low mark.
  std::string got(total, '\0');
  boost::asio::read(client, boost::asio::buffer(got));
  EXPECT_EQ(got, std::string(total, 'x'));
  ASSERT_TRUE(waitFor([&] { return server->writableCalls.load() == 1; }));
  // The call comes at the low mark; the last write's completion may still be on its way.
  EXPECT_TRUE(waitFor([&] { return server->pendingWriteBytes() == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server->writableCalls.load(), 1);

  // Asked for when already drained: the call comes anyway, on the loop.
  server->notifyWhenWritable();
  EXPECT_TRUE(waitFor([&] { return server->writableCalls.load() == 2; }));
  // Not asked: none.
  server->send(chunk);
  got.assign(chunk.size(), '\0');
  boost::asio::read(client, boost::asio::buffer(got));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server->writableCalls.load(), 2);

  client.close();
  srv.stop();
  loops.stop();
}

// A paused connection arms no read wait: it must stay open and owned (it used to be destroyed
// with its socket open, the peer seeing a reset), take the rest once resumed, and go at its close.
TEST(ConnectionTest, APausedConnectionOwnsItselfUntilResumedOrClosed) {
  EventLoopGroup loops("io", 1);
  loops.start();
  std::weak_ptr<PausingConnection> weak;
  std::promise<void> accepted;
  TcpServer srv(loops, [&](EventLoop& l, tcp::socket s) {
    auto c = std::make_shared<PausingConnection>(l, std::move(s));
    weak = c;
    accepted.set_value();
    return c;  // the server keeps no reference
  });
  ASSERT_TRUE(srv.start("127.0.0.1", 0).isOk());
  boost::asio::io_context ctx;
  tcp::socket client = connectLocal(ctx, srv.boundPort());
  accepted.get_future().wait();
  boost::asio::write(client, boost::asio::buffer(std::string("first")));
  ASSERT_TRUE(waitFor([&] {
    auto c = weak.lock();
    return c && c->bytes.load() == 5;
  }));
  boost::asio::write(client, boost::asio::buffer(std::string("second")));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto c = weak.lock();
  ASSERT_TRUE(c) << "the paused connection was destroyed";
  EXPECT_FALSE(c->isClosed());
  EXPECT_EQ(c->bytes.load(), 5u);  // paused: "second" waits in the kernel
  c->loop().execute([c] { c->resumeRead(); });
  c.reset();
  ASSERT_TRUE(waitFor([&] {
    auto r = weak.lock();
    return r && r->bytes.load() == 11;
  }));
  client.close();
  EXPECT_TRUE(waitFor([&] { return weak.expired(); }));  // closed, and no owner left

  // Closed while paused: the close path runs and the hold goes with it.
  std::promise<void> accepted2;
  TcpServer srv2(loops, [&](EventLoop& l, tcp::socket s) {
    auto p = std::make_shared<PausingConnection>(l, std::move(s));
    weak = p;
    accepted2.set_value();
    return p;
  });
  ASSERT_TRUE(srv2.start("127.0.0.1", 0).isOk());
  tcp::socket client2 = connectLocal(ctx, srv2.boundPort());
  accepted2.get_future().wait();
  boost::asio::write(client2, boost::asio::buffer(std::string("x")));
  ASSERT_TRUE(waitFor([&] {
    auto p = weak.lock();
    return p && p->bytes.load() == 1;
  }));
  std::shared_ptr<PausingConnection> p = weak.lock();
  ASSERT_TRUE(p);
  p->close();
  EXPECT_TRUE(waitFor([&] { return p->closed.load(); }));
  p.reset();
  EXPECT_TRUE(waitFor([&] { return weak.expired(); }));
  srv.stop();
  srv2.stop();
  loops.stop();
}

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
  tcp::socket client = connectLocal(ctx, srv.boundPort());
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
  // Bytes reserved and given back do not count (the outbound watermark relies on the total).
  FrameBatch t;
  uint8_t* p = t.appendSpace(10);
  std::memcpy(p, "abc", 3);
  t.trimBytes(7);
  EXPECT_EQ(t.totalBytes(), 3u);
  EXPECT_EQ(t.bytes(), "abc");
}

}  // namespace magnetar::net
