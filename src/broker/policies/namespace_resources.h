// NamespaceResources: the namespaces and the partitioned-topic metadata of the broker (Pulsar's
// NamespaceResources and PartitionedTopicResources), kept in memory and in the metadata store.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_POLICIES)
#error "broker/policies is not below this broker part (src/broker/README.md)"
#endif

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "storage/metadata_store.h"

namespace magnetar::broker {

// Keys "tenant/ns" for namespaces and full topic names ("persistent://t/ns/topic") for
// partitioned topics. Every change is written through to the store (when attached) before the
// call returns; a failed write is logged and the in-memory state kept, as the broker always did
// (docs/broker-metadata-format.md). Thread: any; one internal lock, never held across calls out.
class NamespaceResources {
 public:
  // Loads what `store` holds (null: memory only) and adds `initial` (e.g. public/default, which
  // Pulsar standalone creates). Damaged partition counts are skipped with a warning.
  void load(storage::MetadataStore* store, const std::vector<std::string>& initial);

  bool exists(const std::string& ns) const;
  // Errors: kAlreadyExists.
  Status create(const std::string& ns);
  // Creates `ns` unless it exists.
  void ensure(const std::string& ns);
  // Forgets `ns` and its partitioned topics. Errors: kNotFound.
  Status remove(const std::string& ns);
  std::vector<std::string> list() const;  // sorted

  // Partitions of a partitioned topic; nullopt when `topic` is not partitioned.
  std::optional<int> partitions(const std::string& topic) const;
  // Records `topic` with `n` >= 1 partitions. Errors: kAlreadyExists.
  Status createPartitioned(const std::string& topic, int n);
  // Raises the count to `n`; returns the count before. Errors: kNotFound, kInvalidArgument
  // (fewer than now).
  Result<int> updatePartitioned(const std::string& topic, int n);
  // Forgets `topic`; returns its count. Errors: kNotFound.
  Result<int> removePartitioned(const std::string& topic);
  // Cluster mode: the configuration store's state applied to this cache (not persisted here).
  // applyNamespace(ns, false) also forgets its partitioned topics. applyPartitioned returns the
  // count before (nullopt: it was not partitioned).
  void applyNamespace(const std::string& ns, bool exists);
  std::optional<int> applyPartitioned(const std::string& topic, std::optional<int> partitions);
  void clear();

  // Partitioned topics whose full name starts with `prefix`: name -> partitions.
  std::map<std::string, int> partitionedWithPrefix(const std::string& prefix) const;

 private:
  void persistLocked() REQUIRES(mu_);

  mutable Mutex mu_;
  storage::MetadataStore* store_ GUARDED_BY(mu_) = nullptr;
  std::set<std::string> namespaces_ GUARDED_BY(mu_);
  std::map<std::string, int> partitioned_ GUARDED_BY(mu_);
};

}  // namespace magnetar::broker
