#include "metadata/zk_store.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/thread_annotations.h"

namespace magnetar::metadata {

namespace {

constexpr size_t kMaxValueBytes = 1024 * 1024;  // ZooKeeper's jute.maxbuffer default

Status zkStatus(int rc, const std::string& path) {
  switch (rc) {
    case ZOK:
      return Status::ok();
    case ZNONODE:
      return Status::notFound("node " + path + " does not exist");
    case ZNODEEXISTS:
      return Status::badVersion("node " + path + " already exists");
    case ZBADVERSION:
      return Status::badVersion("node " + path + " is at another version");
    case ZNOTEMPTY:
      return Status::notAllowed("node " + path + " has children");
    case ZNOCHILDRENFOREPHEMERALS:
      return Status::notAllowed("the parent of " + path + " is ephemeral and cannot have children");
    case ZSESSIONEXPIRED:
    case ZCLOSING:
    case ZINVALIDSTATE:
      return Status::closed(std::string("ZooKeeper session lost (") + zerror(rc) + ") at " + path);
    case ZOPERATIONTIMEOUT:
      return Status::error(StatusCode::kTimeout, "ZooKeeper operation timed out at " + path);
    case ZBADARGUMENTS:
      return Status::invalidArgument("bad ZooKeeper arguments for " + path);
    default:
      return Status::ioError("ZooKeeper error on " + path + ": " + zerror(rc));
  }
}

Stat toStat(const std::string& path, const ::Stat* s, int64_t self) {
  metadata::Stat out;
  out.path = path;
  if (!s) return out;
  out.version = s->version;
  out.creationTimestampMs = s->ctime;
  out.modificationTimestampMs = s->mtime;
  out.ephemeral = s->ephemeralOwner != 0;
  out.createdBySelf = out.ephemeral && s->ephemeralOwner == self;
  return out;
}

using Clock = std::chrono::steady_clock;

// Deadlines of the operations in flight (metadataStoreOperationTimeoutSeconds): one thread of
// its own fires an operation's timeout action unless the operation ended first (cancel).
class Timeouts {
 public:
  explicit Timeouts(int timeoutMs) : timeoutMs_(timeoutMs) {
    if (timeoutMs_ > 0) thread_ = std::thread([this] { run(); });
  }
  ~Timeouts() { stop(); }
  // Returns an id for cancel(); 0 (nothing armed) when operation timeouts are off or stopped.
  uint64_t arm(std::function<void()> onTimeout) {
    if (timeoutMs_ <= 0) return 0;
    std::lock_guard lock(mu_);
    if (stopped_) return 0;
    uint64_t id = next_++;
    auto at = Clock::now() + std::chrono::milliseconds(timeoutMs_);
    byId_[id] = Entry{at, std::move(onTimeout)};
    byTime_.emplace(at, id);
    cv_.notify_one();
    return id;
  }
  void cancel(uint64_t id) {
    if (id == 0) return;
    std::lock_guard lock(mu_);
    byId_.erase(id);  // its byTime_ entry is skipped when reached
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
      byId_.clear();
      byTime_.clear();
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Entry {
    Clock::time_point at;
    std::function<void()> fn;
  };
  void run() {
    std::unique_lock lock(mu_);
    while (!stopped_) {
      if (byTime_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = byTime_.begin();
      if (Clock::now() < first->first) {
        // A copy: stop() or cancel() may free the node while the lock is released in the wait.
        const Clock::time_point at = first->first;
        cv_.wait_until(lock, at);
        continue;
      }
      uint64_t id = first->second;
      byTime_.erase(first);
      auto it = byId_.find(id);
      if (it == byId_.end()) continue;
      auto fn = std::move(it->second.fn);
      byId_.erase(it);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const int timeoutMs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  uint64_t next_ = 1;
  std::map<uint64_t, Entry> byId_;
  std::multimap<Clock::time_point, uint64_t> byTime_;
  std::thread thread_;
};

struct Listener {
  std::function<void(const Notification&)> fn;
  std::function<void(SessionEvent)> sessionFn;
  net::Executor* ex = nullptr;
};

// State shared by the store, its handle's watcher and every operation in flight.
struct Core {
  std::string hosts;
  int sessionTimeoutMs = 30000;
  std::unique_ptr<Timeouts> timeouts;  // set before the first operation, stopped by close()
  Mutex mu;
  std::condition_variable cv;
  zhandle_t* zh GUARDED_BY(mu) = nullptr;
  bool closed GUARDED_BY(mu) = false;
  bool connected GUARDED_BY(mu) = false;
  bool lost GUARDED_BY(mu) = false;            // connection lost since the last connect
  bool reestablishing GUARDED_BY(mu) = false;  // a new session after an expiry
  std::map<uint64_t, Listener> listeners GUARDED_BY(mu);
  uint64_t nextListener GUARDED_BY(mu) = 1;
  std::vector<std::thread> reapers GUARDED_BY(mu);  // close expired handles off ZooKeeper's threads

  // Posts to every listener of the kind; session == true for session events.
  void fireSession(SessionEvent e) REQUIRES(mu) {
    for (const auto& [id, l] : listeners) {
      if (l.sessionFn) l.ex->execute([fn = l.sessionFn, e] { fn(e); });
    }
  }
  void fireNode(const Notification& n) REQUIRES(mu) {
    for (const auto& [id, l] : listeners) {
      if (l.fn) l.ex->execute([fn = l.fn, n] { fn(n); });
    }
  }
  int64_t selfId() REQUIRES(mu) {
    const clientid_t* id = zh ? zoo_client_id(zh) : nullptr;
    return id ? id->client_id : 0;
  }
};

void watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);

// libzookeeper's own log lines (one per connection attempt while a server refuses, ~60 before a
// connect timeout): at debug level in our log. Our code reports what they mean (a connect
// timeout, a lost connection, an expired session) once, at warn or as the caller's error.
void zkLibraryLog(const char* message) {
  std::string_view m(message ? message : "");
  while (!m.empty() && (m.back() == '\n' || m.back() == '\r')) m.remove_suffix(1);
  MLOG_DEBUG("zookeeper: {}", m);
}

zhandle_t* connect(Core* core) {
  return zookeeper_init2(core->hosts.c_str(), watcher, core->sessionTimeoutMs, nullptr, core, 0,
                         zkLibraryLog);
}

void watcher(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  auto* core = static_cast<Core*>(ctx);
  MutexLock lock(core->mu);
  if (core->closed || zh != core->zh) return;  // an expired handle's late events
  if (type != ZOO_SESSION_EVENT) {
    Notification n{NotificationType::kModified, path ? path : ""};
    if (type == ZOO_CREATED_EVENT) n.type = NotificationType::kCreated;
    if (type == ZOO_DELETED_EVENT) n.type = NotificationType::kDeleted;
    if (type == ZOO_CHILD_EVENT) n.type = NotificationType::kChildrenChanged;
    if (type == ZOO_CREATED_EVENT || type == ZOO_DELETED_EVENT || type == ZOO_CHANGED_EVENT ||
        type == ZOO_CHILD_EVENT) {
      core->fireNode(n);
    }
    return;
  }
  if (state == ZOO_CONNECTED_STATE) {
    if (core->reestablishing) {
      core->fireSession(SessionEvent::kSessionReestablished);
    } else if (core->lost) {
      core->fireSession(SessionEvent::kReconnected);
    }
    core->reestablishing = false;
    core->lost = false;
    core->connected = true;
    core->cv.notify_all();
  } else if (state == ZOO_CONNECTING_STATE) {
    if (core->connected && !core->lost) {
      MLOG_WARN("ZooKeeper connection to {} lost; reconnecting", core->hosts);
      core->fireSession(SessionEvent::kConnectionLost);
    }
    core->lost = true;
  } else if (state == ZOO_EXPIRED_SESSION_STATE) {
    MLOG_WARN("ZooKeeper session on {} expired: its ephemeral nodes are gone, opening a new one",
              core->hosts);
    core->fireSession(SessionEvent::kSessionLost);
    core->connected = false;
    core->reestablishing = true;
    zhandle_t* old = core->zh;
    core->zh = connect(core);
    if (!core->zh) MLOG_ERROR("ZooKeeper on {}: cannot open a new session", core->hosts);
    core->reapers.emplace_back([old] { zookeeper_close(old); });
  }
}

// ---- operations ------------------------------------------------------------------------------

// One call in flight; freed by its last completion.
struct Op {
  std::shared_ptr<Core> core;
  net::Executor* ex = nullptr;
  std::string path;
  std::string value;
  PutOptions opts;
  int createTries = 0;
  Store::GetCallback getCb;
  Store::ExistsCallback existsCb;
  Store::ChildrenCallback childrenCb;
  Store::PutCallback putCb;
  Store::StatusCallback statusCb;
  // For creating a missing parent: the op to resume once the parent exists.
  Op* resume = nullptr;
  // Set by whichever ends the call first: its completion or its timeout. Shared with the
  // parent ops made for it and with the armed timeout.
  std::shared_ptr<std::atomic<bool>> ended = std::make_shared<std::atomic<bool>>(false);
  uint64_t timeoutId = 0;
};

// True for the first of completion and timeout; the caller then runs the callback.
bool claim(Op* op) {
  if (op->ended->exchange(true)) return false;
  op->core->timeouts->cancel(op->timeoutId);
  return true;
}

// Arms op's timeout: when it fires first, the callback gets kTimeout naming the path; the
// completion that may still come from ZooKeeper is then dropped.
void armTimeout(Op* op) {
  std::function<void(Status)> fail;
  net::Executor* ex = op->ex;
  if (op->getCb) {
    fail = [cb = op->getCb](Status s) { cb(Result<std::optional<GetResult>>(std::move(s))); };
  } else if (op->existsCb) {
    fail = [cb = op->existsCb](Status s) { cb(Result<bool>(std::move(s))); };
  } else if (op->childrenCb) {
    fail = [cb = op->childrenCb](Status s) { cb(Result<std::vector<std::string>>(std::move(s))); };
  } else if (op->putCb) {
    fail = [cb = op->putCb](Status s) { cb(Result<Stat>(std::move(s))); };
  } else if (op->statusCb) {
    fail = [cb = op->statusCb](Status s) { cb(std::move(s)); };
  }
  if (!fail) return;
  op->timeoutId =
      op->core->timeouts->arm([ended = op->ended, ex, fail = std::move(fail), path = op->path] {
        if (ended->exchange(true)) return;
        Status s = Status::error(
            StatusCode::kTimeout,
            "metadata operation on " + path + " timed out (metadataStoreOperationTimeoutSeconds)");
        ex->execute([fail, s] { fail(s); });
      });
}

template <typename Cb, typename T>
void finish(net::Executor* ex, Cb cb, T value) {
  ex->execute([cb = std::move(cb), value = std::move(value)]() mutable { cb(std::move(value)); });
}

// Runs fn(zh) under the lock; on a closed store or a failed submission, fail(status).
template <typename Submit, typename Fail>
void submit(Op* op, Submit submitFn, Fail fail) {
  int rc = ZOK;
  {
    MutexLock lock(op->core->mu);
    if (op->core->closed || !op->core->zh) {
      rc = ZCLOSING;
    } else {
      rc = submitFn(op->core->zh);
    }
  }
  if (rc != ZOK) fail(zkStatus(rc, op->path));
}

void startGet(Op* op);
void startCreate(Op* op);
void startSet(Op* op);

void failOp(Op* op, const Status& s) {
  while (op->resume) {  // a parent's creation failed: fail the put waiting at the end
    Op* next = op->resume;
    delete op;
    op = next;
  }
  if (!claim(op)) {
    delete op;
    return;
  }
  if (op->getCb) finish(op->ex, std::move(op->getCb), Result<std::optional<GetResult>>(s));
  if (op->existsCb) finish(op->ex, std::move(op->existsCb), Result<bool>(s));
  if (op->childrenCb)
    finish(op->ex, std::move(op->childrenCb), Result<std::vector<std::string>>(s));
  if (op->putCb) finish(op->ex, std::move(op->putCb), Result<Stat>(s));
  if (op->statusCb) finish(op->ex, std::move(op->statusCb), s);
  delete op;
}

int64_t selfOf(Op* op) {
  MutexLock lock(op->core->mu);
  return op->core->selfId();
}

void onExistsAfterMissingGet(int rc, const ::Stat* /*stat*/, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc == ZOK) return startGet(op);  // created meanwhile: read it
  if (rc == ZNONODE) {
    if (claim(op))
      finish(op->ex, std::move(op->getCb), Result<std::optional<GetResult>>(std::nullopt));
    delete op;
    return;
  }
  failOp(op, zkStatus(rc, op->path));
}

void onGet(int rc, const char* value, int len, const ::Stat* stat, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc == ZNONODE) {
    // Watch for its creation, as Pulsar's ZKMetadataStore does for a missing node.
    return submit(
        op,
        [op](zhandle_t* zh) {
          return zoo_aexists(zh, op->path.c_str(), 1, onExistsAfterMissingGet, op);
        },
        [op](const Status& s) { failOp(op, s); });
  }
  if (rc != ZOK) return failOp(op, zkStatus(rc, op->path));
  GetResult r;
  if (value && len > 0) r.value.assign(value, static_cast<size_t>(len));
  r.stat = toStat(op->path, stat, selfOf(op));
  if (claim(op))
    finish(op->ex, std::move(op->getCb), Result<std::optional<GetResult>>(std::move(r)));
  delete op;
}

void startGet(Op* op) {
  submit(
      op, [op](zhandle_t* zh) { return zoo_aget(zh, op->path.c_str(), 1, onGet, op); },
      [op](const Status& s) { failOp(op, s); });
}

void onExists(int rc, const ::Stat* /*stat*/, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc != ZOK && rc != ZNONODE) return failOp(op, zkStatus(rc, op->path));
  if (claim(op)) finish(op->ex, std::move(op->existsCb), Result<bool>(rc == ZOK));
  delete op;
}

void onChildren(int rc, const struct String_vector* strings, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc != ZOK && rc != ZNONODE) return failOp(op, zkStatus(rc, op->path));
  std::vector<std::string> out;
  if (rc == ZOK && strings) {
    out.reserve(static_cast<size_t>(strings->count));
    for (int i = 0; i < strings->count; ++i) out.emplace_back(strings->data[i]);
  }
  std::sort(out.begin(), out.end());
  if (claim(op))
    finish(op->ex, std::move(op->childrenCb), Result<std::vector<std::string>>(std::move(out)));
  delete op;
}

void onParentCreated(int rc, const char* created, const ::Stat* stat, const void* data);

// Creates an empty persistent node for a parent op (one with `resume` set), then resumes the op
// waiting for it: another parent op, or the put that needed it.
void startParentCreate(Op* parent) {
  submit(
      parent,
      [parent](zhandle_t* zh) {
        return zoo_acreate2(zh, parent->path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0,
                            onParentCreated, parent);
      },
      [parent](const Status& s) {
        Op* child = parent->resume;
        delete parent;
        failOp(child, s);
      });
}

// Creates op->path's parent, then resumes op.
void createParent(Op* op) {
  auto* parent = new Op();
  parent->core = op->core;
  parent->ex = op->ex;
  parent->path = parentPath(op->path);
  parent->resume = op;
  parent->ended = op->ended;
  startParentCreate(parent);
}

void onParentCreated(int rc, const char* /*created*/, const ::Stat* /*stat*/, const void* data) {
  auto* parent = static_cast<Op*>(const_cast<void*>(data));
  if (rc == ZNONODE) return createParent(parent);  // its own parent is missing too
  Op* child = parent->resume;
  delete parent;
  if (rc != ZOK && rc != ZNODEEXISTS) return failOp(child, zkStatus(rc, child->path));
  if (child->resume) return startParentCreate(child);
  startCreate(child);
}

void onCreated(int rc, const char* created, const ::Stat* stat, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc == ZNONODE && op->createTries < 64) return createParent(op);
  if (rc == ZNODEEXISTS && !op->opts.expectedVersion && !op->opts.sequential) {
    return startSet(op);  // made by someone else meanwhile: overwrite, as asked
  }
  if (rc != ZOK) return failOp(op, zkStatus(rc, op->path));
  Stat st = toStat(created ? std::string(created) : op->path, stat, selfOf(op));
  if (claim(op)) finish(op->ex, std::move(op->putCb), Result<Stat>(std::move(st)));
  delete op;
}

