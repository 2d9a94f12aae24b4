#include "broker/cluster/namespace_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <ctime>
#include <future>
#include <limits>

#include "base/blocking_wait.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/cluster/bundle_split.h"
#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace {

constexpr const char* kBrokersRoot = "/loadbalance/brokers";
constexpr const char* kLeaderPath = "/loadbalance/leader";
// Pulsar's BrokerService.PRODUCER_NAME_GENERATOR_PATH.
constexpr const char* kProducerNameCounter = "/counters/producer-name";
constexpr const char* kPoliciesRoot = "/admin/policies/";
constexpr const char* kLocalPoliciesRoot = "/admin/local-policies/";
constexpr const char* kNamespaceRoot = "/namespace/";
// The leader counts a bundle it handed out until the broker's report shows it, or for this long
// (a client that never followed the redirect).
constexpr int64_t kPreallocationMaxAgeMs = 30000;

// The lease's clock: CLOCK_MONOTONIC_COARSE (a few ns to read, ms resolution), in ns.
int64_t coarseNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

LookupAnswer failed(Status s) {
  LookupAnswer a;
  a.error = std::move(s);
  return a;
}

std::string bundleKey(const std::string& ns, const std::vector<uint64_t>& b, size_t i) {
  return ns + "/" + bundleName(b[i], b[i + 1]);
}

}  // namespace

std::string ownershipPath(const std::string& bundleKey) { return kNamespaceRoot + bundleKey; }

NamespaceService::NamespaceService(metadata::Store* store, metadata::Store* config,
                                   NamespaceServiceOptions options)
    : store_(store), config_(config), options_(std::move(options)) {}

NamespaceService::~NamespaceService() { stop(); }

Status NamespaceService::start(const BrokerUrls& self) {
  self_ = self;
  startMs_ = nowMs();
  loop_.start();
  listenerIds_.push_back(store_->registerListener(
      [this](const metadata::Notification& n) { onNotification(n); }, &loop_));
  listenerIds_.push_back(
      store_->registerSessionListener([this](metadata::SessionEvent e) { onSession(e); }, &loop_));
  if (config_ != store_) {
    uint64_t id = config_->registerListener(
        [this](const metadata::Notification& n) { onNotification(n); }, &loop_);
    configListener_ = id;
    configSessionListener_ = config_->registerSessionListener(
        [this](metadata::SessionEvent e) { onConfigSession(e); }, &loop_);
  }
  int64_t registeringNs = coarseNowNs();
  // clusterName must be a cluster of this configuration store (initialize-cluster-metadata):
  // a broker of another (or no) cluster would share the brokers and bundles of this one.
  auto known = std::make_shared<std::promise<Status>>();
  auto checked = known->get_future();
  loop_.execute([this, known] {
    config_->getChildren(
        "/admin/clusters", &loop_, [this, known](const Result<std::vector<std::string>>& r) {
          if (!r.isOk()) return known->set_value(r.status());
          if (std::find(r->begin(), r->end(), options_.clusterName) != r->end()) {
            return known->set_value(Status::ok());
          }
          std::string list;
          for (const auto& c : *r) {
            if (c == "global") continue;
            list += (list.empty() ? "" : ", ") + c;
          }
          known->set_value(Status::invalidArgument(
              "clusterName=" + options_.clusterName +
              (options_.clusterName == "standalone" ? " (the default: is clusterName set?)" : "") +
              " is not a cluster of this metadata store (/admin/clusters has: " +
              (list.empty() ? "none" : list) +
              "); set clusterName, or run `magnetar initialize-cluster-metadata --cluster " +
              options_.clusterName + "` first"));
        });
  });
  auto c = blockingGetFor(checked, std::chrono::seconds(45), "checking /admin/clusters");
  if (!c) return Status::error(StatusCode::kTimeout, "no answer for /admin/clusters in 45 s");
  if (!c->isOk()) return *c;
  auto done = std::make_shared<std::promise<Status>>();
  auto registered = done->get_future();
  loop_.execute(
      [this, done] { registerSelf(30, [done](const Status& s) { done->set_value(s); }); });
  auto s = blockingGetFor(registered, std::chrono::seconds(45), "broker registration");
  if (!s) {
    return Status::error(StatusCode::kTimeout, "broker registration in ZooKeeper took over 45 s");
  }
  if (!s->isOk()) return *s;
  auto gen = std::make_shared<std::promise<Result<int64_t>>>();
  auto generated = gen->get_future();
  loop_.execute(
      [this, gen] { takeGeneratorId([gen](const Result<int64_t>& r) { gen->set_value(r); }); });
  auto id = blockingGetFor(generated, std::chrono::seconds(45), "/counters/producer-name");
  if (!id) {
    return Status::error(StatusCode::kTimeout, "no answer for /counters/producer-name in 45 s");
  }
  if (!id->isOk()) return id->status();
  generatorId_ = **id;
  extendLease(registeringNs);  // the registration was answered: the lease runs from its sending
  {
    MutexLock lock(mu_);
    ready_ = true;
  }
  loop_.execute([this] {
    elect();
    renewLease();
  });
  MLOG_INFO("Registered in the cluster as {} ({})", self_.brokerId, self_.pulsarServiceUrl);
  return Status::ok();
}

void NamespaceService::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (uint64_t id : listenerIds_) store_->unregisterListener(id);
  if (configListener_) config_->unregisterListener(*configListener_);
  if (configSessionListener_) config_->unregisterListener(*configSessionListener_);
  {
    MutexLock lock(mu_);
    ready_ = false;
    owned_.clear();
  }
  loop_.stop();
}

void NamespaceService::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(loop_.context(), delay);
  timer->async_wait([timer, fn = std::move(fn)](boost::system::error_code ec) {
    if (!ec) fn();
  });
}

// Creates the registration znode. A node left by an earlier process with the same id (killed,
// its session not yet expired) is waited out, once a second, as Pulsar does.
void NamespaceService::registerSelf(int triesLeft, const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = std::string(kBrokersRoot) + "/" + self_.brokerId;
  metadata::PutOptions o;
  o.ephemeral = true;
  o.expectedVersion = metadata::kNotExists;
  store_->put(path, registrationJson(), o, &loop_,
              [this, path, triesLeft, done](const Result<metadata::Stat>& r) {
                if (r.isOk()) return done(Status::ok());
                if (r.status().code() == StatusCode::kBadVersion && triesLeft > 0) {
                  return registeredBySelf(path, triesLeft, done);
                }
                done(Status::error(r.status().code(),
                                   "cannot register " + path + ": " + r.status().message()));
              });
}

void NamespaceService::registeredBySelf(const std::string& path, int triesLeft,
                                        const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  store_->get(path, &loop_,
              [this, path, triesLeft, done](const Result<std::optional<metadata::GetResult>>& g) {
                // After a session expiry the load report's update (publishRegistration: create when
                // missing) can create the node on the new session before this create: it is ours
                // then.
                if (g.isOk() && *g && (*g)->stat.createdBySelf) return done(Status::ok());
                MLOG_WARN("{} exists (an earlier broker's session?); waiting for it to expire",
                          path);
                after(std::chrono::seconds(1),
                      [this, triesLeft, done] { registerSelf(triesLeft - 1, done); });
              });
}

