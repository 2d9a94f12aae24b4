#include "broker/cluster/configuration_store.h"

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <vector>

#include "base/blocking_wait.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/cluster/bundles.h"
#include "broker/cluster/cluster_metadata.h"

namespace magnetar::broker::cluster {

namespace {

constexpr const char* kPoliciesRoot = "/admin/policies";
constexpr const char* kPartitionedRoot = "/admin/partitioned-topics";
constexpr const char* kClustersRoot = "/admin/clusters";
constexpr const char* kResourceGroupsRoot = "/admin/resourcegroups";
constexpr const char* kLocalPoliciesRoot = "/admin/local-policies/";
// Read-modify-write attempts before giving up on a node other brokers keep changing.
constexpr int kCasAttempts = 16;

std::string childPath(const std::string& parent, const std::string& name) {
  std::string out = parent;
  out.append("/").append(name);
  return out;
}

// The path's components below `root` ("/admin/policies/t/ns" -> {"t", "ns"}); nullopt when path
// is not under root.
std::optional<std::vector<std::string>> below(const std::string& path, const std::string& root) {
  if (path == root) return std::vector<std::string>{};
  if (path.compare(0, root.size() + 1, root + "/") != 0) return std::nullopt;
  std::vector<std::string> out;
  size_t pos = root.size() + 1;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

// "persistent://t/ns/x" of the components {t, ns, domain, encoded x}.
std::string topicOf(const std::vector<std::string>& c) {
  return c[2] + "://" + c[0] + "/" + c[1] + "/" + urlDecode(c[3]);
}

}  // namespace

const char* ConfigurationStore::rootOf(Tree tree) {
  switch (tree) {
    case Tree::kPolicies:
      return kPoliciesRoot;
    case Tree::kPartitioned:
      return kPartitionedRoot;
    case Tree::kResourceGroups:
      return kResourceGroupsRoot;
    case Tree::kClusters:
      break;
  }
  return kClustersRoot;
}

// Tenants at depth 1 and namespaces at 2 below /admin/policies; a partitioned topic at 4
// (tenant/ns/domain/topic); a cluster at 1 (its failure domains below are not read); a resource
// group at 1.
bool ConfigurationStore::isData(Tree tree, int depth) {
  if (tree == Tree::kPolicies) return depth == 1 || depth == 2;
  return depth == (tree == Tree::kPartitioned ? 4 : 1);
}

bool ConfigurationStore::isContainer(Tree tree, int depth) {
  if (tree == Tree::kPolicies) return depth < 2;
  return depth < (tree == Tree::kPartitioned ? 4 : 1);
}

std::vector<std::string> ConfigurationStore::roots() {
  return {kPoliciesRoot, kPartitionedRoot, kClustersRoot, kResourceGroupsRoot};
}

ConfigurationStore::ConfigurationStore(metadata::Store* config, metadata::Store* local,
                                       ConfigurationStoreOptions options)
    : config_(config), local_(local), options_(std::move(options)) {}

ConfigurationStore::~ConfigurationStore() { stop(); }

void ConfigurationStore::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (listener_) config_->unregisterListener(*listener_);
  if (sessionListener_) config_->unregisterListener(*sessionListener_);
  loop_.stop();
}

void ConfigurationStore::begin() {
  std::lock_guard<std::mutex> lock(loadMu_);
  ++loading_;
}

void ConfigurationStore::end() {
  std::lock_guard<std::mutex> lock(loadMu_);
  if (--loading_ == 0) loadCv_.notify_all();
}

Status ConfigurationStore::start(SharedConfigView* view) {
  service_ = view;
  loop_.start();
  listener_ = config_->registerListener(
      [this](const metadata::Notification& n) { onNotification(n); }, &loop_);
  sessionListener_ = config_->registerSessionListener(
      [this](metadata::SessionEvent e) {
        if (e == metadata::SessionEvent::kSessionReestablished) resync();
      },
      &loop_);
  // The roots exist (initialize-cluster-metadata writes /admin/policies; a child watch needs the
  // node).
  for (const char* root : {kPoliciesRoot, kPartitionedRoot, kClustersRoot, kResourceGroupsRoot}) {
    auto r = putSync(config_, root, "", metadata::kNotExists);
    if (!r.isOk() && r.status().code() != StatusCode::kBadVersion) return r.status();
  }
  service_->clearShared();
  begin();
  loop_.execute([this] {
    for (Tree tree : kTrees) listChildren(tree, rootOf(tree), 0);
    end();
  });
  std::unique_lock<std::mutex> lock(loadMu_);
  if (!blockingWaitFor(
          loadCv_, lock, std::chrono::milliseconds(options_.operationTimeoutMs + 30000),
          [this] { return loading_ == 0; }, "loading the configuration store")) {
    return Status::error(StatusCode::kTimeout,
                         "loading tenants, namespaces and partitioned topics from the "
                         "configuration store timed out");
  }
  if (!loadError_.isOk()) return loadError_;
  MLOG_INFO("Configuration store: {} tenants, {} namespaces loaded", service_->sharedTenantCount(),
            service_->sharedNamespaceCount());
  return Status::ok();
}

void ConfigurationStore::resync() {
  MAGNETAR_DCHECK_ON(loop_);
  if (stopped_) return;
  MLOG_INFO(
      "Configuration store: new ZooKeeper session; reading tenants, namespaces and "
      "partitioned topics again");
  for (Tree tree : kTrees) listChildren(tree, rootOf(tree), 0, true);
}

void ConfigurationStore::listChildren(Tree tree, const std::string& path, int depth, bool all) {
  MAGNETAR_DCHECK_ON(loop_);
  begin();
  config_->getChildren(
      path, &loop_, [this, tree, path, depth, all](Result<std::vector<std::string>> r) {
        if (!r.isOk()) {
          MLOG_WARN("configuration store: cannot list {}: {}", path, r.status().message());
          {
            std::lock_guard<std::mutex> lock(loadMu_);
            if (loadError_.isOk()) loadError_ = r.status();
          }
          return end();
        }
        std::set<std::string> now(r->begin(), r->end());
        std::set<std::string> old = children_[path];
        children_[path] = now;
        for (const auto& c : now) {
          if (old.count(c) && !all) continue;
          std::string child = childPath(path, c);
          int d = depth + 1;
          if (isData(tree, d)) readNode(tree, child, d);
          if (isContainer(tree, d)) listChildren(tree, child, d, all);
        }
        for (const auto& c : old) {
          if (!now.count(c)) forget(tree, childPath(path, c), depth + 1);
        }
        end();
      });
}

void ConfigurationStore::readNode(Tree tree, const std::string& path, int depth) {
  MAGNETAR_DCHECK_ON(loop_);
  begin();
  config_->get(path, &loop_,
               [this, tree, path, depth](Result<std::optional<metadata::GetResult>> r) {
                 if (!r.isOk()) {
                   MLOG_WARN("configuration store: cannot read {}: {}", path, r.status().message());
                   return end();
                 }
                 std::optional<std::string> value;
                 if (r->has_value()) value = (*r)->value;
                 applyNode(tree, path, depth, value);
                 end();
               });
}

void ConfigurationStore::applyNode(Tree tree, const std::string& path, int depth,
                                   const std::optional<std::string>& value) {
  auto c = below(path, rootOf(tree));
  if (!c || static_cast<int>(c->size()) != depth || !isData(tree, depth)) return;
  if (tree == Tree::kClusters) {
    service_->applySharedCluster((*c)[0], value);
  } else if (tree == Tree::kResourceGroups) {
    service_->applySharedResourceGroup((*c)[0], value);
  } else if (tree == Tree::kPolicies && depth == 1) {
    if (!value) {
      service_->applySharedTenant((*c)[0], std::nullopt);
    } else if (value->empty()) {
      service_->applySharedTenant((*c)[0], TenantInfo{});
    } else if (auto t = parseTenantInfo(*value, path); t.isOk()) {
      service_->applySharedTenant((*c)[0], *t);
    } else {
      MLOG_ERROR("{}", t.status().message());
    }
  } else if (tree == Tree::kPolicies) {
    applyNamespaceValue((*c)[0] + "/" + (*c)[1], path, value);
  } else {
    std::string topic = topicOf(*c);
    if (!value) {
      service_->applySharedPartitioned(topic, std::nullopt);
    } else if (auto n = parsePartitionedTopicMetadata(*value, path); n.isOk()) {
      service_->applySharedPartitioned(topic, *n);
    } else {
      MLOG_ERROR("{}", n.status().message());
    }
  }
}

void ConfigurationStore::applyNamespaceValue(const std::string& ns, const std::string& path,
                                             const std::optional<std::string>& value) {
  {
    // Unchanged since last applied (a refresh's read): nothing to do.
    std::lock_guard<std::mutex> lock(appliedMu_);
    auto it = applied_.find(ns);
    if (value ? (it != applied_.end() && it->second == *value) : it == applied_.end()) return;
    if (value) {
      applied_[ns] = *value;
    } else {
      applied_.erase(ns);
    }
  }
  if (!value) {
    service_->applySharedNamespace(ns, std::nullopt);
    return;
  }
  // An empty node is a v1 namespace's cluster level (/admin/policies/tenant/cluster), not a
  // namespace.
  if (value->empty()) return;
  auto doc = parsePolicies(*value, path);
  if (!doc.isOk()) {
    MLOG_ERROR("{}", doc.status().message());
    return;
  }
  service_->applySharedNamespace(ns, doc->policies);
}

void ConfigurationStore::forget(Tree tree, const std::string& path, int depth) {
  MAGNETAR_DCHECK_ON(loop_);
  auto it = children_.find(path);
  if (it != children_.end()) {
    std::set<std::string> kids = std::move(it->second);
    children_.erase(it);
    for (const auto& k : kids) forget(tree, childPath(path, k), depth + 1);
  }
  applyNode(tree, path, depth, std::nullopt);  // a namespace forgets its text too
}

void ConfigurationStore::onNotification(const metadata::Notification& n) {
  MAGNETAR_DCHECK_ON(loop_);
  if (stopped_) return;
  for (Tree tree : kTrees) {
    auto c = below(n.path, rootOf(tree));
    if (!c) continue;
    int depth = static_cast<int>(c->size());
    if (n.type == metadata::NotificationType::kChildrenChanged) {
      if (children_.count(n.path)) listChildren(tree, n.path, depth);
      return;
    }
    if (!isData(tree, depth)) return;
    // Only nodes this broker knows of (listed under their parent): a new one arrives through
    // the parent's children watch.
    std::string parent = metadata::parentPath(n.path);
    auto p = children_.find(parent);
    if (p == children_.end() || !p->second.count(c->back())) return;
    readNode(tree, n.path, depth);
    return;
  }
}

// --- Blocking calls ---

namespace {
template <class T>
Result<T> waitFor(std::future<Result<T>>& f, int timeoutMs, const std::string& path) {
  auto r = blockingGetFor(f, std::chrono::milliseconds(timeoutMs + 5000), "configuration store");
  if (!r) return Status::error(StatusCode::kTimeout, "configuration store: no answer for " + path);
  return std::move(*r);
}
}  // namespace

Result<std::optional<metadata::GetResult>> ConfigurationStore::getSync(metadata::Store* s,
                                                                       const std::string& path) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<std::optional<metadata::GetResult>>>>();
  auto f = p->get_future();
  s->get(path, &loop_,
         [p](const Result<std::optional<metadata::GetResult>>& r) { p->set_value(r); });
  return waitFor(f, options_.operationTimeoutMs, path);
}