void startCreate(Op* op) {
  op->createTries++;
  int flags = (op->opts.ephemeral ? ZOO_EPHEMERAL : 0) | (op->opts.sequential ? ZOO_SEQUENCE : 0);
  submit(
      op,
      [op, flags](zhandle_t* zh) {
        return zoo_acreate2(zh, op->path.c_str(), op->value.data(),
                            static_cast<int>(op->value.size()), &ZOO_OPEN_ACL_UNSAFE, flags,
                            onCreated, op);
      },
      [op](const Status& s) { failOp(op, s); });
}

void onSet(int rc, const ::Stat* stat, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc == ZNONODE && !op->opts.expectedVersion) return startCreate(op);
  if (rc != ZOK) return failOp(op, zkStatus(rc, op->path));
  if (claim(op))
    finish(op->ex, std::move(op->putCb), Result<Stat>(toStat(op->path, stat, selfOf(op))));
  delete op;
}

void startSet(Op* op) {
  int version = op->opts.expectedVersion ? static_cast<int>(*op->opts.expectedVersion) : -1;
  submit(
      op,
      [op, version](zhandle_t* zh) {
        return zoo_aset(zh, op->path.c_str(), op->value.data(), static_cast<int>(op->value.size()),
                        version, onSet, op);
      },
      [op](const Status& s) { failOp(op, s); });
}

