// A voluntary release keeps the
// ownership znode until the bundle's topics closed (on the in-process metadata store). A broker
// whose ZooKeeper contact lapsed (a pause past its session) does not answer lookups of its bundles
// from memory.
#include "broker/cluster/namespace_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/cluster/cluster_metadata.h"
#include "metadata/local_store.h"
#include "net/event_loop.h"

namespace magnetar::broker::cluster {
namespace {

// One broker on an in-process metadata store, with a release handler that records its calls.
class ReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override { replies_.start(); }
  void TearDown() override {
    if (ns_) ns_->stop();
    replies_.stop();
  }

  void startBroker(int64_t unloadTimeoutMs, bool withHandler) {
    std::promise<bool> made;  // the cluster, as initialize-cluster-metadata writes it
    store_->put("/admin/clusters/c", "{}", {}, &replies_,
                [&made](const Result<metadata::Stat>& r) { made.set_value(r.isOk()); });
    ASSERT_TRUE(made.get_future().get());
    NamespaceServiceOptions o;
    o.clusterName = "c";
    o.bundleUnloadingTimeoutMs = [unloadTimeoutMs] { return unloadTimeoutMs; };
    ns_ = std::make_unique<NamespaceService>(store_.get(), store_.get(), o);
    ns_->setOwnershipLostHandler([this] { lostCalls_++; });
    ns_->setBundleOwnedHandler([this](const std::string& key) {
      MutexLock lock(ownedMu_);
      ownedCalls_.push_back({key, ns_->owns(topic_)});
    });
    if (withHandler) {
      ns_->setBundleReleaseHandler([this](const std::string& key, std::function<void()> closed) {
        released_.set_value({key, std::move(closed)});
      });
    }
    ASSERT_TRUE(
        ns_->start(
               {"127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", "", {}})
            .isOk());
  }

  LookupAnswer lookup() {
    std::promise<LookupAnswer> p;
    ns_->lookup(topic_, false, "", &replies_, [&p](LookupAnswer a) { p.set_value(a); });
    auto f = p.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  }

  std::optional<OwnerData> ownerOf(const std::string& key) {
    std::promise<Result<std::optional<OwnerData>>> p;
    ns_->ownerOf(key, &replies_, [&p](Result<std::optional<OwnerData>> r) { p.set_value(r); });
    auto r = p.get_future().get();
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? *r : std::nullopt;
  }

  // Takes the topic's bundle and starts its admin unload; returns the bundle and the reply.
  std::pair<std::string, std::future<Status>> takeAndUnload() {
    LookupAnswer a = lookup();
    EXPECT_TRUE(a.error.isOk()) << a.error.toString();
    EXPECT_EQ(a.url, "pulsar://127.0.0.1:6650");
    auto owned = ns_->ownedBundles();
    EXPECT_EQ(owned.size(), 1u);
    std::string key = owned.empty() ? "" : owned[0];
    auto done = std::make_shared<std::promise<Status>>();
    ns_->unloadBundle("public/default", key.substr(key.rfind('/') + 1), &replies_,
                      [done](Status s) { done->set_value(s); });
    return {key, done->get_future()};
  }