void NamespaceService::takeGeneratorId(const std::function<void(Result<int64_t>)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  metadata::PutOptions base;
  base.expectedVersion = metadata::kNotExists;
  store_->put(
      kProducerNameCounter, "", base, &loop_, [this, done](const Result<metadata::Stat>& r) {
        if (!r.isOk() && r.status().code() != StatusCode::kBadVersion) return done(r.status());
        metadata::PutOptions o;
        o.ephemeral = true;
        o.sequential = true;
        o.expectedVersion = metadata::kNotExists;
        store_->put(std::string(kProducerNameCounter) + "/-", "", o, &loop_,
                    [done](const Result<metadata::Stat>& c) {
                      if (!c.isOk()) return done(c.status());
                      const std::string& path = c->path;
                      std::string seq = path.substr(path.rfind('-') + 1);
                      char* end = nullptr;
                      long long n = std::strtoll(seq.c_str(), &end, 10);
                      if (seq.empty() || *end != '\0') {
                        return done(Status::ioError("unexpected sequential node " + path));
                      }
                      MLOG_INFO("Created sequential node at {}: producer-name generator id {}",
                                path, n);
                      done(static_cast<int64_t>(n));
                    });
      });
}

void NamespaceService::lookup(const TopicName& topic, bool authoritative,
                              const std::string& listenerName, net::Executor* replyEx,
                              LookupCallback cb) {
  auto reply = [replyEx, listenerName, cb = std::move(cb)](LookupAnswer a) {
    if (a.error.isOk() && !listenerName.empty()) {  // that listener's address on that broker
      auto it = a.listeners.find(listenerName);
      if (it == a.listeners.end()) {
        a = failed(Status::invalidArgument("the broker do not have " + listenerName + " listener"));
      } else {
        a.url = it->second.first;
        a.urlTls = it->second.second;
      }
    }
    replyEx->execute([cb, a = std::move(a)] { cb(a); });
  };
  {
    MutexLock lock(mu_);
    if (!ready_) {
      return reply(failed(Status::closed("the broker is not registered in the cluster (yet)")));
    }
  }
  loop_.execute([this, topic, authoritative, reply] { lookupOnLoop(topic, authoritative, reply); });
}

bool NamespaceService::writable() const {
  return coarseNowNs() < leaseUntilNs_.load(std::memory_order_relaxed);
}

void NamespaceService::extendLease(int64_t sentNs) {
  const int64_t until = sentNs + static_cast<int64_t>(options_.sessionTimeoutMs) * 750000;
  if (until > leaseUntilNs_.load(std::memory_order_relaxed)) {
    leaseUntilNs_.store(until, std::memory_order_relaxed);
  }
}

void NamespaceService::renewLease() {
  MAGNETAR_DCHECK_ON(loop_);
  if (stopped_) return;
  int64_t sentNs = coarseNowNs();
  uint64_t generation = sessionGeneration_;
  store_->exists(kBrokersRoot, &loop_, [this, sentNs, generation](const Result<bool>& r) {
    if (!r.isOk() || generation != sessionGeneration_) return;  // no contact, or an old session
    extendLease(sentNs);
  });
  after(std::chrono::milliseconds(std::max(options_.sessionTimeoutMs / 4, 50)),
        [this] { renewLease(); });
}

bool NamespaceService::owns(const TopicName& topic) const {
  std::string ns = topic.namespaceName();
  MutexLock lock(mu_);
  auto it = boundaries_.find(ns);
  if (it == boundaries_.end() || owned_.empty()) return false;
  size_t i = findBundle(it->second, topicHash(topic.toString()));
  return owned_.count(bundleKey(ns, it->second, i)) > 0;
}

void NamespaceService::confirmOwned(const TopicName& topic, net::Executor* replyEx,
                                    std::function<void(bool)> cb) {
  auto reply = [replyEx, cb = std::move(cb)](bool owned) {
    replyEx->execute([cb, owned] { cb(owned); });
  };
  {
    MutexLock lock(mu_);
    if (!ready_) return reply(false);
  }
  loop_.execute([this, ns = topic.namespaceName(), hash = topicHash(topic.toString()), reply] {
    getBoundaries(ns, [this, ns, hash, reply](Result<Boundaries> b) {
      if (!b.isOk()) return reply(false);
      std::string key = bundleKey(ns, *b, findBundle(*b, hash));
      {
        MutexLock lock(mu_);
        if (owned_.count(key) && writable()) return reply(true);  // else the znode decides
      }
      // ZooKeeper answers a session in order: this read's completion runs after the one of our
      // own create of the znode, if there was one.
      std::string path = ownershipPath(key);
      store_->get(path, &loop_,
                  [this, key, path, reply](Result<std::optional<metadata::GetResult>> r) {
                    if (!r.isOk() || !r->has_value() || !(*r)->stat.createdBySelf) {
                      return reply(false);
                    }
                    auto owner = parseNamespaceEphemeralData((*r)->value, path);
                    if (!owner.isOk() || owner->disabled) return reply(false);
                    bool owned;
                    {
                      MutexLock lock(mu_);
                      owned = owned_.count(key) > 0;
                    }
                    reply(owned);
                  });
    });
  });
}

std::vector<std::string> NamespaceService::ownedBundles() const {
  MutexLock lock(mu_);
  return {owned_.begin(), owned_.end()};
}

bool NamespaceService::isLeader() const {
  MutexLock lock(mu_);
  return leader_;
}

std::string NamespaceService::bundleOf(const std::string& ns,
                                       const std::string& fullTopicName) const {
  uint32_t hash = topicHash(fullTopicName);
  std::string prefix = ns + "/";
  Boundaries b;
  {
    MutexLock lock(mu_);
    // An owned bundle holding the topic: the cut this broker serves it by.
    for (auto it = owned_.lower_bound(prefix);
         it != owned_.end() && it->compare(0, prefix.size(), prefix) == 0; ++it) {
      uint64_t lo = 0, hi = 0;
      std::string name = it->substr(prefix.size());
      if (!parseBundleName(name, &lo, &hi).isOk()) continue;
      if (lo <= hash && (hash < hi || (hi == 0xffffffffULL && hash == 0xffffffffU))) return name;
    }
    auto it = boundaries_.find(ns);
    if (it != boundaries_.end()) b = it->second;
  }
  if (b.empty()) {
    auto d = defaultBoundaries(options_.defaultNumberOfNamespaceBundles);
    if (!d.isOk()) return "";
    b = *d;
  }
  size_t i = findBundle(b, hash);
  return bundleName(b[i], b[i + 1]);
}

int NamespaceService::bundleCount(const std::string& ns) const {
  return static_cast<int>(bundlesOf(ns).size());
}

std::vector<std::string> NamespaceService::bundlesOf(const std::string& ns) const {
  Boundaries b;
  {
    MutexLock lock(mu_);
    auto it = boundaries_.find(ns);
    if (it != boundaries_.end()) b = it->second;
  }
  if (b.empty()) {
    auto d = defaultBoundaries(options_.defaultNumberOfNamespaceBundles);
    if (!d.isOk()) return {};
    b = *d;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < b.size(); ++i) out.push_back(bundleName(b[i], b[i + 1]));
  return out;
}