void onDeleted(int rc, const void* data) {
  auto* op = static_cast<Op*>(const_cast<void*>(data));
  if (rc != ZOK) return failOp(op, zkStatus(rc, op->path));
  if (claim(op)) finish(op->ex, std::move(op->statusCb), Status::ok());
  delete op;
}

// ---- the store -------------------------------------------------------------------------------

class ZkStore : public Store {
 public:
  explicit ZkStore(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~ZkStore() override { close(); }

  void get(const std::string& path, net::Executor* ex, GetCallback cb) override {
    Status v = validatePath(path);
    if (!v.isOk()) return finish(ex, std::move(cb), Result<std::optional<GetResult>>(v));
    Op* op = newOp(path, ex);
    op->getCb = std::move(cb);
    armTimeout(op);
    startGet(op);
  }

  void getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) override {
    Status v = validatePath(path);
    if (!v.isOk()) return finish(ex, std::move(cb), Result<std::vector<std::string>>(v));
    Op* op = newOp(path, ex);
    op->childrenCb = std::move(cb);
    armTimeout(op);
    submit(
        op,
        [op](zhandle_t* zh) { return zoo_aget_children(zh, op->path.c_str(), 1, onChildren, op); },
        [op](const Status& s) { failOp(op, s); });
  }

  void exists(const std::string& path, net::Executor* ex, ExistsCallback cb) override {
    Status v = validatePath(path);
    if (!v.isOk()) return finish(ex, std::move(cb), Result<bool>(v));
    Op* op = newOp(path, ex);
    op->existsCb = std::move(cb);
    armTimeout(op);
    submit(
        op, [op](zhandle_t* zh) { return zoo_aexists(zh, op->path.c_str(), 1, onExists, op); },
        [op](const Status& s) { failOp(op, s); });
  }

