#include "broker/cluster/cluster_metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <map>
#include <set>

#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace json = boost::json;

namespace {

json::value orNull(const std::string& s) {
  if (s.empty()) return nullptr;
  return json::value(s);
}

std::string str(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  if (!v || !v->is_string()) return {};
  return std::string(v->as_string());
}

Result<json::object> parseObject(std::string_view text, const std::string& path, const char* what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return Status::corruption(std::string("znode ") + path + " does not hold " + what + " JSON" +
                              (ec ? ": " + ec.message() : ""));
  }
  return std::move(v.as_object());
}

// The cut lives in LocalPolicies (/admin/local-policies/...) or in Policies: name the one read.
const char* policiesKind(const std::string& path) {
  return path.find("/local-policies/") != std::string::npos ? "LocalPolicies" : "Policies";
}

Status missing(const std::string& path, const char* what, const char* field) {
  return Status::corruption(std::string("znode ") + path + ": " + what + " without " + field);
}

json::array stringArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

json::object listenersJson(const std::map<std::string, ListenerUrls>& listeners) {
  json::object o;
  for (const auto& [name, l] : listeners) {
    o[name] = json::object{{"brokerServiceUrl", orNull(l.brokerServiceUrl)},
                           {"brokerServiceUrlTls", orNull(l.brokerServiceUrlTls)}};
  }
  return o;
}

std::map<std::string, ListenerUrls> listenersFrom(const json::object& o) {
  std::map<std::string, ListenerUrls> out;
  const json::value* v = o.if_contains("advertisedListeners");
  if (!v || !v->is_object()) return out;
  for (const auto& [name, l] : v->as_object()) {
    if (!l.is_object()) continue;
    out[std::string(name)] = ListenerUrls{str(l.as_object(), "brokerServiceUrl"),
                                          str(l.as_object(), "brokerServiceUrlTls")};
  }
  return out;
}

}  // namespace

std::string namespaceEphemeralDataJson(const BrokerUrls& owner, bool disabled) {
  json::object o;
  o["nativeUrl"] = owner.pulsarServiceUrl;
  o["nativeUrlTls"] = orNull(owner.pulsarServiceUrlTls);
  o["httpUrl"] = owner.webServiceUrl;
  o["httpUrlTls"] = orNull(owner.webServiceUrlTls);
  o["disabled"] = disabled;
  o["advertisedListeners"] = listenersJson(owner.listeners);
  return json::serialize(o);
}

Result<OwnerData> parseNamespaceEphemeralData(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "NamespaceEphemeralData");
  if (!o.isOk()) return o.status();
  OwnerData d;
  d.urls.pulsarServiceUrl = str(*o, "nativeUrl");
  d.urls.pulsarServiceUrlTls = str(*o, "nativeUrlTls");
  d.urls.webServiceUrl = str(*o, "httpUrl");
  d.urls.webServiceUrlTls = str(*o, "httpUrlTls");
  if (d.urls.pulsarServiceUrl.empty() && d.urls.pulsarServiceUrlTls.empty()) {
    return missing(path, "NamespaceEphemeralData", "nativeUrl");
  }
  if (auto* v = o->if_contains("disabled"); v && v->is_bool()) d.disabled = v->as_bool();
  d.urls.listeners = listenersFrom(*o);
  return d;
}

