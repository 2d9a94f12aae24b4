// SharedRecords: cluster mode's home for the broker records that standalone keeps in its embedded
// store and that every broker must see: topic policies and schemas (docs/cluster-mode.md, "Topic
// policies and schemas"). A storage::MetadataStore over the configuration metadata store
// (ZooKeeper): a key is the znode's path, unchanged, so PolicyRegistry and SchemaRegistry keep
// their keys and record formats (docs/broker-metadata-format.md):
//   /admin/magnetar/topic-policies/{escaped full topic name}   TopicPolicies record
//   /admin/magnetar/schemas/{escaped schema id}                schema versions record
// watch() keeps a cache current: each child of a root is read (and watched) and every change
// made through any broker is handed to the callback milliseconds later. On a new ZooKeeper session
// (the old one expired, and its watches with it) every root is listed and read again.
//
// Thread: its loop `shared-records` completes the blocking MetadataStore calls (they wait on it
// from the caller's thread, at most metadataStoreOperationTimeoutSeconds + 5 s); a second loop
// `shared-watch` runs the watches and their callbacks. Two loops, so a callback that waits for a
// registry's lock never stalls the completion that the lock's holder (a writer) waits for.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "metadata/store.h"
#include "net/event_loop.h"
#include "storage/metadata_store.h"

namespace magnetar::broker::cluster {

class SharedRecords : public storage::MetadataStore {
 public:
  // store outlives this. operationTimeoutMs: metadataStoreOperationTimeoutSeconds * 1000.
  SharedRecords(metadata::Store* store, int operationTimeoutMs);
  ~SharedRecords() override;

  void start();
  void stop();

  // storage::MetadataStore, blocking. A key must be a valid znode path. write() applies its ops
  // one by one (not atomically; the registries write one key at a time). Errors: the store's
  // (kTimeout, kClosed, kIoError naming the path).
  Result<std::string> get(const std::string& key) override;
  Status put(const std::string& key, const std::string& value) override;
  Status remove(const std::string& key) override;
  Status write(const std::vector<storage::MetadataOp>& ops) override;
  // prefix must end in '/': the children of that node (one level, the registries' flat roots).
  Result<std::vector<std::pair<std::string, std::string>>> scan(const std::string& prefix) override;
  Result<std::vector<std::string>> getChildren(const std::string& path) override;

  // Watches the children of `root` (a node path without trailing '/'): fn(childName, value) for
  // each child now there, and again whenever one is created, changed (value) or deleted
  // (nullopt). fn runs on the `shared-watch` loop and may block on locks of writers (never call
  // the blocking calls from it). Call after start().
  using RecordFn = std::function<void(const std::string&, const std::optional<std::string>&)>;
  void watch(const std::string& root, RecordFn fn);

 private:
  // Watch loop only. all: read every child again, not only the new ones (a new session: its
  // watches must be set again, as Pulsar's caches invalidate all on SessionReestablished).
  void list(const std::string& root, bool all = false);
  void read(const std::string& root, const std::string& name);  // watch loop only
  void onNotification(const metadata::Notification& n);         // watch loop only

  metadata::Store* store_;
  int operationTimeoutMs_;
  net::EventLoop loop_{"shared-records"};
  net::EventLoop watchLoop_{"shared-watch"};
  std::optional<uint64_t> listener_;
  std::optional<uint64_t> sessionListener_;
  bool started_ = false;
  // Watch loop only: watched roots, their callbacks and children last listed.
  std::map<std::string, RecordFn> roots_;
  std::map<std::string, std::set<std::string>> children_;
};

}  // namespace magnetar::broker::cluster