  void put(const std::string& path, const std::string& value, const PutOptions& opts,
           net::Executor* ex, PutCallback cb) override {
    Status v = validatePath(path);
    if (v.isOk() && path == "/") v = Status::invalidArgument("cannot write the root node");
    if (v.isOk() && value.size() > kMaxValueBytes) {
      v = Status::invalidArgument("metadata value of " + std::to_string(value.size()) +
                                  " bytes for " + path + " is over the 1 MiB limit");
    }
    if (!v.isOk()) return finish(ex, std::move(cb), Result<Stat>(v));
    Op* op = newOp(path, ex);
    op->value = value;
    op->opts = opts;
    op->putCb = std::move(cb);
    armTimeout(op);
    if (opts.sequential || (opts.expectedVersion && *opts.expectedVersion == kNotExists)) {
      startCreate(op);
    } else {
      startSet(op);  // nullopt: set, then create when missing; n: set at version n
    }
  }

  void remove(const std::string& path, std::optional<Version> expectedVersion, net::Executor* ex,
              StatusCallback cb) override {
    Status v = validatePath(path);
    if (v.isOk() && path == "/") v = Status::invalidArgument("cannot remove the root node");
    if (!v.isOk()) return finish(ex, std::move(cb), v);
    Op* op = newOp(path, ex);
    op->statusCb = std::move(cb);
    armTimeout(op);
    int version = expectedVersion ? static_cast<int>(*expectedVersion) : -1;
    submit(
        op,
        [op, version](zhandle_t* zh) {
          return zoo_adelete(zh, op->path.c_str(), version, onDeleted, op);
        },
        [op](const Status& s) { failOp(op, s); });
  }