std::string localBrokerDataJson(const BrokerUrls& self, const std::vector<std::string>& bundles,
                                int64_t startTimestampMs, int64_t lastUpdateMs) {
  auto usage = [] {
    json::object u;
    u["usage"] = 0.0;
    u["limit"] = 0.0;
    return u;
  };
  json::object o;
  o["webServiceUrl"] = self.webServiceUrl;
  o["webServiceUrlTls"] = orNull(self.webServiceUrlTls);
  o["pulsarServiceUrl"] = self.pulsarServiceUrl;
  o["pulsarServiceUrlTls"] = orNull(self.pulsarServiceUrlTls);
  o["persistentTopicsEnabled"] = true;
  o["nonPersistentTopicsEnabled"] = true;  // served as Pulsar's (enableNonPersistentTopics)
  o["cpu"] = usage();
  o["memory"] = usage();
  o["directMemory"] = usage();
  o["bandwidthIn"] = usage();
  o["bandwidthOut"] = usage();
  o["msgThroughputIn"] = 0.0;
  o["msgThroughputOut"] = 0.0;
  o["msgRateIn"] = 0.0;
  o["msgRateOut"] = 0.0;
  o["lastUpdate"] = lastUpdateMs;
  o["lastStats"] = json::object();
  o["numTopics"] = 0;
  o["numBundles"] = static_cast<int64_t>(bundles.size());
  o["numConsumers"] = 0;
  o["numProducers"] = 0;
  o["bundles"] = stringArray(bundles);
  o["lastBundleGains"] = json::array();
  o["lastBundleLosses"] = json::array();
  o["brokerVersionString"] = "magnetar";
  o["protocols"] = json::object();
  o["advertisedListeners"] = listenersJson(self.listeners);
  o["loadManagerClassName"] = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl";
  o["startTimestamp"] = startTimestampMs;
  o["loadReportType"] = "LocalBrokerData";
  return json::serialize(o);
}

Result<BrokerReport> parseLocalBrokerData(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "LocalBrokerData");
  if (!o.isOk()) return o.status();
  BrokerReport r;
  r.urls.pulsarServiceUrl = str(*o, "pulsarServiceUrl");
  r.urls.pulsarServiceUrlTls = str(*o, "pulsarServiceUrlTls");
  r.urls.webServiceUrl = str(*o, "webServiceUrl");
  r.urls.webServiceUrlTls = str(*o, "webServiceUrlTls");
  if (r.urls.pulsarServiceUrl.empty() && r.urls.pulsarServiceUrlTls.empty()) {
    return missing(path, "LocalBrokerData", "pulsarServiceUrl");
  }
  r.urls.listeners = listenersFrom(*o);
  if (auto* b = o->if_contains("bundles"); b && b->is_array()) {
    for (const auto& e : b->as_array()) {
      if (e.is_string()) r.bundles.emplace_back(e.as_string());
    }
  }
  return r;
}

std::string leaderBrokerJson(const BrokerUrls& leader) {
  json::object o;
  o["brokerId"] = leader.brokerId;
  o["serviceUrl"] = leader.webServiceUrl;
  return json::serialize(o);
}

Result<LeaderData> parseLeaderBroker(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "LeaderBroker");
  if (!o.isOk()) return o.status();
  LeaderData d;
  d.serviceUrl = str(*o, "serviceUrl");
  d.brokerId = str(*o, "brokerId");
  if (d.brokerId.empty()) {
    auto p = d.serviceUrl.find("://");
    if (p != std::string::npos) d.brokerId = d.serviceUrl.substr(p + 3);
  }
  if (d.brokerId.empty()) return missing(path, "LeaderBroker", "brokerId or serviceUrl");
  return d;
}

std::string clusterDataJson(const std::string& webServiceUrl, const std::string& webServiceUrlTls,
                            const std::string& brokerServiceUrl,
                            const std::string& brokerServiceUrlTls) {
  json::object o;
  if (!webServiceUrl.empty()) o["serviceUrl"] = webServiceUrl;
  if (!webServiceUrlTls.empty()) o["serviceUrlTls"] = webServiceUrlTls;
  if (!brokerServiceUrl.empty()) o["brokerServiceUrl"] = brokerServiceUrl;
  if (!brokerServiceUrlTls.empty()) o["brokerServiceUrlTls"] = brokerServiceUrlTls;
  o["brokerClientTlsEnabled"] = false;
  o["tlsAllowInsecureConnection"] = false;
  o["brokerClientTlsEnabledWithKeyStore"] = false;
  o["brokerClientTlsKeyStoreType"] = "JKS";
  o["brokerClientTlsTrustStoreType"] = "JKS";
  return json::serialize(o);
}

std::string tenantInfoJson(const std::vector<std::string>& adminRoles,
                           const std::vector<std::string>& allowedClusters) {
  json::object o;
  o["adminRoles"] = stringArray(adminRoles);
  o["allowedClusters"] = stringArray(allowedClusters);
  return json::serialize(o);
}