// As Pulsar's NamespaceBundleFactory: the cut in the namespace's LocalPolicies (local store),
// else its Policies' bundles (configuration store), copied to LocalPolicies at first use; a
// namespace without policies gets the default cut (not stored).
void NamespaceService::getBoundaries(const std::string& ns,
                                     const std::function<void(Result<Boundaries>)>& cb) {
  MAGNETAR_DCHECK_ON(loop_);
  std::optional<Boundaries> cached;
  {
    MutexLock lock(mu_);
    auto it = boundaries_.find(ns);
    if (it != boundaries_.end()) cached = it->second;
  }
  if (cached) return cb(std::move(*cached));  // outside the lock: cb may take it
  loadBoundaries(ns, cb);
}

void NamespaceService::loadBoundaries(const std::string& ns,
                                      const std::function<void(Result<Boundaries>)>& cb) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string local = kLocalPoliciesRoot + ns;
  store_->get(local, &loop_, [this, ns, local, cb](Result<std::optional<metadata::GetResult>> r) {
    if (!r.isOk()) return cb(r.status());
    if (r->has_value()) {
      auto parsed = boundariesFromPolicies((*r)->value, local);
      if (!parsed.isOk()) return cb(parsed.status());
      if (parsed->has_value()) {
        Boundaries b = **parsed;
        {
          MutexLock lock(mu_);
          boundaries_[ns] = b;
        }
        return cb(std::move(b));
      }
    }
    std::string path = kPoliciesRoot + ns;
    config_->get(path, &loop_,
                 [this, ns, path, local, cb](Result<std::optional<metadata::GetResult>> g) {
                   if (!g.isOk()) return cb(g.status());
                   Boundaries b;
                   bool exists = g->has_value() && !(*g)->value.empty();
                   if (exists) {
                     auto parsed = boundariesFromPolicies((*g)->value, path);
                     if (!parsed.isOk()) return cb(parsed.status());
                     if (parsed->has_value()) b = **parsed;
                   }
                   if (b.empty()) {
                     auto d = defaultBoundaries(options_.defaultNumberOfNamespaceBundles);
                     if (!d.isOk()) return cb(d.status());
                     b = std::move(*d);
                   }
                   if (exists) {
                     metadata::PutOptions o;
                     o.expectedVersion = metadata::kNotExists;
                     store_->put(local, localPoliciesJson(b, ""), o, &loop_,
                                 [local](const Result<metadata::Stat>& w) {
                                   if (!w.isOk() && w.status().code() != StatusCode::kBadVersion) {
                                     MLOG_WARN("cannot write {}: {}", local, w.status().message());
                                   }
                                 });
                   }
                   {
                     MutexLock lock(mu_);
                     boundaries_[ns] = b;
                   }
                   cb(std::move(b));
                 });
  });
}

void NamespaceService::lookupOnLoop(const TopicName& topic, bool authoritative,
                                    const std::function<void(LookupAnswer)>& reply) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string ns = topic.namespaceName();
  uint32_t hash = topicHash(topic.toString());
  getBoundaries(ns, [this, ns, hash, authoritative, reply](Result<Boundaries> b) {
    if (!b.isOk()) return reply(failed(b.status()));
    std::string key = bundleKey(ns, *b, findBundle(*b, hash));
    resolveBundle(key, authoritative, reply, hash);
  });
}

LookupAnswer NamespaceService::connectTo(const BrokerUrls& u) const {
  LookupAnswer a;
  a.authoritative = true;
  a.url = u.pulsarServiceUrl;
  a.urlTls = u.pulsarServiceUrlTls;
  a.httpUrl = u.webServiceUrl;
  a.httpUrlTls = u.webServiceUrlTls;
  for (const auto& [name, l] : u.listeners) {
    a.listeners[name] = {l.brokerServiceUrl, l.brokerServiceUrlTls};
  }
  return a;
}

void NamespaceService::resolveBundle(const std::string& key, bool authoritative,
                                     const std::function<void(LookupAnswer)>& reply,
                                     std::optional<uint32_t> hash) {
  MAGNETAR_DCHECK_ON(loop_);
  {
    // Past the lease (no answer from ZooKeeper for 3/4 of the session timeout: a pause past the
    // session) the bundle may be another broker's although the session-expiry event has not come
    // in yet: its znode, read below on the session ZooKeeper answers now, decides.
    MutexLock lock(mu_);
    if (owned_.count(key) && writable()) return reply(connectTo(self_));
  }
  if (releasing_.count(key)) {
    return reply(failed(Status::closed("Namespace bundle " + key + " is being unloaded")));
  }
  // Another broker's bundle seen before (its znode watched since): answered without ZooKeeper,
  // as Pulsar's ownership cache does, so lookups of owned bundles go on while ZooKeeper is away.
  if (auto it = owners_.find(key); it != owners_.end()) return reply(connectTo(it->second));
  std::string path = ownershipPath(key);
  store_->get(
      path, &loop_,
      [this, key, path, authoritative, reply, hash](Result<std::optional<metadata::GetResult>> r) {
        if (!r.isOk()) return reply(failed(r.status()));
        if (r->has_value()) {
          auto owner = parseNamespaceEphemeralData((*r)->value, path);
          if (!owner.isOk()) return reply(failed(owner.status()));
          if (owner->disabled) {
            return reply(failed(Status::closed("Namespace bundle " + key + " is being unloaded")));
          }
          if ((*r)->stat.createdBySelf) {  // ours (this session): keep serving it
            {
              MutexLock lock(mu_);
              owned_.insert(key);
            }
            if (onOwned_) onOwned_(key);
            return reply(connectTo(self_));
          }
          owners_[key] = owner->urls;  // the read set a watch: a change drops it
          return reply(connectTo(owner->urls));
        }
        bool leader;
        {
          MutexLock lock(mu_);
          leader = leader_;
        }
        if (authoritative) return acquire(key, reply, hash);
        if (leader) return assignAsLeader(key, reply, hash);
        if (!leaderId_.empty() && leaderId_ != self_.brokerId) {
          return redirectToLeader(key, reply, hash);
        }
        acquire(key, reply, hash);
      });
}

void NamespaceService::acquire(const std::string& key,
                               const std::function<void(LookupAnswer)>& reply,
                               std::optional<uint32_t> hash) {
  MAGNETAR_DCHECK_ON(loop_);
  // Pulsar reads the bundles from LocalPolicies when it takes one: never from a cache here, which
  // may predate a split made through another broker (a missed watch: two owners of one topic).
  size_t slash = key.rfind('/');
  std::string ns = key.substr(0, slash);
  uint64_t lo = 0, hi = 0;
  if (Status s = parseBundleName(key.substr(slash + 1), &lo, &hi); !s.isOk()) {
    return reply(failed(s));
  }
  loadBoundaries(ns, [this, key, ns, lo, hi, hash, reply](Result<Boundaries> b) {
    if (!b.isOk()) return reply(failed(b.status()));
    size_t i = 0;
    while (i + 1 < b->size() && !((*b)[i] == lo && (*b)[i + 1] == hi)) ++i;
    if (i + 1 >= b->size()) {
      if (!hash) {
        return reply(failed(Status::notFound("Bundle " + key + " is not a bundle of " + ns +
                                             " (its bundles changed)")));
      }
      MLOG_INFO("Bundle {} is no longer a bundle of {} (split): looking up again", key, ns);
      return resolveBundle(bundleKey(ns, *b, findBundle(*b, *hash)), true, reply, hash);
    }
    // No other owned bundle may overlap it (a split in progress elsewhere).
    std::string dir = kNamespaceRoot + ns;
    store_->getChildren(
        dir, &loop_, [this, key, lo, hi, reply](Result<std::vector<std::string>> names) {
          if (!names.isOk()) return reply(failed(names.status()));
          std::string prefix = key.substr(0, key.rfind('/') + 1);
          for (const auto& n : *names) {
            uint64_t l = 0, h = 0;
            if (prefix + n == key || !parseBundleName(n, &l, &h).isOk()) continue;
            if (l < hi && lo < h) {
              return reply(failed(Status::closed(
                  fmt::format("Bundle {} overlaps owned bundle {}{}: the bundles are changing", key,
                              prefix, n))));
            }
          }
          createOwnership(key, reply);
        });
  });
}

