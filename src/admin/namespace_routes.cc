#include "admin/namespace_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <set>

#include "broker/cluster/bundles.h"
#include "broker/topic_ownership.h"

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
  if ((size && !size->is_int64()) || (time && !time->is_int64()) ||
      (policy && !policy->is_string())) {
    return "Bad backlog quota fields";
  }
  if (size) q->limitSize = size->as_int64();
  if (time) q->limitTime = static_cast<int32_t>(time->as_int64());
  if (policy) q->policy = std::string(policy->as_string());
  if (!kBacklogPolicies.count(q->policy)) return "Unknown backlog quota policy: " + q->policy;
  return "";
}

json::object retentionJson(const broker::RetentionPolicy& r) {
  return {{"retentionTimeInMinutes", r.retentionTimeInMinutes},
          {"retentionSizeInMB", r.retentionSizeInMB}};
}

// Pulsar's Policies object (the fields Magnetar knows; the rest at Pulsar's defaults).
json::object policiesJson(const AdminContext& ctx, const NamespacePolicies& p) {
  json::object o;
  json::object destinationAuth;
  for (const auto& [topic, roles] : p.topicPermissions) {
    destinationAuth[topic] = permissionsJson(roles);
  }
  o["auth_policies"] = json::object{{"namespace_auth", permissionsJson(p.permissions)},
                                    {"destination_auth", std::move(destinationAuth)},
                                    {"subscription_auth_roles", json::object{}}};
  o["replication_clusters"] = json::array{json::string(ctx.config->clusterName())};
  o["bundles"] = json::object{{"boundaries", json::array{"0x00000000", "0x40000000", "0x80000000",
                                                         "0xc0000000", "0xffffffff"}},
                              {"numBundles", 4}};
  json::object quotas;
  for (const auto& [type, q] : p.backlogQuotas) quotas[type] = backlogQuotaJson(q);
  o["backlog_quota_map"] = std::move(quotas);
  o["clusterDispatchRate"] = json::object{};
  o["topicDispatchRate"] = json::object{};
  o["subscriptionDispatchRate"] = json::object{};
  o["replicatorDispatchRate"] = json::object{};
  o["clusterSubscribeRate"] = json::object{};
  o["publishMaxMessageRate"] = json::object{};
  o["latency_stats_sample_rate"] = json::object{};
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
  o["encryption_required"] = false;
  o["subscription_auth_mode"] = "None";
  o["offload_threshold"] = -1;
  o["schema_compatibility_strategy"] = p.schemaCompatibilityStrategy.value_or("UNDEFINED");
  o["is_allow_auto_update_schema"] = p.isAllowAutoUpdateSchema.value_or(true);
  o["schema_validation_enforced"] = p.schemaValidationEnforced.value_or(false);
  o["properties"] = json::object{};
  return o;
}