Result<metadata::Stat> ConfigurationStore::putSync(metadata::Store* s, const std::string& path,
                                                   const std::string& value,
                                                   std::optional<metadata::Version> v) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<metadata::Stat>>>();
  auto f = p->get_future();
  metadata::PutOptions o;
  o.expectedVersion = v;
  s->put(path, value, o, &loop_, [p](const Result<metadata::Stat>& r) { p->set_value(r); });
  return waitFor(f, options_.operationTimeoutMs, path);
}

Status ConfigurationStore::removeSync(metadata::Store* s, const std::string& path,
                                      std::optional<metadata::Version> v) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<bool>>>();
  auto f = p->get_future();
  s->remove(path, v, &loop_, [p](const Status& st) {
    p->set_value(st.isOk() ? Result<bool>(true) : Result<bool>(st));
  });
  auto r = waitFor(f, options_.operationTimeoutMs, path);
  return r.isOk() ? Status::ok() : r.status();
}

Result<std::vector<std::string>> ConfigurationStore::childrenSync(metadata::Store* s,
                                                                  const std::string& path) {
  MAGNETAR_DCHECK(!loop_.inExecutorThread());
  auto p = std::make_shared<std::promise<Result<std::vector<std::string>>>>();
  auto f = p->get_future();
  s->getChildren(path, &loop_, [p](const Result<std::vector<std::string>>& r) { p->set_value(r); });
  return waitFor(f, options_.operationTimeoutMs, path);
}

