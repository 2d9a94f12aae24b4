// ZkStore against a real ZooKeeper server started by scripts/zookeeper.sh (one per test binary,
// tickTime 200 ms so that sessions can be short).
#include "metadata/zk_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "metadata/cache.h"
#include "metadata/tests/cache_contract.h"
#include "metadata/tests/store_contract.h"

namespace magnetar::metadata::testing {
namespace {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// The server for this binary: started by the first test that needs it (ctest runs each test in
// a process of its own), stopped after the last test.
struct ZkServer : public ::testing::Environment {
  std::string dir;
  int port = 0;
  pid_t pid = 0;

  static ZkServer& get() {
    if (instance->port == 0) instance->start();
    return *instance;
  }
  std::string url() const { return "zk:127.0.0.1:" + std::to_string(port); }

  void start() {
    char tmpl[] = "/tmp/magnetar-zk-XXXXXX";
    dir = ::mkdtemp(tmpl);
    port = freePort();
    std::string cmd = "bash " MAGNETAR_SOURCE_DIR "/scripts/zookeeper.sh start -d " + dir + " -p " +
                      std::to_string(port) + " --tick-ms 200 > " + dir + "/start.out";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "scripts/zookeeper.sh start failed (see " << dir << "/zookeeper.log)";
      return;
    }
    std::ifstream pidf(dir + "/zookeeper.pid");
    pidf >> pid;
  }
  void TearDown() override {
    if (port == 0) return;
    std::string stop = "bash " MAGNETAR_SOURCE_DIR "/scripts/zookeeper.sh stop -d " + dir;
    EXPECT_EQ(std::system(stop.c_str()), 0);
    std::string rm = "rm -rf " + dir;
    (void)std::system(rm.c_str());
  }

  static ZkServer* instance;
};
ZkServer* ZkServer::instance =
    static_cast<ZkServer*>(::testing::AddGlobalTestEnvironment(new ZkServer()));

class ZkSource : public SessionSource {
 public:
  explicit ZkSource(int sessionTimeoutMs = 4000, int operationTimeoutMs = 30000)
      : timeout_(sessionTimeoutMs), opTimeout_(operationTimeoutMs) {}
  std::unique_ptr<Store> openSession() override {
    ZkConfig c;
    c.url = ZkServer::get().url();
    c.sessionTimeoutMs = timeout_;
    c.connectTimeoutMs = 15000;
    c.operationTimeoutMs = opTimeout_;
    auto s = openZkStore(c);
    EXPECT_TRUE(s.isOk()) << s.status().toString();
    return s.isOk() ? std::move(s).value() : nullptr;
  }