void NamespaceService::createOwnership(const std::string& key,
                                       const std::function<void(LookupAnswer)>& reply) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = ownershipPath(key);
  metadata::PutOptions o;
  o.ephemeral = true;
  o.expectedVersion = metadata::kNotExists;
  store_->put(path, namespaceEphemeralDataJson(self_), o, &loop_,
              [this, key, path, reply](const Result<metadata::Stat>& r) {
                if (r.isOk()) {
                  {
                    MutexLock lock(mu_);
                    owned_.insert(key);
                  }
                  MLOG_INFO("Took ownership of bundle {}", key);
                  if (onOwned_) onOwned_(key);
                  publishRegistration();
                  // A watch on our own node: its deletion (admin unload elsewhere) releases it.
                  store_->exists(path, &loop_, [](const Result<bool>&) {});
                  return reply(connectTo(self_));
                }
                if (r.status().code() == StatusCode::kBadVersion) {
                  return resolveBundle(key, false, reply);  // another broker won: its answer
                }
                reply(failed(r.status()));
              });
}

struct NamespaceService::Placement {
  std::string key;
  std::function<void(LookupAnswer)> reply;
  std::optional<uint32_t> hash;
  std::map<std::string, LocalBrokerData> reports;  // by broker id
  size_t pending = 0;
  NamespaceIsolationPolicies policies;
  std::string group;                           // the namespace's anti-affinity group
  std::map<std::string, std::string> groupOf;  // namespace -> its group (with a group only)
  // chooseUnloadDestination: the owner and the answer instead of `reply`.
  std::string owner;
  std::function<void(std::optional<std::string>)> chosen;
};

void NamespaceService::assignAsLeader(const std::string& key,
                                      const std::function<void(LookupAnswer)>& reply,
                                      std::optional<uint32_t> hash) {
  MAGNETAR_DCHECK_ON(loop_);
  // Given out a moment ago and not taken yet: the same broker (selectBrokerForAssignment),
  // unless an unload named its destination (checked first, as Pulsar's getLeastLoaded).
  if (auto pre = preallocated_.brokerOf(key);
      pre && *pre == self_.brokerId && !affinity_.count(key)) {
    return acquire(key, reply, hash);
  }
  auto p = std::make_shared<Placement>();
  p->key = key;
  p->reply = reply;
  p->hash = hash;
  readReports(p);
}

void NamespaceService::chooseUnloadDestination(const std::string& bundleKey,
                                               const std::string& owner, net::Executor* replyEx,
                                               std::function<void(std::optional<std::string>)> cb) {
  loop_.execute([this, bundleKey, owner, replyEx, cb = std::move(cb)] {
    auto p = std::make_shared<Placement>();
    p->key = bundleKey;
    p->owner = owner;
    p->chosen = [replyEx, cb](std::optional<std::string> b) {
      replyEx->execute([cb, b = std::move(b)] { cb(b); });
    };
    readReports(p);
  });
}

// The registered brokers' reports, then readPlacementPolicies.
void NamespaceService::readReports(const std::shared_ptr<Placement>& p) {
  MAGNETAR_DCHECK_ON(loop_);
  store_->getChildren(kBrokersRoot, &loop_, [this, p](Result<std::vector<std::string>> names) {
    if (!names.isOk() || names->empty()) {
      if (p->chosen) return p->chosen(std::nullopt);
      return acquire(p->key, p->reply, p->hash);
    }
    p->pending = names->size();
    for (const auto& name : *names) {
      std::string path = std::string(kBrokersRoot) + "/" + name;
      store_->get(path, &loop_,
                  [this, p, name, path](Result<std::optional<metadata::GetResult>> r) {
                    if (r.isOk() && r->has_value()) {
                      auto rep = parseLoadReport((*r)->value, path);
                      if (rep.isOk()) {
                        p->reports[name] = std::move(*rep);
                      } else {
                        MLOG_WARN("{}", rep.status().message());
                      }
                    }
                    if (--p->pending == 0) readPlacementPolicies(p);
                  });
    }
  });
}

void NamespaceService::readPlacementPolicies(const std::shared_ptr<Placement>& p) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = isolationPoliciesPath(options_.clusterName);
  config_->get(path, &loop_, [this, p, path](Result<std::optional<metadata::GetResult>> r) {
    if (r.isOk() && r->has_value() && !(*r)->value.empty()) {
      auto parsed = parseNamespaceIsolationPolicies((*r)->value, path);
      if (parsed.isOk()) {
        p->policies = std::move(*parsed);
      } else {
        MLOG_WARN("{}", parsed.status().message());  // placed as without policies
      }
    }
    std::string ns = p->key.substr(0, p->key.rfind('/'));
    std::string local = kLocalPoliciesRoot + ns;
    store_->get(local, &loop_, [this, p](Result<std::optional<metadata::GetResult>> l) {
      if (l.isOk() && l->has_value()) p->group = antiAffinityGroupOf((*l)->value);
      if (p->group.empty()) return placeBundle(p);
      readAntiAffinityGroups(p);
    });
  });
}

void NamespaceService::readAntiAffinityGroups(const std::shared_ptr<Placement>& p) {
  MAGNETAR_DCHECK_ON(loop_);
  // The groups of every namespace a broker reports (Pulsar reads each one's LocalPolicies).
  std::set<std::string> namespaces;
  for (const auto& [id, rep] : p->reports) {
    for (const auto& b : rep.bundles) namespaces.insert(b.substr(0, b.rfind('/')));
    for (const auto& [b, stats] : rep.lastStats) namespaces.insert(b.substr(0, b.rfind('/')));
  }
  for (const auto& b : preallocated_.bundles()) namespaces.insert(b.substr(0, b.rfind('/')));
  if (namespaces.empty()) return placeBundle(p);
  p->pending = namespaces.size();
  for (const auto& ns : namespaces) {
    store_->get(kLocalPoliciesRoot + ns, &loop_,
                [this, p, ns](Result<std::optional<metadata::GetResult>> l) {
                  if (l.isOk() && l->has_value()) {
                    std::string g = antiAffinityGroupOf((*l)->value);
                    if (!g.empty()) p->groupOf[ns] = g;
                  }
                  if (--p->pending == 0) placeBundle(p);
                });
  }
}

