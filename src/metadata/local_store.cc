#include "metadata/local_store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <utility>

#include "base/blocking_wait.h"
#include "base/logging.h"
#include "net/event_loop.h"

namespace magnetar::metadata {

namespace {

// ZooKeeper's jute.maxbuffer default: the largest value a znode takes.
constexpr size_t kMaxValueBytes = 1024 * 1024;

int64_t wallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename T, typename Cb>
void post(net::Executor* ex, Cb cb, T value) {
  ex->execute([cb = std::move(cb), value = std::move(value)]() mutable { cb(std::move(value)); });
}

Status closedStatus() { return Status::closed("metadata store session is closed"); }

}  // namespace

// ---- LocalBackend ----------------------------------------------------------------------------

std::shared_ptr<LocalBackend> LocalBackend::create() {
  return std::shared_ptr<LocalBackend>(new LocalBackend());
}

Result<std::shared_ptr<LocalBackend>> LocalBackend::open(
    std::unique_ptr<LocalPersistence> persistence) {
  auto nodes = persistence->load();
  if (!nodes.isOk()) return nodes.status();
  std::sort(nodes->begin(), nodes->end());  // a parent before its children
  std::shared_ptr<LocalBackend> backend(new LocalBackend());
  {
    MutexLock lock(backend->mu_);
    const int64_t now = wallMs();
    for (const auto& [path, value] : *nodes) {
      if (!validatePath(path).isOk() || path == "/") {
        MLOG_WARN("metadata store: skipping the stored node '{}': not a node path", path);
        continue;
      }
      auto it = backend->nodes_.find(path);
      if (it != backend->nodes_.end()) {
        it->second.value = value;  // made as the parent of an earlier node
      } else {
        (void)backend->createLocked(path, value, 0, 0, now);
      }
    }
    backend->persistence_ = std::move(persistence);
  }
  backend->storeLoop_ = std::make_unique<net::EventLoop>("metadata-store");
  backend->storeLoop_->start();
  return backend;
}

LocalBackend::~LocalBackend() {
  if (!storeLoop_) return;
  flush();
  storeLoop_->stop();
}

void LocalBackend::flush() {
  if (!storeLoop_) return;
  std::promise<void> done;
  std::future<void> f = done.get_future();
  storeLoop_->execute([&done] { done.set_value(); });
  blockingGet(f, "metadata-store flush");
}

void LocalBackend::persistLocked(std::function<void(Status)> then) {
  if (!persistence_ || pending_.empty()) {
    pending_.clear();
    then(Status::ok());
    return;
  }
  std::vector<PendingWrite> writes;
  writes.swap(pending_);
  // Queued under mu_: the store thread writes in the order memory changed.
  storeLoop_->execute([this, writes = std::move(writes), then = std::move(then)] {
    Status out;
    for (const auto& [path, value] : writes) {
      Status s = persistence_->write(path, value);
      if (!s.isOk() && out.isOk()) {
        MLOG_WARN("metadata store: cannot write {}: {}", path, s.toString());
        out = Status::ioError("cannot write metadata node " + path + ": " + s.message());
      }
    }
    then(out);
  });
}

std::unique_ptr<LocalStore> LocalBackend::openSession() {
  uint64_t id = 0;
  std::unique_ptr<LocalStore> store;
  {
    MutexLock lock(mu_);
    id = nextSession_++;
    store.reset(new LocalStore(shared_from_this(), id));
    sessions_[id].store = store.get();
  }
  return store;
}

Stat LocalBackend::statOf(const std::string& path, const Node& n, uint64_t session) {
  Stat s;
  s.path = path;
  s.version = n.version;
  s.creationTimestampMs = n.ctimeMs;
  s.modificationTimestampMs = n.mtimeMs;
  s.ephemeral = n.ephemeralOwner != 0;
  s.createdBySelf = s.ephemeral && n.ephemeralOwner == session;
  return s;
}

int64_t& LocalBackend::childChangesLocked(const std::string& parent) {
  if (parent == "/") return rootChildChanges_;
  return nodes_[parent].childChanges;
}

std::vector<std::string> LocalBackend::childrenLocked(const std::string& path) const {
  std::string prefix = path == "/" ? "/" : path + "/";
  std::vector<std::string> out;
  for (auto it = nodes_.lower_bound(prefix); it != nodes_.end(); ++it) {
    const std::string& k = it->first;
    if (k.compare(0, prefix.size(), prefix) != 0) break;
    if (k.find('/', prefix.size()) == std::string::npos) out.push_back(k.substr(prefix.size()));
  }
  return out;  // map order is byte order: sorted
}

void LocalBackend::fireData(const std::string& path, NotificationType t) {
  for (auto& [id, s] : sessions_) {
    if (s.dataWatches.erase(path) > 0 && s.store) s.store->notify({t, path});
  }
}

void LocalBackend::fireChildren(const std::string& parent) {
  for (auto& [id, s] : sessions_) {
    if (s.childWatches.erase(parent) > 0 && s.store) {
      s.store->notify({NotificationType::kChildrenChanged, parent});
    }
  }
}

Result<Stat> LocalBackend::createLocked(const std::string& path, const std::string& value,
                                        uint64_t owner, uint64_t session, int64_t nowMs) {
  std::string parent = parentPath(path);
  if (parent != "/") {
    auto it = nodes_.find(parent);
    if (it == nodes_.end()) {
      auto made = createLocked(parent, {}, 0, session, nowMs);
      if (!made.isOk()) return made.status();
    } else if (it->second.ephemeralOwner != 0) {
      return Status::notAllowed("ephemeral node " + parent + " cannot have children (" + path +
                                ")");
    }
  }
  Node n;
  n.value = value;
  n.ctimeMs = nowMs;
  n.mtimeMs = nowMs;
  n.ephemeralOwner = owner;
  auto [it, inserted] = nodes_.emplace(path, std::move(n));
  (void)inserted;
  if (owner == 0 && persistence_ && persistence_->persists(path))
    pending_.emplace_back(path, value);
  ++childChangesLocked(parent);
  fireData(path, NotificationType::kCreated);
  fireChildren(parent);
  return statOf(path, it->second, session);
}

void LocalBackend::removeLocked(const std::string& path) {
  auto it = nodes_.find(path);
  if (it != nodes_.end() && it->second.ephemeralOwner == 0 && persistence_ &&
      persistence_->persists(path)) {
    pending_.emplace_back(path, std::nullopt);
  }
  nodes_.erase(path);
  std::string parent = parentPath(path);
  ++childChangesLocked(parent);
  fireData(path, NotificationType::kDeleted);
  fireChildren(parent);
}

void LocalBackend::closeSession(uint64_t session) {
  MutexLock lock(mu_);
  std::vector<std::string> mine;
  for (const auto& [path, n] : nodes_) {
    if (n.ephemeralOwner == session) mine.push_back(path);
  }
  sessions_.erase(session);
  for (const auto& p : mine) removeLocked(p);
  pending_.clear();  // ephemeral nodes only: nothing kept
}

// ---- LocalStore ------------------------------------------------------------------------------

LocalStore::LocalStore(std::shared_ptr<LocalBackend> backend, uint64_t session)
    : backend_(std::move(backend)), session_(session) {}

LocalStore::~LocalStore() { close(); }

void LocalStore::close() {
  {
    MutexLock lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  backend_->closeSession(session_);
  MutexLock lock(mu_);
  listeners_.clear();
}

void LocalStore::notify(const Notification& n) {
  MutexLock lock(mu_);
  for (const auto& [id, l] : listeners_) {
    if (l.fn) l.ex->execute([fn = l.fn, n] { fn(n); });
  }
}

void LocalStore::get(const std::string& path, net::Executor* ex, GetCallback cb) {
  Status v = validatePath(path);
  if (!v.isOk()) return post(ex, std::move(cb), Result<std::optional<GetResult>>(v));
  std::optional<GetResult> out;
  {
    MutexLock lock(backend_->mu_);
    auto s = backend_->sessions_.find(session_);
    if (s == backend_->sessions_.end()) {
      return post(ex, std::move(cb), Result<std::optional<GetResult>>(closedStatus()));
    }
    s->second.dataWatches.insert(path);  // set on a missing node too: fires at its creation
    auto it = backend_->nodes_.find(path);
    if (it != backend_->nodes_.end()) {
      out = GetResult{it->second.value, LocalBackend::statOf(path, it->second, session_)};
    } else if (path == "/") {
      out = GetResult{{}, Stat{"/", 0, 0, 0, false, false}};
    }
  }
  post(ex, std::move(cb), Result<std::optional<GetResult>>(std::move(out)));
}

void LocalStore::getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) {
  Status v = validatePath(path);
  if (!v.isOk()) return post(ex, std::move(cb), Result<std::vector<std::string>>(v));
  std::vector<std::string> out;
  {
    MutexLock lock(backend_->mu_);
    auto s = backend_->sessions_.find(session_);
    if (s == backend_->sessions_.end()) {
      return post(ex, std::move(cb), Result<std::vector<std::string>>(closedStatus()));
    }
    if (path == "/" || backend_->nodes_.count(path) > 0) {
      s->second.childWatches.insert(path);  // ZooKeeper sets a child watch on existing nodes only
      out = backend_->childrenLocked(path);
    }
  }
  post(ex, std::move(cb), Result<std::vector<std::string>>(std::move(out)));
}

void LocalStore::exists(const std::string& path, net::Executor* ex, ExistsCallback cb) {
  Status v = validatePath(path);
  if (!v.isOk()) return post(ex, std::move(cb), Result<bool>(v));
  bool found = false;
  {
    MutexLock lock(backend_->mu_);
    auto s = backend_->sessions_.find(session_);
    if (s == backend_->sessions_.end()) {
      return post(ex, std::move(cb), Result<bool>(closedStatus()));
    }
    s->second.dataWatches.insert(path);
    found = path == "/" || backend_->nodes_.count(path) > 0;
  }
  post(ex, std::move(cb), Result<bool>(found));
}

void LocalStore::put(const std::string& path, const std::string& value, const PutOptions& opts,
                     net::Executor* ex, PutCallback cb) {
  Status v = validatePath(path);
  if (v.isOk() && path == "/") v = Status::invalidArgument("cannot write the root node");
  if (v.isOk() && value.size() > kMaxValueBytes) {
    v = Status::invalidArgument("metadata value of " + std::to_string(value.size()) +
                                " bytes for " + path + " is over the 1 MiB limit");
  }
  if (!v.isOk()) return post(ex, std::move(cb), Result<Stat>(v));
  Result<Stat> out = Status::internal("unset");
  {
    MutexLock lock(backend_->mu_);
    if (backend_->sessions_.count(session_) == 0) {
      return post(ex, std::move(cb), Result<Stat>(closedStatus()));
    }
    const int64_t now = wallMs();
    const uint64_t owner = opts.ephemeral ? session_ : 0;
    if (opts.sequential) {
      std::string parent = parentPath(path);
      int64_t seq = backend_->nodes_.count(parent) > 0 || parent == "/"
                        ? backend_->childChangesLocked(parent)
                        : 0;
      char suffix[16];
      std::snprintf(suffix, sizeof suffix, "%010lld", static_cast<long long>(seq));
      std::string full = path + suffix;
      if (backend_->nodes_.count(full) > 0) {
        out = Status::badVersion("sequential node " + full + " exists");
      } else {
        out = backend_->createLocked(full, value, owner, session_, now);
      }
    } else {
      auto it = backend_->nodes_.find(path);
      const bool exists = it != backend_->nodes_.end();
      if (opts.expectedVersion && *opts.expectedVersion == kNotExists && exists) {
        out = Status::badVersion("node " + path + " already exists");
      } else if (opts.expectedVersion && *opts.expectedVersion >= 0 && !exists) {
        out = Status::notFound("node " + path + " does not exist");
      } else if (opts.expectedVersion && *opts.expectedVersion >= 0 &&
                 it->second.version != *opts.expectedVersion) {
        out = Status::badVersion("node " + path + " is at version " +
                                 std::to_string(it->second.version) + ", not " +
                                 std::to_string(*opts.expectedVersion));
      } else if (exists) {
        it->second.value = value;
        it->second.version++;
        it->second.mtimeMs = now;
        out = LocalBackend::statOf(path, it->second, session_);
        backend_->fireData(path, NotificationType::kModified);
        if (it->second.ephemeralOwner == 0 && backend_->persistence_ &&
            backend_->persistence_->persists(path)) {
          backend_->pending_.emplace_back(path, value);
        }
      } else {
        out = backend_->createLocked(path, value, owner, session_, now);
      }
    }
    backend_->persistLocked(
        [ex, cb = std::move(cb), out = std::move(out)](const Status& s) mutable {
          post(ex, std::move(cb), s.isOk() ? std::move(out) : Result<Stat>(s));
        });
  }
}

void LocalStore::remove(const std::string& path, std::optional<Version> expectedVersion,
                        net::Executor* ex, StatusCallback cb) {
  Status v = validatePath(path);
  if (v.isOk() && path == "/") v = Status::invalidArgument("cannot remove the root node");
  if (!v.isOk()) return post(ex, std::move(cb), v);
  Status out;
  {
    MutexLock lock(backend_->mu_);
    if (backend_->sessions_.count(session_) == 0) return post(ex, std::move(cb), closedStatus());
    auto it = backend_->nodes_.find(path);
    if (it == backend_->nodes_.end()) {
      out = Status::notFound("node " + path + " does not exist");
    } else if (expectedVersion && it->second.version != *expectedVersion) {
      out = Status::badVersion("node " + path + " is at version " +
                               std::to_string(it->second.version) + ", not " +
                               std::to_string(*expectedVersion));
    } else if (!backend_->childrenLocked(path).empty()) {
      out = Status::notAllowed("node " + path + " has children");
    } else {
      backend_->removeLocked(path);
    }
    backend_->persistLocked([ex, cb = std::move(cb), out](const Status& s) mutable {
      post(ex, std::move(cb), s.isOk() ? out : s);
    });
  }
}

uint64_t LocalStore::registerListener(std::function<void(const Notification&)> fn,
                                      net::Executor* ex) {
  MutexLock lock(mu_);
  uint64_t id = nextListener_++;
  listeners_[id] = Listener{std::move(fn), nullptr, ex};
  return id;
}

uint64_t LocalStore::registerSessionListener(std::function<void(SessionEvent)> fn,
                                             net::Executor* ex) {
  // A local session is never lost: no events to deliver.
  MutexLock lock(mu_);
  uint64_t id = nextListener_++;
  listeners_[id] = Listener{nullptr, std::move(fn), ex};
  return id;
}

void LocalStore::unregisterListener(uint64_t id) {
  MutexLock lock(mu_);
  listeners_.erase(id);
}

}  // namespace magnetar::metadata
