#include "admin/namespace_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <tuple>

#include "admin/topic_policy_routes.h"
#include "base/blocking_wait.h"
#include "broker/cluster/bundles.h"
#include "broker/common/topic_ownership.h"
#include "broker/schema/schema_compatibility.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::NamespacePolicies;

const std::set<std::string> kBacklogQuotaTypes = {"destination_storage", "message_age"};
const std::set<std::string> kBacklogPolicies = {"producer_request_hold", "producer_exception",
                                                "consumer_backlog_eviction"};
// Namespaces of a tenant, sorted ("tenant/ns").
std::vector<std::string> namespacesOf(const AdminContext& ctx, const std::string& tenant) {
  std::vector<std::string> out;
  for (auto& ns : ctx.service.namespaces()) {
    if (ns.compare(0, tenant.size() + 1, tenant + "/") == 0) out.push_back(ns);
  }
  return out;
}

// A tenant exists when created through the API or implied by a stored namespace. In cluster
// mode one unknown here is read from the configuration store first (created through another
// broker a moment ago).
bool tenantExists(const AdminContext& ctx, const std::string& tenant) {
  auto known = [&] {
    return ctx.service.policies().tenant(tenant).has_value() || !namespacesOf(ctx, tenant).empty();
  };
  if (known()) return true;
  if (auto* shared = ctx.service.sharedConfig()) {
    shared->refreshTenant(tenant);
    return known();
  }
  return false;
}

json::array stringArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

// Reads an array of strings; false when `v` is not one.
bool readStrings(const json::value* v, std::vector<std::string>* out) {
  if (!v || v->is_null()) return true;
  if (!v->is_array()) return false;
  for (const auto& e : v->as_array()) {
    if (!e.is_string()) return false;
    out->emplace_back(e.as_string());
  }
  return true;
}

json::object backlogQuotaJson(const broker::BacklogQuota& q) {
  return {{"limitSize", q.limitSize}, {"limitTime", q.limitTime}, {"policy", q.policy}};
}

json::object inactiveTopicPoliciesJson(const broker::InactiveTopicPolicies& p) {
  return {{"inactiveTopicDeleteMode", p.inactiveTopicDeleteMode},
          {"maxInactiveDurationSeconds", p.maxInactiveDurationSeconds},
          {"deleteWhileInactive", p.deleteWhileInactive}};
}

// Pulsar's BacklogQuota JSON (limitSize, or its older name limit; limitTime; policy) into q.
// "" or the error text.
std::string backlogQuotaFrom(const json::value& v, broker::BacklogQuota* q) {
  const json::object* o = v.if_object();
  if (!o) return "Backlog quota must be a JSON object";
  const json::value* size = o->if_contains("limitSize");
  if (!size) size = o->if_contains("limit");
  const json::value* time = o->if_contains("limitTime");
  const json::value* policy = o->if_contains("policy");
  // Jackson's coercions: "2000" and 1e3 are numbers, a policy given as any scalar is its text.
  std::optional<int64_t> sizeValue = size && !size->is_null() ? javaInteger(*size, false) : 0;
  std::optional<int64_t> timeValue = time && !time->is_null() ? javaInteger(*time, true) : 0;
  std::optional<std::string> policyValue =
      policy && !policy->is_null() ? javaString(*policy) : std::optional<std::string>(q->policy);
  if (!sizeValue) return "Cannot deserialize value of type `long` for limitSize";
  if (!timeValue) return "Cannot deserialize value of type `int` for limitTime";
  if (!policyValue) return "Cannot deserialize the backlog quota policy";
  if (size && !size->is_null()) q->limitSize = *sizeValue;
  if (time && !time->is_null()) q->limitTime = static_cast<int32_t>(*timeValue);
  q->policy = *policyValue;
  if (!kBacklogPolicies.count(q->policy)) return "Unknown backlog quota policy: " + q->policy;
  return "";
}

json::object retentionJson(const broker::RetentionPolicy& r) {
  return {{"retentionTimeInMinutes", r.retentionTimeInMinutes},
          {"retentionSizeInMB", r.retentionSizeInMB}};
}

// Pulsar's RetentionPolicies from JSON (Jackson: missing fields 0, numbers as strings taken);
// nullopt when not one.
std::optional<broker::RetentionPolicy> retentionFrom(const json::value& v) {
  const json::object* o = v.if_object();
  if (!o) return std::nullopt;
  std::optional<int64_t> t = 0, sz = 0;
  if (const json::value* f = o->if_contains("retentionTimeInMinutes"); f && !f->is_null()) {
    t = javaInteger(*f, true);
  }
  if (const json::value* f = o->if_contains("retentionSizeInMB"); f && !f->is_null()) {
    sz = javaInteger(*f, false);
  }
  if (!t || !sz) return std::nullopt;
  return broker::RetentionPolicy{static_cast<int32_t>(*t), *sz};
}

// auth_policies.subscription_auth_roles: subscription -> roles (also GET permissions/subscription).
json::object subscriptionRolesJson(const std::map<std::string, std::set<std::string>>& subs) {
  json::object o;
  for (const auto& [sub, roles] : subs) {
    json::array a;
    for (const auto& r : roles) a.emplace_back(r);
    o[sub] = std::move(a);
  }
  return o;
}

// Pulsar's Policies object (the fields Magnetar knows; the rest at Pulsar's defaults).
json::object policiesJson(const AdminContext& ctx, const NamespacePolicies& p) {
  json::object o;
  json::object destinationAuth;
  for (const auto& [topic, roles] : p.topicPermissions) {
    destinationAuth[topic] = permissionsJson(roles);
  }
  // A field kept as given at creation (keptFields), else `dflt`.
  auto kept = [&p](const char* field, json::value dflt) {
    auto it = p.keptFields.find(field);
    if (it == p.keptFields.end()) return dflt;
    boost::system::error_code ec;
    json::value v = json::parse(it->second, ec);
    return ec ? dflt : v;
  };
  o["auth_policies"] =
      json::object{{"namespace_auth", permissionsJson(p.permissions)},
                   {"destination_auth", std::move(destinationAuth)},
                   {"subscription_auth_roles", subscriptionRolesJson(p.subscriptionAuthRoles)}};
  o["replication_clusters"] =
      p.replicationClusters && !p.replicationClusters->empty()
          ? json::value(stringArray(*p.replicationClusters))
          : json::value(json::array{json::string(ctx.config->clusterName())});
  o["bundles"] = kept(
      "bundles", json::object{{"boundaries", json::array{"0x00000000", "0x40000000", "0x80000000",
                                                         "0xc0000000", "0xffffffff"}},
                              {"numBundles", 4}});
  json::object quotas;
  for (const auto& [type, q] : p.backlogQuotas) quotas[type] = backlogQuotaJson(q);
  o["backlog_quota_map"] = std::move(quotas);
  for (const char* m : {"clusterDispatchRate", "topicDispatchRate", "subscriptionDispatchRate",
                        "replicatorDispatchRate", "clusterSubscribeRate", "publishMaxMessageRate",
                        "latency_stats_sample_rate"}) {
    o[m] = kept(m, json::object{});
  }
  if (const auto& a = p.autoTopicCreation) {
    json::object ao{{"allowAutoTopicCreation", a->allowAutoTopicCreation},
                    {"topicType", a->topicType}};
    if (a->defaultNumPartitions) ao["defaultNumPartitions"] = *a->defaultNumPartitions;
    o["autoTopicCreationOverride"] = std::move(ao);
  }
  if (const auto& d = p.delayedDelivery) {
    o["delayed_delivery_policies"] =
        json::object{{"tickTime", d->tickTime},
                     {"active", d->active},
                     {"maxDeliveryDelayInMillis", d->maxDeliveryDelayInMillis}};
  }
  o["deduplicationEnabled"] =
      p.deduplicationEnabled ? json::value(*p.deduplicationEnabled) : json::value(nullptr);
  o["message_ttl_in_seconds"] =
      p.messageTtlSeconds ? json::value(*p.messageTtlSeconds) : json::value(nullptr);
  o["retention_policies"] = p.retention ? json::value(retentionJson(*p.retention)) : nullptr;
  o["inactive_topic_policies"] =
      p.inactiveTopicPolicies ? json::value(inactiveTopicPoliciesJson(*p.inactiveTopicPolicies))
                              : json::value(nullptr);
  o["subscription_expiration_time_minutes"] =
      p.subscriptionExpirationTimeMinutes ? json::value(*p.subscriptionExpirationTimeMinutes)
                                          : json::value(nullptr);
  for (const auto& l : broker::kNamespaceLimits) {  // unset ones are left out, as Pulsar
    auto it = p.limits.find(l.name);
    if (it != p.limits.end()) o[l.policiesField] = it->second;
  }
  if (p.compactionThreshold) o["compaction_threshold"] = *p.compactionThreshold;
  o["deleted"] = false;
  o["encryption_required"] = kept("encryption_required", false);
  o["subscription_auth_mode"] = kept("subscription_auth_mode", "None");
  o["offload_threshold"] = kept("offload_threshold", -1);
  o["schema_compatibility_strategy"] = p.schemaCompatibilityStrategy.value_or("UNDEFINED");
  o["is_allow_auto_update_schema"] = p.isAllowAutoUpdateSchema.value_or(true);
  o["schema_validation_enforced"] = p.schemaValidationEnforced.value_or(false);
  o["properties"] = kept("properties", json::object{});
  // The other kept fields (persistence, offload_policies, ...), as given.
  for (const auto& [field, text] : p.keptFields) {
    if (o.contains(field)) continue;
    o[field] = kept(field.c_str(), nullptr);
  }
  return o;
}

