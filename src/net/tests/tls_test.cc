#include "net/tls.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "net/connection.h"
#include "net/tcp_server.h"
#include "net/tests/stop_at_connection.h"

namespace magnetar::net {
namespace {

using boost::asio::ip::tcp;
namespace fs = std::filesystem;

// Certificates made once per run by tests/harness/gen_tls_certs.sh (the openssl command).
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("magnetar-tls-test-" + std::to_string(::getpid()));
    std::string cmd = "bash " MAGNETAR_SOURCE_DIR "/tests/harness/gen_tls_certs.sh " +
                      dir_.string() + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string f(const std::string& name) { return (dir_ / name).string(); }

  static TlsOptions brokerOptions() {
    TlsOptions o;
    o.certificateFilePath = f("broker.pem");
    o.keyFilePath = f("broker.key");
    o.trustCertsFilePath = f("ca.pem");
    return o;
  }
  // A client context trusting the test CA, with `cert` (and its key) when given.
  static std::shared_ptr<ssl_ctx_st> clientCtx(const std::string& cert = "") {
    std::shared_ptr<SSL_CTX> c(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    EXPECT_EQ(SSL_CTX_load_verify_locations(c.get(), f("ca.pem").c_str(), nullptr), 1);
    SSL_CTX_set_verify(c.get(), SSL_VERIFY_PEER, nullptr);
    if (!cert.empty()) {
      EXPECT_EQ(SSL_CTX_use_certificate_file(c.get(), f(cert + ".pem").c_str(), SSL_FILETYPE_PEM),
                1);
      EXPECT_EQ(SSL_CTX_use_PrivateKey_file(c.get(), f(cert + ".key").c_str(), SSL_FILETYPE_PEM),
                1);
    }
    return c;
  }
  // Runs the handshake between two sessions in memory. Returns the server's status.
  static Status handshake(TlsSession& client, TlsSession& server) {
    std::string toServer, toClient, plain;
    EXPECT_TRUE(client.startHandshake(toServer).isOk());
    for (int i = 0; i < 10 && !(client.handshakeDone() && server.handshakeDone()); ++i) {
      std::string in;
      in.swap(toServer);
      Status s =
          server.feed(reinterpret_cast<const uint8_t*>(in.data()), in.size(), plain, toClient);
      if (!s) return s;
      in.clear();
      in.swap(toClient);
      Status c =
          client.feed(reinterpret_cast<const uint8_t*>(in.data()), in.size(), plain, toServer);
      if (!c) return c;
    }
    // TLS 1.3: the server learns of a refused client certificate with the client's last flight.
    if (!toServer.empty()) {
      Status s = server.feed(reinterpret_cast<const uint8_t*>(toServer.data()), toServer.size(),
                             plain, toClient);
      if (!s) return s;
    }
    return Status::ok();
  }

  static inline fs::path dir_;
};

TEST_F(TlsTest, LoadErrorsNameTheSettingAndFile) {
  TlsOptions o = brokerOptions();
  o.certificateFilePath = f("missing.pem");
  auto r = TlsContext::create(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("tlsCertificateFilePath"), std::string::npos);
  EXPECT_NE(r.status().message().find("cannot read"), std::string::npos);

  o = brokerOptions();
  o.certificateFilePath = f("expired.pem");
  o.keyFilePath = f("expired.key");
  r = TlsContext::create(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("expired on Jan  2"), std::string::npos)
      << r.status().message();

  o = brokerOptions();
  o.keyFilePath = f("client.key");
  r = TlsContext::create(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos);

  o = brokerOptions();
  o.certificateFilePath = f("ca.key");  // a key where a certificate belongs
  r = TlsContext::create(o);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("not a PEM certificate"), std::string::npos);

