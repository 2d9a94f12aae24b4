// NamespaceResources: the namespaces and the partitioned-topic metadata of the broker (Pulsar's
// NamespaceResources and PartitionedTopicResources) as the broker's in-memory view; the
// configuration store (SharedConfig) holds them and applies its state here.
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

namespace magnetar::broker {

// Keys "tenant/ns" for namespaces and full topic names ("persistent://t/ns/topic") for
// partitioned topics. The mutators change memory only (a broker without a configuration store:
// unit tests). Thread: any; one internal lock, never held across calls out.
class NamespaceResources {
 public:
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
  // The configuration store's state applied to this cache.
  // applyNamespace(ns, false) also forgets its partitioned topics. applyPartitioned returns the
  // count before (nullopt: it was not partitioned).
  void applyNamespace(const std::string& ns, bool exists);
  std::optional<int> applyPartitioned(const std::string& topic, std::optional<int> partitions);
  void clear();

  // Partitioned topics whose full name starts with `prefix`: name -> partitions.
  std::map<std::string, int> partitionedWithPrefix(const std::string& prefix) const;

 private:
  mutable Mutex mu_;
  std::set<std::string> namespaces_ GUARDED_BY(mu_);
  std::map<std::string, int> partitioned_ GUARDED_BY(mu_);
};

}  // namespace magnetar::broker
