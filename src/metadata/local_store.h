// LocalStore: metadata::Store inside one process (standalone mode, tests). The nodes live in a
// LocalBackend shared by every LocalStore opened on it; each LocalStore is one session, so two of
// them behave as two brokers' sessions on one ZooKeeper: ephemeral nodes go when their session
// closes, and watches are per session. Thread: any; callbacks are posted to the given executor.
//
// Persistent backend (standalone, as Pulsar's RocksdbMetadataStore): a LocalPersistence holds the
// persistent nodes across restarts. Reads are served from memory; a write changes memory at once
// (so versions and notifications are ordered as ZooKeeper's) and is written to the persistence by
// the backend's store thread `metadata-store`, in order; its callback is posted once that write
// is done (kIoError naming the path when it failed: memory keeps the change until the next write
// of that node). Node versions restart at 0 when the backend is opened again.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "metadata/store.h"

namespace magnetar::net {
class EventLoop;
}  // namespace magnetar::net

namespace magnetar::metadata {

class LocalStore;

// Where a persistent LocalBackend keeps its persistent nodes (standalone: the broker's RocksDB,
// src/app/topic_storage.cc). Values are the nodes' bytes as they are.
class LocalPersistence {
 public:
  virtual ~LocalPersistence() = default;
  // Whether `path` is kept (a persistence may own only some subtrees; the others stay in memory).
  virtual bool persists(const std::string& path) const = 0;
  // Every kept node (path, value); read once, by LocalBackend::open. Errors: the medium's.
  virtual Result<std::vector<std::pair<std::string, std::string>>> load() = 0;
  // Writes (value) or deletes (nullopt) one node. Thread: the backend's store thread.
  virtual Status write(const std::string& path, const std::optional<std::string>& value) = 0;
};

// The shared node tree. Thread: any (one mutex).
class LocalBackend : public std::enable_shared_from_this<LocalBackend> {
 public:
  // In memory only.
  static std::shared_ptr<LocalBackend> create();
  // Over `persistence`: loads its nodes, then keeps every later change of a kept persistent node
  // there. Errors: load()'s. Thread: any but an executor (it reads the medium).
  static Result<std::shared_ptr<LocalBackend>> open(std::unique_ptr<LocalPersistence> persistence);
  ~LocalBackend();
  // A new session on this backend.
  std::unique_ptr<LocalStore> openSession();
  // Waits until every write queued so far is on the persistence (no-op in memory). Thread: any
  // but an executor (base/blocking_wait.h).
  void flush();

 private:
  friend class LocalStore;
  // One change for the persistence: path and its new value (nullopt: deleted).
  using PendingWrite = std::pair<std::string, std::optional<std::string>>;
  struct Node {
    std::string value;
    Version version = 0;
    int64_t ctimeMs = 0;
    int64_t mtimeMs = 0;
    uint64_t ephemeralOwner = 0;  // session id, 0 for persistent
    int64_t childChanges = 0;     // ZooKeeper's cversion: the sequential counter of its children
  };
  struct Session {
    std::set<std::string> dataWatches;
    std::set<std::string> childWatches;
    LocalStore* store = nullptr;
  };
  LocalBackend() = default;
  // Creates path (its parents as empty persistent nodes first). REQUIRES: no node at path.
  Result<Stat> createLocked(const std::string& path, const std::string& value, uint64_t owner,
                            uint64_t session, int64_t nowMs) REQUIRES(mu_);
  void removeLocked(const std::string& path) REQUIRES(mu_);
  std::vector<std::string> childrenLocked(const std::string& path) const REQUIRES(mu_);
  // Fire (and clear) the one-shot watches sessions hold on path / on parent's children. Lock
  // order: the backend's mutex, then a store's.
  void fireData(const std::string& path, NotificationType t) REQUIRES(mu_);
  void fireChildren(const std::string& parent) REQUIRES(mu_);
  int64_t& childChangesLocked(const std::string& parent) REQUIRES(mu_);
  static Stat statOf(const std::string& path, const Node& n, uint64_t session);
  void closeSession(uint64_t session);
  // Writes what the last call queued in pending_ (on the store thread), then runs `then` with
  // the outcome (ok, or the first failure). Without persistence: then(ok) at once.
  void persistLocked(std::function<void(Status)> then) REQUIRES(mu_);

  std::unique_ptr<LocalPersistence> persistence_;
  std::unique_ptr<net::EventLoop> storeLoop_;  // `metadata-store`, with a persistence only
  Mutex mu_;
  std::vector<PendingWrite> pending_ GUARDED_BY(mu_);  // changes of the call in progress
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);  // "/" is implicit
  std::map<uint64_t, Session> sessions_ GUARDED_BY(mu_);
  int64_t rootChildChanges_ GUARDED_BY(mu_) = 0;
  uint64_t nextSession_ GUARDED_BY(mu_) = 1;
};

class LocalStore : public Store {
 public:
  ~LocalStore() override;
  void get(const std::string& path, net::Executor* ex, GetCallback cb) override;
  void getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) override;
  void exists(const std::string& path, net::Executor* ex, ExistsCallback cb) override;
  void put(const std::string& path, const std::string& value, const PutOptions& opts,
           net::Executor* ex, PutCallback cb) override;
  void remove(const std::string& path, std::optional<Version> expectedVersion, net::Executor* ex,
              StatusCallback cb) override;
  uint64_t registerListener(std::function<void(const Notification&)> fn,
                            net::Executor* ex) override;
  uint64_t registerSessionListener(std::function<void(SessionEvent)> fn,
                                   net::Executor* ex) override;
  void unregisterListener(uint64_t id) override;
  void close() override;

  uint64_t sessionId() const { return session_; }

 private:
  friend class LocalBackend;
  LocalStore(std::shared_ptr<LocalBackend> backend, uint64_t session);
  // Posts n to every listener (on their executors). Thread: any.
  void notify(const Notification& n);

  struct Listener {
    std::function<void(const Notification&)> fn;
    std::function<void(SessionEvent)> sessionFn;
    net::Executor* ex;
  };
  std::shared_ptr<LocalBackend> backend_;
  const uint64_t session_;
  Mutex mu_;
  bool closed_ GUARDED_BY(mu_) = false;
  std::map<uint64_t, Listener> listeners_ GUARDED_BY(mu_);
  uint64_t nextListener_ GUARDED_BY(mu_) = 1;
};

}  // namespace magnetar::metadata