// The policies given in a create-namespace body (Pulsar's Policies JSON): the max_* limits,
// deduplicationEnabled, message_ttl_in_seconds, retention_policies, backlog_quota_map and
// subscription_expiration_time_minutes; the other fields are accepted and left at their
// defaults. "" or the error text (a 400, as Pulsar's JSON mapping errors).
std::string initialPolicies(const json::value& body, NamespacePolicies* out) {
  const json::object* o = body.if_object();
  if (!o) return "The body must be a Policies JSON object";
  auto intField = [&](const char* field, std::optional<int32_t>* v) -> bool {
    const json::value* f = o->if_contains(field);
    if (!f || f->is_null()) return true;
    if (!f->is_int64() || f->as_int64() < 0 || f->as_int64() > INT32_MAX) return false;
    *v = static_cast<int32_t>(f->as_int64());
    return true;
  };
  for (const auto& l : broker::kNamespaceLimits) {
    std::optional<int32_t> v;
    if (!intField(l.policiesField, &v)) return std::string("Invalid ") + l.policiesField;
    if (v) out->limits[l.name] = *v;
  }
  if (!intField("message_ttl_in_seconds", &out->messageTtlSeconds)) {
    return "Invalid message_ttl_in_seconds";
  }
  if (const json::value* d = o->if_contains("deduplicationEnabled"); d && !d->is_null()) {
    if (!d->is_bool()) return "Invalid deduplicationEnabled";
    out->deduplicationEnabled = d->as_bool();
  }
  if (const json::value* r = o->if_contains("retention_policies"); r && !r->is_null()) {
    const json::object* ro = r->if_object();
    const json::value* t = ro ? ro->if_contains("retentionTimeInMinutes") : nullptr;
    const json::value* sz = ro ? ro->if_contains("retentionSizeInMB") : nullptr;
    if (!t || !sz || !t->is_int64() || !sz->is_int64()) return "Invalid retention_policies";
    out->retention = broker::RetentionPolicy{static_cast<int32_t>(t->as_int64()), sz->as_int64()};
  }
  if (const json::value* m = o->if_contains("backlog_quota_map"); m && !m->is_null()) {
    if (!m->is_object()) return "Invalid backlog_quota_map";
    for (const auto& [type, q] : m->as_object()) {
      std::string t(type);
      // Pulsar answers an unknown type with a 500 (a null map key); refused here.
      if (!kBacklogQuotaTypes.count(t)) return "Invalid backlog_quota_map: unknown type " + t;
      broker::BacklogQuota quota;
      // Pulsar's BacklogQuotaImpl defaults when a field is left out of the Policies JSON.
      quota.limitTime = 0;
      if (std::string e = backlogQuotaFrom(q, &quota); !e.empty()) {
        return "Invalid backlog_quota_map: " + e;
      }
      out->backlogQuotas[t] = quota;
    }
  }
  std::optional<int32_t> expiration;
  if (!intField("subscription_expiration_time_minutes", &expiration)) {
    return "Invalid subscription_expiration_time_minutes";
  }
  out->subscriptionExpirationTimeMinutes = expiration;
  return "";
}