// role -> AuthAction names (Pulsar's namespace_auth / destination_auth maps); false when not one.
bool readPermissions(const json::value& v, std::map<std::string, std::set<std::string>>* out) {
  if (v.is_null()) return true;
  if (!v.is_object()) return false;
  for (const auto& [role, actions] : v.as_object()) {
    if (!actions.is_array()) return false;
    std::set<std::string>& set = (*out)[std::string(role)];
    for (const auto& a : actions.as_array()) {
      std::optional<std::string> action = authActionFrom(a);
      if (!action) return false;
      set.insert(std::move(*action));
    }
  }
  return true;
}

// Policies.auth_policies: namespace_auth, destination_auth, subscription_auth_roles.
std::string readAuthPolicies(const json::object* o, NamespacePolicies* out) {
  if (const json::value* a = o->if_contains("auth_policies"); a && !a->is_null()) {
    const json::object* ao = a->if_object();
    if (!ao) return "Invalid auth_policies";
    if (const json::value* n = ao->if_contains("namespace_auth");
        n && !readPermissions(*n, &out->permissions)) {
      return "Invalid auth_policies.namespace_auth";
    }
    if (const json::value* d = ao->if_contains("destination_auth"); d && !d->is_null()) {
      if (!d->is_object()) return "Invalid auth_policies.destination_auth";
      for (const auto& [topic, roles] : d->as_object()) {
        if (!readPermissions(roles, &out->topicPermissions[std::string(topic)])) {
          return "Invalid auth_policies.destination_auth";
        }
      }
    }
    if (const json::value* r = ao->if_contains("subscription_auth_roles"); r && !r->is_null()) {
      if (!r->is_object()) return "Invalid auth_policies.subscription_auth_roles";
      for (const auto& [sub, list] : r->as_object()) {
        std::vector<std::string> names;
        if (!readStrings(&list, &names)) return "Invalid auth_policies.subscription_auth_roles";
        out->subscriptionAuthRoles[std::string(sub)].insert(names.begin(), names.end());
      }
    }
  }
  return "";
}

// replication_clusters and the fields of broker::kKeptPolicyFields, kept as given.
std::string readKeptFields(const json::object* o, NamespacePolicies* out) {
  if (const json::value* rc = o->if_contains("replication_clusters"); rc && !rc->is_null()) {
    std::vector<std::string> clusters;
    if (!readStrings(rc, &clusters)) return "Invalid replication_clusters";
    if (!clusters.empty()) out->replicationClusters = std::move(clusters);
  }
  for (const auto& kept : broker::kKeptPolicyFields) {
    const std::string field = kept.name;
    const std::string type = kept.javaType;
    const json::value* f = o->if_contains(field);
    if (!f || f->is_null()) continue;
    json::value v = *f;
    if (type == "boolean") {
      auto b = javaBoolean(*f);
      if (!b) return "Invalid " + field;
      v = *b;
    } else if (type == "long" || type == "int") {
      auto n = javaInteger(*f, type == "int");
      if (!n) return "Invalid " + field;
      v = *n;
    } else if (type == "String") {
      auto t = javaString(*f);
      if (!t) return "Invalid " + field;
      v = json::string(*t);
    } else if (type == "map") {
      auto m = javaStringMap(*f);
      if (!m) return "Invalid " + field;
      json::object mo;
      for (const auto& [k, val] : *m) mo[k] = val;
      v = std::move(mo);
    }
    out->keptFields[field] = json::serialize(v);
  }
  return "";
}

// inactive_topic_policies, with Pulsar's defaults for fields left out.
std::string readInactiveTopicPolicies(const json::object* o, NamespacePolicies* out) {
  if (const json::value* i = o->if_contains("inactive_topic_policies"); i && !i->is_null()) {
    const json::object* io = i->if_object();
    if (!io) return "Invalid inactive_topic_policies";
    broker::InactiveTopicPolicies p{"delete_when_no_subscriptions", 0, false};
    if (const json::value* m = io->if_contains("inactiveTopicDeleteMode"); m && !m->is_null()) {
      if (!m->is_string() || (m->as_string() != "delete_when_no_subscriptions" &&
                              m->as_string() != "delete_when_subscriptions_caught_up")) {
        return "Invalid inactive_topic_policies";
      }
      p.inactiveTopicDeleteMode = std::string(m->as_string());
    }
    if (const json::value* m = io->if_contains("maxInactiveDurationSeconds"); m && !m->is_null()) {
      auto n = javaInteger(*m, true);
      if (!n) return "Invalid inactive_topic_policies";
      p.maxInactiveDurationSeconds = static_cast<int32_t>(*n);
    }
    if (const json::value* d = io->if_contains("deleteWhileInactive"); d && !d->is_null()) {
      auto b = javaBoolean(*d);
      if (!b) return "Invalid inactive_topic_policies";
      p.deleteWhileInactive = *b;
    }
    out->inactiveTopicPolicies = p;
  }
  return "";
}

// delayed_delivery_policies, with Java's defaults for fields left out.
std::string readDelayedDelivery(const json::object* o, NamespacePolicies* out) {
  if (const json::value* d = o->if_contains("delayed_delivery_policies"); d && !d->is_null()) {
    const json::object* dobj = d->if_object();
    if (!dobj) return "Invalid delayed_delivery_policies";
    broker::DelayedDeliveryPolicies dd;
    dd.active = false;  // Java's defaults for fields left out
    dd.tickTime = 0;
    if (const json::value* f = dobj->if_contains("active"); f && !f->is_null()) {
      auto b = javaBoolean(*f);
      if (!b) return "Invalid delayed_delivery_policies";
      dd.active = *b;
    }
    for (auto [name, field] :
         {std::pair{"tickTime", &dd.tickTime},
          std::pair{"maxDeliveryDelayInMillis", &dd.maxDeliveryDelayInMillis}}) {
      if (const json::value* f = dobj->if_contains(name); f && !f->is_null()) {
        auto n = javaInteger(*f, false);
        if (!n) return "Invalid delayed_delivery_policies";
        *field = *n;
      }
    }
    out->delayedDelivery = dd;
  }
  return "";
}