  o = brokerOptions();
  o.protocols = {"SSLv3"};
  EXPECT_FALSE(TlsContext::create(o).isOk());
  o = brokerOptions();
  o.ciphers = {"TLS_NO_SUCH_CIPHER"};
  EXPECT_FALSE(TlsContext::create(o).isOk());
}

TEST_F(TlsTest, HandshakeThenGatheredBuffersRoundTrip) {
  auto ctx = TlsContext::create(brokerOptions());
  ASSERT_TRUE(ctx.isOk()) << ctx.status().message();
  TlsSession server((*ctx)->current());
  TlsSession client(clientCtx("client"), /*client=*/true);
  ASSERT_TRUE(handshake(client, server).isOk());
  ASSERT_TRUE(server.handshakeDone());
  EXPECT_EQ(server.peerCommonName(), "tls-client");
  EXPECT_EQ(client.protocol(), "TLSv1.3");

  // Small segments and one large one: one pass, the client gets the bytes in order.
  std::string big(100000, 'x');
  std::vector<std::pair<const uint8_t*, size_t>> bufs;
  std::string expect;
  for (const char* s : {"header-1", "payload-1", "header-2"}) {
    bufs.emplace_back(reinterpret_cast<const uint8_t*>(s), strlen(s));
    expect += s;
  }
  bufs.emplace_back(reinterpret_cast<const uint8_t*>(big.data()), big.size());
  expect += big;
  std::string cipher;
  ASSERT_TRUE(server.encrypt(bufs.data(), bufs.size(), cipher).isOk());
  EXPECT_GT(cipher.size(), expect.size());
  std::string plain, out;
  // Fed in odd-sized pieces, as reads deliver it.
  for (size_t off = 0; off < cipher.size(); off += 7777) {
    size_t n = std::min<size_t>(7777, cipher.size() - off);
    ASSERT_TRUE(
        client.feed(reinterpret_cast<const uint8_t*>(cipher.data()) + off, n, plain, out).isOk());
  }
  EXPECT_EQ(plain, expect);
}

TEST_F(TlsTest, NoClientCertificateMeansNoCommonName) {
  auto ctx = TlsContext::create(brokerOptions());
  ASSERT_TRUE(ctx.isOk());
  TlsSession server((*ctx)->current());
  TlsSession client(clientCtx(), true);
  ASSERT_TRUE(handshake(client, server).isOk());
  EXPECT_TRUE(server.handshakeDone());
  EXPECT_EQ(server.peerCommonName(), std::nullopt);
}

TEST_F(TlsTest, RequiredClientCertificates) {
  TlsOptions o = brokerOptions();
  o.requireTrustedClientCertOnConnect = true;
  auto ctx = TlsContext::create(o);
  ASSERT_TRUE(ctx.isOk());
  {
    TlsSession server((*ctx)->current());
    TlsSession client(clientCtx(), true);
    EXPECT_FALSE(handshake(client, server).isOk());
    EXPECT_EQ(server.error(), TlsError::kUntrustedCert);
  }
  {
    TlsSession server((*ctx)->current());
    TlsSession client(clientCtx("other-client"), true);
    EXPECT_FALSE(handshake(client, server).isOk());
    EXPECT_FALSE(server.handshakeDone());
    EXPECT_EQ(server.error(), TlsError::kUntrustedCert);
  }
  // tlsAllowInsecureConnection: any certificate, and its CN is still reported.
  o.allowInsecureConnection = true;
  auto insecure = TlsContext::create(o);
  ASSERT_TRUE(insecure.isOk());
  TlsSession server((*insecure)->current());
  TlsSession client(clientCtx("other-client"), true);
  ASSERT_TRUE(handshake(client, server).isOk());
  EXPECT_EQ(server.peerCommonName(), "stranger");
}

TEST_F(TlsTest, PlaintextIsAHandshakeFailure) {
  auto ctx = TlsContext::create(brokerOptions());
  ASSERT_TRUE(ctx.isOk());
  TlsSession server((*ctx)->current());
  std::string plain, out;
  const char kHttp[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  Status s = server.feed(reinterpret_cast<const uint8_t*>(kHttp), sizeof(kHttp) - 1, plain, out);
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(server.error(), TlsError::kHandshakeFailed);
  EXPECT_TRUE(plain.empty());
}

TEST_F(TlsTest, ChangedFilesAreReloadedForNewConnections) {
  fs::path live = dir_ / "live";
  fs::create_directories(live);
  fs::copy_file(f("broker.pem"), live / "cert.pem", fs::copy_options::overwrite_existing);
  fs::copy_file(f("broker.key"), live / "key.pem", fs::copy_options::overwrite_existing);
  TlsOptions o = brokerOptions();
  o.certificateFilePath = (live / "cert.pem").string();
  o.keyFilePath = (live / "key.pem").string();
  o.certRefreshCheckDurationSec = 0;
  auto ctx = TlsContext::create(o);
  ASSERT_TRUE(ctx.isOk());
  auto before = (*ctx)->current();
  EXPECT_EQ((*ctx)->current(), before);  // unchanged files: the same context
  // A broken certificate is refused (counted, old context kept) ...
  uint64_t failed = TlsErrorStats::get(TlsError::kCertRefreshFailed);
  { std::ofstream(live / "cert.pem", std::ios::trunc) << "garbage"; }
  EXPECT_EQ((*ctx)->current(), before);
  EXPECT_EQ(TlsErrorStats::get(TlsError::kCertRefreshFailed), failed + 1);
  // ... a good one is taken.
  fs::copy_file(f("client.pem"), live / "cert.pem", fs::copy_options::overwrite_existing);
  fs::copy_file(f("client.key"), live / "key.pem", fs::copy_options::overwrite_existing);
  auto after = (*ctx)->current();
  EXPECT_NE(after, before);
  EXPECT_EQ((*ctx)->reloads(), 1u);
  X509* cert = SSL_CTX_get0_certificate(after.get());
  char cn[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "tls-client");
}

// A TLS echo server on a real socket: the Connection decrypts, onData echoes through write().
class TlsEcho : public Connection {
 public:
  TlsEcho(EventLoop& l, tcp::socket s, std::unique_ptr<TlsSession> tls)
      : Connection(l, std::move(s), std::move(tls)) {}
  std::promise<void> closed;
  std::promise<std::optional<std::string>> cn;
  bool cnSet = false;

 protected:
  bool onData(const uint8_t* data, size_t len) override {
    if (!cnSet) {
      cnSet = true;
      cn.set_value(peerCommonName());
    }
    write([&](FrameBatch& b) {
      b.appendBytes(data, len);
      b.appendBytes(reinterpret_cast<const uint8_t*>("!"), 1);
    });
    return true;
  }
  void onClosed() override { closed.set_value(); }
};

// Server-side tests: the broker's TLS context (brokerOptions()) and one I/O loop.
class TlsServerTest : public TlsTest {
 protected:
  void SetUp() override {
    auto ctx = TlsContext::create(brokerOptions());
    ASSERT_TRUE(ctx.isOk()) << ctx.status().toString();
    ctx_ = *ctx;
    loops_.start();
    started_ = true;
  }
  void TearDown() override {
    if (started_) loops_.stop();
  }

  std::shared_ptr<TlsContext> ctx_;
  EventLoopGroup loops_{"tls-io", 1};
  bool started_ = false;
};

// The client end of a TLS connection over a blocking socket.
struct BlockingTlsClient {
  BlockingTlsClient(tcp::socket& s, const std::shared_ptr<ssl_ctx_st>& ctx)
      : sock(s), session(ctx, /*client=*/true) {}
  // Sends what the session has for the server.
  void flush() {
    if (!out.empty()) boost::asio::write(sock, boost::asio::buffer(out));
    out.clear();
  }
  // flush(), then reads one chunk back and feeds it to the session (plaintext to `plain`).
  void pump() {
    flush();
    size_t n = sock.read_some(boost::asio::buffer(buf));
    ASSERT_TRUE(session.feed(buf.data(), n, plain, out).isOk());
  }
  void handshake() {
    ASSERT_TRUE(session.startHandshake(out).isOk());
    while (!session.handshakeDone() && !::testing::Test::HasFatalFailure()) pump();
  }
  // Encrypts `data` for the next flush().
  void queue(const std::string& data) {
    std::pair<const uint8_t*, size_t> b{reinterpret_cast<const uint8_t*>(data.data()), data.size()};
    ASSERT_TRUE(session.encrypt(&b, 1, out).isOk());
  }

  tcp::socket& sock;
  TlsSession session;
  std::string out, plain;
  std::vector<uint8_t> buf = std::vector<uint8_t>(65536);
};

TEST_F(TlsServerTest, ConnectionEchoesOverTls) {
  std::promise<std::shared_ptr<TlsEcho>> made;
  TcpServer server(loops_, [&](EventLoop& loop, tcp::socket s) {
    auto c = std::make_shared<TlsEcho>(loop, std::move(s),
                                       std::make_unique<TlsSession>(ctx_->current()));
    made.set_value(c);
    return c;
  });
  ASSERT_TRUE(server.start("127.0.0.1", 0).isOk());

  boost::asio::io_context io;
  tcp::socket sock = connectLocal(io, server.boundPort());
  BlockingTlsClient client(sock, clientCtx("client"));
  client.handshake();
  std::string msg = "hello over tls";
  client.queue(msg);
  while (client.plain.size() < msg.size() + 1 && !HasFatalFailure()) client.pump();
  EXPECT_EQ(client.plain, msg + "!");
  auto conn = made.get_future().get();
  EXPECT_TRUE(conn->isTls());
  EXPECT_EQ(conn->cn.get_future().get(), "tls-client");
  sock.close();
  EXPECT_EQ(conn->closed.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  server.stop();
}

TEST_F(TlsServerTest, MaxNextDeliveryCutsDecryptedDataAndKeepsTheRestUntilResumed) {
  const size_t stopAt = 100003;
  expectStopsAtTheBoundary(
      loops_,
      [&](EventLoop& l, tcp::socket s) {
        return std::make_shared<StopAtConnection>(l, std::move(s), stopAt,
                                                  std::make_unique<TlsSession>(ctx_->current()));
      },
      [&](tcp::socket& sock, const std::string& data) {
        BlockingTlsClient client(sock, clientCtx());
        client.handshake();
        client.queue(data);
        client.flush();
      },
      stopAt, 300000);
}

TEST_F(TlsServerTest, GarbageOnTheTlsPortClosesOnlyThatConnection) {
  std::vector<std::shared_ptr<TlsEcho>> conns;
  std::mutex mu;
  TcpServer server(loops_, [&](EventLoop& loop, tcp::socket s) {
    auto c = std::make_shared<TlsEcho>(loop, std::move(s),
                                       std::make_unique<TlsSession>(ctx_->current()));
    std::lock_guard<std::mutex> lock(mu);
    conns.push_back(c);
    return c;
  });
  ASSERT_TRUE(server.start("127.0.0.1", 0).isOk());
  uint64_t before = TlsErrorStats::get(TlsError::kHandshakeFailed);
  boost::asio::io_context io;
  tcp::socket sock = connectLocal(io, server.boundPort());
  std::string garbage(300, '\x17');
  boost::asio::write(sock, boost::asio::buffer(garbage));
  std::vector<uint8_t> buf(4096);
  boost::system::error_code ec;
  for (int i = 0; i < 10 && !ec; ++i) sock.read_some(boost::asio::buffer(buf), ec);  // alert, EOF
  EXPECT_TRUE(ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset)
      << ec.message();
  EXPECT_EQ(TlsErrorStats::get(TlsError::kHandshakeFailed), before + 1);
  server.stop();
}

}  // namespace
}  // namespace magnetar::net