void NamespaceService::setBundleAffinity(const std::string& bundleKey,
                                         const std::string& brokerId) {
  loop_.execute([this, bundleKey, brokerId] { affinity_[bundleKey] = brokerId; });
}

bool NamespaceService::placeByAffinity(const std::shared_ptr<Placement>& p) {
  MAGNETAR_DCHECK_ON(loop_);
  auto it = affinity_.find(p->key);
  if (it == affinity_.end()) return false;
  std::string dest = it->second;
  affinity_.erase(it);
  auto rep = p->reports.find(dest);
  if (rep == p->reports.end()) {
    MLOG_WARN("Bundle {} was unloaded to broker {}, which is not registered: placed by load",
              p->key, dest);
    return false;
  }
  MLOG_INFO("Leader assigns bundle {} to {}, the destination of its unload", p->key, dest);
  if (dest == self_.brokerId) {
    acquire(p->key, p->reply, p->hash);
    return true;
  }
  LookupAnswer a = connectTo(rep->second.urls);
  a.redirect = true;
  a.authoritative = true;
  p->reply(std::move(a));
  return true;
}

void NamespaceService::placeBundle(const std::shared_ptr<Placement>& p) {
  MAGNETAR_DCHECK_ON(loop_);
  if (placeByAffinity(p)) return;
  const std::string& key = p->key;
  auto now = nowMs();
  preallocated_.prune(p->reports, now, kPreallocationMaxAgeMs);
  std::map<std::string, BundleData> data;
  if (bundleDataSource_) data = bundleDataSource_();
  BrokerLoads loads;
  PlacementInput in;
  in.bundleKey = key;
  for (auto& [id, rep] : p->reports) {
    BrokerLoad& b = loads[id];
    std::set<std::string> bundles;
    for (const auto& [bundle, stats] : rep.lastStats) bundles.insert(bundle);
    b.timeAverage.reset(bundles, data, defaultBundleStats());
    b.preallocated = preallocated_.of(id);
    b.local = rep;
    in.available.insert(id);
  }
  in.loads = &loads;
  in.policies = &p->policies;
  in.roundRobin = &roundRobin_;
  if (!p->group.empty()) {
    in.antiAffinityCounts =
        antiAffinityNamespaceCounts(brokerNamespaces(loads), p->groupOf, p->group);
  }
  PlacementSettings s =
      options_.placementSettings ? options_.placementSettings() : PlacementSettings{};
  if (s.strategy != kLeastLongTermMessageRate && s.strategy != loggedStrategy_) {
    MLOG_WARN("loadBalancerLoadPlacementStrategy {} is not supported: placing by {}", s.strategy,
              kLeastLongTermMessageRate);
    loggedStrategy_ = s.strategy;
  }
  // Shedding asks selectBroker itself (a preallocation of the bundle is not its answer).
  std::optional<std::string> best = p->chosen ? std::nullopt : preallocated_.brokerOf(key);
  if (!best || !p->reports.count(*best)) {
    best = selectBroker(in, s, [this](size_t n) {
      return std::uniform_int_distribution<size_t>(0, n - 1)(random_);
    });
  }
  if (p->chosen && (!best || *best == p->owner)) return p->chosen(best);
  if (!best) {
    return p->reply(failed(Status::closed(
        "Failed to look up a broker registered in the cluster for assigning namespace bundle " +
        key + " (no broker qualifies: namespace isolation policies)")));
  }
  // Counted at once, so the assignments decided before the reports show them spread.
  auto it = data.find(key);
  preallocated_.add(key, *best,
                    it != data.end() ? it->second : BundleData::withDefaults(defaultBundleStats()),
                    now);
  if (p->chosen) return p->chosen(best);
  if (*best == self_.brokerId) return acquire(key, p->reply, p->hash);
  LookupAnswer a = connectTo(p->reports[*best].urls);
  a.redirect = true;
  a.authoritative = true;
  MLOG_DEBUG("Leader assigns bundle {} to {}", key, *best);
  p->reply(std::move(a));
}

void NamespaceService::redirectToLeader(const std::string& key,
                                        const std::function<void(LookupAnswer)>& reply,
                                        std::optional<uint32_t> hash) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = std::string(kBrokersRoot) + "/" + leaderId_;
  store_->get(path, &loop_,
              [this, key, path, reply, hash](Result<std::optional<metadata::GetResult>> r) {
                if (!r.isOk() || !r->has_value()) return acquire(key, reply, hash);
                auto rep = parseLocalBrokerData((*r)->value, path);
                if (!rep.isOk()) return acquire(key, reply, hash);
                LookupAnswer a = connectTo(rep->urls);
                a.redirect = true;
                a.authoritative = false;
                reply(std::move(a));
              });
}

std::string NamespaceService::registrationJson() const {
  MAGNETAR_DCHECK_ON(loop_);
  if (registrationSource_) return registrationSource_(self_, ownedBundles(), startMs_);
  return localBrokerDataJson(self_, ownedBundles(), startMs_, nowMs());
}

void NamespaceService::republishRegistration() {
  {
    MutexLock lock(mu_);
    if (!ready_) return;
  }
  loop_.execute([this] { publishRegistration(); });
}

void NamespaceService::publishRegistration() {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = std::string(kBrokersRoot) + "/" + self_.brokerId;
  metadata::PutOptions o;
  o.ephemeral = true;
  store_->put(path, registrationJson(), o, &loop_, [path](const Result<metadata::Stat>& r) {
    if (!r.isOk()) MLOG_WARN("cannot update {}: {}", path, r.status().message());
  });
}

void NamespaceService::elect() {
  MAGNETAR_DCHECK_ON(loop_);
  metadata::PutOptions o;
  o.ephemeral = true;
  o.expectedVersion = metadata::kNotExists;
  store_->put(
      kLeaderPath, leaderBrokerJson(self_), o, &loop_, [this](const Result<metadata::Stat>& r) {
        if (r.isOk()) {
          {
            MutexLock lock(mu_);
            leader_ = true;
          }
          leaderId_ = self_.brokerId;
          MLOG_INFO("This broker ({}) is the leader", self_.brokerId);
          return;
        }
        if (r.status().code() != StatusCode::kBadVersion) {
          MLOG_WARN("leader election: {}; trying again in 1 s", r.status().message());
          after(std::chrono::seconds(1), [this] { elect(); });
          return;
        }
        // Someone leads: read who (and watch the node, to run again when it goes).
        store_->get(kLeaderPath, &loop_, [this](Result<std::optional<metadata::GetResult>> g) {
          if (!g.isOk()) {
            after(std::chrono::seconds(1), [this] { elect(); });
            return;
          }
          if (!g->has_value()) return elect();  // gone meanwhile
          auto d = parseLeaderBroker((*g)->value, kLeaderPath);
          if (!d.isOk()) {
            MLOG_ERROR("{}", d.status().message());
            return;
          }
          leaderId_ = d->brokerId;
          bool mine = (*g)->stat.createdBySelf;
          {
            MutexLock lock(mu_);
            leader_ = mine;
          }
          MLOG_INFO("Leader broker: {}", leaderId_);
        });
      });
}

