#include "broker/cluster/local_records.h"

#include <charconv>
#include <cstring>
#include <map>
#include <set>

#include "base/logging.h"
#include "broker/cluster/bundles.h"
#include "broker/cluster/cluster_metadata.h"
#include "broker/policies/policies.h"

namespace magnetar::broker::cluster {

namespace {

// The keys a build before kept tenants, clusters, namespaces and partitioned topics under.
constexpr const char* kLegacyNamespacesKey = "/admin/magnetar/namespaces";
constexpr const char* kLegacyPartitionedKey = "/admin/magnetar/partitioned-topics";
constexpr const char* kLegacyTenantsPrefix = "/admin/magnetar/tenants/";
constexpr const char* kLegacyPoliciesPrefix = "/admin/magnetar/policies/";
constexpr const char* kLegacyClustersPrefix = "/admin/magnetar/clusters/";

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    if (nl > pos) out.push_back(text.substr(pos, nl - pos));
  }
  return out;
}

// key -> value of the keys under `prefix`, by their escaped name.
Result<std::map<std::string, std::string>> legacyRecords(storage::MetadataStore* store,
                                                         const char* prefix) {
  auto kv = store->scan(prefix);
  if (!kv.isOk()) return kv.status();
  std::map<std::string, std::string> out;
  for (auto& [key, value] : *kv) {
    out[storage::unescapePathComponent(key.substr(strlen(prefix)))] = std::move(value);
  }
  return out;
}

// The old single-key list (namespaces, or "topic=partitions" lines); "" when absent.
Result<std::string> legacyList(storage::MetadataStore* store, const char* key) {
  auto v = store->get(key);
  if (v.isOk()) return std::move(*v);
  if (v.status().code() == StatusCode::kNotFound) return std::string();
  return v.status();
}

// A namespace's Policies node from its old policies record (nullopt: none).
Result<std::string> namespaceNode(const std::optional<std::string>& record,
                                  const ConfigurationStoreOptions& o) {
  NamespacePolicies p = record ? decodePolicies(*record) : NamespacePolicies{};
  std::vector<uint64_t> cut;
  if (auto kept = p.keptFields.find("bundles"); kept != p.keptFields.end()) {
    auto b = boundariesFromPolicies("{\"bundles\":" + kept->second + "}", "bundles");
    if (b.isOk() && b->has_value()) cut = std::move(**b);
  }
  if (cut.empty()) {
    auto d = defaultBoundaries(o.defaultNumberOfNamespaceBundles);
    if (!d.isOk()) return d.status();
    cut = std::move(*d);
  }
  return policiesJson(p, cut, "", o.clusterName);
}

// The partitioned-topic nodes of the old "topic=partitions" lines; damaged ones are skipped.
// Returns how many were added.
size_t addPartitionedNodes(const std::string& list, std::vector<storage::MetadataOp>& ops) {
  size_t added = 0;
  for (const auto& line : lines(list)) {
    auto eq = line.rfind('=');
    int n = 0;
    const char* digits = line.data() + (eq == std::string::npos ? line.size() : eq + 1);
    auto [end, ec] = std::from_chars(digits, line.data() + line.size(), n);
    if (eq == std::string::npos || ec != std::errc() || end != line.data() + line.size() ||
        n <= 0) {
      MLOG_WARN("metadata migration: ignoring damaged partitioned-topic metadata line '{}'", line);
      continue;
    }
    ops.push_back(storage::MetadataOp::put(partitionedTopicPath(line.substr(0, eq)),
                                           partitionedTopicMetadataJson(n)));
    ++added;
  }
  return added;
}

}  // namespace

bool MetadataStorePersistence::persists(const std::string& path) const {
  for (const auto& root : roots_) {
    if (path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                         path[root.size()] == '/')) {
      return true;
    }
  }
  return false;
}