// autoTopicCreationOverride, compaction_threshold and the schema policies.
std::string readTopicCreationAndSchema(const json::object* o, NamespacePolicies* out) {
  if (const json::value* a = o->if_contains("autoTopicCreationOverride"); a && !a->is_null()) {
    broker::AutoTopicCreationOverride ov;
    std::string bad = validateAutoTopicCreation(*a, &ov);
    if (!bad.empty()) return "Invalid autoTopicCreationOverride: " + bad;
    out->autoTopicCreation = ov;
  }
  if (const json::value* c = o->if_contains("compaction_threshold"); c && !c->is_null()) {
    auto n = javaInteger(*c, false);
    if (!n) return "Invalid compaction_threshold";
    out->compactionThreshold = *n;
  }
  if (const json::value* c = o->if_contains("schema_compatibility_strategy"); c && !c->is_null()) {
    if (!c->is_string() || !broker::strategyFromName(c->as_string())) {
      return "Invalid schema_compatibility_strategy";
    }
    if (c->as_string() != "UNDEFINED")
      out->schemaCompatibilityStrategy = std::string(c->as_string());
  }
  if (const json::value* b = o->if_contains("is_allow_auto_update_schema"); b && !b->is_null()) {
    auto v = javaBoolean(*b);
    if (!v) return "Invalid is_allow_auto_update_schema";
    out->isAllowAutoUpdateSchema = *v;
  }
  if (const json::value* b = o->if_contains("schema_validation_enforced"); b && !b->is_null()) {
    auto v = javaBoolean(*b);
    if (!v) return "Invalid schema_validation_enforced";
    if (*v) out->schemaValidationEnforced = true;
  }
  return "";
}

// The int field when present: false when not a non-negative int (Java's Integer).
bool readNonNegativeInt(const json::object* o, const char* field, std::optional<int32_t>* v) {
  const json::value* f = o->if_contains(field);
  if (!f || f->is_null()) return true;
  auto n = javaInteger(*f, true);
  if (!n || *n < 0) return false;
  *v = static_cast<int32_t>(*n);
  return true;
}

// The max_* limits, message_ttl_in_seconds and deduplicationEnabled.
std::string readLimitsTtlDedup(const json::object* o, NamespacePolicies* out) {
  for (const auto& l : broker::kNamespaceLimits) {
    std::optional<int32_t> v;
    if (!readNonNegativeInt(o, l.policiesField, &v)) {
      return std::string("Invalid ") + l.policiesField;
    }
    if (v) out->limits[l.name] = *v;
  }
  // A negative TTL is read; the create route refuses it as Pulsar's validatePolicies (412).
  if (const json::value* f = o->if_contains("message_ttl_in_seconds"); f && !f->is_null()) {
    auto n = javaInteger(*f, true);
    if (!n) return "Invalid message_ttl_in_seconds";
    out->messageTtlSeconds = static_cast<int32_t>(*n);
  }
  if (const json::value* d = o->if_contains("deduplicationEnabled"); d && !d->is_null()) {
    auto b = javaBoolean(*d);
    if (!b) return "Invalid deduplicationEnabled";
    out->deduplicationEnabled = *b;
  }
  return "";
}

// retention_policies, backlog_quota_map, subscription_expiration_time_minutes.
std::string readRetentionBacklogExpiration(const json::object* o, NamespacePolicies* out) {
  if (const json::value* r = o->if_contains("retention_policies"); r && !r->is_null()) {
    auto rp = retentionFrom(*r);
    if (!rp) return "Invalid retention_policies";
    out->retention = *rp;
  }
  if (const json::value* m = o->if_contains("backlog_quota_map"); m && !m->is_null()) {
    if (!m->is_object()) return "Invalid backlog_quota_map";
    for (const auto& [type, q] : m->as_object()) {
      std::string t(type);
      // Pulsar answers an unknown type with a 500 (a null map key); refused here.
      if (!kBacklogQuotaTypes.count(t)) return "Invalid backlog_quota_map: unknown type " + t;
      broker::BacklogQuota quota;
      // Pulsar's BacklogQuotaImpl defaults when a field is left out of the Policies JSON.
      quota.limitSize = 0;
      quota.limitTime = 0;
      if (std::string e = backlogQuotaFrom(q, &quota); !e.empty()) {
        return "Invalid backlog_quota_map: " + e;
      }
      out->backlogQuotas[t] = quota;
    }
  }
  std::optional<int32_t> expiration;
  if (!readNonNegativeInt(o, "subscription_expiration_time_minutes", &expiration)) {
    return "Invalid subscription_expiration_time_minutes";
  }
  out->subscriptionExpirationTimeMinutes = expiration;
  return "";
}

// The policies given in a create-namespace body (Pulsar's Policies JSON), with Jackson's
// coercions ("30" for a number, "true" for a boolean): auth_policies (namespace_auth and
// destination_auth are the namespace's and topics' grants), replication_clusters, the max_*
// limits, deduplicationEnabled, message_ttl_in_seconds, retention_policies, backlog_quota_map,
// subscription_expiration_time_minutes, inactive_topic_policies, delayed_delivery_policies,
// autoTopicCreationOverride, compaction_threshold, the schema policies; the fields of
// broker::kKeptPolicyFields are kept as given (GET shows them); unknown fields are ignored, as
// Pulsar's mapper does. "" or the error text (a 400, as Pulsar's JSON mapping errors).
std::string initialPolicies(const json::value& body, NamespacePolicies* out) {
  const json::object* o = body.if_object();
  if (!o) return "The body must be a Policies JSON object";
  for (auto read :
       {readAuthPolicies, readKeptFields, readInactiveTopicPolicies, readDelayedDelivery,
        readTopicCreationAndSchema, readLimitsTtlDedup, readRetentionBacklogExpiration}) {
    if (std::string e = read(o, out); !e.empty()) return e;
  }
  return "";
}

// Java's Long.decode: an optional sign, then "0x", "0X" or "#" (hex), "0" and more digits
// (octal) or decimal digits, within a long; nullopt where it throws NumberFormatException.
std::optional<int64_t> javaLongDecode(std::string_view s) {
  size_t i = 0;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    i = 1;
  }
  int radix = 10;
  if (s.substr(i, 2) == "0x" || s.substr(i, 2) == "0X") {
    radix = 16;
    i += 2;
  } else if (s.substr(i, 1) == "#") {
    radix = 16;
    i += 1;
  } else if (s.substr(i, 1) == "0" && s.size() > i + 1) {
    radix = 8;
    i += 1;
  }
  std::string_view digits = s.substr(std::min(i, s.size()));
  if (digits.empty() || digits[0] == '-' || digits[0] == '+') return std::nullopt;
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, radix);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  const uint64_t limit = uint64_t{INT64_MAX} + (negative ? 1 : 0);
  if (magnitude > limit) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

// The bundles a create-namespace body asks for, as Pulsar's validatePolicies: with numBundles
// of 1 or more, its boundaries when it gives any (each read by Long.decode and printed
// "0x%08x", sorted as text without duplicates, from 0x00000000 to 0xffffffff: else 400; a
// boundary Long.decode refuses is Pulsar's 500), else numBundles cut evenly; otherwise the
// default bundles (*numBundles 0). *boundaries: the given ones, or empty.
std::optional<HttpResponse> createBundles(const json::value& body, int* numBundles,
                                          std::vector<std::string>* boundaries) {
  const json::object* o = body.if_object();
  const json::value* b = o ? o->if_contains("bundles") : nullptr;
  if (!b || b->is_null()) return std::nullopt;
  if (!b->is_object()) return jacksonError("BundlesData", *b, "bundles");
  int64_t count = 0;
  if (const json::value* num = b->as_object().if_contains("numBundles"); num && !num->is_null()) {
    auto n = javaInteger(*num, true);
    if (!n) return jacksonError("int", *num, "numBundles");
    count = *n;
  }
  std::vector<std::string> given;
  if (const json::value* bounds = b->as_object().if_contains("boundaries");
      bounds && !bounds->is_null()) {
    if (!bounds->is_array()) return jacksonError("java.util.ArrayList", *bounds, "boundaries");
    for (const auto& v : bounds->as_array()) {
      auto text = javaString(v);
      if (!text) return jacksonError("java.lang.String", v, "boundaries");
      given.push_back(*text);
    }
  }
  if (count <= 0) return std::nullopt;  // Pulsar: the default bundles
  if (given.empty()) {
    // Pulsar cuts any count; Magnetar bounds the boundaries it makes.
    if (count > 1 << 20) return HttpResponse::error(412, "Invalid number of bundles");
    *numBundles = static_cast<int>(count);
    return std::nullopt;
  }
  std::set<std::string> sorted;
  for (const auto& g : given) {
    auto v = javaLongDecode(g);
    if (!v) return HttpResponse::error(500, fmt::format("For input string: \"{}\"", g));
    sorted.insert(fmt::format("0x{:08x}", static_cast<uint64_t>(*v)));
  }
  if (*sorted.begin() != "0x00000000" || *sorted.rbegin() != "0xffffffff") {
    return HttpResponse::error(
        400, fmt::format("Input bundles do not cover the whole hash range. first:{}, last:{}",
                         *sorted.begin(), *sorted.rbegin()));
  }
  boundaries->assign(sorted.begin(), sorted.end());
  *numBundles = static_cast<int>(sorted.size()) - 1;
  return std::nullopt;
}