void NamespaceService::onNotification(const metadata::Notification& n) {
  MAGNETAR_DCHECK_ON(loop_);
  if (n.path == kLeaderPath && n.type == metadata::NotificationType::kDeleted) {
    {
      MutexLock lock(mu_);
      if (!ready_) return;
      leader_ = false;
    }
    leaderId_.clear();
    elect();
    return;
  }
  if (n.path.rfind(kNamespaceRoot, 0) == 0) {
    owners_.erase(n.path.substr(std::string(kNamespaceRoot).size()));
  }
  if (n.path.rfind(kNamespaceRoot, 0) == 0 && n.type == metadata::NotificationType::kModified) {
    // Marked disabled by another broker's namespace unload: release it (Pulsar's owner-side
    // unload).
    std::string key = n.path.substr(std::string(kNamespaceRoot).size());
    {
      MutexLock lock(mu_);
      if (!owned_.count(key)) return;
    }
    store_->get(n.path, &loop_,
                [this, key, path = n.path](Result<std::optional<metadata::GetResult>> r) {
                  if (!r.isOk() || !r->has_value()) return;
                  auto d = parseNamespaceEphemeralData((*r)->value, path);
                  if (!d.isOk() || !d->disabled) return;
                  release(key, [key](const Status& s) {
                    if (!s.isOk()) MLOG_WARN("unloading bundle {}: {}", key, s.message());
                  });
                });
    return;
  }
  if (n.path.rfind(kNamespaceRoot, 0) == 0 && n.type == metadata::NotificationType::kDeleted) {
    std::string key = n.path.substr(std::string(kNamespaceRoot).size());
    bool was;
    {
      MutexLock lock(mu_);
      was = owned_.erase(key) > 0;
    }
    if (was) {
      MLOG_WARN("Ownership of bundle {} was removed: releasing it", key);
      publishRegistration();
      if (onLost_) onLost_();
    }
    return;
  }
  for (const char* root : {kPoliciesRoot, kLocalPoliciesRoot}) {
    if (n.path.rfind(root, 0) != 0) continue;
    // A namespace's bundles may have changed: read them again, keeping the known cut meanwhile
    // (owns() must not refuse clients of owned bundles in between: a C++ client whose SUBSCRIBE
    // gets ServiceNotReady right after its lookup waits for its operation timeout).
    std::string ns = n.path.substr(std::string(root).size());
    bool known;
    {
      MutexLock lock(mu_);
      known = boundaries_.count(ns) > 0;
    }
    if (known) {
      loadBoundaries(ns, [ns](const Result<Boundaries>& b) {
        if (!b.isOk()) MLOG_WARN("bundles of {}: {}", ns, b.status().message());
      });
    }
  }
}

void NamespaceService::releaseAll(const char* why) {
  MAGNETAR_DCHECK_ON(loop_);
  size_t n;
  {
    MutexLock lock(mu_);
    n = owned_.size();
    owned_.clear();
    // Their clients never write again, whatever a new session owns. Raised after the clear, under
    // the lock owns() takes: a producer that read the new epoch cannot have seen these bundles.
    ownershipEpoch_.fetch_add(1, std::memory_order_acq_rel);
    leader_ = false;
  }
  leaderId_.clear();
  owners_.clear();     // the session's watches are gone
  releasing_.clear();  // their znodes went with the session
  MLOG_WARN("{}: released {} bundles", why, n);
  if (onLost_) onLost_();
}

void NamespaceService::onSession(metadata::SessionEvent e) {
  MAGNETAR_DCHECK_ON(loop_);
  switch (e) {
    case metadata::SessionEvent::kSessionLost:
      // No write from here until a request of the new session is answered (after the release).
      leaseUntilNs_.store(0, std::memory_order_relaxed);
      ++sessionGeneration_;
      releaseAll("ZooKeeper session expired");
      {
        // The cuts' watches went with the session: read them again at the next use.
        MutexLock lock(mu_);
        boundaries_.clear();
      }
      break;
    case metadata::SessionEvent::kSessionReestablished: {
      MutexLock lock(mu_);
      boundaries_.clear();
    }
      owners_.clear();
      registerSelf(60, [this, registeringNs = coarseNowNs(),
                        generation = sessionGeneration_](const Status& s) {
        MAGNETAR_DCHECK_ON(loop_);
        if (!s.isOk()) {
          MLOG_ERROR("{}", s.message());
          return;
        }
        // The new session answered: the lease runs from the registration's sending, as at start
        // (else writes wait for the next renewLease() tick, up to sessionTimeoutMs / 4, while
        // bundles are placed here again).
        if (generation == sessionGeneration_) extendLease(registeringNs);
        MLOG_INFO("Registered again as {} on the new ZooKeeper session", self_.brokerId);
        elect();
      });
      break;
    case metadata::SessionEvent::kConnectionLost:
      MLOG_WARN("ZooKeeper connection lost; bundles kept until the session expires");
      break;
    case metadata::SessionEvent::kReconnected:
      MLOG_INFO("ZooKeeper connection back, same session");
      break;
  }
}

void NamespaceService::onConfigSession(metadata::SessionEvent e) {
  MAGNETAR_DCHECK_ON(loop_);
  if (e != metadata::SessionEvent::kSessionReestablished) return;
  std::vector<std::string> known;
  {
    MutexLock lock(mu_);
    for (const auto& [ns, b] : boundaries_) known.push_back(ns);
  }
  // Kept meanwhile: owns() must not refuse the clients of owned bundles in between.
  for (const auto& ns : known) {
    loadBoundaries(ns, [ns](const Result<Boundaries>& b) {
      if (!b.isOk()) MLOG_WARN("bundles of {}: {}", ns, b.status().message());
    });
  }
}

void NamespaceService::activeBrokers(net::Executor* replyEx,
                                     std::function<void(Result<std::vector<std::string>>)> cb) {
  store_->getChildren(kBrokersRoot, replyEx, std::move(cb));
}

void NamespaceService::leaderBroker(net::Executor* replyEx,
                                    std::function<void(Result<LeaderData>)> cb) {
  store_->get(kLeaderPath, replyEx,
              [cb = std::move(cb)](Result<std::optional<metadata::GetResult>> r) {
                if (!r.isOk()) return cb(r.status());
                if (!r->has_value()) return cb(Status::notFound("no leader broker"));
                cb(parseLeaderBroker((*r)->value, kLeaderPath));
              });
}

void NamespaceService::boundariesOf(const std::string& ns, net::Executor* replyEx,
                                    std::function<void(Result<std::vector<uint64_t>>)> cb) {
  loop_.execute([this, ns, replyEx, cb = std::move(cb)] {
    getBoundaries(ns, [replyEx, cb](Result<Boundaries> b) {
      replyEx->execute([cb, b = std::move(b)] { cb(b); });
    });
  });
}

void NamespaceService::ownerOf(const std::string& bundleKey, net::Executor* replyEx,
                               std::function<void(Result<std::optional<OwnerData>>)> cb) {
  std::string path = ownershipPath(bundleKey);
  store_->get(path, replyEx,
              [path, cb = std::move(cb)](Result<std::optional<metadata::GetResult>> r) {
                if (!r.isOk()) return cb(r.status());
                if (!r->has_value()) return cb(std::optional<OwnerData>());
                auto d = parseNamespaceEphemeralData((*r)->value, path);
                if (!d.isOk()) return cb(d.status());
                cb(std::optional<OwnerData>(std::move(*d)));
              });
}

