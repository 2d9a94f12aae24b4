// PeerPool / PeerConnection against a fake owner broker on a local socket (it answers CONNECT and
// each request as a test tells it), and BrokerClientSettings' reading of the brokerClient* keys.
#include "broker/service/broker_peer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "net/tcp_server.h"
#include "net/tls.h"
#include "protocol/commands.h"

namespace magnetar::broker {
namespace {

using boost::asio::ip::tcp;
using protocol::Commands;
using std::chrono::milliseconds;

// What the fake owner answers a frame with; an empty Buffer answers nothing.
using Answer = std::function<Buffer(const proto::BaseCommand&)>;

class FakeOwnerCnx final : public net::Connection {
 public:
  FakeOwnerCnx(net::EventLoop& l, tcp::socket s, Answer answer,
               std::promise<proto::CommandConnect>* connect,
               std::unique_ptr<net::TlsSession> tls = nullptr)
      : net::Connection(l, std::move(s), std::move(tls)),
        answer_(std::move(answer)),
        connect_(connect) {}

 protected:
  bool onData(const uint8_t* data, size_t len) override {
    Status s = decoder_.feed(data, len, [this](const proto::BaseCommand& cmd, const Buffer&) {
      if (cmd.type() == proto::BaseCommand::CONNECT && connect_) {
        connect_->set_value(cmd.connect());
        connect_ = nullptr;
      }
      Buffer b = answer_(cmd);
      if (b.size() > 0) send(b);
      return Status::ok();
    });
    return s.isOk();
  }
  void onClosed() override {}

 private:
  Answer answer_;
  std::promise<proto::CommandConnect>* connect_;
  protocol::FrameDecoder decoder_;
};

// CONNECTED to CONNECT, then `requests` for the rest.
Answer connectThen(Answer requests) {
  return [requests](const proto::BaseCommand& cmd) {
    if (cmd.type() == proto::BaseCommand::CONNECT) {
      return Commands::newConnected("fake-owner", 21, 5 << 20);
    }
    return requests(cmd);
  };
}

class BrokerPeerTest : public ::testing::Test {
 protected:
  void SetUp() override { loops_.start(); }
  void TearDown() override {
    if (server_) server_->stop();
  }
  // Starts the fake owner; its pulsar:// URL.
  // Starts the fake owner (over TLS with `tls`): pulsar://127.0.0.1:P (pulsar+ssl:// with TLS).
  std::string startOwner(Answer answer, std::shared_ptr<net::TlsContext> tls = nullptr) {
    server_ = std::make_unique<net::TcpServer>(
        loops_, [this, answer, tls](net::EventLoop& l, tcp::socket s) {
          auto session = tls ? std::make_unique<net::TlsSession>(tls->current()) : nullptr;
          return std::shared_ptr<net::Connection>(std::make_shared<FakeOwnerCnx>(
              l, std::move(s), answer, &connect_, std::move(session)));
        });
    EXPECT_TRUE(server_->start("0.0.0.0", 0).isOk());
    return std::string(tls ? "pulsar+ssl" : "pulsar") +
           "://127.0.0.1:" + std::to_string(server_->boundPort());
  }
  std::shared_ptr<const BrokerClientSettings> settings(BrokerClientOptions o = {}) {
    auto s = BrokerClientSettings::create(o);
    EXPECT_TRUE(s.isOk()) << s.status().toString();
    return s.isOk() ? *s : nullptr;
  }
  // Sends END_TXN_ON_PARTITION through a pool and waits for the answer.
  Result<proto::BaseCommand> endTxn(PeerPool& pool, const std::string& url, milliseconds timeout) {
    std::promise<Result<proto::BaseCommand>> answered;
    pool.get(url, [&](Result<std::shared_ptr<PeerConnection>> c) {
      if (!c.isOk()) return answered.set_value(c.status());
      (*c)->request(
          [](uint64_t id) {
            return Commands::newEndTxnOnPartition(id, "persistent://t/n/x", 1, 2, proto::COMMIT, 0);
          },
          timeout, [&](Result<proto::BaseCommand> r) { answered.set_value(std::move(r)); });
    });
    return answered.get_future().get();
  }