namespace {

// Pulsar's AuthAction enum order (a Set<AuthAction> is written in it).
constexpr const char* kAuthActions[] = {"produce", "consume", "functions",
                                        "sources", "sinks",   "packages"};

json::object rolesJson(const std::map<std::string, std::set<std::string>>& roles) {
  json::object o;
  for (const auto& [role, actions] : roles) {
    json::array a;
    for (const char* x : kAuthActions) {
      if (actions.count(x)) a.emplace_back(x);
    }
    for (const auto& x : actions) {  // names this build does not know, after Pulsar's
      if (std::find(std::begin(kAuthActions), std::end(kAuthActions), x) ==
          std::end(kAuthActions)) {
        // "": an unknown action a grant gave, which Pulsar stores as null.
        if (x.empty()) {
          a.emplace_back(nullptr);
        } else {
          a.emplace_back(x);
        }
      }
    }
    o[role] = std::move(a);
  }
  return o;
}

std::map<std::string, std::set<std::string>> rolesFrom(const json::value* v) {
  std::map<std::string, std::set<std::string>> out;
  if (!v || !v->is_object()) return out;
  for (const auto& [role, actions] : v->as_object()) {
    auto& set = out[std::string(role)];
    if (!actions.is_array()) continue;
    for (const auto& a : actions.as_array()) {
      if (a.is_string()) set.emplace(a.as_string());
      if (a.is_null()) set.emplace();  // Pulsar's null for an unknown action
    }
  }
  return out;
}

template <class T>
std::optional<T> number(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_number()) return std::nullopt;
  boost::system::error_code ec;
  T out = v->to_number<T>(ec);
  if (ec) return std::nullopt;
  return out;
}

std::optional<bool> boolean(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_bool()) return std::nullopt;
  return v->as_bool();
}

const json::object* object(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->as_object() : nullptr;
}

