#include "broker/policies/policies.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <cstring>

#include "base/logging.h"
#include "broker/policies/shared_config.h"
#include "storage/path_component.h"

namespace magnetar::broker {

namespace {
// A stored policy number as T, or nullopt when it is not exactly representable (a value stored by
// an older build or edited by hand must not throw on a topic's thread).
template <class T>
std::optional<T> exactNumber(const boost::json::value* v) {
  if (!v || !v->is_number()) return std::nullopt;
  boost::system::error_code ec;
  T out = v->to_number<T>(ec);
  if (ec) return std::nullopt;
  return out;
}

// A stored policy's text parsed as a JSON object; nullopt when unset, unparsable or not an object.
std::optional<boost::json::object> policyObject(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(*text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}
}  // namespace

PolicyRegistry::PolicyRegistry(std::string clusterName) {
  tenants_["public"] = TenantInfo{{}, {std::move(clusterName)}};
}

void PolicyRegistry::setShared(SharedConfig* shared) { shared_ = shared; }

void PolicyRegistry::applyTenant(const std::string& name, const std::optional<TenantInfo>& info) {
  MutexLock lock(mu_);
  if (info) {
    tenants_[name] = *info;
  } else {
    tenants_.erase(name);
  }
}

void PolicyRegistry::applyNamespacePolicies(const std::string& ns,
                                            const std::optional<NamespacePolicies>& p) {
  MutexLock lock(mu_);
  if (p) {
    policies_[ns] = *p;
  } else {
    policies_.erase(ns);
  }
}

void PolicyRegistry::applyCluster(const std::string& name,
                                  const std::optional<std::string>& clusterData) {
  MutexLock lock(mu_);
  if (clusterData) {
    clusters_[name] = *clusterData;
  } else {
    clusters_.erase(name);
  }
}

void PolicyRegistry::applyResourceGroup(const std::string& name,
                                        const std::optional<std::string>& json) {
  MutexLock lock(mu_);
  if (json) {
    resourceGroups_[name] = *json;
  } else {
    resourceGroups_.erase(name);
  }
}

void PolicyRegistry::clearTenantsAndPolicies() {
  MutexLock lock(mu_);
  tenants_.clear();
  clusters_.clear();
  resourceGroups_.clear();
  policies_.clear();
}

Status PolicyRegistry::createTenant(const std::string& name, TenantInfo info) {
  if (shared_) {
    if (Status s = shared_->createTenant(name, info); !s.isOk()) return s;
    applyTenant(name, info);
    return Status::ok();
  }
  MutexLock lock(mu_);
  if (!tenants_.emplace(name, std::move(info)).second) {
    return Status::alreadyExists("Tenant already exists");
  }
  return Status::ok();
}

Status PolicyRegistry::updateTenant(const std::string& name, TenantInfo info) {
  if (shared_) {
    if (Status s = shared_->updateTenant(name, info); !s.isOk()) return s;
    applyTenant(name, info);
    return Status::ok();
  }
  MutexLock lock(mu_);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return Status::notFound("Tenant does not exist");
  it->second = std::move(info);
  return Status::ok();
}

Status PolicyRegistry::deleteTenant(const std::string& name) {
  if (shared_) {
    if (Status s = shared_->deleteTenant(name); !s.isOk()) return s;
    applyTenant(name, std::nullopt);
    return Status::ok();
  }
  MutexLock lock(mu_);
  if (tenants_.erase(name) == 0) return Status::notFound("Tenant does not exist");
  return Status::ok();
}

std::optional<TenantInfo> PolicyRegistry::tenant(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = tenants_.find(name);
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> PolicyRegistry::tenants() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, info] : tenants_) out.push_back(name);
  return out;
}

Status PolicyRegistry::createCluster(const std::string& name, std::string clusterData) {
  if (shared_) {
    if (Status s = shared_->createCluster(name, clusterData); !s.isOk()) return s;
    applyCluster(name, clusterData);
    return Status::ok();
  }
  MutexLock lock(mu_);
  if (!clusters_.emplace(name, std::move(clusterData)).second) {
    return Status::alreadyExists("Cluster already exists");
  }
  return Status::ok();
}