  net::EventLoopGroup loops_{"peer-test", 1};
  std::unique_ptr<net::TcpServer> server_;
  std::promise<proto::CommandConnect> connect_;
};

TEST_F(BrokerPeerTest, SendsTokenOnConnectAndGetsTheOwnersAnswer) {
  const std::string url = startOwner(connectThen([](const proto::BaseCommand& cmd) {
    const auto& e = cmd.endtxnonpartition();
    return Commands::newEndTxnOnPartitionResponse(e.request_id(), e.txnid_least_bits(),
                                                  e.txnid_most_bits());
  }));
  BrokerClientOptions o;
  o.authenticationPlugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken";
  o.authenticationParameters = "token:abc.def.ghi";
  PeerPool pool(loops_, milliseconds(2000), settings(o));
  auto r = endTxn(pool, url, milliseconds(2000));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->type(), proto::BaseCommand::END_TXN_ON_PARTITION_RESPONSE);
  EXPECT_FALSE(r->endtxnonpartitionresponse().has_error());
  auto c = connect_.get_future().get();
  EXPECT_EQ(c.auth_method_name(), "token");
  EXPECT_EQ(c.auth_data(), "abc.def.ghi");
  pool.closeAll();
}

TEST_F(BrokerPeerTest, PassesTheOwnersErrorAndLookupRedirect) {
  const std::string url = startOwner(connectThen([](const proto::BaseCommand& cmd) {
    if (cmd.type() == proto::BaseCommand::LOOKUP) {
      return Commands::newLookupResponse(cmd.lookuptopic().request_id(), "pulsar://other:6650",
                                         "pulsar+ssl://other:6651", true,
                                         proto::CommandLookupTopicResponse::Redirect);
    }
    const auto& e = cmd.endtxnonpartition();
    return Commands::newEndTxnOnPartitionResponse(e.request_id(), e.txnid_least_bits(),
                                                  e.txnid_most_bits(), proto::ServiceNotReady,
                                                  "not served");
  }));
  PeerPool pool(loops_, milliseconds(2000), settings());
  auto r = endTxn(pool, url, milliseconds(2000));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->endtxnonpartitionresponse().error(), proto::ServiceNotReady);
  EXPECT_EQ(r->endtxnonpartitionresponse().message(), "not served");
  EXPECT_FALSE(connect_.get_future().get().has_auth_method_name());  // AuthenticationDisabled

  std::promise<Result<proto::BaseCommand>> looked;
  pool.get(url, [&](Result<std::shared_ptr<PeerConnection>> c) {
    ASSERT_TRUE(c.isOk());
    (*c)->request([](uint64_t id) { return Commands::newLookup("persistent://t/n/x", id, false); },
                  milliseconds(2000),
                  [&](Result<proto::BaseCommand> a) { looked.set_value(std::move(a)); });
  });
  auto l = looked.get_future().get();
  ASSERT_TRUE(l.isOk());
  EXPECT_EQ(l->lookuptopicresponse().response(), proto::CommandLookupTopicResponse::Redirect);
  EXPECT_EQ(l->lookuptopicresponse().brokerserviceurltls(), "pulsar+ssl://other:6651");
  pool.closeAll();
}

TEST_F(BrokerPeerTest, ThroughAProxyConnectNamesTheBrokerAndIsAConnectionOfItsOwn) {
  const std::string url = startOwner(connectThen([](const proto::BaseCommand& cmd) {
    const auto& e = cmd.endtxnonpartition();
    return Commands::newEndTxnOnPartitionResponse(e.request_id(), e.txnid_least_bits(),
                                                  e.txnid_most_bits());
  }));
  PeerPool pool(loops_, milliseconds(2000), settings());
  std::promise<std::shared_ptr<PeerConnection>> proxied;
  pool.get(url, "owner-host:6650", [&](Result<std::shared_ptr<PeerConnection>> c) {
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    proxied.set_value(*c);
  });
  auto viaProxy = proxied.get_future().get();
  EXPECT_EQ(connect_.get_future().get().proxy_to_broker_url(), "owner-host:6650");
  // The plain URL is another connection (CONNECT without proxy_to_broker_url).
  connect_ = {};
  ASSERT_TRUE(endTxn(pool, url, milliseconds(2000)).isOk());
  EXPECT_FALSE(connect_.get_future().get().has_proxy_to_broker_url());
  std::promise<std::shared_ptr<PeerConnection>> again;
  pool.get(url, "owner-host:6650",
           [&](Result<std::shared_ptr<PeerConnection>> c) { again.set_value(*c); });
  EXPECT_EQ(again.get_future().get(), viaProxy);  // kept per (url, broker)
  pool.closeAll();
}