  uint64_t registerListener(std::function<void(const Notification&)> fn,
                            net::Executor* ex) override {
    MutexLock lock(core_->mu);
    uint64_t id = core_->nextListener++;
    core_->listeners[id] = Listener{std::move(fn), nullptr, ex};
    return id;
  }

  uint64_t registerSessionListener(std::function<void(SessionEvent)> fn,
                                   net::Executor* ex) override {
    MutexLock lock(core_->mu);
    uint64_t id = core_->nextListener++;
    core_->listeners[id] = Listener{nullptr, std::move(fn), ex};
    return id;
  }

  void unregisterListener(uint64_t id) override {
    MutexLock lock(core_->mu);
    core_->listeners.erase(id);
  }

  void close() override {
    zhandle_t* zh = nullptr;
    std::vector<std::thread> reapers;
    {
      MutexLock lock(core_->mu);
      if (core_->closed) return;
      core_->closed = true;
      core_->listeners.clear();
      zh = core_->zh;
      core_->zh = nullptr;
      reapers.swap(core_->reapers);
    }
    for (auto& t : reapers) t.join();
    core_->timeouts->stop();
    // Ends the session (ZooKeeper removes its ephemeral nodes at once) and completes what is in
    // flight with ZCLOSING.
    if (zh) zookeeper_close(zh);
  }