Status PolicyRegistry::updateCluster(const std::string& name, std::string clusterData) {
  if (shared_) {
    if (Status s = shared_->updateCluster(name, clusterData); !s.isOk()) return s;
    applyCluster(name, clusterData);
    return Status::ok();
  }
  MutexLock lock(mu_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) return Status::notFound("Cluster does not exist");
  it->second = std::move(clusterData);
  return Status::ok();
}

Status PolicyRegistry::deleteCluster(const std::string& name) {
  if (shared_) {
    if (Status s = shared_->deleteCluster(name); !s.isOk()) return s;
    applyCluster(name, std::nullopt);
    return Status::ok();
  }
  MutexLock lock(mu_);
  if (clusters_.erase(name) == 0) return Status::notFound("Cluster does not exist");
  return Status::ok();
}

std::optional<std::string> PolicyRegistry::cluster(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> PolicyRegistry::clusters() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, data] : clusters_) out.push_back(name);
  return out;
}

Status PolicyRegistry::putResourceGroup(const std::string& name, std::string json) {
  if (shared_) {
    if (Status s = shared_->putResourceGroup(name, json); !s.isOk()) return s;
  }
  applyResourceGroup(name, json);
  return Status::ok();
}

Status PolicyRegistry::deleteResourceGroup(const std::string& name) {
  if (shared_) {
    if (Status s = shared_->deleteResourceGroup(name); !s.isOk()) return s;
    applyResourceGroup(name, std::nullopt);
    return Status::ok();
  }
  MutexLock lock(mu_);
  if (resourceGroups_.erase(name) == 0) return Status::notFound("ResourceGroup does not exist");
  return Status::ok();
}

std::optional<std::string> PolicyRegistry::resourceGroup(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = resourceGroups_.find(name);
  if (it == resourceGroups_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> PolicyRegistry::resourceGroups() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, json] : resourceGroups_) out.push_back(name);
  return out;
}

bool PolicyRegistry::resourceGroupInUse(const std::string& name) const {
  MutexLock lock(mu_);
  for (const auto& [ns, p] : policies_) {
    if (resourceGroupOf(p) == name) return true;
  }
  return false;
}

std::optional<std::string> resourceGroupOf(const NamespacePolicies& p) {
  auto it = p.keptFields.find("resource_group_name");
  if (it == p.keptFields.end()) return std::nullopt;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(it->second, ec);
  if (ec || !v.is_string() || v.as_string().empty()) return std::nullopt;
  return std::string(v.as_string());
}

NamespacePolicies PolicyRegistry::namespacePolicies(const std::string& ns) const {
  MutexLock lock(mu_);
  auto it = policies_.find(ns);
  return it == policies_.end() ? NamespacePolicies{} : it->second;
}

Status PolicyRegistry::updateNamespacePolicies(
    const std::string& ns, const std::function<void(NamespacePolicies&)>& change) {
  if (shared_) {
    auto stored = shared_->updateNamespacePolicies(ns, change);
    if (!stored.isOk()) return stored.status();
    applyNamespacePolicies(ns, *stored);
    return Status::ok();
  }
  MutexLock lock(mu_);
  change(policies_[ns]);
  return Status::ok();
}

void PolicyRegistry::removeNamespace(const std::string& ns) {
  MutexLock lock(mu_);
  policies_.erase(ns);
}

std::optional<bool> PolicyRegistry::deduplicationEnabled(const std::string& ns) const {
  MutexLock lock(mu_);
  auto it = policies_.find(ns);
  return it == policies_.end() ? std::nullopt : it->second.deduplicationEnabled;
}