void NamespaceService::release(const std::string& key, const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  {
    MutexLock lock(mu_);
    if (!owned_.erase(key)) {
      return done(Status::notFound("Bundle " + key + " is not owned by this broker"));
    }
  }
  MLOG_INFO("Unloading bundle {}", key);
  auto removeOwnership = [this, key, done, generation = sessionGeneration_] {
    MAGNETAR_DCHECK_ON(loop_);
    if (generation != sessionGeneration_) {
      // The session was lost meanwhile: its znode went with it, and one this broker made since
      // on the new session is not this release's to delete.
      return done(Status::ok());
    }
    releasing_.erase(key);
    store_->remove(ownershipPath(key), std::nullopt, &loop_, [this, done](const Status& s) {
      publishRegistration();
      done(s.code() == StatusCode::kNotFound ? Status::ok() : s);
    });
  };
  if (!onRelease_) {
    if (onLost_) onLost_();
    return removeOwnership();
  }
  // The znode stays until the bundle's topics closed: no other broker takes them meanwhile.
  releasing_.insert(key);
  auto once = std::make_shared<bool>(false);
  auto finish = [once, removeOwnership](bool timedOut, const std::string& key) {
    if (*once) return;
    *once = true;
    if (timedOut) MLOG_WARN("Unloading bundle {}: topics not closed in time; releasing it", key);
    removeOwnership();
  };
  int64_t timeoutMs =
      options_.bundleUnloadingTimeoutMs ? options_.bundleUnloadingTimeoutMs() : 60000;
  after(std::chrono::milliseconds(std::max<int64_t>(timeoutMs, 0)),
        [finish, key] { finish(true, key); });
  onRelease_(key, [this, finish, key] { loop_.execute([finish, key] { finish(false, key); }); });
}

void NamespaceService::unloadBundle(const std::string& ns, const std::string& bundle,
                                    net::Executor* replyEx, std::function<void(Status)> cb) {
  auto reply = [replyEx, cb = std::move(cb)](const Status& s) {
    replyEx->execute([cb, s] { cb(s); });
  };
  loop_.execute([this, ns, bundle, reply] {
    std::string key = ns + "/" + bundle;
    bool mine = false;
    {
      MutexLock lock(mu_);
      mine = owned_.count(key) > 0;
    }
    if (mine) return release(key, reply);
    removeUnreadableOwnership(key, reply);
  });
}

void NamespaceService::removeUnreadableOwnership(const std::string& key,
                                                 const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = ownershipPath(key);
  store_->get(path, &loop_, [this, key, path, done](Result<std::optional<metadata::GetResult>> r) {
    if (!r.isOk()) return done(r.status());
    if (!r->has_value()) return done(Status::ok());
    if ((*r)->stat.createdBySelf) return release(key, done);
    auto owner = parseNamespaceEphemeralData((*r)->value, path);
    if (owner.isOk()) {
      return done(Status::notFound("Bundle " + key + " is not owned by this broker"));
    }
    // Names no broker: nobody can serve or release the bundle through it. Deleted at the version
    // read (a valid owner written meanwhile stays); its creator, if alive, sees the deletion and
    // closes the bundle's clients; the next lookup places the bundle again.
    MLOG_WARN("Unloading bundle {}: deleting its unreadable ownership znode ({})", key,
              owner.status().message());
    store_->remove(path, (*r)->stat.version, &loop_, [done](const Status& s) {
      done(s.code() == StatusCode::kNotFound ? Status::ok() : s);
    });
  });
}

void NamespaceService::unloadElsewhere(const std::string& key,
                                       const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  std::string path = ownershipPath(key);
  store_->get(path, &loop_, [this, key, path, done](Result<std::optional<metadata::GetResult>> r) {
    if (!r.isOk()) return done(r.status());
    if (!r->has_value()) return done(Status::ok());
    if ((*r)->stat.createdBySelf) return release(key, done);
    auto owner = parseNamespaceEphemeralData((*r)->value, path);
    if (!owner.isOk()) return removeUnreadableOwnership(key, done);
    metadata::PutOptions o;
    o.expectedVersion = (*r)->stat.version;
    store_->put(path, namespaceEphemeralDataJson(owner->urls, true), o, &loop_,
                [this, key, path, done](const Result<metadata::Stat>& w) {
                  if (!w.isOk() && w.status().code() != StatusCode::kBadVersion &&
                      w.status().code() != StatusCode::kNotFound) {
                    return done(w.status());
                  }
                  // Wait for the owner to release it; past kUnloadWait delete it here.
                  auto deadline = std::chrono::steady_clock::now() + kUnloadWait;
                  auto poll = std::make_shared<std::function<void()>>();
                  *poll = [this, path, deadline, done, poll] {
                    store_->exists(
                        path, &loop_, [this, path, deadline, done, poll](Result<bool> e) {
                          if (e.isOk() && !*e) {
                            *poll = nullptr;
                            return done(Status::ok());
                          }
                          if (std::chrono::steady_clock::now() < deadline) {
                            return after(std::chrono::milliseconds(50), [poll] {
                              if (*poll) (*poll)();
                            });
                          }
                          MLOG_WARN("{}: its owner did not release it within {} s; deleting it",
                                    path, kUnloadWait.count());
                          *poll = nullptr;
                          store_->remove(path, std::nullopt, &loop_, [done](const Status& s) {
                            done(s.code() == StatusCode::kNotFound ? Status::ok() : s);
                          });
                        });
                  };
                  (*poll)();
                });
  });
}

void NamespaceService::unloadNamespace(const std::string& ns, net::Executor* replyEx,
                                       std::function<void(Status)> cb) {
  auto reply = [replyEx, cb = std::move(cb)](const Status& s) {
    replyEx->execute([cb, s] { cb(s); });
  };
  loop_.execute([this, ns, reply] {
    getBoundaries(ns, [this, ns, reply](Result<Boundaries> b) {
      if (!b.isOk()) return reply(b.status());
      struct Pending {
        size_t left = 0;
        Status first;
      };
      auto p = std::make_shared<Pending>();
      p->left = b->size() - 1;
      for (size_t i = 0; i + 1 < b->size(); ++i) {
        unloadElsewhere(bundleKey(ns, *b, i), [p, reply](const Status& s) {
          if (!s.isOk() && p->first.isOk()) p->first = s;
          if (--p->left == 0) reply(p->first);
        });
      }
    });
  });
}

void NamespaceService::splitBundle(const std::string& ns, const std::string& bundle,
                                   std::vector<uint64_t> at, bool unload, net::Executor* replyEx,
                                   std::function<void(Status)> cb) {
  auto reply = [replyEx, cb = std::move(cb)](const Status& s) {
    replyEx->execute([cb, s] { cb(s); });
  };
  loop_.execute([this, ns, bundle, at = std::move(at), unload, reply] {
    splitOwned(ns, bundle, at, unload, reply);
  });
}