Result<std::vector<std::pair<std::string, std::string>>> MetadataStorePersistence::load() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& root : roots_) {
    auto self = store_->get(root);
    if (self.isOk()) {
      out.emplace_back(root, std::move(*self));
    } else if (self.status().code() != StatusCode::kNotFound) {
      return self.status();
    }
    auto below = store_->scan(root + "/");
    if (!below.isOk()) return below.status();
    for (auto& kv : *below) out.push_back(std::move(kv));
  }
  return out;
}

Status MetadataStorePersistence::write(const std::string& path,
                                       const std::optional<std::string>& value) {
  return value ? store_->put(path, *value) : store_->remove(path);
}

Status migrateLegacyMetadata(storage::MetadataStore* store, const ConfigurationStoreOptions& o) {
  auto namespaces = legacyList(store, kLegacyNamespacesKey);
  auto partitioned = legacyList(store, kLegacyPartitionedKey);
  auto tenants = legacyRecords(store, kLegacyTenantsPrefix);
  auto policies = legacyRecords(store, kLegacyPoliciesPrefix);
  auto clusters = legacyRecords(store, kLegacyClustersPrefix);
  for (const Status& s : {namespaces.status(), partitioned.status(), tenants.status(),
                          policies.status(), clusters.status()}) {
    if (!s.isOk()) return s;
  }
  std::vector<storage::MetadataOp> ops;
  if (!namespaces->empty() && !tenants->count("public")) {
    // The build before made tenant "public" at every start without storing it.
    tenants->emplace("public", encodeTenant(TenantInfo{{}, {o.clusterName}}));
  }
  for (const auto& [name, record] : *tenants) {
    TenantInfo t = decodeTenant(record);
    ops.push_back(storage::MetadataOp::put(tenantPath(name),
                                           tenantInfoJson(t.adminRoles, t.allowedClusters)));
    ops.push_back(
        storage::MetadataOp::del(kLegacyTenantsPrefix + storage::escapePathComponent(name)));
  }
  for (const auto& [name, data] : *clusters) {
    ops.push_back(storage::MetadataOp::put("/admin/clusters/" + name, data));
    ops.push_back(
        storage::MetadataOp::del(kLegacyClustersPrefix + storage::escapePathComponent(name)));
  }
  std::set<std::string> known;
  for (const auto& ns : lines(*namespaces)) {
    auto it = policies->find(ns);
    auto node = namespaceNode(
        it == policies->end() ? std::nullopt : std::optional<std::string>(it->second), o);
    if (!node.isOk()) return node.status();
    ops.push_back(storage::MetadataOp::put(namespacePath(ns), *node));
    known.insert(ns);
  }
  for (const auto& [ns, record] : *policies) {
    if (!known.count(ns)) MLOG_WARN("metadata migration: dropping the policies of gone {}", ns);
    ops.push_back(
        storage::MetadataOp::del(kLegacyPoliciesPrefix + storage::escapePathComponent(ns)));
  }
  size_t topics = addPartitionedNodes(*partitioned, ops);
  if (ops.empty() && namespaces->empty() && partitioned->empty()) return Status::ok();
  ops.push_back(storage::MetadataOp::del(kLegacyNamespacesKey));
  ops.push_back(storage::MetadataOp::del(kLegacyPartitionedKey));
  if (Status s = store->write(ops); !s.isOk()) return s;
  MLOG_INFO(
      "Metadata migrated to Pulsar's paths: {} tenants, {} clusters, {} namespaces, {} "
      "partitioned topics",
      tenants->size(), clusters->size(), known.size(), topics);
  return Status::ok();
}

Result<std::shared_ptr<metadata::LocalBackend>> openLocalRecords(storage::MetadataStore* store,
                                                                 std::vector<std::string> roots) {
  return metadata::LocalBackend::open(
      std::make_unique<MetadataStorePersistence>(store, std::move(roots)));
}

}  // namespace magnetar::broker::cluster