// Whether `cluster` exists: the local one or one created through PUT clusters.
bool clusterExists(const AdminContext& ctx, const std::string& cluster) {
  return cluster == ctx.config->clusterName() || ctx.service.policies().cluster(cluster);
}

// PUT/POST tenant body -> TenantInfo; errors as Pulsar (400 bad JSON, 412 unknown cluster).
std::optional<broker::TenantInfo> tenantInfoFrom(const AdminContext& ctx, const HttpRequest& req,
                                                 HttpResponse* error) {
  broker::TenantInfo info;
  if (req.body.empty()) return info;
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    *error = HttpResponse::error(400, "Tenant info must be a JSON object");
    return std::nullopt;
  }
  const auto& o = v->as_object();
  if (!readStrings(o.if_contains("adminRoles"), &info.adminRoles) ||
      !readStrings(o.if_contains("allowedClusters"), &info.allowedClusters)) {
    *error = HttpResponse::error(400, "adminRoles and allowedClusters must be string arrays");
    return std::nullopt;
  }
  for (const auto& c : info.allowedClusters) {
    if (!clusterExists(ctx, c)) {
      *error = HttpResponse::error(412, "Clusters do not exist: " + c);
      return std::nullopt;
    }
  }
  return info;
}

json::object tenantJson(const broker::TenantInfo& t) {
  return {{"adminRoles", stringArray(t.adminRoles)},
          {"allowedClusters", stringArray(t.allowedClusters)}};
}

// Pulsar's ClusterDataImpl.checkPropertiesIfPresent: each URL given has its scheme; false with
// 400 in *error when not.
bool clusterUrlsValid(const json::object& out, HttpResponse* error) {
  static const std::tuple<const char*, const char*, const char*> kUrls[] = {
      {"serviceUrl", "http://", "Illegal service url, example: http://pulsar.example.com:8080"},
      {"serviceUrlTls", "https://",
       "Illegal service tls url, example: https://pulsar.example.com:8443"},
      {"brokerServiceUrl", "pulsar://",
       "Illegal broker service url, example: pulsar://pulsar.example.com:6650"},
      {"brokerServiceUrlTls", "pulsar+ssl://",
       "Illegal broker service tls url, example: pulsar+ssl://pulsar.example.com:6651"}};
  for (const auto& [field, scheme, message] : kUrls) {
    const json::value* u = out.if_contains(field);
    if (!u || u->as_string().empty()) continue;
    if (u->as_string().size() <= strlen(scheme) || u->as_string().find(scheme) != 0) {
      *error = HttpResponse::error(400, message);
      return false;
    }
  }
  return true;
}

// Pulsar's ClusterData from a PUT/POST body as its ClusterDataImpl keeps it (Jackson: unknown
// fields ignored, booleans from "true"/1, strings from numbers; the three TLS booleans default to
// false, null fields left out) and its URL checks. nullopt with 400 in *error.
std::optional<json::object> clusterDataFromBody(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  if (v->is_null() || (req.body.empty())) {
    *error = HttpResponse::error(400, "cluster data is required");
    return std::nullopt;
  }
  if (!v->is_object()) {
    *error = jacksonError("org.apache.pulsar.common.policies.data.ClusterDataImpl", *v);
    return std::nullopt;
  }
  static const char* kStrings[] = {"serviceUrl",
                                   "serviceUrlTls",
                                   "brokerServiceUrl",
                                   "brokerServiceUrlTls",
                                   "proxyServiceUrl",
                                   "authenticationPlugin",
                                   "authenticationParameters",
                                   "proxyProtocol",
                                   "brokerClientTlsTrustStoreType",
                                   "brokerClientTlsTrustStore",
                                   "brokerClientTlsTrustStorePassword",
                                   "brokerClientTlsKeyStoreType",
                                   "brokerClientTlsKeyStore",
                                   "brokerClientTlsKeyStorePassword",
                                   "brokerClientTrustCertsFilePath",
                                   "brokerClientKeyFilePath",
                                   "brokerClientCertificateFilePath",
                                   "listenerName",
                                   "brokerClientSslFactoryPlugin",
                                   "brokerClientSslFactoryPluginParams"};
  static const char* kBooleans[] = {"brokerClientTlsEnabled", "tlsAllowInsecureConnection",
                                    "brokerClientTlsEnabledWithKeyStore"};
  const json::object& body = v->as_object();
  json::object out;
  for (const char* f : kStrings) {
    const json::value* x = body.if_contains(f);
    if (!x || x->is_null()) continue;
    auto text = javaString(*x);
    if (!text) {
      *error = jacksonError("java.lang.String", *x, f);
      return std::nullopt;
    }
    out[f] = *text;
  }
  for (const char* f : kBooleans) {
    const json::value* x = body.if_contains(f);
    auto b = x && !x->is_null() ? javaBoolean(*x) : std::optional<bool>(false);
    if (!b) {
      *error = jacksonError("boolean", *x, f);
      return std::nullopt;
    }
    out[f] = *b;
  }
  for (const char* f : {"peerClusterNames"}) {  // a set of names, kept as given
    if (const json::value* x = body.if_contains(f); x && !x->is_null()) {
      std::vector<std::string> names;
      if (!readStrings(x, &names)) {
        *error = jacksonError("java.util.LinkedHashSet", *x, f);
        return std::nullopt;
      }
      out[f] = stringArray(names);
    }
  }
  if (!clusterUrlsValid(out, error)) return std::nullopt;
  return out;
}