json::value optionalValue(const std::optional<int32_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::object bundlesJson(const std::vector<uint64_t>& boundaries) {
  json::array b;
  for (uint64_t v : boundaries) b.emplace_back(formatBoundary(v));
  json::object o;
  o["boundaries"] = std::move(b);
  o["numBundles"] = static_cast<int64_t>(boundaries.size()) - 1;
  return o;
}

// Pulsar's Policies fields in declaration order (Policies.java of Pulsar 4.2.4, checked with
// javap), Jackson's output order.
constexpr const char* kPoliciesFields[] = {
    "auth_policies",
    "replication_clusters",
    "allowed_clusters",
    "bundles",
    "backlog_quota_map",
    "clusterDispatchRate",
    "topicDispatchRate",
    "subscriptionDispatchRate",
    "replicatorDispatchRate",
    "clusterSubscribeRate",
    "persistence",
    "deduplicationEnabled",
    "autoTopicCreationOverride",
    "autoSubscriptionCreationOverride",
    "publishMaxMessageRate",
    "latency_stats_sample_rate",
    "message_ttl_in_seconds",
    "subscription_expiration_time_minutes",
    "retention_policies",
    "deleted",
    "encryption_required",
    "delayed_delivery_policies",
    "inactive_topic_policies",
    "subscription_auth_mode",
    "max_producers_per_topic",
    "max_consumers_per_topic",
    "max_consumers_per_subscription",
    "max_unacked_messages_per_consumer",
    "max_unacked_messages_per_subscription",
    "max_subscriptions_per_topic",
    "compaction_threshold",
    "offload_threshold",
    "offload_threshold_in_seconds",
    "offload_deletion_lag_ms",
    "max_topics_per_namespace",
    "schema_auto_update_compatibility_strategy",
    "schema_compatibility_strategy",
    "is_allow_auto_update_schema",
    "schema_validation_enforced",
    "offload_policies",
    "deduplicationSnapshotIntervalSeconds",
    "subscription_types_enabled",
    "allowed_topic_property_keys_for_metrics",
    "properties",
    "resource_group_name",
    "migrated",
    "dispatcherPauseOnAckStatePersistentEnabled",
    "entryFilters",
};

// The fields a new namespace's Policies has that Magnetar does not model (Pulsar's defaults for
// non-null fields).
json::object newNamespaceDefaults(const std::string& clusterName) {
  json::object o;
  o["replication_clusters"] = json::array{json::string(clusterName)};
  o["allowed_clusters"] = json::array();
  for (const char* m : {"clusterDispatchRate", "topicDispatchRate", "subscriptionDispatchRate",
                        "replicatorDispatchRate", "clusterSubscribeRate", "publishMaxMessageRate",
                        "latency_stats_sample_rate", "properties"}) {
    o[m] = json::object();
  }
  o["deleted"] = false;
  o["encryption_required"] = false;
  o["subscription_auth_mode"] = "None";
  o["offload_threshold"] = -1;
  o["offload_threshold_in_seconds"] = -1;
  o["schema_compatibility_strategy"] = "UNDEFINED";
  o["schema_validation_enforced"] = false;
  o["subscription_types_enabled"] = json::array();
  o["migrated"] = false;
  return o;
}

// auth_policies of p (namespace_auth, destination_auth, subscription_auth_roles).
json::object authPoliciesJson(const NamespacePolicies& p) {
  json::object auth;
  auth["namespace_auth"] = rolesJson(p.permissions);
  json::object destination;
  for (const auto& [topic, roles] : p.topicPermissions) destination[topic] = rolesJson(roles);
  auth["destination_auth"] = std::move(destination);
  json::object subs;
  for (const auto& [sub, roles] : p.subscriptionAuthRoles)
    subs[sub] = stringArray({roles.begin(), roles.end()});
  auth["subscription_auth_roles"] = std::move(subs);
  return auth;
}

// The policies held as objects (null when unset), with TTL and subscription expiry.
void putStructuredPolicies(const NamespacePolicies& p, json::object& m) {
  if (const auto& a = p.autoTopicCreation) {
    json::object o{{"allowAutoTopicCreation", a->allowAutoTopicCreation},
                   {"topicType", a->topicType}};
    if (a->defaultNumPartitions) o["defaultNumPartitions"] = *a->defaultNumPartitions;
    m["autoTopicCreationOverride"] = std::move(o);
  } else {
    m["autoTopicCreationOverride"] = nullptr;
  }
  m["message_ttl_in_seconds"] = optionalValue(p.messageTtlSeconds);
  m["subscription_expiration_time_minutes"] = optionalValue(p.subscriptionExpirationTimeMinutes);
  if (const auto& r = p.retention) {
    m["retention_policies"] = json::object{{"retentionTimeInMinutes", r->retentionTimeInMinutes},
                                           {"retentionSizeInMB", r->retentionSizeInMB}};
  } else {
    m["retention_policies"] = nullptr;
  }
  if (const auto& d = p.delayedDelivery) {
    m["delayed_delivery_policies"] =
        json::object{{"tickTime", d->tickTime},
                     {"active", d->active},
                     {"maxDeliveryDelayInMillis", d->maxDeliveryDelayInMillis}};
  } else {
    m["delayed_delivery_policies"] = nullptr;
  }
  if (const auto& i = p.inactiveTopicPolicies) {
    m["inactive_topic_policies"] =
        json::object{{"inactiveTopicDeleteMode", i->inactiveTopicDeleteMode},
                     {"maxInactiveDurationSeconds", i->maxInactiveDurationSeconds},
                     {"deleteWhileInactive", i->deleteWhileInactive}};
  } else {
    m["inactive_topic_policies"] = nullptr;
  }
}

}  // namespace

