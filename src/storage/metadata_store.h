// MetadataStore: a small key/value store with path-like keys ("/admin/tenants/t1") for everything
// that is not message data: managed-ledger lists, cursor state, the journal index and checkpoint
// (storage's own keys start with "/ml"), and the broker's tenants, namespaces, topics and
// partitioned metadata. RocksDB is the embedded default (rocksdb_metadata_store.h);
// MemoryMetadataStore is for tests. Thread: any; every call is synchronous and may block on disk,
// so the broker calls it off the I/O threads.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "storage/path_component.h"

namespace magnetar::storage {

// One change in an atomic batch.
struct MetadataOp {
  enum class Kind { kPut, kDelete, kDeletePrefix };
  Kind kind = Kind::kPut;
  std::string key;    // for kDeletePrefix: every key starting with this
  std::string value;  // kPut only

  static MetadataOp put(std::string k, std::string v) {
    return {Kind::kPut, std::move(k), std::move(v)};
  }
  static MetadataOp del(std::string k) { return {Kind::kDelete, std::move(k), {}}; }
  static MetadataOp delPrefix(std::string p) { return {Kind::kDeletePrefix, std::move(p), {}}; }
};

class MetadataStore {
 public:
  virtual ~MetadataStore() = default;
  // The value, or kNotFound.
  virtual Result<std::string> get(const std::string& key) = 0;
  virtual Status put(const std::string& key, const std::string& value) = 0;
  // Deleting a missing key is ok.
  virtual Status remove(const std::string& key) = 0;
  // Applies all ops atomically, in order.
  virtual Status write(const std::vector<MetadataOp>& ops) = 0;
  // Makes every completed write durable (when writes are not synced one by one). Default: ok.
  virtual Status syncWrites() { return Status::ok(); }
  // All (key, value) pairs whose key starts with prefix, in key (byte) order.
  virtual Result<std::vector<std::pair<std::string, std::string>>> scan(
      const std::string& prefix) = 0;
  // Names of the direct children of `path` (ZooKeeper-style): for keys "/a/b" and "/a/c/d",
  // getChildren("/a") is {"b", "c"}. Sorted.
  virtual Result<std::vector<std::string>> getChildren(const std::string& path) = 0;
};

// In-memory store for tests. Thread: any (one mutex).
class MemoryMetadataStore : public MetadataStore {
 public:
  Result<std::string> get(const std::string& key) override;
  Status put(const std::string& key, const std::string& value) override;
  Status remove(const std::string& key) override;
  Status write(const std::vector<MetadataOp>& ops) override;
  Result<std::vector<std::pair<std::string, std::string>>> scan(const std::string& prefix) override;
  Result<std::vector<std::string>> getChildren(const std::string& path) override;

 private:
  Mutex mu_;
  std::map<std::string, std::string> kv_ GUARDED_BY(mu_);
};

}  // namespace magnetar::storage