// --- SharedConfig ---

Status ConfigurationStore::createTenant(const std::string& name, const TenantInfo& info) {
  auto r = putSync(config_, tenantPath(name), tenantInfoJson(info.adminRoles, info.allowedClusters),
                   metadata::kNotExists);
  if (r.isOk()) return Status::ok();
  if (r.status().code() == StatusCode::kBadVersion) {
    return Status::alreadyExists("Tenant already exists");
  }
  return r.status();
}

Status ConfigurationStore::updateTenant(const std::string& name, const TenantInfo& info) {
  std::string path = tenantPath(name);
  for (int i = 0; i < kCasAttempts; ++i) {
    auto cur = getSync(config_, path);
    if (!cur.isOk()) return cur.status();
    if (!cur->has_value()) return Status::notFound("Tenant does not exist");
    auto r = putSync(config_, path, tenantInfoJson(info.adminRoles, info.allowedClusters),
                     (*cur)->stat.version);
    if (r.isOk()) return Status::ok();
    if (r.status().code() != StatusCode::kBadVersion) return r.status();
  }
  return Status::error(StatusCode::kBadVersion, path + " kept changing; try again");
}

Status ConfigurationStore::deleteTenant(const std::string& name) {
  Status s = removeSync(config_, tenantPath(name), std::nullopt);
  if (s.code() == StatusCode::kNotFound) return Status::notFound("Tenant does not exist");
  if (s.code() == StatusCode::kNotAllowed) {
    return Status::error(StatusCode::kAlreadyExists, "The tenant still has active namespaces");
  }
  if (!s.isOk()) return s;
  (void)removeSync(config_, std::string(kPartitionedRoot) + "/" + name, std::nullopt);
  return Status::ok();
}