std::string policiesJson(const NamespacePolicies& p, const std::vector<uint64_t>& boundaries,
                         const std::string& base, const std::string& clusterName) {
  json::object from;
  if (!base.empty()) {
    boost::system::error_code ec;
    json::value v = json::parse(base, ec);
    if (!ec && v.is_object()) from = std::move(v.as_object());
  }
  if (base.empty()) from = newNamespaceDefaults(clusterName);
  // The fields kept as given (standalone's creation body) and replication_clusters replace the
  // stored ones.
  for (const auto& [field, text] : p.keptFields) {
    boost::system::error_code ec;
    json::value v = json::parse(text, ec);
    if (!ec) from[field] = std::move(v);
  }
  if (p.replicationClusters) from["replication_clusters"] = stringArray(*p.replicationClusters);
  // The modeled fields; null ones are left out (NON_NULL).
  json::object m;
  m["auth_policies"] = authPoliciesJson(p);
  if (!boundaries.empty()) m["bundles"] = bundlesJson(boundaries);
  json::object quotas;
  for (const auto& [type, q] : p.backlogQuotas) {
    quotas[type] = json::object{{"limit", q.limitSize},
                                {"limitSize", q.limitSize},
                                {"limitTime", q.limitTime},
                                {"policy", q.policy}};
  }
  m["backlog_quota_map"] = std::move(quotas);
  m["deduplicationEnabled"] =
      p.deduplicationEnabled ? json::value(*p.deduplicationEnabled) : json::value(nullptr);
  putStructuredPolicies(p, m);
  for (const auto& l : kNamespaceLimits) {
    auto it = p.limits.find(l.name);
    m[l.policiesField] = it == p.limits.end() ? json::value(nullptr) : json::value(it->second);
  }
  m["compaction_threshold"] =
      p.compactionThreshold ? json::value(*p.compactionThreshold) : json::value(nullptr);
  if (p.schemaCompatibilityStrategy) {
    m["schema_compatibility_strategy"] = *p.schemaCompatibilityStrategy;
  } else {
    m["schema_compatibility_strategy"] = "UNDEFINED";
  }
  m["is_allow_auto_update_schema"] =
      p.isAllowAutoUpdateSchema ? json::value(*p.isAllowAutoUpdateSchema) : json::value(nullptr);
  m["schema_validation_enforced"] = p.schemaValidationEnforced.value_or(false);

  json::object out;
  auto emit = [&](std::string_view key) {
    if (const json::value* v = m.if_contains(key)) {
      if (!v->is_null()) out[key] = *v;
    } else if (const json::value* b = from.if_contains(key)) {
      if (!b->is_null()) out[key] = *b;
    }
  };
  for (const char* key : kPoliciesFields) emit(key);
  for (const auto& [key, v] : from) {  // fields of a newer Pulsar, unchanged
    if (!out.contains(key) && !m.contains(key) && !v.is_null()) out[key] = v;
  }
  return json::serialize(out);
}

