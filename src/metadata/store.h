// metadata::Store: the cluster's shared metadata (Pulsar's MetadataStore API): znode-style paths
// ("/admin/policies/public/default") holding byte values, with a version per node for
// compare-and-set, ephemeral nodes that live as long as the session that made them, sequential
// nodes, children and change notifications. Backends: LocalStore (one process; in memory or on
// RocksDB) and ZkStore (Apache ZooKeeper, metadataStoreUrl=zk:...). One conformance suite
// (tests/store_contract.{h,cc}) runs against each.
//
// Every call is asynchronous and never blocks the caller: its callback runs on the executor
// passed with it (an event loop or an ml-worker), never inline. Errors (Status codes):
//   kNotFound     the node (or, for put with a version, the node to update) does not exist;
//   kBadVersion   the expected version does not match (or -1 was expected and the node exists);
//   kNotAllowed   remove of a node with children; a child under an ephemeral node;
//   kInvalidArgument  a path that is not absolute, ends in '/', or has an empty component;
//   kClosed       the store is closed, or the session is lost (ZkStore);
//   kTimeout      no answer within metadataStoreOperationTimeoutSeconds (ZkStore);
//   kIoError      the backend failed (message names the path).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/executor.h"

namespace magnetar::metadata {

// A node's version: 0 at creation, +1 at every put (ZooKeeper's dataVersion).
using Version = int64_t;
// As an expected version: the node must not exist yet.
inline constexpr Version kNotExists = -1;

struct Stat {
  std::string path;  // the node's path (for a sequential put: with its sequence suffix)
  Version version = 0;
  int64_t creationTimestampMs = 0;      // wall clock, ms since the epoch
  int64_t modificationTimestampMs = 0;  // wall clock, ms since the epoch
  bool ephemeral = false;
  bool createdBySelf = false;  // ephemeral and owned by this store's session
};

struct GetResult {
  std::string value;
  Stat stat;
};

struct PutOptions {
  // nullopt: create or overwrite; kNotExists: create only; n >= 0: update only at version n.
  std::optional<Version> expectedVersion;
  bool ephemeral = false;   // removed when this store's session ends (close, expiry)
  bool sequential = false;  // a 10-digit, zero-padded counter is appended to the path (ZooKeeper's)
};

// Pulsar's NotificationType.
enum class NotificationType { kCreated, kModified, kDeleted, kChildrenChanged };

struct Notification {
  NotificationType type;
  std::string path;  // for kChildrenChanged: the parent
};

// Pulsar's SessionEvent.
enum class SessionEvent { kConnectionLost, kReconnected, kSessionLost, kSessionReestablished };

class Store {
 public:
  using GetCallback = std::function<void(Result<std::optional<GetResult>>)>;
  using ChildrenCallback = std::function<void(Result<std::vector<std::string>>)>;
  using ExistsCallback = std::function<void(Result<bool>)>;
  using PutCallback = std::function<void(Result<Stat>)>;
  using StatusCallback = std::function<void(Status)>;

  virtual ~Store() = default;

  // The value and stat, or nullopt when the node does not exist. Sets a watch on the path: its
  // next change (created, modified, deleted) is notified once (ZooKeeper's one-shot watches).
  virtual void get(const std::string& path, net::Executor* ex, GetCallback cb) = 0;
  // Names of the direct children, sorted; empty when the node does not exist. Sets a child watch.
  virtual void getChildren(const std::string& path, net::Executor* ex, ChildrenCallback cb) = 0;
  // Sets a watch as get() does.
  virtual void exists(const std::string& path, net::Executor* ex, ExistsCallback cb) = 0;
  // Writes value (at most 1 MiB, ZooKeeper's jute.maxbuffer); missing parents are created as empty
  // persistent nodes (as Pulsar's ZKMetadataStore does). Returns the new stat.
  virtual void put(const std::string& path, const std::string& value, const PutOptions& opts,
                   net::Executor* ex, PutCallback cb) = 0;
  // Removes the node; nullopt: whatever its version. kNotFound when missing.
  virtual void remove(const std::string& path, std::optional<Version> expectedVersion,
                      net::Executor* ex, StatusCallback cb) = 0;

  // Notifications for the watched paths of this store; fn runs on ex. Thread: any, before or
  // after other calls. Returns an id for unregisterListener.
  virtual uint64_t registerListener(std::function<void(const Notification&)> fn,
                                    net::Executor* ex) = 0;
  virtual uint64_t registerSessionListener(std::function<void(SessionEvent)> fn,
                                           net::Executor* ex) = 0;
  virtual void unregisterListener(uint64_t id) = 0;

  // Ends the session (its ephemeral nodes go) and fails calls still pending with kClosed.
  // Blocks until done. Thread: any but a callback of this store.
  virtual void close() = 0;
};

// A path's checks: absolute, no trailing '/', no empty component. "/" itself is valid.
Status validatePath(const std::string& path);
// "/a/b" -> "/a"; "/a" -> "/".
std::string parentPath(const std::string& path);

}  // namespace magnetar::metadata