Status ConfigurationStore::createCluster(const std::string& name, const std::string& clusterData) {
  auto r = putSync(config_, childPath(kClustersRoot, name), clusterData, metadata::kNotExists);
  if (r.isOk()) return Status::ok();
  if (r.status().code() == StatusCode::kBadVersion) {
    return Status::alreadyExists("Cluster already exists");
  }
  return r.status();
}

Status ConfigurationStore::updateCluster(const std::string& name, const std::string& clusterData) {
  std::string path = childPath(kClustersRoot, name);
  auto cur = getSync(config_, path);
  if (!cur.isOk()) return cur.status();
  if (!cur->has_value()) return Status::notFound("Cluster does not exist");
  auto r = putSync(config_, path, clusterData, std::nullopt);
  return r.isOk() ? Status::ok() : r.status();
}

Status ConfigurationStore::deleteCluster(const std::string& name) {
  Status s = removeSync(config_, childPath(kClustersRoot, name), std::nullopt);
  if (s.code() == StatusCode::kNotFound) return Status::notFound("Cluster does not exist");
  return s;
}

Status ConfigurationStore::putResourceGroup(const std::string& name, const std::string& json) {
  auto r = putSync(config_, childPath(kResourceGroupsRoot, name), json, std::nullopt);
  return r.isOk() ? Status::ok() : r.status();
}

Status ConfigurationStore::deleteResourceGroup(const std::string& name) {
  Status s = removeSync(config_, childPath(kResourceGroupsRoot, name), std::nullopt);
  if (s.code() == StatusCode::kNotFound) return Status::notFound("ResourceGroup does not exist");
  return s;
}

// The bundle cut of a new namespace: the boundaries kept from the request (standalone's
// `bundles` field), else `numBundles` (or the default count) evenly cut.
Result<std::vector<uint64_t>> ConfigurationStore::newNamespaceCut(const NamespacePolicies& policies,
                                                                  int numBundles) const {
  if (auto kept = policies.keptFields.find("bundles"); kept != policies.keptFields.end()) {
    auto b = boundariesFromPolicies("{\"bundles\":" + kept->second + "}", "bundles");
    if (b.isOk() && b->has_value()) return std::move(**b);
  }
  return defaultBoundaries(numBundles > 0 ? numBundles : options_.defaultNumberOfNamespaceBundles);
}

Status ConfigurationStore::createNamespace(const std::string& ns, const NamespacePolicies& policies,
                                           int numBundles) {
  auto cut = newNamespaceCut(policies, numBundles);
  if (!cut.isOk()) return cut.status();
  auto r = putSync(config_, namespacePath(ns),
                   policiesJson(policies, *cut, "", options_.clusterName), metadata::kNotExists);
  if (r.isOk()) return Status::ok();
  if (r.status().code() == StatusCode::kBadVersion) {
    return Status::alreadyExists("Namespace already exists");
  }
  return r.status();
}