namespace {

enum class JsonType { kNumber, kBool, kString, kObject, kArray };

bool hasType(const json::value& v, JsonType t) {
  switch (t) {
    case JsonType::kNumber:
      return v.is_number();
    case JsonType::kBool:
      return v.is_bool();
    case JsonType::kString:
      return v.is_string();
    case JsonType::kObject:
      return v.is_object();
    case JsonType::kArray:
      return v.is_array();
  }
  return false;
}

// A field Magnetar reads holding a value of another JSON type (null is "unset") fails the read,
// as Pulsar's Jackson mapper fails to deserialize it: dropping it instead would make the next
// update write the namespace's Policies back without it.
Status checkFieldTypes(const json::object& o, const std::string& path, const char* where,
                       std::initializer_list<std::pair<const char*, JsonType>> fields) {
  for (const auto& [key, type] : fields) {
    const json::value* v = o.if_contains(key);
    if (!v || v->is_null() || hasType(*v, type)) continue;
    return Status::corruption("znode " + path + " does not hold valid Policies JSON: " + where +
                              key + " has a value of the wrong type: " + json::serialize(*v));
  }
  return Status::ok();
}

Status checkPoliciesTypes(const json::object& o, const std::string& path) {
  using enum JsonType;
  Status s = checkFieldTypes(o, path, "",
                             {{"auth_policies", kObject},
                              {"replication_clusters", kArray},
                              {"bundles", kObject},
                              {"backlog_quota_map", kObject},
                              {"deduplicationEnabled", kBool},
                              {"autoTopicCreationOverride", kObject},
                              {"message_ttl_in_seconds", kNumber},
                              {"subscription_expiration_time_minutes", kNumber},
                              {"retention_policies", kObject},
                              {"delayed_delivery_policies", kObject},
                              {"inactive_topic_policies", kObject},
                              {"compaction_threshold", kNumber},
                              {"schema_compatibility_strategy", kString},
                              {"is_allow_auto_update_schema", kBool},
                              {"schema_validation_enforced", kBool}});
  for (const auto& l : kNamespaceLimits) {
    if (s.isOk()) s = checkFieldTypes(o, path, "", {{l.policiesField, kNumber}});
  }
  if (!s.isOk()) return s;
  if (const json::object* r = object(o, "retention_policies")) {
    s = checkFieldTypes(*r, path, "retention_policies.",
                        {{"retentionTimeInMinutes", kNumber}, {"retentionSizeInMB", kNumber}});
  }
  if (const json::object* a = object(o, "auth_policies"); a && s.isOk()) {
    s = checkFieldTypes(*a, path, "auth_policies.",
                        {{"namespace_auth", kObject}, {"destination_auth", kObject}});
  }
  if (const json::object* d = object(o, "delayed_delivery_policies"); d && s.isOk()) {
    s = checkFieldTypes(
        *d, path, "delayed_delivery_policies.",
        {{"active", kBool}, {"tickTime", kNumber}, {"maxDeliveryDelayInMillis", kNumber}});
  }
  if (const json::object* i = object(o, "inactive_topic_policies"); i && s.isOk()) {
    s = checkFieldTypes(*i, path, "inactive_topic_policies.",
                        {{"inactiveTopicDeleteMode", kString},
                         {"maxInactiveDurationSeconds", kNumber},
                         {"deleteWhileInactive", kBool}});
  }
  if (const json::object* a = object(o, "autoTopicCreationOverride"); a && s.isOk()) {
    s = checkFieldTypes(*a, path, "autoTopicCreationOverride.",
                        {{"allowAutoTopicCreation", kBool},
                         {"topicType", kString},
                         {"defaultNumPartitions", kNumber}});
  }
  return s;
}

void readBacklogQuotas(const json::object& o, NamespacePolicies& p) {
  if (const json::object* q = object(o, "backlog_quota_map")) {
    for (const auto& [type, v] : *q) {
      if (!v.is_object()) continue;
      BacklogQuota bq;
      const json::object& qo = v.as_object();
      if (auto n = number<int64_t>(qo, "limitSize")) {
        bq.limitSize = *n;
      } else if (auto l = number<int64_t>(qo, "limit")) {
        bq.limitSize = *l;
      }
      if (auto n = number<int32_t>(qo, "limitTime")) bq.limitTime = *n;
      if (const auto* pol = qo.if_contains("policy"); pol && pol->is_string()) {
        bq.policy = std::string(pol->as_string());
      }
      p.backlogQuotas[type] = bq;
    }
  }
}

// The fields Magnetar keeps but does not act on (kKeptPolicyFields) and bundles, as stored.
void readKeptFields(const json::object& o, NamespacePolicies& p) {
  for (const auto& kept : kKeptPolicyFields) {
    if (const json::value* v = o.if_contains(kept.name); v && !v->is_null()) {
      p.keptFields[kept.name] = json::serialize(*v);
    }
  }
  if (const json::value* b = o.if_contains("bundles"); b && b->is_object()) {
    p.keptFields["bundles"] = json::serialize(*b);
  }
}

// The policies held as objects, with TTL and subscription expiry (putStructuredPolicies' fields).
void readStructuredPolicies(const json::object& o, NamespacePolicies& p) {
  if (const json::object* a = object(o, "autoTopicCreationOverride")) {
    AutoTopicCreationOverride ov;
    if (auto b = boolean(*a, "allowAutoTopicCreation")) ov.allowAutoTopicCreation = *b;
    if (const auto* t = a->if_contains("topicType"); t && t->is_string()) {
      ov.topicType = std::string(t->as_string());
    }
    ov.defaultNumPartitions = number<int32_t>(*a, "defaultNumPartitions");
    p.autoTopicCreation = ov;
  }
  p.messageTtlSeconds = number<int32_t>(o, "message_ttl_in_seconds");
  p.subscriptionExpirationTimeMinutes = number<int32_t>(o, "subscription_expiration_time_minutes");
  if (const json::object* r = object(o, "retention_policies")) {
    p.retention = RetentionPolicy{number<int32_t>(*r, "retentionTimeInMinutes").value_or(0),
                                  number<int64_t>(*r, "retentionSizeInMB").value_or(0)};
  }
  if (const json::object* dd = object(o, "delayed_delivery_policies")) {
    DelayedDeliveryPolicies v;
    if (auto b = boolean(*dd, "active")) v.active = *b;
    if (auto n = number<int64_t>(*dd, "tickTime")) v.tickTime = *n;
    if (auto n = number<int64_t>(*dd, "maxDeliveryDelayInMillis")) v.maxDeliveryDelayInMillis = *n;
    p.delayedDelivery = v;
  }
  if (const json::object* i = object(o, "inactive_topic_policies")) {
    InactiveTopicPolicies v;
    if (const auto* m = i->if_contains("inactiveTopicDeleteMode"); m && m->is_string()) {
      v.inactiveTopicDeleteMode = std::string(m->as_string());
    }
    if (auto n = number<int32_t>(*i, "maxInactiveDurationSeconds")) {
      v.maxInactiveDurationSeconds = *n;
    }
    if (auto b = boolean(*i, "deleteWhileInactive")) v.deleteWhileInactive = *b;
    p.inactiveTopicPolicies = v;
  }
}

}  // namespace