  std::shared_ptr<metadata::LocalBackend> backend_ = metadata::LocalBackend::create();
  std::unique_ptr<metadata::LocalStore> store_ = backend_->openSession();
  net::EventLoop replies_{"test-replies"};
  std::unique_ptr<NamespaceService> ns_;
  TopicName topic_ = *TopicName::parse("persistent://public/default/t");
  std::promise<std::pair<std::string, std::function<void()>>> released_;
  std::atomic<int> lostCalls_{0};
  Mutex ownedMu_;
  // The owned handler's calls: the bundle, and whether owns() was already true then.
  std::vector<std::pair<std::string, bool>> ownedCalls_ GUARDED_BY(ownedMu_);
};

TEST_F(ReleaseTest, TakingABundleCallsTheOwnedHandlerOnceOwned) {
  startBroker(60000, true);
  {
    MutexLock lock(ownedMu_);
    EXPECT_TRUE(ownedCalls_.empty());
  }
  LookupAnswer a = lookup();  // the handler ran before the answer
  ASSERT_TRUE(a.error.isOk()) << a.error.toString();
  auto owned = ns_->ownedBundles();
  ASSERT_EQ(owned.size(), 1u);
  MutexLock lock(ownedMu_);
  ASSERT_EQ(ownedCalls_.size(), 1u);
  EXPECT_EQ(ownedCalls_[0].first, owned[0]);
  EXPECT_TRUE(ownedCalls_[0].second);
}

TEST_F(ReleaseTest, AdminUnloadKeepsTheOwnershipUntilTheTopicsClosed) {
  startBroker(60000, true);
  auto [key, unloaded] = takeAndUnload();
  auto call = released_.get_future();
  ASSERT_EQ(call.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [releasedKey, closed] = call.get();
  EXPECT_EQ(releasedKey, key);
  EXPECT_FALSE(ns_->owns(topic_));
  EXPECT_EQ(lostCalls_.load(), 0);
  // Topics still closing: the znode stays (no other broker takes them), lookups wait.
  EXPECT_EQ(unloaded.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_TRUE(ownerOf(key).has_value());
  LookupAnswer during = lookup();
  EXPECT_FALSE(during.error.isOk());
  EXPECT_NE(during.error.message().find("being unloaded"), std::string::npos);
  EXPECT_FALSE(ns_->owns(topic_));
  closed();
  ASSERT_EQ(unloaded.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(unloaded.get().isOk());
  EXPECT_FALSE(ownerOf(key).has_value());
  // Free again: the next lookup takes it.
  EXPECT_TRUE(lookup().error.isOk());
  EXPECT_TRUE(ns_->owns(topic_));
}

TEST_F(ReleaseTest, TopicsNotClosedInTimeDoNotHoldTheBundle) {
  startBroker(200, true);
  auto [key, unloaded] = takeAndUnload();
  ASSERT_EQ(unloaded.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(unloaded.get().isOk());
  EXPECT_FALSE(ownerOf(key).has_value());
  // A late `closed` changes nothing.
  auto call = released_.get_future();
  ASSERT_EQ(call.wait_for(std::chrono::seconds(1)), std::future_status::ready);
  call.get().second();
  EXPECT_TRUE(lookup().error.isOk());
  EXPECT_TRUE(ns_->owns(topic_));
  EXPECT_TRUE(ownerOf(key).has_value());
}

TEST_F(ReleaseTest, WithoutAReleaseHandlerTheLostHandlerRunsAndTheOwnershipGoesAtOnce) {
  startBroker(60000, false);
  auto [key, unloaded] = takeAndUnload();
  ASSERT_EQ(unloaded.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(unloaded.get().isOk());
  EXPECT_EQ(lostCalls_.load(), 1);
  EXPECT_FALSE(ownerOf(key).has_value());
}

// Shedding's destination (Pulsar's doLoadShedding runs selectBroker before the unload): the
// owner itself while it is the only broker (the bundle then stays), else the broker the
// placement picks, which the bundle is preallocated to: the lookup after the unload goes there.
TEST_F(ReleaseTest, AShedBundleGoesToTheDestinationChosenBeforeTheUnload) {
  startBroker(60000, false);
  ASSERT_TRUE(lookup().error.isOk());
  auto owned = ns_->ownedBundles();
  ASSERT_EQ(owned.size(), 1u);
  const std::string key = owned[0];
  auto destination = [&] {
    std::promise<std::optional<std::string>> p;
    ns_->chooseUnloadDestination(key, "127.0.0.1:8080", &replies_,
                                 [&p](std::optional<std::string> b) { p.set_value(b); });
    auto f = p.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return f.get();
  };
  EXPECT_EQ(destination(), std::optional<std::string>("127.0.0.1:8080"));
  // A second broker registers, owning nothing: the even spread picks it.
  BrokerUrls other{
      "127.0.0.2:8080", "pulsar://127.0.0.2:6650", "", "http://127.0.0.2:8080", "", {}};
  std::promise<bool> put;
  store_->put("/loadbalance/brokers/127.0.0.2:8080", localBrokerDataJson(other, {}, 1, 1), {},
              &replies_, [&put](const Result<metadata::Stat>& r) { put.set_value(r.isOk()); });
  ASSERT_TRUE(put.get_future().get());
  EXPECT_EQ(destination(), std::optional<std::string>("127.0.0.2:8080"));
  std::promise<Status> unloaded;
  ns_->unloadBundle("public/default", key.substr(key.rfind('/') + 1), &replies_,
                    [&unloaded](Status s) { unloaded.set_value(s); });
  ASSERT_TRUE(unloaded.get_future().get().isOk());
  LookupAnswer a = lookup();
  ASSERT_TRUE(a.error.isOk()) << a.error.toString();
  EXPECT_TRUE(a.redirect);
  EXPECT_EQ(a.url, "pulsar://127.0.0.2:6650");
}

// A session whose ZooKeeper falls silent on demand, as seen by a broker resumed from a SIGSTOP
// past its session: nothing it asked for is answered and no watch or session event has arrived
// yet. Requests made meanwhile go out (in order) at speak().
class SilentStore : public metadata::Store {
 public:
  explicit SilentStore(std::unique_ptr<metadata::LocalStore> inner) : inner_(std::move(inner)) {}
  void silence() {
    MutexLock lock(mu_);
    silent_ = true;
  }
  void speak() {
    std::deque<std::function<void()>> held;
    {
      MutexLock lock(mu_);
      silent_ = false;
      held.swap(held_);
    }
    for (auto& f : held) f();
  }
  void get(const std::string& path, net::Executor* ex, GetCallback cb) override {
    run([=, this] { inner_->get(path, ex, cb); });
  }
  void getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) override {
    run([=, this] { inner_->getChildren(path, ex, cb); });
  }
  void exists(const std::string& path, net::Executor* ex, ExistsCallback cb) override {
    run([=, this] { inner_->exists(path, ex, cb); });
  }
  void put(const std::string& path, const std::string& value, const metadata::PutOptions& opts,
           net::Executor* ex, PutCallback cb) override {
    run([=, this] { inner_->put(path, value, opts, ex, cb); });
  }
  void remove(const std::string& path, std::optional<metadata::Version> v, net::Executor* ex,
              StatusCallback cb) override {
    run([=, this] { inner_->remove(path, v, ex, cb); });
  }
  uint64_t registerListener(std::function<void(const metadata::Notification&)> fn,
                            net::Executor* ex) override {
    return inner_->registerListener(
        [this, fn, ex](const metadata::Notification& n) {
          run([fn, ex, n] { ex->execute([fn, n] { fn(n); }); });
        },
        ex);
  }
  uint64_t registerSessionListener(std::function<void(metadata::SessionEvent)> fn,
                                   net::Executor* ex) override {
    return inner_->registerSessionListener(fn, ex);
  }
  void unregisterListener(uint64_t id) override { inner_->unregisterListener(id); }
  void close() override { inner_->close(); }

 private:
  void run(std::function<void()> f) {
    {
      MutexLock lock(mu_);
      if (silent_) return held_.push_back(std::move(f));
    }
    f();
  }
  std::unique_ptr<metadata::LocalStore> inner_;
  Mutex mu_;
  bool silent_ GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> held_ GUARDED_BY(mu_);
};

// The race behind test_paused_owner_is_fenced_and_acknowledges_nothing_more's failures: a broker
// resumed after its session expired and another broker took its bundle answered a lookup from its
// in-memory ownership ("connect here") before its ZooKeeper client told it the session was gone.
// The client then subscribed there and was refused; the C++ client ignores its own reconnection
// after a refused SUBSCRIBE on a connection it got from a lookup ("already connected") and
// create_reader timed out. Past its lease (3/4 of the session timeout without an answer from
// ZooKeeper) the broker must read the ownership znode again before naming itself.
TEST(OwnershipLease, ALookupPastTheLeaseAsksZooKeeperWhoOwnsTheBundle) {
  auto backend = metadata::LocalBackend::create();
  auto silent = std::make_unique<SilentStore>(backend->openSession());
  auto other = backend->openSession();  // the broker that takes the bundle over
  net::EventLoop replies{"test-replies"};
  replies.start();
  std::promise<bool> made;
  other->put("/admin/clusters/c", "{}", {}, &replies,
             [&made](const Result<metadata::Stat>& r) { made.set_value(r.isOk()); });
  ASSERT_TRUE(made.get_future().get());
  NamespaceServiceOptions o;
  o.clusterName = "c";
  o.sessionTimeoutMs = 400;  // lease 300 ms, renewed every 100 ms
  NamespaceService ns(silent.get(), silent.get(), o);
  ASSERT_TRUE(
      ns.start({"127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", "", {}})
          .isOk());
  TopicName topic = *TopicName::parse("persistent://public/default/t");
  auto lookup = [&] {
    auto p = std::make_shared<std::promise<LookupAnswer>>();
    ns.lookup(topic, false, "", &replies, [p](LookupAnswer a) { p->set_value(a); });
    return p->get_future();
  };
  LookupAnswer mine = lookup().get();
  ASSERT_TRUE(mine.error.isOk()) << mine.error.toString();
  ASSERT_EQ(mine.url, "pulsar://127.0.0.1:6650");
  ASSERT_EQ(ns.ownedBundles().size(), 1u);
  std::string key = ns.ownedBundles()[0];
  EXPECT_TRUE(ns.writable());

  // Paused: no answer from ZooKeeper; the session expires and another broker takes the bundle.
  silent->silence();
  std::promise<bool> taken;
  other->remove(ownershipPath(key), std::nullopt, &replies, [&](const Status& s) {
    if (!s.isOk()) return taken.set_value(false);
    metadata::PutOptions eph;
    eph.ephemeral = true;
    eph.expectedVersion = metadata::kNotExists;
    other->put(
        ownershipPath(key),
        namespaceEphemeralDataJson(
            {"127.0.0.1:8081", "pulsar://127.0.0.1:6651", "", "http://127.0.0.1:8081", "", {}}),
        eph, &replies, [&taken](const Result<metadata::Stat>& r) { taken.set_value(r.isOk()); });
  });
  ASSERT_TRUE(taken.get_future().get());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(ns.writable());  // the lease lapsed

  // Resumed: a lookup read from its socket before ZooKeeper's answers and events come in.
  auto during = lookup();
  if (during.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready) {
    LookupAnswer a = during.get();
    EXPECT_NE(a.url, "pulsar://127.0.0.1:6650") << "answered from memory past the lease";
  } else {
    silent->speak();  // ZooKeeper answers: the bundle is the other broker's
    ASSERT_EQ(during.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    LookupAnswer a = during.get();
    ASSERT_TRUE(a.error.isOk()) << a.error.toString();
    EXPECT_EQ(a.url, "pulsar://127.0.0.1:6651");
  }
  silent->speak();
  ns.stop();
  replies.stop();
}

// A store whose ZooKeeper session expires on demand: expire() closes the session (its ephemeral
// nodes go), opens a new one and tells the session listeners kSessionLost; reestablish() tells
// them kSessionReestablished, so a test can act in between.
class ExpiringStore : public metadata::Store {
 public:
  explicit ExpiringStore(std::shared_ptr<metadata::LocalBackend> backend)
      : backend_(std::move(backend)), inner_(backend_->openSession()) {}
  void expire() {
    std::unique_ptr<metadata::LocalStore> old;
    {
      MutexLock lock(mu_);
      old = std::move(inner_);
      inner_ = backend_->openSession();
      for (auto& [id, l] : nodeListeners_) l.innerId = inner_->registerListener(l.fn, l.ex);
    }
    old->close();
    fire(metadata::SessionEvent::kSessionLost);
  }
  void reestablish() { fire(metadata::SessionEvent::kSessionReestablished); }
  void get(const std::string& path, net::Executor* ex, GetCallback cb) override {
    MutexLock lock(mu_);
    inner_->get(path, ex, std::move(cb));
  }
  void getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) override {
    MutexLock lock(mu_);
    inner_->getChildren(path, ex, std::move(cb));
  }
  void exists(const std::string& path, net::Executor* ex, ExistsCallback cb) override {
    MutexLock lock(mu_);
    inner_->exists(path, ex, std::move(cb));
  }
  void put(const std::string& path, const std::string& value, const metadata::PutOptions& opts,
           net::Executor* ex, PutCallback cb) override {
    MutexLock lock(mu_);
    inner_->put(path, value, opts, ex, std::move(cb));
  }
  void remove(const std::string& path, std::optional<metadata::Version> v, net::Executor* ex,
              StatusCallback cb) override {
    MutexLock lock(mu_);
    inner_->remove(path, v, ex, std::move(cb));
  }
  uint64_t registerListener(std::function<void(const metadata::Notification&)> fn,
                            net::Executor* ex) override {
    MutexLock lock(mu_);
    uint64_t id = nextId_++;
    nodeListeners_[id] = NodeListener{fn, ex, inner_->registerListener(fn, ex)};
    return id;
  }
  uint64_t registerSessionListener(std::function<void(metadata::SessionEvent)> fn,
                                   net::Executor* ex) override {
    MutexLock lock(mu_);
    uint64_t id = nextId_++;
    sessionListeners_[id] = {std::move(fn), ex};
    return id;
  }
  void unregisterListener(uint64_t id) override {
    MutexLock lock(mu_);
    if (auto it = nodeListeners_.find(id); it != nodeListeners_.end()) {
      inner_->unregisterListener(it->second.innerId);
      nodeListeners_.erase(it);
    }
    sessionListeners_.erase(id);
  }
  void close() override {
    MutexLock lock(mu_);
    inner_->close();
  }

 private:
  struct NodeListener {
    std::function<void(const metadata::Notification&)> fn;
    net::Executor* ex;
    uint64_t innerId;
  };
  void fire(metadata::SessionEvent e) {
    MutexLock lock(mu_);
    for (auto& [id, l] : sessionListeners_) l.second->execute([fn = l.first, e] { fn(e); });
  }
  std::shared_ptr<metadata::LocalBackend> backend_;
  Mutex mu_;
  std::unique_ptr<metadata::LocalStore> inner_ GUARDED_BY(mu_);
  uint64_t nextId_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, NodeListener> nodeListeners_ GUARDED_BY(mu_);
  std::map<uint64_t, std::pair<std::function<void(metadata::SessionEvent)>, net::Executor*>>
      sessionListeners_ GUARDED_BY(mu_);
};

bool eventually(const std::function<bool()>& check) {
  for (int i = 0; i < 500 && !check(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return check();
}

// test_a_broker_paused_past_its_session_stops_serving_its_bundles failed once on this: after the
// session expired, the load report's rewrite of /loadbalance/brokers/{id} (create when missing)
// reached ZooKeeper before the re-registration's create, which then took the node for another
// session's and waited a minute for it to go: no "Registered again", no election, no lease from it.
TEST(SessionExpiry, ANodeTheNewSessionAlreadyCreatedCountsAsTheRegistration) {
  auto backend = metadata::LocalBackend::create();
  ExpiringStore store(backend);
  net::EventLoop replies{"test-replies"};
  replies.start();
  std::promise<bool> made;
  store.put("/admin/clusters/c", "{}", {}, &replies,
            [&made](const Result<metadata::Stat>& r) { made.set_value(r.isOk()); });
  ASSERT_TRUE(made.get_future().get());
  NamespaceServiceOptions o;
  o.clusterName = "c";
  NamespaceService ns(&store, &store, o);
  ASSERT_TRUE(
      ns.start({"127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", "", {}})
          .isOk());
  ASSERT_TRUE(eventually([&] { return ns.isLeader(); }));

  store.expire();
  ASSERT_TRUE(eventually([&] { return !ns.isLeader(); }));  // the lost session handled
  ns.republishRegistration();  // the load report's rewrite, first on the new session
  auto mine = [&] {
    std::promise<bool> p;
    store.get("/loadbalance/brokers/127.0.0.1:8080", &replies,
              [&p](const Result<std::optional<metadata::GetResult>>& g) {
                p.set_value(g.isOk() && *g && (*g)->stat.createdBySelf);
              });
    return p.get_future().get();
  };
  ASSERT_TRUE(eventually(mine));
  store.reestablish();
  EXPECT_TRUE(eventually([&] { return ns.isLeader(); })) << "not registered again";
  ns.stop();
  replies.stop();
}

}  // namespace
}  // namespace magnetar::broker::cluster