// The bundle count a create-namespace body asks for (Pulsar's BundlesData: numBundles, or the
// count of its boundaries); 0 when it names none. "" or the error text (412, as Pulsar).
std::string bundleCount(const json::value& body, int* n) {
  const json::object* o = body.if_object();
  const json::value* b = o ? o->if_contains("bundles") : nullptr;
  if (!b || b->is_null()) return "";
  if (!b->is_object()) return "Invalid bundles";
  if (const json::value* bounds = b->as_object().if_contains("boundaries");
      bounds && bounds->is_array() && !bounds->as_array().empty()) {
    *n = static_cast<int>(bounds->as_array().size()) - 1;
    return *n >= 1 ? "" : "Invalid bundles: fewer than 2 boundaries";
  }
  if (const json::value* num = b->as_object().if_contains("numBundles"); num && !num->is_null()) {
    if (!num->is_int64() || num->as_int64() < 1 || num->as_int64() > 1 << 20) {
      return "Invalid number of bundles";
    }
    *n = static_cast<int>(num->as_int64());
  }
  return "";
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
    if (c != ctx.config->clusterName()) {
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

void addClusterRoutes(Router& r, const AdminContext* ctx) {
  r.addSync("GET", "/admin/v2/clusters", [ctx](const HttpRequest&, const PathParams&) {
    return jsonResponse(json::array{json::string(ctx->config->clusterName())});
  });
  r.addSync(
      "GET", "/admin/v2/clusters/{cluster}", [ctx](const HttpRequest& req, const PathParams& p) {
        if (p.at("cluster") != ctx->config->clusterName()) {
          return HttpResponse::error(404, "Cluster does not exist");
        }
        std::string host = advertisedHost(*ctx, req);
        return jsonResponse(
            json::object{{"serviceUrl", webServiceUrl(*ctx, req)},
                         {"brokerServiceUrl",
                          fmt::format("pulsar://{}:{}", host, ctx->service.brokerServicePort())}});
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
    if (!ctx->service.sharedConfig() && !namespacesOf(*ctx, t).empty()) {
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
    if (answer.wait_for(std::chrono::seconds(35)) != std::future_status::ready) {
      return respond(HttpResponse::error(500, "Listing the topics of " + ns + " timed out"));
    }
    auto stored = answer.get();
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
        Status s = ctx->service.removeNamespace(ns);
        respond(s ? noContent() : errorResponse(s));
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
  r.addSync("PUT", "/admin/v2/namespaces/{tenant}/{namespace}",
            [ctx](const HttpRequest& req, const PathParams& p) {
              const std::string& t = p.at("tenant");
              const std::string& n = p.at("namespace");
              if (!broker::isValidNamePart(t) || !broker::isValidNamePart(n)) {
                return HttpResponse::error(412, "Namespace name is not valid: " + t + "/" + n);
              }
              if (!tenantExists(*ctx, t)) return HttpResponse::error(404, "Tenant does not exist");
              NamespacePolicies initial;
              int numBundles = 0;  // pulsar-admin namespaces create --bundles N
              if (!req.body.empty()) {
                HttpResponse err;
                auto body = parseJsonBody(req, &err);
                if (!body) return err;
                std::string bad = initialPolicies(*body, &initial);
                if (!bad.empty()) return HttpResponse::error(400, bad);
                bad = bundleCount(*body, &numBundles);
                if (!bad.empty()) return HttpResponse::error(412, bad);
              }
              Status s = ctx->service.addNamespace(t + "/" + n, initial, numBundles);
              return s ? noContent() : errorResponse(s);
            });
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

void addRetentionTtlDedupRoutes(Router& r, const AdminContext* ctx) {
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
              const json::object* o = v->if_object();
              const json::value* t = o ? o->if_contains("retentionTimeInMinutes") : nullptr;
              const json::value* s = o ? o->if_contains("retentionSizeInMB") : nullptr;
              if (!t || !s || !t->is_int64() || !s->is_int64()) {
                return HttpResponse::error(
                    400, "retentionTimeInMinutes and retentionSizeInMB are required");
              }
              broker::RetentionPolicy rp{static_cast<int32_t>(t->as_int64()), s->as_int64()};
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
              if (!v->is_int64() || v->as_int64() < 0 || v->as_int64() > INT32_MAX) {
                return HttpResponse::error(412, "Invalid value for message TTL");
              }
              int32_t ttl = static_cast<int32_t>(v->as_int64());
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
                if (!f->is_bool()) return HttpResponse::error(400, "Invalid value for active");
                d.active = f->as_bool();
              }
              if (const auto* f = o->if_contains("tickTime"); f && !f->is_null()) {
                if (!f->is_number()) return HttpResponse::error(400, "Invalid value for tickTime");
                d.tickTime = f->to_number<int64_t>();
              }
              if (const auto* f = o->if_contains("maxDeliveryDelayInMillis"); f && !f->is_null()) {
                if (!f->is_number()) {
                  return HttpResponse::error(400, "Invalid value for maxDeliveryDelayInMillis");
                }
                d.maxDeliveryDelayInMillis = f->to_number<int64_t>();
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
              if (!v->is_bool()) return HttpResponse::error(400, "The body must be true or false");
              bool on = v->as_bool();
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
              if ((mode && !mode->is_string() && !mode->is_null()) || (max && !max->is_int64()) ||
                  (del && !del->is_bool())) {
                return HttpResponse::error(400, "Bad inactive topic policies fields");
              }
              if (mode && mode->is_string()) p.inactiveTopicDeleteMode = mode->as_string();
              if (p.inactiveTopicDeleteMode != "delete_when_no_subscriptions" &&
                  p.inactiveTopicDeleteMode != "delete_when_subscriptions_caught_up") {
                return HttpResponse::error(400, "Invalid inactiveTopicDeleteMode");
              }
              if (max) p.maxInactiveDurationSeconds = static_cast<int32_t>(max->as_int64());
              if (del) p.deleteWhileInactive = del->as_bool();
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
                // Pulsar's JSON mapping: a non-number is a 400, a fraction is truncated.
                if (!v->is_number() || v->to_number<double>() > INT32_MAX) {
                  return HttpResponse::error(400, "Cannot deserialize value of type `int`");
                }
                auto value = static_cast<int32_t>(v->to_number<double>());
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

void addPermissionRoutes(Router& r, const AdminContext* ctx) {
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
  addRetentionTtlDedupRoutes(router, &ctx);
  addBacklogQuotaRoutes(router, &ctx);
  addPermissionRoutes(router, &ctx);
  addLimitRoutes(router, &ctx);
}

}  // namespace magnetar::admin