void NamespaceService::splitOwned(const std::string& ns, const std::string& bundle,
                                  const std::vector<uint64_t>& at, bool unload,
                                  const std::function<void(Status)>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  uint64_t lo = 0, hi = 0;
  if (Status s = parseBundleName(bundle, &lo, &hi); !s.isOk()) return done(s);
  std::string key = ns + "/" + bundle;
  getBoundaries(ns, [this, ns, key, lo, hi, at, unload, done](Result<Boundaries> b) {
    if (!b.isOk()) return done(b.status());
    size_t i = 0;
    while (i + 1 < b->size() && !((*b)[i] == lo && (*b)[i + 1] == hi)) ++i;
    if (i + 1 >= b->size()) return done(Status::notFound("Bundle " + key + " not found"));
    auto next = cutAfterSplit(*b, i, at);
    if (!next.isOk()) return done(next.status());
    auto sp = std::make_shared<BundleSplit>();
    sp->ns = ns;
    sp->key = key;
    sp->unload = unload;
    sp->done = done;
    sp->cut = *b;
    sp->next = std::move(*next);
    const size_t pieces = sp->next.size() - sp->cut.size() + 1;
    for (size_t c = i; c < i + pieces; ++c) {
      sp->children.push_back(bundleKey(ns, sp->next, c));
    }
    // Owned here first (Pulsar's validateNamespaceBundleOwnership takes an unowned one).
    auto split = [this, sp] { claimSplitChildren(sp, 0); };
    bool owned;
    {
      MutexLock lock(mu_);
      owned = owned_.count(key) > 0;
    }
    if (owned) return split();
    std::string path = ownershipPath(key);
    store_->get(path, &loop_,
                [this, key, path, split, done](Result<std::optional<metadata::GetResult>> r) {
                  if (!r.isOk()) return done(r.status());
                  if (r->has_value() && !(*r)->stat.createdBySelf) {
                    return done(Status::busy("Bundle " + key + " is owned by another broker"));
                  }
                  if (r->has_value()) {
                    MutexLock lock(mu_);
                    owned_.insert(key);
                  }
                  if (r->has_value()) return split();
                  acquire(key, [this, split, done](const LookupAnswer& a) {
                    if (!a.error.isOk()) return done(a.error);
                    if (a.url != self_.pulsarServiceUrl) {
                      return done(Status::busy("the bundle was taken by another broker"));
                    }
                    split();
                  });
                });
  });
}

void NamespaceService::claimSplitChildren(const std::shared_ptr<const BundleSplit>& sp, size_t n) {
  if (n == sp->children.size()) return writeSplitBoundaries(sp);
  metadata::PutOptions eph;
  eph.ephemeral = true;
  eph.expectedVersion = metadata::kNotExists;
  store_->put(ownershipPath(sp->children[n]), namespaceEphemeralDataJson(self_), eph, &loop_,
              [this, sp, n](const Result<metadata::Stat>& r) {
                if (!r.isOk()) {
                  undoSplit(*sp, n);
                  return sp->done(r.status());
                }
                claimSplitChildren(sp, n + 1);
              });
}

void NamespaceService::writeSplitBoundaries(const std::shared_ptr<const BundleSplit>& sp) {
  std::string local = kLocalPoliciesRoot + sp->ns;
  const size_t all = sp->children.size();
  store_->get(
      local, &loop_, [this, sp, local, all](Result<std::optional<metadata::GetResult>> cur) {
        if (!cur.isOk()) {
          undoSplit(*sp, all);
          return sp->done(cur.status());
        }
        metadata::PutOptions o;
        std::string text;
        if (cur->has_value()) {
          auto current = boundariesFromPolicies((*cur)->value, local);
          if (current.isOk() && current->has_value() && **current != sp->cut) {
            undoSplit(*sp, all);
            return sp->done(Status::error(StatusCode::kBadVersion,
                                          "the bundles of " + sp->ns + " changed; try again"));
          }
          auto w = withBundles((*cur)->value, sp->next, local);
          if (!w.isOk()) {
            undoSplit(*sp, all);
            return sp->done(w.status());
          }
          text = std::move(*w);
          o.expectedVersion = (*cur)->stat.version;
        } else {
          text = localPoliciesJson(sp->next, "");
          o.expectedVersion = metadata::kNotExists;
        }
        store_->put(local, text, o, &loop_, [this, sp, all](const Result<metadata::Stat>& w) {
          if (!w.isOk()) {
            undoSplit(*sp, all);
            return sp->done(w.status());
          }
          writeSplitPolicies(sp, 3);
        });
      });
}

void NamespaceService::writeSplitPolicies(const std::shared_ptr<const BundleSplit>& sp,
                                          int triesLeft) {
  // Pulsar's updateNamespaceBundlesForPolicies: Policies.bundles follows the cut too. The cut in
  // LocalPolicies decides from here on, so a failure here is logged, not undone.
  std::string path = namespacePath(sp->ns);
  config_->get(
      path, &loop_, [this, sp, path, triesLeft](Result<std::optional<metadata::GetResult>> cur) {
        if (!cur.isOk() || !cur->has_value()) {
          if (!cur.isOk()) {
            MLOG_WARN("Split of {}: Policies not read: {}", sp->key, cur.status().message());
          }
          return finishSplit(sp);
        }
        auto text = withBundles((*cur)->value, sp->next, path);
        if (!text.isOk()) {
          MLOG_WARN("Split of {}: {}", sp->key, text.status().message());
          return finishSplit(sp);
        }
        metadata::PutOptions o;
        o.expectedVersion = (*cur)->stat.version;
        config_->put(
            path, *text, o, &loop_, [this, sp, triesLeft](const Result<metadata::Stat>& w) {
              if (!w.isOk() && w.status().code() == StatusCode::kBadVersion && triesLeft > 1) {
                return writeSplitPolicies(sp, triesLeft - 1);
              }
              if (!w.isOk()) {
                MLOG_WARN("Split of {}: Policies not written: {}", sp->key, w.status().message());
              }
              finishSplit(sp);
            });
      });
}

void NamespaceService::finishSplit(const std::shared_ptr<const BundleSplit>& sp) {
  {
    MutexLock lock(mu_);
    owned_.erase(sp->key);
    owned_.insert(sp->children.begin(), sp->children.end());
    boundaries_[sp->ns] = sp->next;
  }
  MLOG_INFO("Split bundle {} into {} bundles", sp->key, sp->children.size());
  if (onOwned_) {
    for (const auto& k : sp->children) onOwned_(k);
  }
  for (const std::string& k : sp->children) {
    store_->exists(ownershipPath(k), &loop_, [](const Result<bool>&) {});  // watch
  }
  store_->remove(ownershipPath(sp->key), std::nullopt, &loop_, [this, sp](const Status&) {
    publishRegistration();
    if (!sp->unload) return sp->done(Status::ok());
    releaseChildren(sp, 0, Status::ok());
  });
}

void NamespaceService::releaseChildren(const std::shared_ptr<const BundleSplit>& sp, size_t n,
                                       const Status& first) {
  if (n == sp->children.size()) return sp->done(first);
  release(sp->children[n], [this, sp, n, first](const Status& s) {
    releaseChildren(sp, n + 1, first.isOk() ? s : first);
  });
}

void NamespaceService::undoSplit(const BundleSplit& sp, size_t created) {
  for (size_t i = 0; i < created && i < sp.children.size(); ++i) {
    store_->remove(ownershipPath(sp.children[i]), std::nullopt, &loop_, [](const Status&) {});
  }
}

}  // namespace magnetar::broker::cluster