// Standalone's clusters: the local one (built from this broker's URLs unless a stored
// ClusterData replaces it) and those created through PUT (broker::PolicyRegistry, persisted).
// Pulsar answers PUT and POST with 200 and no body.
void addClusterRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  r.addSync("GET", "/admin/v2/clusters", [ctx, &reg](const HttpRequest&, const PathParams&) {
    std::set<std::string> names{ctx->config->clusterName()};
    for (auto& c : reg.clusters()) names.insert(c);
    return jsonResponse(stringArray({names.begin(), names.end()}));
  });
  r.addSync("GET", "/admin/v2/clusters/{cluster}",
            [ctx, &reg](const HttpRequest& req, const PathParams& p) {
              const std::string& name = p.at("cluster");
              if (auto stored = reg.cluster(name)) {
                boost::system::error_code ec;
                json::value v = json::parse(*stored, ec);
                if (!ec) return jsonResponse(v);
                return HttpResponse::error(500, "stored ClusterData of " + name + " is not JSON");
              }
              if (name != ctx->config->clusterName()) {
                return HttpResponse::error(404, "Cluster does not exist");
              }
              std::string host = advertisedHost(*ctx, req);
              return jsonResponse(json::object{
                  {"serviceUrl", webServiceUrl(*ctx, req)},
                  {"brokerServiceUrl",
                   fmt::format("pulsar://{}:{}", host, ctx->service.brokerServicePort())},
                  {"brokerClientTlsEnabled", false},
                  {"tlsAllowInsecureConnection", false},
                  {"brokerClientTlsEnabledWithKeyStore", false}});
            });
  r.addSync("PUT", "/admin/v2/clusters/{cluster}",
            [ctx, &reg](const HttpRequest& req, const PathParams& p) {
              const std::string& name = p.at("cluster");
              if (!broker::isValidNamePart(name)) {
                return HttpResponse::error(412, "Cluster name is not valid");
              }
              HttpResponse err;
              auto data = clusterDataFromBody(req, &err);
              if (!data) return err;
              if (name == ctx->config->clusterName() || reg.cluster(name)) {
                return HttpResponse::error(409, "Cluster already exists");
              }
              Status s = reg.createCluster(name, json::serialize(*data));
              return s ? HttpResponse{200, "", "", {}} : errorResponse(s);
            });
  r.addSync("POST", "/admin/v2/clusters/{cluster}",
            [ctx, &reg](const HttpRequest& req, const PathParams& p) {
              const std::string& name = p.at("cluster");
              HttpResponse err;
              auto data = clusterDataFromBody(req, &err);
              if (!data) return err;
              Status s = reg.updateCluster(name, json::serialize(*data));
              if (s.code() == StatusCode::kNotFound && name == ctx->config->clusterName()) {
                s = reg.createCluster(name, json::serialize(*data));  // the local one, replaced
              }
              return s ? HttpResponse{200, "", "", {}} : errorResponse(s);
            });
  // The local cluster is refused (412): Pulsar deletes it, leaving its standalone serving
  // namespaces of a cluster that no longer exists.
  r.addSync("DELETE", "/admin/v2/clusters/{cluster}",
            [ctx, &reg](const HttpRequest& req, const PathParams& p) {
              if (ctx->service.topicOwnership()) {  // cluster mode: cluster_routes.cc's answers
                return HttpResponse::error(405, "Method DELETE not allowed on " + req.path);
              }
              const std::string& name = p.at("cluster");
              if (name == ctx->config->clusterName()) {
                return HttpResponse::error(412, "Cannot delete the cluster this broker serves");
              }
              Status s = reg.deleteCluster(name);
              return s ? noContent() : errorResponse(s);
            });
}

void addTenantRoutes(Router& r, const AdminContext* ctx) {
  r.addSync("GET", "/admin/v2/tenants", [ctx](const HttpRequest&, const PathParams&) {
    std::set<std::string> names;
    for (auto& t : ctx->service.policies().tenants()) names.insert(t);
    for (auto& ns : ctx->service.namespaces()) names.insert(ns.substr(0, ns.find('/')));
    return jsonResponse(stringArray({names.begin(), names.end()}));
  });
  r.addSync("GET", "/admin/v2/tenants/{tenant}", [ctx](const HttpRequest&, const PathParams& p) {
    const std::string& t = p.at("tenant");
    if (!tenantExists(*ctx, t)) return HttpResponse::error(404, "Tenant does not exist");
    if (auto info = ctx->service.policies().tenant(t)) return jsonResponse(tenantJson(*info));
    return jsonResponse(tenantJson({}));
  });
  r.addSync("PUT", "/admin/v2/tenants/{tenant}",
            [ctx](const HttpRequest& req, const PathParams& p) {
              const std::string& t = p.at("tenant");
              if (!broker::isValidNamePart(t)) {
                return HttpResponse::error(412, "Tenant name is not valid: " + t);
              }
              HttpResponse err;
              auto info = tenantInfoFrom(*ctx, req, &err);
              if (!info) return err;
              if (tenantExists(*ctx, t) && !ctx->service.policies().tenant(t)) {
                return HttpResponse::error(409, "Tenant already exists");
              }
              Status s = ctx->service.policies().createTenant(t, std::move(*info));
              return s ? noContent() : errorResponse(s);
            });
  r.addSync("POST", "/admin/v2/tenants/{tenant}",
            [ctx](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto info = tenantInfoFrom(*ctx, req, &err);
              if (!info) return err;
              Status s = ctx->service.policies().updateTenant(p.at("tenant"), std::move(*info));
              return s ? noContent() : errorResponse(s);
            });
  r.addSync("DELETE", "/admin/v2/tenants/{tenant}", [ctx](const HttpRequest&, const PathParams& p) {
    const std::string& t = p.at("tenant");
    // Cluster mode: ZooKeeper refuses to delete a tenant node that still has namespaces (this
    // broker's view may lag another broker's change).
    if (!ctx->service.topicOwnership() && !namespacesOf(*ctx, t).empty()) {
      return HttpResponse::error(409, "The tenant still has active namespaces");
    }
    Status s = ctx->service.policies().deleteTenant(t);
    return s ? noContent() : errorResponse(s);
  });
}

void deleteNamespaceTopics(const AdminContext* ctx, const std::string& ns, bool force,
                           const std::vector<std::string>& topics, const Respond& respond);

// Deletes every topic of ns (force), then the namespace itself. On shared storage (BookKeeper)
// the topics are the storage's too, not only those this broker has loaded (one ZooKeeper read,
// waited for on the pulsar-web thread).
void deleteNamespace(const AdminContext* ctx, const std::string& ns, bool force,
                     const Respond& respond) {
  std::vector<std::string> topics = listTopics(*ctx, ns, broker::TopicDomain::kAll);
  if (ctx->service.storageShared()) {
    auto promise = std::make_shared<std::promise<Result<std::vector<std::string>>>>();
    auto answer = promise->get_future();
    ctx->service.sharedStoredTopicsOf(
        ns, broker::TopicDomain::kAll, &ctx->service.ioLoops().next(),
        [promise](Result<std::vector<std::string>> r) { promise->set_value(std::move(r)); });
    auto listed = blockingGetFor(answer, std::chrono::seconds(35), "listing stored topics");
    if (!listed) {
      return respond(HttpResponse::error(500, "Listing the topics of " + ns + " timed out"));
    }
    auto& stored = *listed;
    if (!stored.isOk()) {
      return respond(HttpResponse::error(
          500, "Failed to list the topics of " + ns + ": " + stored.status().message()));
    }
    std::set<std::string> all(topics.begin(), topics.end());
    all.insert(stored->begin(), stored->end());
    topics.assign(all.begin(), all.end());
  }
  deleteNamespaceTopics(ctx, ns, force, topics, respond);
}

void deleteNamespaceTopics(const AdminContext* ctx, const std::string& ns, bool force,
                           const std::vector<std::string>& topics, const Respond& respond) {
  if ((!topics.empty() ||
       !ctx->service.partitionedTopicsOf(ns, broker::TopicDomain::kAll).empty()) &&
      !force) {
    respond(HttpResponse::error(409, "Cannot delete non empty namespace"));
    return;
  }
  auto gather =
      Gather<Status>::create(topics.size(), [ctx, ns, respond](const std::vector<Status>& r) {
        for (const Status& s : r) {
          if (!s.isOk() && s.code() != StatusCode::kNotFound) {
            respond(errorResponse(s));
            return;
          }
        }
        runMayBlock(*ctx, [ctx, ns, respond] {
          Status s = ctx->service.removeNamespace(ns);
          respond(s ? noContent() : errorResponse(s));
        });
      });
  for (size_t i = 0; i < topics.size(); ++i) {
    auto name = broker::TopicName::parse(topics[i]);
    if (!name.isOk()) {
      gather->set(i, Status::ok());
      continue;
    }
    ctx->service.deleteTopic(*name, true, [gather, i](const Status& s) { gather->set(i, s); });
  }
}