namespace {

// A change that rewrote the kept `bundles` (standalone's bundle split) moves the cut written to
// Policies.bundles with it; kInvalidArgument for boundaries that do not parse.
Status applyBundlesChange(const NamespacePolicies& p, const std::string& before,
                          const std::string& path, std::vector<uint64_t>* boundaries) {
  auto it = p.keptFields.find("bundles");
  if (it == p.keptFields.end() || it->second == before) return Status::ok();
  auto cut = boundariesFromPolicies("{\"bundles\":" + it->second + "}", path);
  if (!cut.isOk()) return Status::invalidArgument(cut.status().message());
  if (cut->has_value()) *boundaries = **cut;
  return Status::ok();
}

}  // namespace

Result<NamespacePolicies> ConfigurationStore::updateNamespacePolicies(
    const std::string& ns, const std::function<void(NamespacePolicies&)>& change) {
  std::string path = namespacePath(ns);
  for (int i = 0; i < kCasAttempts; ++i) {
    auto cur = getSync(config_, path);
    if (!cur.isOk()) return cur.status();
    if (!cur->has_value() || (*cur)->value.empty()) {
      return Status::notFound("Namespace does not exist");
    }
    auto doc = parsePolicies((*cur)->value, path);
    if (!doc.isOk()) return doc.status();
    auto kept = doc->policies.keptFields.find("bundles");
    std::string bundlesBefore = kept == doc->policies.keptFields.end() ? "" : kept->second;
    change(doc->policies);
    if (Status s = applyBundlesChange(doc->policies, bundlesBefore, path, &doc->boundaries); !s) {
      return s;
    }
    auto r = putSync(config_, path,
                     policiesJson(doc->policies, doc->boundaries, doc->raw, options_.clusterName),
                     (*cur)->stat.version);
    if (r.isOk()) return doc->policies;
    if (r.status().code() != StatusCode::kBadVersion) return r.status();
  }
  return Status::error(StatusCode::kBadVersion, path + " kept changing; try again");
}

Status ConfigurationStore::deleteNamespace(const std::string& ns) {
  Status s = removeSync(config_, namespacePath(ns), std::nullopt);
  if (s.code() == StatusCode::kNotFound) return Status::notFound("Namespace does not exist");
  if (!s.isOk()) return s;
  // What Pulsar removes with it (best effort): the partitioned topics' metadata (a forced delete
  // deleted their partitions), its containers, the bundle cut.
  std::string pt = std::string(kPartitionedRoot) + "/" + ns;
  for (const char* d : {"/persistent", "/non-persistent"}) {
    const std::string dir = pt + d;
    if (auto children = childrenSync(config_, dir); children.isOk()) {
      for (const auto& c : *children) (void)removeSync(config_, fmt::format("{}/{}", dir, c), {});
    }
    (void)removeSync(config_, dir, std::nullopt);
  }
  (void)removeSync(config_, pt, std::nullopt);
  (void)removeSync(local_, kLocalPoliciesRoot + ns, std::nullopt);
  return Status::ok();
}

Status ConfigurationStore::createPartitioned(const std::string& topic, int partitions) {
  auto r = putSync(config_, partitionedTopicPath(topic), partitionedTopicMetadataJson(partitions),
                   metadata::kNotExists);
  if (r.isOk()) return Status::ok();
  if (r.status().code() == StatusCode::kBadVersion) {
    return Status::alreadyExists("Topic " + topic + " already exists");
  }
  return r.status();
}

Result<int> ConfigurationStore::updatePartitioned(const std::string& topic, int partitions) {
  std::string path = partitionedTopicPath(topic);
  for (int i = 0; i < kCasAttempts; ++i) {
    auto cur = getSync(config_, path);
    if (!cur.isOk()) return cur.status();
    if (!cur->has_value()) return Status::notFound("Partitioned topic does not exist");
    auto before = parsePartitionedTopicMetadata((*cur)->value, path);
    if (!before.isOk()) return before.status();
    if (partitions < *before) {
      return Status::invalidArgument("Number of partitions can only be increased");
    }
    auto r = putSync(config_, path, partitionedTopicMetadataJson(partitions, (*cur)->value),
                     (*cur)->stat.version);
    if (r.isOk()) return *before;
    if (r.status().code() != StatusCode::kBadVersion) return r.status();
  }
  return Status::error(StatusCode::kBadVersion, path + " kept changing; try again");
}