 private:
  int timeout_;
  int opTimeout_;
};

std::unique_ptr<SessionSource> makeZk() { return std::make_unique<ZkSource>(); }

// Runs ex's tasks until pred() holds or `limit` passed; returns pred().
bool runFor(storage::testing::ManualExecutor& ex, const std::function<bool()>& pred,
            std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < deadline) {
    if (ex.runPending() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(ZooKeeper, StoreContractTest, ::testing::Values(SourceMaker(makeZk)));
INSTANTIATE_TEST_SUITE_P(ZooKeeper, MetadataCacheContractTest,
                         ::testing::Values(SourceMaker(makeZk)));

TEST(ZkUrl, ParsesPulsarsFormsAndRefusesBadOnes) {
  EXPECT_EQ(parseZkUrl("zk:h1:2181,h2:2182/chroot/x").value(), "h1:2181,h2:2182/chroot/x");
  EXPECT_EQ(parseZkUrl("zk://h1:2181").value(), "h1:2181");
  EXPECT_EQ(parseZkUrl("127.0.0.1:2181").value(), "127.0.0.1:2181");
  EXPECT_EQ(parseZkUrl("zk:h1:2181/").value(), "h1:2181");
  for (const char* bad : {"zk:", "zk:host", "zk:host:0", "zk:host:70000", "zk:h:1,", "zk::2181",
                          "zk:h:12x", "zk:h:2181//x"}) {
    auto r = parseZkUrl(bad);
    EXPECT_FALSE(r.isOk()) << bad;
    if (!r.isOk()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(ZkStoreOpen, NoServerIsATimeoutNamingTheServers) {
  ZkConfig c;
  c.url = "zk:127.0.0.1:" + std::to_string(freePort());
  c.connectTimeoutMs = 1500;
  auto t0 = std::chrono::steady_clock::now();
  auto s = openZkStore(c);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.status().code(), StatusCode::kTimeout);
  EXPECT_NE(s.status().message().find("127.0.0.1"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(openZkStore(ZkConfig{"zk:nohostport", 1000, 1000}).status().code(),
            StatusCode::kInvalidArgument);
}

// An expired session (ended from a second connection, ZooKeeper's way): listeners hear the session
// end and a new one start; the ephemeral node is gone; the store keeps working.
TEST(ZkStoreSession, ExpiryEndsEphemeralNodesAndANewSessionFollows) {
  ZkServer& server = ZkServer::get();
  ASSERT_GT(server.pid, 0);
  ZkSource source(/*sessionTimeoutMs=*/4000);
  auto store = source.openSession();
  auto watcher = source.openSession();
  ASSERT_TRUE(store && watcher);
  storage::testing::ManualExecutor ex;
  std::vector<SessionEvent> events;
  store->registerSessionListener([&](SessionEvent e) { events.push_back(e); }, &ex);

  auto runUntil = [&](const std::function<bool()>& pred, int seconds) {
    return runFor(ex, pred, std::chrono::seconds(seconds));
  };
  std::string p = "/expiry-" + std::to_string(::getpid());
  std::optional<Result<Stat>> made;
  PutOptions eph;
  eph.ephemeral = true;
  store->put(p, "mine", eph, &ex, [&](Result<Stat> r) { made = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return made.has_value(); }, 10));
  ASSERT_TRUE(made->isOk()) << made->status().toString();

  ASSERT_TRUE(expireZkSessionForTesting(store.get()).isOk());
  auto has = [&](SessionEvent e) {
    return std::find(events.begin(), events.end(), e) != events.end();
  };
  EXPECT_TRUE(runUntil([&] { return has(SessionEvent::kSessionReestablished); }, 30));
  EXPECT_TRUE(has(SessionEvent::kSessionLost));

  std::optional<Result<std::optional<GetResult>>> after;
  watcher->get(p, &ex, [&](Result<std::optional<GetResult>> r) { after = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return after.has_value(); }, 20));
  ASSERT_TRUE(after->isOk()) << after->status().toString();
  EXPECT_FALSE(after->value().has_value());

  std::optional<Result<Stat>> again;
  store->put(p, "mine-again", eph, &ex, [&](Result<Stat> r) { again = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return again.has_value(); }, 10));
  EXPECT_TRUE(again->isOk()) << again->status().toString();
  store->close();
  watcher->close();
  ex.runPending();
}

// MetadataCache on a ZooKeeper session that expires: the watches went with the old session, so
// every entry is dropped (and listeners told) when the new one starts, as Pulsar's caches do on
// SessionReestablished; the next read goes to ZooKeeper and sees another broker's write.
TEST(ZkStoreSession, AReestablishedSessionEmptiesTheMetadataCache) {
  ZkServer& server = ZkServer::get();
  ASSERT_GT(server.pid, 0);
  ZkSource source(/*sessionTimeoutMs=*/4000);
  auto store = source.openSession();
  auto other = source.openSession();
  ASSERT_TRUE(store && other);
  storage::testing::ManualExecutor ex;
  auto runUntil = [&](const std::function<bool()>& pred, int seconds) {
    return runFor(ex, pred, std::chrono::seconds(seconds));
  };
  auto cache = MetadataCache<std::string>::create(
      store.get(),
      Serde<std::string>{[](const std::string& v) { return v; },
                         [](const std::string& v) -> Result<std::string> { return v; }},
      &ex);
  bool allDropped = false;
  cache->addListener([&](const std::optional<std::string>& path) {
    if (!path) allDropped = true;
  });
  std::string p = "/cache-expiry-" + std::to_string(::getpid());
  std::optional<Result<Stat>> made;
  other->put(p, "v1", {}, &ex, [&](Result<Stat> r) { made = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return made.has_value(); }, 10));
  bool read = false;
  cache->get(p, &ex, [&](Result<std::optional<std::string>>) { read = true; });
  ASSERT_TRUE(runUntil([&] { return read; }, 10));
  ASSERT_EQ(cache->getIfCached(p), std::optional<std::string>("v1"));

  ASSERT_TRUE(expireZkSessionForTesting(store.get()).isOk());
  EXPECT_TRUE(runUntil([&] { return allDropped; }, 30));
  EXPECT_FALSE(cache->getIfCached(p).has_value());
  std::optional<Result<std::optional<std::string>>> got;
  cache->get(p, &ex, [&](Result<std::optional<std::string>> r) { got = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return got.has_value(); }, 20));
  ASSERT_TRUE(got->isOk()) << got->status().toString();
  EXPECT_EQ(**got, std::optional<std::string>("v1"));
  cache->close();
  store->close();
  other->close();
  ex.runPending();
}

// metadataStoreOperationTimeoutSeconds: a call ZooKeeper does not answer (the server paused,
// well inside the session timeout) ends with kTimeout naming the path, and the late answer after
// the server resumes is dropped (the callback runs once).
TEST(ZkStoreTimeout, AnUnansweredCallEndsWithTimeout) {
  ZkServer& server = ZkServer::get();
  ASSERT_GT(server.pid, 0);
  ZkSource source(/*sessionTimeoutMs=*/4000, /*operationTimeoutMs=*/500);
  auto store = source.openSession();
  ASSERT_TRUE(store);
  storage::testing::ManualExecutor ex;
  auto runUntil = [&](const std::function<bool()>& pred, int ms) {
    return runFor(ex, pred, std::chrono::milliseconds(ms));
  };
  // Answered in time: no timeout.
  int calls = 0;
  std::optional<Result<Stat>> made;
  store->put("/timeout-" + std::to_string(::getpid()), "v", {}, &ex, [&](Result<Stat> r) {
    made = std::move(r);
    calls++;
  });
  ASSERT_TRUE(runUntil([&] { return made.has_value(); }, 5000));
  ASSERT_TRUE(made->isOk()) << made->status().toString();

  ASSERT_EQ(::kill(server.pid, SIGSTOP), 0);
  std::vector<Result<std::optional<GetResult>>> got;
  auto t0 = std::chrono::steady_clock::now();
  store->get("/timeout-" + std::to_string(::getpid()), &ex,
             [&](Result<std::optional<GetResult>> r) { got.push_back(std::move(r)); });
  bool ended = runUntil([&] { return !got.empty(); }, 1800);
  auto waited = std::chrono::steady_clock::now() - t0;
  ::kill(server.pid, SIGCONT);
  ASSERT_TRUE(ended) << "no kTimeout while ZooKeeper was paused";
  EXPECT_GE(waited, std::chrono::milliseconds(450));
  ASSERT_FALSE(got[0].isOk());
  EXPECT_EQ(got[0].status().code(), StatusCode::kTimeout);
  EXPECT_NE(got[0].status().message().find("/timeout-"), std::string::npos);
  // The server answers once resumed; that late answer must not reach the callback again.
  std::optional<Result<bool>> there;
  store->exists("/timeout-" + std::to_string(::getpid()), &ex,
                [&](Result<bool> r) { there = std::move(r); });
  ASSERT_TRUE(runUntil([&] { return there.has_value(); }, 8000));
  ASSERT_TRUE(there->isOk()) << there->status().toString();
  EXPECT_TRUE(there->value());
  runUntil([] { return false; }, 200);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(calls, 1);
  store->close();
  ex.runPending();
}

}  // namespace magnetar::metadata::testing