// Pulsar's validatePolicies: each replication cluster must be one the tenant may use (403).
std::optional<HttpResponse> clusterNotAllowed(const AdminContext& ctx, const std::string& t,
                                              const NamespacePolicies& initial) {
  if (!initial.replicationClusters) return std::nullopt;
  auto info = ctx.service.policies().tenant(t);
  for (const auto& c : *initial.replicationClusters) {
    bool allowed = info && !info->allowedClusters.empty()
                       ? std::find(info->allowedClusters.begin(), info->allowedClusters.end(), c) !=
                             info->allowedClusters.end()
                       : c == ctx.config->clusterName();
    if (!allowed) {
      return HttpResponse::error(403,
                                 fmt::format("Cluster [{}] is not in the list of allowed clusters "
                                             "list for tenant [{}]",
                                             c, t));
    }
  }
  return std::nullopt;
}

// PUT /admin/v2/namespaces/{tenant}/{namespace}: Pulsar's createNamespace, with the policies
// of the body (initialPolicies) checked as its validatePolicies.
HttpResponse createNamespace(const AdminContext& ctx, const HttpRequest& req, const PathParams& p) {
  const std::string& t = p.at("tenant");
  const std::string& n = p.at("namespace");
  if (!broker::isValidNamePart(t) || !broker::isValidNamePart(n)) {
    return HttpResponse::error(412, "Namespace name is not valid: " + t + "/" + n);
  }
  if (!tenantExists(ctx, t)) return HttpResponse::error(404, "Tenant does not exist");
  NamespacePolicies initial;
  json::value body;  // null: no policies, as Pulsar
  if (!req.body.empty()) {
    HttpResponse err;
    auto parsed = parseJsonBody(req, &err);
    if (!parsed) return err;
    body = std::move(*parsed);
    if (!body.is_null()) {
      std::string bad = initialPolicies(body, &initial);
      if (!bad.empty()) return HttpResponse::error(400, bad);
    }
  }
  if (auto refused = clusterNotAllowed(ctx, t, initial)) return *refused;
  // The rest of Pulsar's validatePolicies, in its order; nothing is stored on a
  // refusal.
  if (initial.messageTtlSeconds && *initial.messageTtlSeconds < 0) {
    return HttpResponse::error(412, "Invalid value for message TTL");
  }
  int numBundles = 0;  // pulsar-admin namespaces create --bundles N
  std::vector<std::string> boundaries;
  if (auto bad = createBundles(body, &numBundles, &boundaries)) return *bad;
  if (initial.retention) {
    std::string bad = retentionPolicyError(initial.retention->retentionTimeInMinutes,
                                           initial.retention->retentionSizeInMB);
    if (!bad.empty()) return HttpResponse::error(400, bad);
  }
  if (numBundles > 0 && !ctx.service.topicOwnership()) {
    // Standalone serves every namespace itself; the bundles asked for are kept as
    // Pulsar shows them (the given boundaries, else evenly cut as its
    // NamespaceBundleFactory).
    json::array a;
    if (boundaries.empty()) {
      auto b = broker::cluster::defaultBoundaries(numBundles);
      if (!b.isOk()) return HttpResponse::error(412, b.status().message());
      for (uint64_t v : *b) a.emplace_back(broker::cluster::formatBoundary(v));
    } else {
      for (const auto& v : boundaries) a.emplace_back(v);
    }
    initial.keptFields["bundles"] =
        json::serialize(json::object{{"boundaries", std::move(a)}, {"numBundles", numBundles}});
  }
  Status s = ctx.service.addNamespace(t + "/" + n, initial, numBundles);
  return s ? noContent() : errorResponse(s);
}

void addNamespaceLifecycleRoutes(Router& r, const AdminContext* ctx) {
  r.addSync("GET", "/admin/v2/namespaces/{tenant}", [ctx](const HttpRequest&, const PathParams& p) {
    const std::string& t = p.at("tenant");
    if (!tenantExists(*ctx, t)) return HttpResponse::error(404, "Tenant does not exist");
    return jsonResponse(stringArray(namespacesOf(*ctx, t)));
  });
  r.add("GET", "/admin/v2/namespaces/{tenant}/{namespace}",
        [ctx](const HttpRequest&, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto ns = namespaceFromParams(*ctx, p, &err);
          if (!ns) return respond(err);
          json::object o = policiesJson(*ctx, ctx->service.policies().namespacePolicies(*ns));
          broker::TopicOwnership* ownership = ctx->service.topicOwnership();
          if (ownership == nullptr) return respond(jsonResponse(o));
          // Cluster mode: the bundles as cut now (a split's LocalPolicies), as Pulsar's
          // getNamespacePoliciesAsync replaces Policies.bundles with the bundle factory's.
          ownership->boundariesOf(
              *ns, &ctx->service.ioLoops().next(),
              [respond, o = std::move(o)](Result<std::vector<uint64_t>> b) mutable {
                if (!b.isOk()) return respond(errorResponse(b.status()));
                json::array a;
                for (uint64_t v : *b) a.emplace_back(broker::cluster::formatBoundary(v));
                o["bundles"] = json::object{{"boundaries", std::move(a)},
                                            {"numBundles", static_cast<int64_t>(b->size()) - 1}};
                respond(jsonResponse(o));
              });
        });
  r.addSync(
      "PUT", "/admin/v2/namespaces/{tenant}/{namespace}",
      [ctx](const HttpRequest& req, const PathParams& p) { return createNamespace(*ctx, req, p); });
  r.add("DELETE", "/admin/v2/namespaces/{tenant}/{namespace}",
        [ctx](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto ns = namespaceFromParams(*ctx, p, &err);
          if (!ns) return respond(err);
          deleteNamespace(ctx, *ns, queryFlag(req, "force"), respond);
        });
  r.addSync("GET", "/admin/v2/namespaces/{tenant}/{namespace}/topics",
            [ctx](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto ns = namespaceFromParams(*ctx, p, &err);
              if (!ns) return err;
              // Pulsar's ?mode=PERSISTENT (default) | NON_PERSISTENT | ALL; another value is
              // not a Mode, which JAX-RS answers 404. ALL: the persistent topics, then the
              // non-persistent ones (Pulsar's order), each sorted.
              std::string mode = queryParam(req, "mode").value_or("PERSISTENT");
              std::vector<std::string> topics;
              if (mode == "PERSISTENT" || mode == "ALL") {
                topics = listTopics(*ctx, *ns, broker::TopicDomain::kPersistent);
              } else if (mode != "NON_PERSISTENT") {
                return HttpResponse::error(404, "Unknown mode: " + mode);
              }
              if (mode != "PERSISTENT") {
                auto np = listTopics(*ctx, *ns, broker::TopicDomain::kNonPersistent);
                topics.insert(topics.end(), np.begin(), np.end());
              }
              return jsonResponse(stringArray(topics));
            });
}

// A policy route: validates the namespace, then runs fn.
using PolicyFn =
    std::function<HttpResponse(const HttpRequest&, const PathParams&, const std::string& ns)>;
void addPolicy(Router& r, const AdminContext* ctx, const char* method, const std::string& suffix,
               PolicyFn fn) {
  r.addSync(method, "/admin/v2/namespaces/{tenant}/{namespace}/" + suffix,
            [ctx, fn = std::move(fn)](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto ns = namespaceFromParams(*ctx, p, &err);
              if (!ns) return err;
              return fn(req, p, *ns);
            });
}

void addRetentionRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "retention",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              auto p = reg.namespacePolicies(ns);
              return p.retention ? jsonResponse(retentionJson(*p.retention)) : noContent();
            });
  addPolicy(r, ctx, "POST", "retention",
            [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              auto parsed = retentionFrom(*v);
              if (!parsed) return jacksonError("RetentionPolicies", *v);
              broker::RetentionPolicy rp = *parsed;
              std::string bad =
                  retentionPolicyError(rp.retentionTimeInMinutes, rp.retentionSizeInMB);
              if (!bad.empty()) return HttpResponse::error(400, bad);
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& p) { p.retention = rp; });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "retention",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [](NamespacePolicies& p) { p.retention.reset(); });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
}

void addMessageTtlRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "messageTTL",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              auto p = reg.namespacePolicies(ns);
              return p.messageTtlSeconds ? jsonResponse(*p.messageTtlSeconds) : noContent();
            });
  addPolicy(r, ctx, "POST", "messageTTL",
            [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              // An Integer: null clears it, "30" and 30.5 are 30, a non-number is a 400.
              std::optional<int32_t> ttl;
              if (!v->is_null()) {
                auto n = javaInteger(*v, true);
                if (!n) return jacksonError("int", *v);
                if (*n < 0) return HttpResponse::error(412, "Invalid value for message TTL");
                ttl = static_cast<int32_t>(*n);
              }
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& p) { p.messageTtlSeconds = ttl; });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "messageTTL",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [](NamespacePolicies& p) { p.messageTtlSeconds.reset(); });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
}

void addDelayedDeliveryRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  // Pulsar's DelayedDeliveryPolicies; GET answers 200 with an empty body while unset, as Pulsar.
  addPolicy(r, ctx, "GET", "delayedDelivery",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              auto d = reg.namespacePolicies(ns).delayedDelivery;
              if (!d) return HttpResponse::json("");
              return jsonResponse(
                  json::object{{"tickTime", d->tickTime},
                               {"active", d->active},
                               {"maxDeliveryDelayInMillis", d->maxDeliveryDelayInMillis}});
            });
  addPolicy(r, ctx, "POST", "delayedDelivery",
            [&reg, ctx](const HttpRequest& req, const PathParams&, const std::string& ns) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              const json::object* o = v->if_object();
              if (!o) return HttpResponse::error(400, "The body must be a JSON object");
              broker::DelayedDeliveryPolicies d;
              // Fields left out take Java's defaults, as Pulsar's JSON binding does.
              d.active = false;
              d.tickTime = 0;
              if (const auto* f = o->if_contains("active"); f && !f->is_null()) {
                auto b = javaBoolean(*f);
                if (!b) return jacksonError("boolean", *f, "active");
                d.active = *b;
              }
              if (const auto* f = o->if_contains("tickTime"); f && !f->is_null()) {
                auto n = javaInteger(*f, false);
                if (!n) return jacksonError("long", *f, "tickTime");
                d.tickTime = *n;
              }
              if (const auto* f = o->if_contains("maxDeliveryDelayInMillis"); f && !f->is_null()) {
                auto n = javaInteger(*f, false);
                if (!n) return jacksonError("long", *f, "maxDeliveryDelayInMillis");
                d.maxDeliveryDelayInMillis = *n;
              }
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& p) { p.delayedDelivery = d; });
                  !stored)
                return errorResponse(stored);
              ctx->service.onNamespacePoliciesChanged(ns);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "delayedDelivery",
            [&reg, ctx](const HttpRequest&, const PathParams&, const std::string& ns) {
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [](NamespacePolicies& p) { p.delayedDelivery.reset(); });
                  !stored)
                return errorResponse(stored);
              ctx->service.onNamespacePoliciesChanged(ns);
              return noContent();
            });
}

void addDeduplicationRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "deduplication",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              auto d = reg.deduplicationEnabled(ns);
              return d ? jsonResponse(*d) : noContent();
            });
  addPolicy(r, ctx, "POST", "deduplication",
            [&reg, ctx](const HttpRequest& req, const PathParams&, const std::string& ns) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              auto b = javaBoolean(*v);  // "true", 1: Jackson's coercions
              if (!b) return jacksonError("boolean", *v);
              bool on = *b;
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& p) { p.deduplicationEnabled = on; });
                  !stored)
                return errorResponse(stored);
              ctx->service.onNamespacePoliciesChanged(ns);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "deduplication",
            [&reg, ctx](const HttpRequest&, const PathParams&, const std::string& ns) {
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [](NamespacePolicies& p) { p.deduplicationEnabled.reset(); });
                  !stored)
                return errorResponse(stored);
              ctx->service.onNamespacePoliciesChanged(ns);
              return noContent();
            });
}

void addBacklogQuotaRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "backlogQuotaMap",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              json::object o;
              for (const auto& [type, q] : reg.namespacePolicies(ns).backlogQuotas) {
                o[type] = backlogQuotaJson(q);
              }
              return jsonResponse(o);
            });
  auto quotaType = [](const HttpRequest& req) {
    return queryParam(req, "backlogQuotaType").value_or("destination_storage");
  };
  // A backlogQuotaType that is not a BacklogQuotaType is a 404, as JAX-RS answers a query
  // parameter it cannot convert (Pulsar).
  addPolicy(
      r, ctx, "POST", "backlogQuota",
      [&reg, ctx, quotaType](const HttpRequest& req, const PathParams&, const std::string& ns) {
        std::string type = quotaType(req);
        if (!kBacklogQuotaTypes.count(type)) return HttpResponse::error(404, "Not Found");
        HttpResponse err;
        auto v = parseJsonBody(req, &err);
        if (!v) return err;
        broker::BacklogQuota q;
        q.limitSize = 0;  // Java's defaults for the fields left out, as Pulsar's JSON binding
        q.limitTime = 0;
        const json::value* policy = v->is_object() ? v->as_object().if_contains("policy") : nullptr;
        if (v->is_object() && (!policy || policy->is_null())) {
          return HttpResponse::error(
              400, "Set namespace[" + ns +
                       "] backlog quota failed because the data validation failed. the "
                       "attribute policy cannot be null");
        }
        if (std::string e = backlogQuotaFrom(*v, &q); !e.empty()) {
          return HttpResponse::error(400, e);
        }
        if (Status stored = reg.updateNamespacePolicies(
                ns, [&](NamespacePolicies& p) { p.backlogQuotas[type] = q; });
            !stored)
          return errorResponse(stored);
        ctx->service.onNamespacePoliciesChanged(ns);
        return noContent();
      });
  addPolicy(
      r, ctx, "DELETE", "backlogQuota",
      [&reg, ctx, quotaType](const HttpRequest& req, const PathParams&, const std::string& ns) {
        std::string type = quotaType(req);
        if (!kBacklogQuotaTypes.count(type)) return HttpResponse::error(404, "Not Found");
        if (Status stored = reg.updateNamespacePolicies(
                ns, [&](NamespacePolicies& p) { p.backlogQuotas.erase(type); });
            !stored)
          return errorResponse(stored);
        ctx->service.onNamespacePoliciesChanged(ns);
        return noContent();
      });
}

void addInactiveTopicPolicyRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  // Pulsar's InactiveTopicPolicies; GET answers 200 with an empty body while unset.
  addPolicy(r, ctx, "GET", "inactiveTopicPolicies",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              auto p = reg.namespacePolicies(ns).inactiveTopicPolicies;
              if (!p) return HttpResponse{200, "", "application/json", {}};
              return jsonResponse(inactiveTopicPoliciesJson(*p));
            });
  addPolicy(r, ctx, "POST", "inactiveTopicPolicies",
            [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              const json::object* o = v->if_object();
              if (!o) return HttpResponse::error(400, "Inactive topic policies must be an object");
              broker::InactiveTopicPolicies p;
              const json::value* mode = o->if_contains("inactiveTopicDeleteMode");
              const json::value* max = o->if_contains("maxInactiveDurationSeconds");
              const json::value* del = o->if_contains("deleteWhileInactive");
              std::optional<int64_t> maxValue =
                  max && !max->is_null() ? javaInteger(*max, true) : 0;
              std::optional<bool> delValue = del && !del->is_null() ? javaBoolean(*del) : false;
              if ((mode && !mode->is_string() && !mode->is_null()) || !maxValue || !delValue) {
                return HttpResponse::error(400, "Bad inactive topic policies fields");
              }
              if (mode && mode->is_string()) p.inactiveTopicDeleteMode = mode->as_string();
              if (p.inactiveTopicDeleteMode != "delete_when_no_subscriptions" &&
                  p.inactiveTopicDeleteMode != "delete_when_subscriptions_caught_up") {
                return HttpResponse::error(400, "Invalid inactiveTopicDeleteMode");
              }
              if (max && !max->is_null()) {
                p.maxInactiveDurationSeconds = static_cast<int32_t>(*maxValue);
              }
              if (del && !del->is_null()) p.deleteWhileInactive = *delValue;
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& np) { np.inactiveTopicPolicies = p; });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "inactiveTopicPolicies",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [](NamespacePolicies& np) { np.inactiveTopicPolicies.reset(); });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
}

