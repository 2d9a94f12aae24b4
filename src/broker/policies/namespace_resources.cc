#include "broker/policies/namespace_resources.h"

#include <charconv>
#include <string_view>
#include <utility>
#include <vector>

#include "base/logging.h"

namespace magnetar::broker {

namespace {
// Metadata-store keys of the broker's own state (ZooKeeper-style paths, as Pulsar's /admin/...).
constexpr const char* kNamespacesKey = "/admin/magnetar/namespaces";
constexpr const char* kPartitionedKey = "/admin/magnetar/partitioned-topics";

// Calls fn for each non-empty line of `text`.
template <typename Fn>
void forEachLine(const std::string& text, Fn fn) {
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    if (nl > pos) fn(text.substr(pos, nl - pos));
  }
}
}  // namespace

void NamespaceResources::load(storage::MetadataStore* store,
                              const std::vector<std::string>& initial) {
  MutexLock lock(mu_);
  store_ = store;
  for (const auto& ns : initial) namespaces_.insert(ns);
  if (!store_) return;
  if (auto ns = store_->get(kNamespacesKey); ns.isOk()) {
    // Lambdas are analysed apart from the enclosing lock: collect, then insert under mu_.
    std::vector<std::string> lines;
    forEachLine(*ns, [&](const std::string& line) { lines.push_back(line); });
    namespaces_.insert(lines.begin(), lines.end());
  }
  if (auto pt = store_->get(kPartitionedKey); pt.isOk()) {
    std::vector<std::pair<std::string, int>> parsed;
    forEachLine(*pt, [&](const std::string& line) {
      auto eq = line.rfind('=');
      if (eq == std::string::npos) return;
      int n = 0;
      auto digits = std::string_view(line).substr(eq + 1);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
      if (ec != std::errc() || end != digits.data() + digits.size() || n <= 0) {
        MLOG_WARN("ignoring damaged partitioned-topic metadata line '{}'", line);
        return;
      }
      parsed.emplace_back(line.substr(0, eq), n);
    });
    for (auto& [name, count] : parsed) partitioned_[name] = count;
  }
}

void NamespaceResources::persistLocked() {
  if (!store_) return;
  std::string ns;
  for (const auto& n : namespaces_) ns += n + "\n";
  std::string pt;
  for (const auto& [n, c] : partitioned_) pt += n + "=" + std::to_string(c) + "\n";
  Status s = store_->write({storage::MetadataOp::put(kNamespacesKey, ns),
                            storage::MetadataOp::put(kPartitionedKey, pt)});
  if (!s.isOk()) MLOG_WARN("cannot persist namespaces/partitioned topics: {}", s.toString());
}

bool NamespaceResources::exists(const std::string& ns) const {
  MutexLock lock(mu_);
  return namespaces_.count(ns) > 0;
}

Status NamespaceResources::create(const std::string& ns) {
  MutexLock lock(mu_);
  if (!namespaces_.insert(ns).second) return Status::alreadyExists("Namespace already exists");
  persistLocked();
  return Status::ok();
}

void NamespaceResources::ensure(const std::string& ns) {
  MutexLock lock(mu_);
  if (namespaces_.insert(ns).second) persistLocked();
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
  persistLocked();
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
  persistLocked();
  return Status::ok();
}

Result<int> NamespaceResources::updatePartitioned(const std::string& topic, int n) {
  MutexLock lock(mu_);
  auto it = partitioned_.find(topic);
  if (it == partitioned_.end()) return Status::notFound("Partitioned topic does not exist");
  if (n < it->second) return Status::invalidArgument("Number of partitions can only be increased");
  int before = it->second;
  it->second = n;
  persistLocked();
  return before;
}

Result<int> NamespaceResources::removePartitioned(const std::string& topic) {
  MutexLock lock(mu_);
  auto it = partitioned_.find(topic);
  if (it == partitioned_.end()) return Status::notFound("Partitioned topic does not exist");
  int n = it->second;
  partitioned_.erase(it);
  persistLocked();
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
