// LocalStore: metadata::Store inside one process (standalone mode, tests). The nodes live in a
// LocalBackend shared by every LocalStore opened on it; each LocalStore is one session, so two of
// them behave as two brokers' sessions on one ZooKeeper: ephemeral nodes go when their session
// closes, and watches are per session. Thread: any; callbacks are posted to the given executor.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "metadata/store.h"

namespace magnetar::metadata {

class LocalStore;

// The shared node tree. Thread: any (one mutex).
class LocalBackend : public std::enable_shared_from_this<LocalBackend> {
 public:
  static std::shared_ptr<LocalBackend> create();
  // A new session on this backend.
  std::unique_ptr<LocalStore> openSession();

 private:
  friend class LocalStore;
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

  Mutex mu_;
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