Result<int> ConfigurationStore::deletePartitioned(const std::string& topic) {
  std::string path = partitionedTopicPath(topic);
  auto cur = getSync(config_, path);
  if (!cur.isOk()) return cur.status();
  if (!cur->has_value()) return Status::notFound("Partitioned topic does not exist");
  auto n = parsePartitionedTopicMetadata((*cur)->value, path);
  Status s = removeSync(config_, path, std::nullopt);
  if (s.code() == StatusCode::kNotFound)
    return Status::notFound("Partitioned topic does not exist");
  if (!s.isOk()) return s;
  return n.isOk() ? *n : 0;
}

void ConfigurationStore::deletePartitionedAsync(const std::string& topic,
                                                std::function<void(Result<int>)> done) {
  loop_.execute([this, topic, done = std::move(done)] {
    std::string path = partitionedTopicPath(topic);
    config_->get(path, &loop_, [this, path, done](Result<std::optional<metadata::GetResult>> r) {
      if (!r.isOk()) return done(r.status());
      if (!r->has_value()) return done(Status::notFound("Partitioned topic does not exist"));
      auto n = parsePartitionedTopicMetadata((*r)->value, path);
      config_->remove(path, (*r)->stat.version, &loop_, [done, n](const Status& s) {
        if (!s.isOk()) return done(s);
        done(n.isOk() ? *n : 0);
      });
    });
  });
}

void ConfigurationStore::createPartitionedAsync(const std::string& topic, int partitions) {
  loop_.execute([this, topic, partitions] {
    std::string path = partitionedTopicPath(topic);
    metadata::PutOptions o;
    o.expectedVersion = metadata::kNotExists;
    config_->put(path, partitionedTopicMetadataJson(partitions), o, &loop_,
                 [this, path, topic](const Result<metadata::Stat>& r) {
                   if (r.isOk()) return;
                   if (r.status().code() != StatusCode::kBadVersion) {
                     MLOG_WARN("cannot store partitioned topic {}: {}", topic,
                               r.status().message());
                     return;
                   }
                   readNode(Tree::kPartitioned, path, 4);  // another broker's count wins
                 });
  });
}

void ConfigurationStore::refresh(const TopicName& topic, net::Executor* ex,
                                 std::function<void(Status)> done) {
  std::string ns = topic.namespaceName();
  std::string partitioned =
      topic.partitionIndex() >= 0 ? topic.partitionedTopicName() : topic.toString();
  loop_.execute([this, ns, partitioned, ex, done = std::move(done)] {
    struct Pending {
      int left = 2;
      Status first;
    };
    auto p = std::make_shared<Pending>();
    auto finish = [p, ex, done](const Status& s) {
      if (!s.isOk() && p->first.isOk()) p->first = s;
      if (--p->left == 0) ex->execute([done, s = p->first] { done(s); });
    };
    std::string nsPath = namespacePath(ns);
    config_->get(nsPath, &loop_,
                 [this, ns, nsPath, finish](Result<std::optional<metadata::GetResult>> r) {
                   if (r.isOk()) {
                     std::optional<std::string> v;
                     if (r->has_value()) v = (*r)->value;
                     applyNamespaceValue(ns, nsPath, v);
                   }
                   finish(r.status());
                 });
    std::string ptPath = partitionedTopicPath(partitioned);
    config_->get(ptPath, &loop_,
                 [this, partitioned, ptPath, finish](Result<std::optional<metadata::GetResult>> r) {
                   if (r.isOk()) {
                     if (!r->has_value()) {
                       service_->applySharedPartitioned(partitioned, std::nullopt);
                     } else if (auto n = parsePartitionedTopicMetadata((*r)->value, ptPath);
                                n.isOk()) {
                       service_->applySharedPartitioned(partitioned, *n);
                     } else {
                       MLOG_ERROR("{}", n.status().message());
                     }
                   }
                   finish(r.status());
                 });
  });
}

void ConfigurationStore::refreshNamespace(const std::string& ns) {
  std::string path = namespacePath(ns);
  auto r = getSync(config_, path);
  if (!r.isOk()) return;
  std::optional<std::string> v;
  if (r->has_value()) v = (*r)->value;
  applyNamespaceValue(ns, path, v);
}

void ConfigurationStore::refreshTenant(const std::string& tenant) {
  std::string path = tenantPath(tenant);
  auto r = getSync(config_, path);
  if (!r.isOk()) return;
  if (!r->has_value()) return service_->applySharedTenant(tenant, std::nullopt);
  if ((*r)->value.empty()) return service_->applySharedTenant(tenant, TenantInfo{});
  auto t = parseTenantInfo((*r)->value, path);
  if (t.isOk()) service_->applySharedTenant(tenant, *t);
}

}  // namespace magnetar::broker::cluster