// GET/POST/DELETE /namespaces/{t}/{ns}/<limit> for each of kNamespaceLimits: an integer >= 0
// (a non-number 400, below 0 412 "<name> must be 0 or more", as Pulsar); GET of an unset limit
// is 204.
void addLimitRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  for (const auto& l : broker::kNamespaceLimits) {
    std::string name = l.name;
    addPolicy(r, ctx, "GET", name,
              [&reg, name](const HttpRequest&, const PathParams&, const std::string& ns) {
                auto p = reg.namespacePolicies(ns);
                auto it = p.limits.find(name);
                return it != p.limits.end() ? jsonResponse(it->second) : noContent();
              });
    addPolicy(r, ctx, "POST", name,
              [&reg, ctx, name](const HttpRequest& req, const PathParams&, const std::string& ns) {
                HttpResponse err;
                auto v = parseJsonBody(req, &err);
                if (!v) return err;
                // Pulsar's JSON mapping: a non-number is a 400, a fraction is truncated, "5"
                // is 5.
                auto n = javaInteger(*v, true);
                if (!n) return jacksonError("int", *v);
                auto value = static_cast<int32_t>(*n);
                if (value < 0) return HttpResponse::error(412, name + " must be 0 or more");
                if (Status stored = reg.updateNamespacePolicies(
                        ns, [&](NamespacePolicies& p) { p.limits[name] = value; });
                    !stored)
                  return errorResponse(stored);
                ctx->service.onNamespacePoliciesChanged(ns);
                return noContent();
              });
    addPolicy(r, ctx, "DELETE", name,
              [&reg, ctx, name](const HttpRequest&, const PathParams&, const std::string& ns) {
                if (Status stored = reg.updateNamespacePolicies(
                        ns, [&](NamespacePolicies& p) { p.limits.erase(name); });
                    !stored)
                  return errorResponse(stored);
                ctx->service.onNamespacePoliciesChanged(ns);
                return noContent();
              });
  }
}

// Pulsar's subscription permissions (grant-subscription-permission / revoke-subscription-permission
// / permission-on-subscription): auth_policies.subscription_auth_roles.
void addSubscriptionPermissionRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(
      r, ctx, "GET", "permissions/subscription",
      [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
        return jsonResponse(subscriptionRolesJson(reg.namespacePolicies(ns).subscriptionAuthRoles));
      });
  // The body's roles replace the subscription's list (Pulsar's put).
  addPolicy(r, ctx, "POST", "permissions/subscription/{subscription}",
            [&reg](const HttpRequest& req, const PathParams& p, const std::string& ns) {
              if (req.body.empty()) return HttpResponse::error(400, "Roles should not be null");
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return err;
              if (v->is_null()) return HttpResponse::error(400, "Roles should not be null");
              std::vector<std::string> roles;
              if (!v->is_array() || !readStrings(&*v, &roles)) {
                return jacksonError("java.util.Set<java.lang.String>", *v);
              }
              const std::string sub = p.at("subscription");
              if (Status stored = reg.updateNamespacePolicies(
                      ns,
                      [&](NamespacePolicies& pol) {
                        pol.subscriptionAuthRoles[sub] = {roles.begin(), roles.end()};
                      });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "permissions/{subscription}/{role}",
            [&reg](const HttpRequest&, const PathParams& p, const std::string& ns) {
              const std::string sub = p.at("subscription");
              const std::string role = p.at("role");
              bool found = false;
              if (Status stored =
                      reg.updateNamespacePolicies(ns,
                                                  [&](NamespacePolicies& pol) {
                                                    auto it = pol.subscriptionAuthRoles.find(sub);
                                                    if (it == pol.subscriptionAuthRoles.end())
                                                      return;
                                                    found = true;
                                                    it->second.erase(role);
                                                    // The last role gone, the subscription goes (as
                                                    // Pulsar's revoke).
                                                    if (it->second.empty())
                                                      pol.subscriptionAuthRoles.erase(it);
                                                  });
                  !stored)
                return errorResponse(stored);
              // Pulsar's IllegalArgumentException, answered 500.
              if (!found) return HttpResponse::error(500, "couldn't find subscription");
              return noContent();
            });
}

// namespaces get/set-subscription-auth-mode: Policies.subscription_auth_mode, None or Prefix
// (acted on by AuthorizationService::subscriptionPrefixError), kept as its JSON text.
void addSubscriptionAuthModeRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "subscriptionAuthMode",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              const NamespacePolicies p = reg.namespacePolicies(ns);
              auto it = p.keptFields.find("subscription_auth_mode");
              const bool prefix = it != p.keptFields.end() && it->second == "\"Prefix\"";
              return jsonResponse(json::value(prefix ? "Prefix" : "None"));
            });
  addPolicy(
      r, ctx, "POST", "subscriptionAuthMode",
      [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
        // No body or null: None, as Pulsar's setter. Jackson's enum reading: the name or
        // its ordinal.
        std::string mode = "None";
        if (!req.body.empty()) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return err;
          if (v->is_string() && (v->as_string() == "None" || v->as_string() == "Prefix")) {
            mode = std::string(v->as_string());
          } else if (v->is_int64() && (v->as_int64() == 0 || v->as_int64() == 1)) {
            mode = v->as_int64() == 1 ? "Prefix" : "None";
          } else if (!v->is_null()) {
            return jacksonError("org.apache.pulsar.common.policies.data.SubscriptionAuthMode", *v);
          }
        }
        if (Status stored = reg.updateNamespacePolicies(ns,
                                                        [&](NamespacePolicies& p) {
                                                          p.keptFields["subscription_auth_mode"] =
                                                              "\"" + mode + "\"";
                                                        });
            !stored)
          return errorResponse(stored);
        return noContent();
      });
}

void addPermissionRoutes(Router& r, const AdminContext* ctx) {
  addSubscriptionPermissionRoutes(r, ctx);
  addSubscriptionAuthModeRoutes(r, ctx);
  auto& reg = ctx->service.policies();
  addPolicy(r, ctx, "GET", "permissions",
            [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
              return jsonResponse(permissionsJson(reg.namespacePolicies(ns).permissions));
            });
  addPolicy(r, ctx, "POST", "permissions/{role}",
            [&reg](const HttpRequest& req, const PathParams& p, const std::string& ns) {
              HttpResponse err;
              auto actions = parseAuthActions(req, &err);
              if (!actions) return err;
              std::string role = p.at("role");
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& pol) { pol.permissions[role] = *actions; });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
  addPolicy(r, ctx, "DELETE", "permissions/{role}",
            [&reg](const HttpRequest&, const PathParams& p, const std::string& ns) {
              std::string role = p.at("role");
              if (Status stored = reg.updateNamespacePolicies(
                      ns, [&](NamespacePolicies& pol) { pol.permissions.erase(role); });
                  !stored)
                return errorResponse(stored);
              return noContent();
            });
}

}  // namespace

void addNamespaceRoutes(Router& router, const AdminContext& ctx) {
  addClusterRoutes(router, &ctx);
  addTenantRoutes(router, &ctx);
  addNamespaceLifecycleRoutes(router, &ctx);
  addRetentionRoutes(router, &ctx);
  addMessageTtlRoutes(router, &ctx);
  addDelayedDeliveryRoutes(router, &ctx);
  addDeduplicationRoutes(router, &ctx);
  addBacklogQuotaRoutes(router, &ctx);
  addInactiveTopicPolicyRoutes(router, &ctx);
  addPermissionRoutes(router, &ctx);
  addLimitRoutes(router, &ctx);
}

}  // namespace magnetar::admin