TEST_F(BrokerPeerTest, TimesOutAnUnansweredRequest) {
  const std::string url =
      startOwner(connectThen([](const proto::BaseCommand&) { return Buffer(); }));
  PeerPool pool(loops_, milliseconds(2000), settings());
  const auto start = std::chrono::steady_clock::now();
  auto r = endTxn(pool, url, milliseconds(200));  // transactionBufferClientOperationTimeoutInMills
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(190));
  pool.closeAll();
}

TEST_F(BrokerPeerTest, ConnectRefusedIsNotAllowedWithTheBrokersText) {
  const std::string url = startOwner([](const proto::BaseCommand& cmd) {
    if (cmd.type() != proto::BaseCommand::CONNECT) return Buffer();
    return Commands::newError(0, proto::AuthenticationError, "Failed to authentication");
  });
  PeerPool pool(loops_, milliseconds(2000), settings());
  auto r = endTxn(pool, url, milliseconds(2000));
  EXPECT_EQ(r.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ(r.status().message(), "Failed to authentication");
}

TEST_F(BrokerPeerTest, TlsUrlWithoutBrokerClientTlsEnabledIsRefused) {
  PeerPool pool(loops_, milliseconds(2000), settings());
  auto r = endTxn(pool, "pulsar+ssl://127.0.0.1:1", milliseconds(2000));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// Certificates of tests/harness/gen_tls_certs.sh: broker.pem (SAN localhost, 127.0.0.1) signed
// by ca.pem; other-ca.pem signed nothing here.
class BrokerPeerTlsTest : public BrokerPeerTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-peer-tls-" + std::to_string(::getpid()));
    std::string cmd = "bash " MAGNETAR_SOURCE_DIR "/tests/harness/gen_tls_certs.sh " +
                      dir_.string() + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string f(const std::string& name) { return (dir_ / name).string(); }
  std::string startTlsOwner() {
    net::TlsOptions o;
    o.certificateFilePath = f("broker.pem");
    o.keyFilePath = f("broker.key");
    auto ctx = net::TlsContext::create(o);
    EXPECT_TRUE(ctx.isOk());
    return startOwner(connectThen([](const proto::BaseCommand& cmd) {
                        const auto& e = cmd.endtxnonpartition();
                        return Commands::newEndTxnOnPartitionResponse(
                            e.request_id(), e.txnid_least_bits(), e.txnid_most_bits());
                      }),
                      *ctx);
  }
  BrokerClientOptions tlsOptions(const std::string& ca) {
    BrokerClientOptions o;
    o.tlsEnabled = true;
    o.trustCertsFilePath = f(ca);
    o.hostnameVerificationEnabled = true;
    o.authenticationPlugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken";
    o.authenticationParameters = "token:over-tls";
    return o;
  }
  static inline std::filesystem::path dir_;
};

TEST_F(BrokerPeerTlsTest, EndsOverTlsWithTheTokenWhenTheOwnerIsTrusted) {
  const std::string url = startTlsOwner();
  PeerPool pool(loops_, milliseconds(3000), settings(tlsOptions("ca.pem")));
  auto r = endTxn(pool, url, milliseconds(3000));
  ASSERT_TRUE(r.isOk()) << r.status().toString();
  EXPECT_EQ(r->type(), proto::BaseCommand::END_TXN_ON_PARTITION_RESPONSE);
  EXPECT_EQ(connect_.get_future().get().auth_data(), "over-tls");
  pool.closeAll();
}

TEST_F(BrokerPeerTlsTest, RefusesAnUntrustedOwnerOrAnotherHostName) {
  const std::string url = startTlsOwner();
  PeerPool untrusted(loops_, milliseconds(3000), settings(tlsOptions("other-ca.pem")));
  EXPECT_FALSE(endTxn(untrusted, url, milliseconds(3000)).isOk());
  // 127.0.0.2 reaches the same listener, but the certificate names localhost and 127.0.0.1.
  const std::string other = "pulsar+ssl://127.0.0.2:" + std::to_string(server_->boundPort());
  PeerPool verifying(loops_, milliseconds(3000), settings(tlsOptions("ca.pem")));
  EXPECT_FALSE(endTxn(verifying, other, milliseconds(3000)).isOk());
  auto o = tlsOptions("ca.pem");
  o.hostnameVerificationEnabled = false;  // tlsHostnameVerificationEnabled's default
  PeerPool lenient(loops_, milliseconds(3000), settings(o));
  EXPECT_TRUE(endTxn(lenient, other, milliseconds(3000)).isOk());
  lenient.closeAll();
}

Result<PeerCredentials> credentialsOf(const std::string& plugin, const std::string& params) {
  BrokerClientOptions o;
  o.authenticationPlugin = plugin;
  o.authenticationParameters = params;
  auto s = BrokerClientSettings::create(o);
  if (!s.isOk()) return s.status();
  return (*s)->credentials();
}

TEST(BrokerClientSettingsTest, ReadsPulsarsPluginsAndParameters) {
  const std::string p = "org.apache.pulsar.client.impl.auth.";
  EXPECT_EQ(credentialsOf(p + "AuthenticationDisabled", "")->method, "");
  EXPECT_EQ(credentialsOf(p + "AuthenticationToken", "token:T1")->data, "T1");
  EXPECT_EQ(credentialsOf(p + "AuthenticationToken", R"({"token":"T2"})")->data, "T2");
  EXPECT_EQ(credentialsOf(p + "AuthenticationToken", "T3")->data, "T3");
  auto basic = credentialsOf(p + "AuthenticationBasic", R"({"userId":"u","password":"pw"})");
  EXPECT_EQ(basic->method, "basic");
  EXPECT_EQ(basic->data, "u:pw");
  EXPECT_EQ(credentialsOf(p + "AuthenticationBasic", "u:pw").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(credentialsOf(p + "AuthenticationSasl", "").status().code(),
            StatusCode::kInvalidArgument);
  // AuthenticationTls needs TLS towards the brokers.
  EXPECT_EQ(credentialsOf(p + "AuthenticationTls", "tlsCertFile:/a,tlsKeyFile:/b").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BrokerClientSettingsTest, TokenFileIsReadAtEachConnect) {
  const auto path = std::filesystem::temp_directory_path() / "broker_peer_test_token";
  std::ofstream(path) << "first\n";
  auto s = BrokerClientSettings::create(
      {"org.apache.pulsar.client.impl.auth.AuthenticationToken", "file://" + path.string()});
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ((*s)->credentials()->data, "first");
  std::ofstream(path) << "second";
  EXPECT_EQ((*s)->credentials()->data, "second");
  std::filesystem::remove(path);
  EXPECT_FALSE((*s)->credentials().isOk());
}

TEST(BrokerClientSettingsTest, RefusesKeyStoresAndUnreadableTrustFiles) {
  BrokerClientOptions o;
  o.tlsEnabled = true;
  o.tlsEnabledWithKeyStore = true;
  auto s = BrokerClientSettings::create(o);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.status().message().find("brokerClientTlsEnabledWithKeyStore"), std::string::npos);
  o.tlsEnabledWithKeyStore = false;
  o.trustCertsFilePath = "/nonexistent/ca.pem";
  EXPECT_EQ(BrokerClientSettings::create(o).status().code(), StatusCode::kInvalidArgument);
  o.trustCertsFilePath.clear();
  auto ok = BrokerClientSettings::create(o);  // the system's CAs
  ASSERT_TRUE(ok.isOk());
  EXPECT_TRUE((*ok)->tlsEnabled());
}

}  // namespace
}  // namespace magnetar::broker