 private:
  Op* newOp(const std::string& path, net::Executor* ex) {
    auto* op = new Op();
    op->core = core_;
    op->ex = ex;
    op->path = path;
    return op;
  }

  friend Status metadata::expireZkSessionForTesting(Store* store);
  std::shared_ptr<Core> core_;
};

struct TakeOver {
  std::mutex mu;
  std::condition_variable cv;
  bool connected = false;
};

void takeOverWatcher(zhandle_t* /*zh*/, int type, int state, const char* /*path*/, void* ctx) {
  auto* t = static_cast<TakeOver*>(ctx);
  if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
    std::lock_guard lock(t->mu);
    t->connected = true;
    t->cv.notify_all();
  }
}

Status badServer(const std::string& server, const std::string& url, const char* why) {
  std::string m = "ZooKeeper server '";
  m += server;
  m += "' in '";
  m += url;
  m += "' ";
  m += why;
  return Status::invalidArgument(m);
}

}  // namespace

Status expireZkSessionForTesting(Store* store) {
  auto* zk = dynamic_cast<ZkStore*>(store);
  if (!zk) return Status::invalidArgument("not a ZooKeeper store");
  clientid_t id{};
  std::string hosts;
  {
    MutexLock lock(zk->core_->mu);
    if (!zk->core_->zh) return Status::closed("store is closed");
    id = *zoo_client_id(zk->core_->zh);
    hosts = zk->core_->hosts;
  }
  // The store's own connection reconnects as soon as the server drops it for the second one and
  // may take the session back first; the second client's close then never reaches the server and
  // the session lives on. So: retry until the store runs on another session.
  auto moved = [&] {
    MutexLock lock(zk->core_->mu);
    return !zk->core_->zh || zoo_client_id(zk->core_->zh)->client_id != id.client_id;
  };
  for (int attempt = 0; attempt < 5; ++attempt) {
    TakeOver t;
    zhandle_t* other = zookeeper_init2(hosts.c_str(), takeOverWatcher, zk->core_->sessionTimeoutMs,
                                       &id, &t, 0, zkLibraryLog);
    if (!other) return Status::ioError("cannot connect a second ZooKeeper client");
    bool ok = false;
    {
      std::unique_lock lock(t.mu);
      ok = t.cv.wait_for(lock, std::chrono::seconds(10), [&] { return t.connected; });
    }
    zookeeper_close(other);  // closing the shared session ends it for the first connection too
    if (!ok) return Status::error(StatusCode::kTimeout, "no second connection in 10 s");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (moved()) return Status::ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return Status::error(StatusCode::kTimeout, "the session did not end after 5 take-overs");
}

Result<std::string> parseZkUrl(const std::string& url) {
  std::string s = url;
  if (s.rfind("zk:", 0) == 0) s = s.substr(3);
  if (s.rfind("//", 0) == 0) s = s.substr(2);  // zk://host:port
  std::string hosts = s;
  std::string chroot;
  auto slash = s.find('/');
  if (slash != std::string::npos) {
    hosts = s.substr(0, slash);
    chroot = s.substr(slash);
    Status v = validatePath(chroot);
    if (!v.isOk() || chroot == "/") {
      if (chroot != "/")
        return Status::invalidArgument("bad chroot in ZooKeeper url '" + url + "'");
      chroot.clear();
    }
  }
  if (hosts.empty()) return Status::invalidArgument("no ZooKeeper servers in '" + url + "'");
  size_t start = 0;
  while (start <= hosts.size()) {
    size_t comma = hosts.find(',', start);
    std::string hp =
        hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto colon = hp.rfind(':');
    if (hp.empty() || colon == std::string::npos || colon == 0) {
      return badServer(hp, url, "is not host:port");
    }
    int port = 0;
    auto [p, ec] = std::from_chars(hp.data() + colon + 1, hp.data() + hp.size(), port);
    if (ec != std::errc() || p != hp.data() + hp.size() || port < 1 || port > 65535) {
      return badServer(hp, url, "has no valid port (1-65535)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts + chroot;
}

Result<std::unique_ptr<Store>> openZkStore(const ZkConfig& config) {
  auto hosts = parseZkUrl(config.url);
  if (!hosts.isOk()) return hosts.status();
  static std::once_flag quiet;
  std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
  auto core = std::make_shared<Core>();
  core->hosts = *hosts;
  core->sessionTimeoutMs = config.sessionTimeoutMs;
  core->timeouts = std::make_unique<Timeouts>(config.operationTimeoutMs);
  {
    UniqueLock lock(core->mu);
    core->zh = connect(core.get());
    if (!core->zh) {
      return Status::invalidArgument("cannot start a ZooKeeper client for '" + config.url + "'");
    }
    bool ok = core->cv.wait_for(lock.native(), std::chrono::milliseconds(config.connectTimeoutMs),
                                [&]() NO_THREAD_SAFETY_ANALYSIS { return core->connected; });
    if (!ok) {
      zhandle_t* zh = core->zh;
      core->zh = nullptr;
      core->closed = true;
      lock.unlock();
      zookeeper_close(zh);
      return Status::error(StatusCode::kTimeout,
                           "ZooKeeper at " + *hosts + " did not answer within " +
                               std::to_string(config.connectTimeoutMs) + " ms");
    }
  }
  return std::unique_ptr<Store>(new ZkStore(std::move(core)));
}

}  // namespace magnetar::metadata