Result<PoliciesDoc> parsePolicies(std::string_view text, const std::string& path) {
  auto parsed = parseObject(text, path, "Policies");
  if (!parsed.isOk()) return parsed.status();
  const json::object& o = *parsed;
  if (Status s = checkPoliciesTypes(o, path); !s.isOk()) return s;
  PoliciesDoc d;
  d.raw = std::string(text);
  NamespacePolicies& p = d.policies;
  if (const json::object* auth = object(o, "auth_policies")) {
    p.permissions = rolesFrom(auth->if_contains("namespace_auth"));
    if (const json::object* dest = object(*auth, "destination_auth")) {
      for (const auto& [topic, roles] : *dest) p.topicPermissions[topic] = rolesFrom(&roles);
    }
    if (const json::object* roles = object(*auth, "subscription_auth_roles")) {
      for (const auto& [sub, list] : *roles) {
        if (const json::array* a = list.if_array()) {
          std::set<std::string>& out = p.subscriptionAuthRoles[std::string(sub)];
          for (const auto& r : *a) {
            if (r.is_string()) out.emplace(r.as_string());
          }
        }
      }
    }
  }
  readKeptFields(o, p);
  readBacklogQuotas(o, p);
  if (const json::value* rc = o.if_contains("replication_clusters"); rc && rc->is_array()) {
    std::vector<std::string> clusters;
    for (const auto& c : rc->as_array()) {
      if (c.is_string()) clusters.emplace_back(c.as_string());
    }
    p.replicationClusters = std::move(clusters);
  }
  p.deduplicationEnabled = boolean(o, "deduplicationEnabled");
  readStructuredPolicies(o, p);
  for (const auto& l : kNamespaceLimits) {
    if (auto n = number<int32_t>(o, l.policiesField)) p.limits[l.name] = *n;
  }
  p.compactionThreshold = number<int64_t>(o, "compaction_threshold");
  if (const auto* s = o.if_contains("schema_compatibility_strategy");
      s && s->is_string() && s->as_string() != "UNDEFINED") {
    p.schemaCompatibilityStrategy = std::string(s->as_string());
  }
  p.isAllowAutoUpdateSchema = boolean(o, "is_allow_auto_update_schema");
  if (auto b = boolean(o, "schema_validation_enforced"); b && *b) p.schemaValidationEnforced = true;
  auto b = boundariesFromPolicies(text, path);
  if (!b.isOk()) return b.status();
  if (b->has_value()) d.boundaries = std::move(**b);
  return d;
}

std::string namespacePoliciesJson(const std::vector<std::string>& replicationClusters,
                                  const std::vector<uint64_t>& boundaries) {
  json::object base = newNamespaceDefaults("");
  base["replication_clusters"] = stringArray(replicationClusters);
  return policiesJson(NamespacePolicies{}, boundaries, json::serialize(base), "");
}

