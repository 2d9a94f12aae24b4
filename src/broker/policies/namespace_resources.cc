#include "broker/policies/namespace_resources.h"

#include <utility>
#include <vector>

namespace magnetar::broker {

bool NamespaceResources::exists(const std::string& ns) const {
  MutexLock lock(mu_);
  return namespaces_.count(ns) > 0;
}

Status NamespaceResources::create(const std::string& ns) {
  MutexLock lock(mu_);
  if (!namespaces_.insert(ns).second) return Status::alreadyExists("Namespace already exists");
  return Status::ok();
}

void NamespaceResources::ensure(const std::string& ns) {
  MutexLock lock(mu_);
  namespaces_.insert(ns);
}

Status NamespaceResources::remove(const std::string& ns) {
  MutexLock lock(mu_);
  if (namespaces_.erase(ns) == 0) return Status::notFound("Namespace does not exist");
  for (const char* domain : {"persistent://", "non-persistent://"}) {
    std::string prefix = domain + ns + "/";
    for (auto it = partitioned_.begin(); it != partitioned_.end();) {
      it = it->first.rfind(prefix, 0) == 0 ? partitioned_.erase(it) : std::next(it);
    }
  }
  return Status::ok();
}

void NamespaceResources::applyNamespace(const std::string& ns, bool exists) {
  MutexLock lock(mu_);
  if (exists) {
    namespaces_.insert(ns);
    return;
  }
  namespaces_.erase(ns);
  for (const char* domain : {"persistent://", "non-persistent://"}) {
    std::string prefix = domain + ns + "/";
    for (auto it = partitioned_.lower_bound(prefix);
         it != partitioned_.end() && it->first.rfind(prefix, 0) == 0;) {
      it = partitioned_.erase(it);
    }
  }
}

std::optional<int> NamespaceResources::applyPartitioned(const std::string& topic,
                                                        std::optional<int> partitions) {
  MutexLock lock(mu_);
  std::optional<int> before;
  auto it = partitioned_.find(topic);
  if (it != partitioned_.end()) before = it->second;
  if (partitions) {
    partitioned_[topic] = *partitions;
  } else if (it != partitioned_.end()) {
    partitioned_.erase(it);
  }
  return before;
}

void NamespaceResources::clear() {
  MutexLock lock(mu_);
  namespaces_.clear();
  partitioned_.clear();
}

std::vector<std::string> NamespaceResources::list() const {
  MutexLock lock(mu_);
  return {namespaces_.begin(), namespaces_.end()};
}

std::optional<int> NamespaceResources::partitions(const std::string& topic) const {
  MutexLock lock(mu_);
  auto it = partitioned_.find(topic);
  if (it == partitioned_.end()) return std::nullopt;
  return it->second;
}

Status NamespaceResources::createPartitioned(const std::string& topic, int n) {
  if (n < 1) return Status::invalidArgument("Number of partitions must be >= 1");
  MutexLock lock(mu_);
  if (!partitioned_.emplace(topic, n).second) {
    return Status::alreadyExists("Topic " + topic + " already exists");
  }
  return Status::ok();
}

Result<int> NamespaceResources::updatePartitioned(const std::string& topic, int n) {
  MutexLock lock(mu_);
  auto it = partitioned_.find(topic);
  if (it == partitioned_.end()) return Status::notFound("Partitioned topic does not exist");
  if (n < it->second) return Status::invalidArgument("Number of partitions can only be increased");
  int before = it->second;
  it->second = n;
  return before;
}

Result<int> NamespaceResources::removePartitioned(const std::string& topic) {
  MutexLock lock(mu_);
  auto it = partitioned_.find(topic);
  if (it == partitioned_.end()) return Status::notFound("Partitioned topic does not exist");
  int n = it->second;
  partitioned_.erase(it);
  return n;
}

std::map<std::string, int> NamespaceResources::partitionedWithPrefix(
    const std::string& prefix) const {
  std::map<std::string, int> out;
  MutexLock lock(mu_);
  for (auto it = partitioned_.lower_bound(prefix);
       it != partitioned_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    out.emplace(*it);
  }
  return out;
}

}  // namespace magnetar::broker