namespace {

constexpr const char* kTopicPoliciesPrefix = "/admin/magnetar/topic-policies/";

std::string escapeField(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '%' || c == ',' || c == '=' || c == '\n' || c == '\r') {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string unescapeField(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    int hi = v[i] == '%' && i + 2 < v.size() ? hexDigit(v[i + 1]) : -1;
    int lo = hi >= 0 ? hexDigit(v[i + 2]) : -1;
    if (lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::string joinFields(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += escapeField(fields[i]);
  }
  return out;
}

std::vector<std::string> splitFields(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(unescapeField(text.substr(start, comma - start)));
  }
  out.push_back(unescapeField(text.substr(start)));
  return out;
}

// Calls fn(key, fields) for each "key=fields" line.
template <typename F>
void forEachLine(const std::string& text, F&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    size_t eq = line.find('=');
    if (eq != std::string::npos) fn(line.substr(0, eq), splitFields(line.substr(eq + 1)));
  }
}

int64_t toInt(const std::string& s, int64_t fallback) {
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

std::string encodeTenant(const TenantInfo& t) {
  return "adminRoles=" + joinFields(t.adminRoles) +
         "\nallowedClusters=" + joinFields(t.allowedClusters) + "\n";
}

TenantInfo decodeTenant(const std::string& text) {
  TenantInfo t;
  forEachLine(text, [&](const std::string& key, std::vector<std::string> f) {
    if (key == "adminRoles") {
      t.adminRoles = std::move(f);
    } else if (key == "allowedClusters") {
      t.allowedClusters = std::move(f);
    }
  });
  return t;
}

namespace {

// {"sub": ["role", ...], ...} (JSON text) into p's subscriptionAuthRoles; anything else ignored.
void readSubscriptionAuthRoles(const std::string& text, NamespacePolicies* p) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return;
  for (const auto& [sub, roles] : v.as_object()) {
    if (!roles.is_array()) continue;
    std::set<std::string>& out = p->subscriptionAuthRoles[std::string(sub)];
    for (const auto& r : roles.as_array()) {
      if (r.is_string()) out.emplace(r.as_string());
    }
  }
}

}  // namespace

std::string encodePolicies(const NamespacePolicies& p) {
  std::string out;
  if (p.retention) {
    out += fmt::format("retention={},{}\n", p.retention->retentionTimeInMinutes,
                       p.retention->retentionSizeInMB);
  }
  if (p.deduplicationEnabled)
    out += fmt::format("deduplication={}\n", *p.deduplicationEnabled ? 1 : 0);
  if (p.messageTtlSeconds) out += fmt::format("messageTTL={}\n", *p.messageTtlSeconds);
  for (const auto& [type, q] : p.backlogQuotas) {
    out += "backlogQuota=" +
           joinFields({type, std::to_string(q.limitSize), std::to_string(q.limitTime), q.policy}) +
           "\n";
  }
  for (const auto& [role, actions] : p.permissions) {
    std::vector<std::string> f{role};
    f.insert(f.end(), actions.begin(), actions.end());
    out += "permission=" + joinFields(f) + "\n";
  }
  for (const auto& [topic, roles] : p.topicPermissions) {
    for (const auto& [role, actions] : roles) {
      std::vector<std::string> f{topic, role};
      f.insert(f.end(), actions.begin(), actions.end());
      out += "topicPermission=" + joinFields(f) + "\n";
    }
  }
  for (const auto& [sub, roles] : p.subscriptionAuthRoles) {
    std::vector<std::string> f{sub};
    f.insert(f.end(), roles.begin(), roles.end());
    out += "subscriptionAuthRoles=" + joinFields(f) + "\n";
  }
  if (p.subscriptionExpirationTimeMinutes) {
    out += fmt::format("subscriptionExpirationTime={}\n", *p.subscriptionExpirationTimeMinutes);
  }
  if (const auto& a = p.autoTopicCreation) {
    out += "autoTopicCreation=" +
           joinFields({a->allowAutoTopicCreation ? "1" : "0", a->topicType,
                       a->defaultNumPartitions ? std::to_string(*a->defaultNumPartitions) : ""}) +
           "\n";
  }
  for (const auto& [name, value] : p.limits) {
    out += "limit=" + joinFields({name, std::to_string(value)}) + "\n";
  }
  if (p.schemaCompatibilityStrategy) {
    out += "schemaCompatibilityStrategy=" + escapeField(*p.schemaCompatibilityStrategy) + "\n";
  }
  if (p.isAllowAutoUpdateSchema) {
    out += fmt::format("isAllowAutoUpdateSchema={}\n", *p.isAllowAutoUpdateSchema ? 1 : 0);
  }
  if (p.schemaValidationEnforced) {
    out += fmt::format("schemaValidationEnforced={}\n", *p.schemaValidationEnforced ? 1 : 0);
  }
  if (const auto& d = p.delayedDelivery) {
    out += fmt::format("delayedDelivery={},{},{}\n", d->active ? 1 : 0, d->tickTime,
                       d->maxDeliveryDelayInMillis);
  }
  if (p.compactionThreshold) out += fmt::format("compactionThreshold={}\n", *p.compactionThreshold);
  if (const auto& i = p.inactiveTopicPolicies) {
    out += fmt::format("inactiveTopicPolicies={},{},{}\n", escapeField(i->inactiveTopicDeleteMode),
                       i->maxInactiveDurationSeconds, i->deleteWhileInactive ? 1 : 0);
  }
  if (p.replicationClusters)
    out += "replicationClusters=" + joinFields(*p.replicationClusters) + "\n";
  for (const auto& [name, value] : p.keptFields) {
    out += "kept=" + joinFields({name, value}) + "\n";
  }
  return out;
}

std::string encodeTopicPolicies(const TopicPolicies& p) {
  std::string out;
  for (const auto& [name, value] : p) out += escapeField(name) + "=" + escapeField(value) + "\n";
  return out;
}

TopicPolicies decodeTopicPolicies(const std::string& text) {
  TopicPolicies p;
  forEachLine(text, [&](const std::string& key, const std::vector<std::string>& f) {
    // The value is one escaped field (its commas are escaped), so split gives one part.
    std::string value;
    for (size_t i = 0; i < f.size(); ++i) value += (i ? "," : "") + f[i];
    p[unescapeField(key)] = value;
  });
  return p;
}

NamespacePolicies decodePolicies(const std::string& text) {
  NamespacePolicies p;
  forEachLine(text, [&](const std::string& key, const std::vector<std::string>& f) {
    if (key == "retention" && f.size() == 2) {
      p.retention = RetentionPolicy{static_cast<int32_t>(toInt(f[0], 0)), toInt(f[1], 0)};
    } else if (key == "deduplication" && f.size() == 1) {
      p.deduplicationEnabled = f[0] == "1";
    } else if (key == "compactionThreshold" && f.size() == 1) {
      p.compactionThreshold = toInt(f[0], 0);
    } else if (key == "messageTTL" && f.size() == 1) {
      p.messageTtlSeconds = static_cast<int32_t>(toInt(f[0], 0));
    } else if (key == "backlogQuota" && f.size() == 4) {
      p.backlogQuotas[f[0]] =
          BacklogQuota{toInt(f[1], -1), static_cast<int32_t>(toInt(f[2], -1)), f[3]};
    } else if (key == "permission" && !f.empty()) {
      p.permissions[f[0]] = std::set<std::string>(f.begin() + 1, f.end());
    } else if (key == "subscriptionAuthRoles" && !f.empty()) {
      p.subscriptionAuthRoles[f[0]] = std::set<std::string>(f.begin() + 1, f.end());
    } else if (key == "topicPermission" && f.size() >= 2) {
      p.topicPermissions[f[0]][f[1]] = std::set<std::string>(f.begin() + 2, f.end());
    } else if (key == "subscriptionExpirationTime" && f.size() == 1) {
      p.subscriptionExpirationTimeMinutes = static_cast<int32_t>(toInt(f[0], 0));
    } else if (key == "autoTopicCreation" && f.size() == 3) {
      AutoTopicCreationOverride a;
      a.allowAutoTopicCreation = f[0] == "1";
      a.topicType = f[1];
      if (!f[2].empty()) a.defaultNumPartitions = static_cast<int32_t>(toInt(f[2], 1));
      p.autoTopicCreation = a;
    } else if (key == "limit" && f.size() == 2) {
      p.limits[f[0]] = static_cast<int32_t>(toInt(f[1], 0));
    } else if (key == "schemaCompatibilityStrategy" && f.size() == 1) {
      p.schemaCompatibilityStrategy = f[0];
    } else if (key == "isAllowAutoUpdateSchema" && f.size() == 1) {
      p.isAllowAutoUpdateSchema = f[0] == "1";
    } else if (key == "schemaValidationEnforced" && f.size() == 1) {
      p.schemaValidationEnforced = f[0] == "1";
    } else if (key == "delayedDelivery" && f.size() == 3) {
      p.delayedDelivery = DelayedDeliveryPolicies{f[0] == "1", toInt(f[1], 1000), toInt(f[2], 0)};
    } else if (key == "replicationClusters") {
      p.replicationClusters = std::vector<std::string>(f.begin(), f.end());
    } else if (key == "kept" && f.size() == 2 && f[0] == "subscription_auth_roles") {
      readSubscriptionAuthRoles(f[1], &p);  // stored by versions that did not model it
    } else if (key == "kept" && f.size() == 2) {
      p.keptFields[f[0]] = f[1];
    } else if (key == "inactiveTopicPolicies" && f.size() == 3) {
      p.inactiveTopicPolicies =
          InactiveTopicPolicies{f[0], static_cast<int32_t>(toInt(f[1], 0)), f[2] == "1"};
    }
  });
  return p;
}

void PolicyRegistry::attachTopicPolicies(metadata::Store* store, net::Executor* loop,
                                         std::function<void(const std::string& topic)> changed,
                                         std::function<void(Status)> ready) {
  loop_ = loop;
  topicChanged_ = std::move(changed);
  metadata::Serde<TopicPolicies> serde{
      [](const TopicPolicies& p) { return encodeTopicPolicies(p); },
      [](const std::string& text) -> Result<TopicPolicies> { return decodeTopicPolicies(text); }};
  topicCache_ = metadata::MetadataCache<TopicPolicies>::create(store, std::move(serde), loop);
  topicMirror_ = metadata::ChildrenMirror<TopicPolicies>::create(
      topicCache_, store, loop, kTopicPoliciesRoot,
      [this](const std::string& name, const std::optional<TopicPolicies>& p) {
        applyTopicPolicies(storage::unescapePathComponent(name), p.value_or(TopicPolicies{}));
      });
  topicMirror_->start(std::move(ready));
}

void PolicyRegistry::detachTopicPolicies() {
  if (topicMirror_) topicMirror_->stop();
  if (topicCache_) topicCache_->close();
}

void PolicyRegistry::applyTopicPolicies(const std::string& topic, TopicPolicies p) {
  {
    MutexLock lock(mu_);
    if (p.empty()) {
      topicPolicies_.erase(topic);
    } else {
      topicPolicies_[topic] = std::move(p);
    }
  }
  if (topicChanged_) topicChanged_(topic);
}

void PolicyRegistry::persistTopicPolicies(const std::string& topic,
                                          const std::function<void(TopicPolicies&)>& change,
                                          std::function<void(Status)> done) {
  if (!topicCache_) {
    if (done) done(Status::ok());
    return;
  }
  topicCache_->readModifyUpdate(
      kTopicPoliciesPrefix + storage::escapePathComponent(topic),
      [change](
          const std::optional<TopicPolicies>& current) -> Result<std::optional<TopicPolicies>> {
        TopicPolicies p = current.value_or(TopicPolicies{});
        change(p);
        if (current ? p == *current : p.empty()) return std::optional<TopicPolicies>();  // no write
        return std::optional<TopicPolicies>(std::move(p));
      },
      loop_,
      [this, topic, done = std::move(done)](const Result<std::optional<TopicPolicies>>& r) {
        if (r.isOk()) {
          // The store's record now (this write merged with others'): memory follows it, after
          // any older record a watch read before this write.
          applyTopicPolicies(topic, r->value_or(TopicPolicies{}));
        } else {
          MLOG_WARN("cannot persist topic policies of {}: {}", topic, r.status().toString());
        }
        if (done) done(r.status());
      });
}

TopicPolicies PolicyRegistry::topicPolicies(const std::string& topic) const {
  MutexLock lock(mu_);
  auto it = topicPolicies_.find(topic);
  return it == topicPolicies_.end() ? TopicPolicies{} : it->second;
}

void PolicyRegistry::setTopicPolicy(const std::string& topic, const std::string& policy,
                                    const std::optional<std::string>& jsonValue,
                                    std::function<void(Status)> done) {
  auto change = [policy, jsonValue](TopicPolicies& p) {
    if (jsonValue) {
      p[policy] = *jsonValue;
    } else {
      p.erase(policy);
    }
  };
  {
    MutexLock lock(mu_);
    TopicPolicies& p = topicPolicies_[topic];
    change(p);
    if (p.empty()) topicPolicies_.erase(topic);
  }
  persistTopicPolicies(topic, change, std::move(done));
}

void PolicyRegistry::removeTopicPolicies(const std::string& topic,
                                         std::function<void(Status)> done) {
  {
    MutexLock lock(mu_);
    topicPolicies_.erase(topic);
  }
  persistTopicPolicies(
      topic, [](TopicPolicies& p) { p.clear(); }, std::move(done));
}

std::optional<std::string> PolicyRegistry::topicPolicyText(const std::string& topic,
                                                           const std::string& policy) const {
  MutexLock lock(mu_);
  auto it = topicPolicies_.find(topic);
  if (it == topicPolicies_.end()) return std::nullopt;
  auto p = it->second.find(policy);
  if (p == it->second.end()) return std::nullopt;
  return p->second;
}

std::optional<int64_t> PolicyRegistry::topicPolicyInt(const std::string& topic,
                                                      const std::string& policy) const {
  std::optional<std::string> v = topicPolicyText(topic, policy);
  if (!v || v->empty()) return std::nullopt;
  size_t start = (*v)[0] == '-' ? 1 : 0;
  if (start == v->size() || v->size() > 19 ||
      v->find_first_not_of("0123456789", start) != v->npos) {
    return std::nullopt;
  }
  return toInt(*v, 0);
}

std::optional<bool> PolicyRegistry::topicPolicyBool(const std::string& topic,
                                                    const std::string& policy) const {
  std::optional<std::string> v = topicPolicyText(topic, policy);
  if (v == "true") return true;
  if (v == "false") return false;
  return std::nullopt;
}

std::optional<RetentionPolicy> PolicyRegistry::topicRetention(const std::string& topic) const {
  std::optional<boost::json::object> o = policyObject(topicPolicyText(topic, "retention"));
  if (!o) return std::nullopt;
  auto time = exactNumber<int32_t>(o->if_contains("retentionTimeInMinutes"));
  auto size = exactNumber<int64_t>(o->if_contains("retentionSizeInMB"));
  if (!time || !size) return std::nullopt;
  return RetentionPolicy{*time, *size};
}

std::optional<DelayedDeliveryPolicies> PolicyRegistry::topicDelayedDelivery(
    const std::string& topic) const {
  std::optional<boost::json::object> o = policyObject(topicPolicyText(topic, "delayedDelivery"));
  if (!o) return std::nullopt;
  DelayedDeliveryPolicies d;
  if (const auto* f = o->if_contains("active"); f && f->is_bool()) d.active = f->as_bool();
  if (auto n = exactNumber<int64_t>(o->if_contains("tickTime"))) d.tickTime = *n;
  if (auto n = exactNumber<int64_t>(o->if_contains("maxDeliveryDelayInMillis"))) {
    d.maxDeliveryDelayInMillis = *n;
  }
  return d;
}

std::optional<InactiveTopicPolicies> PolicyRegistry::topicInactiveTopicPolicies(
    const std::string& topic) const {
  std::optional<boost::json::object> o =
      policyObject(topicPolicyText(topic, "inactiveTopicPolicies"));
  if (!o) return std::nullopt;
  InactiveTopicPolicies i;
  if (const auto* f = o->if_contains("inactiveTopicDeleteMode"); f && f->is_string()) {
    i.inactiveTopicDeleteMode = std::string(f->as_string());
  }
  if (auto n = exactNumber<int32_t>(o->if_contains("maxInactiveDurationSeconds"))) {
    i.maxInactiveDurationSeconds = *n;
  }
  if (const auto* f = o->if_contains("deleteWhileInactive"); f && f->is_bool()) {
    i.deleteWhileInactive = f->as_bool();
  }
  return i;
}

std::optional<BacklogQuota> PolicyRegistry::topicBacklogQuota(const std::string& topic,
                                                              const std::string& type) const {
  std::optional<boost::json::object> o =
      policyObject(topicPolicyText(topic, "backlogQuota/" + type));
  if (!o) return std::nullopt;
  BacklogQuota q;
  if (auto n = exactNumber<int64_t>(o->if_contains("limitSize"))) q.limitSize = *n;
  if (auto n = exactNumber<int32_t>(o->if_contains("limitTime"))) q.limitTime = *n;
  if (const auto* f = o->if_contains("policy"); f && f->is_string()) {
    q.policy = std::string(f->as_string());
  }
  return q;
}

}  // namespace magnetar::broker