Result<std::string> withBundles(const std::string& base, const std::vector<uint64_t>& boundaries,
                                const std::string& path) {
  auto o = parseObject(base, path, policiesKind(path));
  if (!o.isOk()) return o.status();
  if (auto* b = o->if_contains("bundles")) {
    *b = bundlesJson(boundaries);
    return json::serialize(*o);
  }
  // No bundles yet: placed where Pulsar writes them (after replication_clusters).
  json::object out;
  bool placed = false;
  for (auto& [k, v] : *o) {
    if (!placed && k != "auth_policies" && k != "replication_clusters") {
      out["bundles"] = bundlesJson(boundaries);
      placed = true;
    }
    out[k] = v;
  }
  if (!placed) out["bundles"] = bundlesJson(boundaries);
  return json::serialize(out);
}

std::string localPoliciesJson(const std::vector<uint64_t>& boundaries, const std::string& base) {
  if (!base.empty()) {
    auto w = withBundles(base, boundaries, "LocalPolicies");
    if (w.isOk()) return *w;
  }
  json::object o;
  o["bundles"] = bundlesJson(boundaries);
  o["migrated"] = false;
  return json::serialize(o);
}

Result<TenantInfo> parseTenantInfo(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "TenantInfo");
  if (!o.isOk()) return o.status();
  TenantInfo t;
  for (auto [key, out] :
       {std::pair{"adminRoles", &t.adminRoles}, std::pair{"allowedClusters", &t.allowedClusters}}) {
    const json::value* v = o->if_contains(key);
    if (!v || v->is_null()) continue;
    if (!v->is_array()) return missing(path, "TenantInfo", key);
    for (const auto& e : v->as_array()) {
      if (e.is_string()) out->emplace_back(e.as_string());
    }
  }
  return t;
}

std::string partitionedTopicMetadataJson(int partitions, const std::string& base) {
  json::object o;
  o["partitions"] = partitions;
  o["deleted"] = false;
  if (!base.empty()) {  // properties (and whatever a newer Pulsar adds) kept
    boost::system::error_code ec;
    json::value v = json::parse(base, ec);
    if (!ec && v.is_object()) {
      for (const auto& [k, val] : v.as_object()) {
        if (k != "partitions" && !val.is_null()) o[k] = val;
      }
    }
  }
  return json::serialize(o);
}

Result<int> parsePartitionedTopicMetadata(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "PartitionedTopicMetadata");
  if (!o.isOk()) return o.status();
  auto n = number<int32_t>(*o, "partitions");
  if (!n || *n < 1) return missing(path, "PartitionedTopicMetadata", "a positive partitions");
  return *n;
}

std::string tenantPath(const std::string& tenant) { return "/admin/policies/" + tenant; }

std::string namespacePath(const std::string& ns) { return "/admin/policies/" + ns; }

std::string urlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '*' || c == '_') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string urlDecode(std::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string partitionedTopicPath(const std::string& fullTopicName) {
  auto sep = fullTopicName.find("://");
  std::string domain = fullTopicName.substr(0, sep);
  std::string rest = fullTopicName.substr(sep + 3);  // tenant/ns/local
  auto a = rest.find('/');
  auto b = rest.find('/', a + 1);
  return "/admin/partitioned-topics/" + rest.substr(0, b) + "/" + domain + "/" +
         urlEncode(rest.substr(b + 1));
}

Result<std::optional<std::vector<uint64_t>>> boundariesFromPolicies(std::string_view text,
                                                                    const std::string& path) {
  auto o = parseObject(text, path, policiesKind(path));
  if (!o.isOk()) return o.status();
  auto* bundles = o->if_contains("bundles");
  if (!bundles || !bundles->is_object()) return std::optional<std::vector<uint64_t>>();
  auto* b = bundles->as_object().if_contains("boundaries");
  if (!b || !b->is_array()) return std::optional<std::vector<uint64_t>>();
  std::vector<std::string> values;
  for (const auto& e : b->as_array()) {
    if (!e.is_string())
      return Status::corruption("znode " + path + ": a bundle boundary is not a string");
    values.emplace_back(e.as_string());
  }
  auto parsed = parseBoundaries(values);
  if (!parsed.isOk()) return Status::corruption("znode " + path + ": " + parsed.status().message());
  return std::optional<std::vector<uint64_t>>(std::move(*parsed));
}

}  // namespace magnetar::broker::cluster
