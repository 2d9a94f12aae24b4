#include "admin/topic_policy_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "admin/rate_limit_routes.h"
#include "admin/resource_group_routes.h"
#include "admin/topic_targets.h"
#include "broker/replication/replication_service.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::TopicName;

const std::string kTopicPath = "/admin/v2/persistent/{tenant}/{namespace}/{topic}";

// A broker setting as JSON (number or text), or `fallback` when Magnetar does not declare it.
json::value setting(const AdminContext& ctx, const char* key, json::value fallback) {
  auto v = ctx.config->getString(key);
  if (!v.isOk()) return fallback;
  boost::system::error_code ec;
  json::value parsed = json::parse(*v, ec);
  if (!ec && (parsed.is_number() || parsed.is_bool())) return parsed;
  return json::value(*v);
}

// "" when v is a Java int >= 0 as Jackson reads one ("5", 5.5 -> 5), v made that integer;
// else `message`.
std::string nonNegativeInt(json::value& v, const std::string& message) {
  auto n = javaInteger(v, true);
  if (!n || *n < 0) return message;
  v = *n;
  return "";
}

using Validate = std::function<std::string(json::value&)>;  // may normalize the value
using Fallback = std::function<json::value(const AdminContext&, const std::string& ns)>;

struct Spec {
  std::string name;
  Validate validate;
  Fallback fallback;
  int invalidStatus = 412;  // the answer to a value `validate` refuses
  // Set from this query parameter rather than a body (Pulsar's topic messageTTL and
  // subscriptionExpirationTime); a POST without it removes the policy. "" when set by body.
  std::string queryParam = "";
  std::string invalidQuery = "";  // the 412 text when the query parameter is not a number
};

Validate intPolicy(const std::string& field) {
  return [field](json::value& v) { return nonNegativeInt(v, field + " must be 0 or more"); };
}

Fallback brokerSetting(const char* key, const json::value& dflt) {
  return
      [key, dflt](const AdminContext& ctx, const std::string&) { return setting(ctx, key, dflt); };
}

// The namespace's limit of that name when set, else the broker setting of the same name.
Fallback namespaceLimit(const char* key, const json::value& dflt) {
  return [key, dflt](const AdminContext& ctx, const std::string& ns) -> json::value {
    auto limits = ctx.service.policies().namespacePolicies(ns).limits;
    auto it = limits.find(key);
    if (it != limits.end()) return it->second;
    return setting(ctx, key, dflt);
  };
}

// Fields of Pulsar's policy classes that are Java ints (the others are longs).
const std::set<std::string> kIntFields = {"retentionTimeInMinutes",
                                          "maxInactiveDurationSeconds",
                                          "bookkeeperEnsemble",
                                          "bookkeeperWriteQuorum",
                                          "bookkeeperAckQuorum",
                                          "ratePeriodInSecond",
                                          "dispatchThrottlingRateInMsg",
                                          "publishThrottlingRateInMsg",
                                          "limitTime",
                                          "subscribeThrottlingRatePerConsumer"};

Spec retentionSpec() {
  return {
      "retention",
      [](json::value& v) {
        std::string e = objectFields(v, {{"retentionTimeInMinutes", 0}, {"retentionSizeInMB", 0}});
        if (!e.empty()) return e;
        return retentionPolicyError(v.at("retentionTimeInMinutes").to_number<int64_t>(),
                                    v.at("retentionSizeInMB").to_number<int64_t>());
      },
      [](const AdminContext& ctx, const std::string& ns) -> json::value {
        if (auto r = ctx.service.policies().namespacePolicies(ns).retention) {
          return json::object{{"retentionTimeInMinutes", r->retentionTimeInMinutes},
                              {"retentionSizeInMB", r->retentionSizeInMB}};
        }
        return json::object{
            {"retentionTimeInMinutes", setting(ctx, "defaultRetentionTimeInMinutes", 0)},
            {"retentionSizeInMB", setting(ctx, "defaultRetentionSizeInMB", 0)}};
      },
      400};
}

Spec inactiveTopicPoliciesSpec() {
  return {"inactiveTopicPolicies",
          [](json::value& v) {
            std::string e =
                objectFields(v, {{"inactiveTopicDeleteMode", "delete_when_no_subscriptions"},
                                 {"maxInactiveDurationSeconds", 0},
                                 {"deleteWhileInactive", false}});
            if (!e.empty()) return e;
            static const std::set<std::string> kModes = {"delete_when_no_subscriptions",
                                                         "delete_when_subscriptions_caught_up"};
            const json::value& m = v.at("inactiveTopicDeleteMode");
            if (!m.is_string() || !kModes.count(std::string(m.as_string()))) {
              return std::string("Invalid inactiveTopicDeleteMode");
            }
            return std::string();
          },
          [](const AdminContext& ctx, const std::string&) -> json::value {
            return json::object{
                {"inactiveTopicDeleteMode",
                 setting(ctx, "brokerDeleteInactiveTopicsMode", "delete_when_no_subscriptions")},
                {"maxInactiveDurationSeconds",
                 setting(ctx, "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds",
                         setting(ctx, "brokerDeleteInactiveTopicsFrequencySeconds", 60))},
                {"deleteWhileInactive", setting(ctx, "brokerDeleteInactiveTopicsEnabled", true)}};
          }};
}

Spec persistenceSpec() {
  return {"persistence",
          [](json::value& v) {
            std::string e = objectFields(v, {{"bookkeeperEnsemble", 0},
                                             {"bookkeeperWriteQuorum", 0},
                                             {"bookkeeperAckQuorum", 0},
                                             {"managedLedgerMaxMarkDeleteRate", 0.0}});
            if (!e.empty()) return e;
            int64_t en = v.at("bookkeeperEnsemble").to_number<int64_t>();
            int64_t w = v.at("bookkeeperWriteQuorum").to_number<int64_t>();
            int64_t a = v.at("bookkeeperAckQuorum").to_number<int64_t>();
            if (en <= 0 || w <= 0 || a <= 0 || en < w || w < a) {
              return fmt::format("Bookkeeper Ensemble ({}) >= WriteQuorum ({}) >= AckQuoru ({})",
                                 en, w, a);
            }
            return std::string();
          },
          [](const AdminContext& ctx, const std::string&) -> json::value {
            return json::object{
                {"bookkeeperEnsemble", setting(ctx, "managedLedgerDefaultEnsembleSize", 2)},
                {"bookkeeperWriteQuorum", setting(ctx, "managedLedgerDefaultWriteQuorum", 2)},
                {"bookkeeperAckQuorum", setting(ctx, "managedLedgerDefaultAckQuorum", 2)},
                {"managedLedgerMaxMarkDeleteRate",
                 setting(ctx, "managedLedgerDefaultMarkDeleteRateLimit", 1.0)}};
          }};
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> kSpecs = {
      retentionSpec(),
      {"messageTTL",
       [](json::value& v) { return nonNegativeInt(v, "Invalid value for message TTL"); },
       [](const AdminContext& ctx, const std::string& ns) -> json::value {
         if (auto t = ctx.service.policies().namespacePolicies(ns).messageTtlSeconds) return *t;
         return setting(ctx, "ttlDurationDefaultInSeconds", 0);
       },
       412, "messageTTL", "Invalid value for message TTL"},
      // Minutes; resolved topic > namespace > subscriptionExpirationTimeMinutes.
      {"subscriptionExpirationTime",
       [](json::value& v) {
         return nonNegativeInt(v, "Invalid value for subscription expiration time");
       },
       [](const AdminContext& ctx, const std::string& ns) -> json::value {
         auto p = ctx.service.policies().namespacePolicies(ns);
         if (p.subscriptionExpirationTimeMinutes) return *p.subscriptionExpirationTimeMinutes;
         return setting(ctx, "subscriptionExpirationTimeMinutes", 0);
       },
       412, "subscriptionExpirationTime", "Invalid value for subscription expiration time"},
      {"maxProducers", intPolicy("maxProducers"), namespaceLimit("maxProducersPerTopic", 0)},
      {"maxConsumers", intPolicy("maxConsumers"), namespaceLimit("maxConsumersPerTopic", 0)},
      {"maxConsumersPerSubscription", intPolicy("maxConsumersPerSubscription"),
       namespaceLimit("maxConsumersPerSubscription", 0)},
      {"maxUnackedMessagesOnConsumer", intPolicy("maxUnackedNum"),
       namespaceLimit("maxUnackedMessagesPerConsumer", 50000)},
      {"maxUnackedMessagesOnSubscription", intPolicy("maxUnackedNum"),
       namespaceLimit("maxUnackedMessagesPerSubscription", 200000)},
      {"maxSubscriptionsPerTopic", intPolicy("maxSubscriptionsPerTopic"),
       namespaceLimit("maxSubscriptionsPerTopic", 0)},
      {"deduplicationEnabled",
       [](json::value& v) -> std::string {
         auto b = javaBoolean(v);  // "true", 1: Jackson's coercions
         if (!b) return "The body must be true or false";
         v = *b;
         return "";
       },
       [](const AdminContext& ctx, const std::string& ns) -> json::value {
         if (auto d = ctx.service.policies().deduplicationEnabled(ns)) return *d;
         return setting(ctx, "brokerDeduplicationEnabled", false);
       }},
      {"delayedDelivery",
       [](json::value& v) {
         return objectFields(
             v, {{"tickTime", 1000}, {"active", true}, {"maxDeliveryDelayInMillis", 0}});
       },
       [](const AdminContext& ctx, const std::string&) -> json::value {
         return json::object{
             {"tickTime", setting(ctx, "delayedDeliveryTickTimeMillis", 1000)},
             {"active", setting(ctx, "delayedDeliveryEnabled", true)},
             {"maxDeliveryDelayInMillis", setting(ctx, "delayedDeliveryMaxDelayInMillis", 0)}};
       }},
      {"compactionThreshold",
       [](json::value& v) {
         auto n = javaInteger(v, false);
         if (!n || *n < 0) return "compactionThreshold must be 0 or more";
         v = *n;
         return "";
       },
       brokerSetting("brokerServiceCompactionThresholdInBytes", 0)},
      inactiveTopicPoliciesSpec(),
      persistenceSpec(),
  };
  return kSpecs;
}

// The rate policies (rate_limit_routes.h): bodies of Pulsar's classes, applied value topic >
// namespace > broker defaults.
std::vector<Spec> rateSpecs() {
  std::vector<Spec> out;
  for (const RateKind& k : rateKinds()) {
    out.push_back(
        {k.path, [&k](json::value& v) { return objectFields(v, k.fields); },
         [&k](const AdminContext& ctx, const std::string& ns) { return appliedRate(ctx, ns, k); },
         400});
  }
  return out;
}

// Topic policies are set on a topic (or a partitioned topic), never on one partition; the topic
// must exist. Returns the registry key, or answers the error itself.
std::optional<std::string> policyTarget(const AdminContext* ctx, const TopicName& name,
                                        const Respond& respond) {
  if (name.partitionIndex() >= 0) {
    respond(HttpResponse::error(412, "Not allowed to set/get topic policy for a partition"));
    return std::nullopt;
  }
  if (!ctx->service.namespaceExists(name.namespaceName())) {
    respond(HttpResponse::error(404, "Namespace does not exist"));
    return std::nullopt;
  }
  if (!ctx->service.topicExists(name)) {
    respond(HttpResponse::error(404, "Topic not found"));
    return std::nullopt;
  }
  return name.toString();
}

std::optional<json::value> stored(const AdminContext* ctx, const std::string& topic,
                                  const std::string& policy) {
  auto all = ctx->service.policies().topicPolicies(topic);
  auto it = all.find(policy);
  if (it == all.end()) return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(it->second, ec);
  if (ec) return std::nullopt;
  return v;
}

// Sets the policy and, once the metadata store has it, applies it to the loaded topics and
// answers (204, or the store's error).
void setPolicy(const AdminContext* ctx, const TopicName& name, const std::string& policy,
               std::optional<json::value> v, const Respond& respond) {
  ctx->service.policies().setTopicPolicy(name.toString(), policy,
                                         v ? std::optional(json::serialize(*v)) : std::nullopt,
                                         [ctx, name, respond](const Status& s) {
                                           ctx->service.onTopicPoliciesChanged(name);
                                           respond(s ? noContent() : errorResponse(s));
                                         });
}

void addSpecRoutes(Router& r, const AdminContext* ctx, const Spec& spec) {
  std::string path = kTopicPath + "/" + spec.name;
  addTopicRoute(r, "GET", path,
                [ctx, spec](const HttpRequest& req, const PathParams&, const TopicName& name,
                            const Respond& respond) {
                  auto key = policyTarget(ctx, name, respond);
                  if (!key) return;
                  if (auto v = stored(ctx, *key, spec.name)) return respond(jsonResponse(*v));
                  if (queryFlag(req, "applied")) {
                    return respond(jsonResponse(spec.fallback(*ctx, name.namespaceName())));
                  }
                  respond(noContent());
                });
  addTopicRoute(r, "POST", path,
                [ctx, spec](const HttpRequest& req, const PathParams&, const TopicName& name,
                            const Respond& respond) {
                  json::value v;
                  if (!spec.queryParam.empty()) {
                    auto q = queryParam(req, spec.queryParam);
                    if (!q) {
                      if (!policyTarget(ctx, name, respond)) return;
                      return setPolicy(ctx, name, spec.name, std::nullopt, respond);
                    }
                    boost::system::error_code ec;
                    v = json::parse(*q, ec);
                    if (ec) return respond(HttpResponse::error(412, spec.invalidQuery));
                  } else {
                    HttpResponse err;
                    auto body = parseJsonBody(req, &err);
                    if (!body) return respond(err);
                    v = std::move(*body);
                  }
                  std::string bad = spec.validate(v);
                  if (!bad.empty()) return respond(HttpResponse::error(spec.invalidStatus, bad));
                  if (!policyTarget(ctx, name, respond)) return;
                  setPolicy(ctx, name, spec.name, std::move(v), respond);
                });
  addTopicRoute(r, "DELETE", path,
                [ctx, spec](const HttpRequest&, const PathParams&, const TopicName& name,
                            const Respond& respond) {
                  if (!policyTarget(ctx, name, respond)) return;
                  setPolicy(ctx, name, spec.name, std::nullopt, respond);
                });
}

const std::set<std::string> kQuotaTypes = {"destination_storage", "message_age"};
const std::set<std::string> kQuotaPolicies = {"producer_request_hold", "producer_exception",
                                              "consumer_backlog_eviction"};

void addBacklogQuotaRoutes(Router& r, const AdminContext* ctx) {
  addTopicRoute(
      r, "GET", kTopicPath + "/backlogQuotaMap",
      [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
            const Respond& respond) {
        auto key = policyTarget(ctx, name, respond);
        if (!key) return;
        json::object out;
        for (const auto& type : kQuotaTypes) {
          if (auto v = stored(ctx, *key, "backlogQuota/" + type)) out[type] = *v;
        }
        if (out.empty() && queryFlag(req, "applied")) {
          for (const auto& [type, q] :
               ctx->service.policies().namespacePolicies(name.namespaceName()).backlogQuotas) {
            out[type] = json::object{
                {"limitSize", q.limitSize}, {"limitTime", q.limitTime}, {"policy", q.policy}};
          }
          if (out.empty()) {
            out["destination_storage"] = json::object{
                {"limitSize", setting(*ctx, "backlogQuotaDefaultLimitBytes", -1)},
                {"limitTime", setting(*ctx, "backlogQuotaDefaultLimitSecond", -1)},
                {"policy",
                 setting(*ctx, "backlogQuotaDefaultRetentionPolicy", "producer_request_hold")}};
          }
        }
        respond(jsonResponse(out));
      });
  addTopicRoute(
      r, "POST", kTopicPath + "/backlogQuota",
      [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
            const Respond& respond) {
        std::string type = queryParam(req, "backlogQuotaType").value_or("destination_storage");
        // Not a BacklogQuotaType: 404, as JAX-RS answers a query parameter it cannot convert.
        if (!kQuotaTypes.count(type)) return respond(HttpResponse::error(404, "Not Found"));
        HttpResponse err;
        auto v = parseJsonBody(req, &err);
        if (!v) return respond(err);
        if (v->is_object() && !v->as_object().contains("limitSize") &&
            v->as_object().contains("limit")) {
          v->as_object()["limitSize"] = v->as_object()["limit"];  // Pulsar's older field name
        }
        std::string bad = objectFields(
            *v, {{"limitSize", -1}, {"limitTime", -1}, {"policy", "producer_request_hold"}});
        if (bad.empty() && (!v->at("policy").is_string() ||
                            !kQuotaPolicies.count(std::string(v->at("policy").as_string())))) {
          bad = "Unknown backlog quota policy";
        }
        if (!bad.empty()) return respond(HttpResponse::error(412, bad));
        if (!policyTarget(ctx, name, respond)) return;
        setPolicy(ctx, name, "backlogQuota/" + type, std::move(*v), respond);
      });
  addTopicRoute(r, "DELETE", kTopicPath + "/backlogQuota",
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  std::string type =
                      queryParam(req, "backlogQuotaType").value_or("destination_storage");
                  // Not a BacklogQuotaType: 404, as JAX-RS answers a query parameter it cannot
                  // convert.
                  if (!kQuotaTypes.count(type))
                    return respond(HttpResponse::error(404, "Not Found"));
                  if (!policyTarget(ctx, name, respond)) return;
                  setPolicy(ctx, name, "backlogQuota/" + type, std::nullopt, respond);
                });
}

// --- namespace routes ---------------------------------------------------------------------------

using NsFn =
    std::function<HttpResponse(const HttpRequest&, const PathParams&, const std::string& ns)>;
void addNs(Router& r, const AdminContext* ctx, const char* method, const std::string& suffix,
           NsFn fn) {
  r.addSync(method, "/admin/v2/namespaces/{tenant}/{namespace}/" + suffix,
            [ctx, fn = std::move(fn)](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto ns = namespaceFromParams(*ctx, p, &err);
              if (!ns) return err;
              return fn(req, p, *ns);
            });
}

json::object autoTopicCreationJson(const broker::AutoTopicCreationOverride& a) {
  json::object o{{"allowAutoTopicCreation", a.allowAutoTopicCreation}, {"topicType", a.topicType}};
  if (a.defaultNumPartitions) o["defaultNumPartitions"] = *a.defaultNumPartitions;
  return o;
}

// A replication cluster list body: the clusters without repeats, in the order given; 400 for
// what is not a JSON array of strings (or null: no cluster).
std::optional<std::vector<std::string>> clusterListOf(const json::value& body, HttpResponse* err) {
  std::vector<std::string> out;
  if (body.is_array()) {
    for (const auto& c : body.as_array()) {
      if (!c.is_string()) {
        *err = HttpResponse::error(400, "Cannot deserialize the cluster list");
        return std::nullopt;
      }
      std::string name(c.as_string());
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  } else if (!body.is_null()) {
    *err = HttpResponse::error(400, "Cannot deserialize the cluster list");
    return std::nullopt;
  }
  return out;
}

// The clusters of a replication list checked as Pulsar's internalSetNamespaceReplicationClusters:
// 412 for no cluster or (`refuseGlobal`, the namespace's list) "global", 403 for a cluster that
// does not exist or that the tenant may not use. True when they pass.
bool clustersAllowed(const AdminContext& ctx, const std::string& tenant,
                     const std::vector<std::string>& clusters, HttpResponse* err,
                     bool refuseGlobal = true) {
  if (clusters.empty()) {
    *err = HttpResponse::error(412, "ClusterIds should not be null or empty");
    return false;
  }
  if (refuseGlobal && std::find(clusters.begin(), clusters.end(), "global") != clusters.end()) {
    *err = HttpResponse::error(412, "Cannot specify global in the list of replication clusters");
    return false;
  }
  auto& reg = ctx.service.policies();
  auto info = reg.tenant(tenant);
  for (const auto& c : clusters) {
    if (c != ctx.config->clusterName() && !reg.cluster(c)) {
      *err = HttpResponse::error(403, "Invalid cluster id: " + c);
      return false;
    }
    bool allowed = info && std::find(info->allowedClusters.begin(), info->allowedClusters.end(),
                                     c) != info->allowedClusters.end();
    if (!allowed) {
      *err = HttpResponse::error(
          403,
          fmt::format("Cluster [{}] is not in the list of allowed clusters list for tenant [{}]", c,
                      tenant));
      return false;
    }
  }
  return true;
}

// The body of POST namespaces/.../replication: clusterListOf, then clustersAllowed.
std::optional<std::vector<std::string>> replicationClustersOf(const AdminContext& ctx,
                                                              const std::string& tenant,
                                                              const json::value& body,
                                                              HttpResponse* err) {
  auto out = clusterListOf(body, err);
  if (!out || !clustersAllowed(ctx, tenant, *out, err)) return std::nullopt;
  return out;
}

// A namespace's replication clusters as GET namespaces/.../replication answers them: the
// Policies' list, or the local cluster when it has none.
json::array namespaceReplication(const AdminContext& ctx, const std::string& ns) {
  auto clusters = ctx.service.policies().namespacePolicies(ns).replicationClusters;
  json::array a;
  if (clusters && !clusters->empty()) {
    for (const auto& c : *clusters) a.emplace_back(c);
  } else {
    a.emplace_back(ctx.config->clusterName());
  }
  return a;
}

// The topic of a topic-level replication call (policyTarget), with Pulsar 4.2.4's 404 text for a
// topic that does not exist.
bool replicationTarget(const AdminContext* ctx, const TopicName& name, const Respond& respond) {
  if (name.partitionIndex() < 0 && ctx->service.namespaceExists(name.namespaceName()) &&
      !ctx->service.topicExists(name)) {
    respond(HttpResponse::error(404, "Topic " + name.toString() + " not found"));
    return false;
  }
  return policyTarget(ctx, name, respond).has_value();
}

// Topic-level replication clusters (Pulsar's topic policy replicationClusters; the replicators
// follow it over the namespace's list): GET (200 with no body when unset, the namespace's with
// ?applied=true), POST (the list must name the local cluster: Pulsar 4.2.4's check comes before
// the namespace ones), DELETE.
void addTopicReplicationRoutes(Router& r, const AdminContext* ctx) {
  const std::string path = kTopicPath + "/replication";
  addTopicRoute(r, "GET", path,
                [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                      const Respond& respond) {
                  if (!replicationTarget(ctx, name, respond)) return;
                  if (auto v = stored(ctx, name.toString(), broker::kTopicReplicationKey)) {
                    return respond(jsonResponse(*v));
                  }
                  if (queryFlag(req, "applied")) {
                    return respond(jsonResponse(namespaceReplication(*ctx, name.namespaceName())));
                  }
                  respond(HttpResponse{200, "", "", {}});
                });
  addTopicRoute(
      r, "POST", path,
      [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
            const Respond& respond) {
        HttpResponse err;
        auto body = parseJsonBody(req, &err);
        if (!body) return respond(err);
        auto clusters = clusterListOf(*body, &err);
        if (!clusters) return respond(err);
        if (!replicationTarget(ctx, name, respond)) return;
        if (!clusters->empty() && std::find(clusters->begin(), clusters->end(),
                                            ctx->config->clusterName()) == clusters->end()) {
          return respond(HttpResponse::error(
              412,
              "Can not remove local cluster from the local topic-level replication "
              "clusters policy"));
        }
        // No "global" check here (Pulsar 4.2.4): it is an unknown cluster (403).
        if (!clustersAllowed(*ctx, name.tenant(), *clusters, &err, false)) return respond(err);
        json::array a;
        for (const auto& c : *clusters) a.emplace_back(c);
        setPolicy(ctx, name, broker::kTopicReplicationKey, json::value(std::move(a)), respond);
      });
  addTopicRoute(
      r, "DELETE", path,
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        if (!replicationTarget(ctx, name, respond)) return;
        setPolicy(ctx, name, broker::kTopicReplicationKey, std::nullopt, respond);
      });
}

void addNamespaceUnloadReplicationRoutes(Router& r, const AdminContext* ctx) {
  r.add("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/unload",
        [ctx](const HttpRequest&, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto ns = namespaceFromParams(*ctx, p, &err);
          if (!ns) return respond(err);
          std::vector<std::shared_ptr<broker::PersistentTopic>> topics;
          for (auto& t : ctx->service.topics()) {
            if (t->name().namespaceName() == *ns) topics.push_back(t);
          }
          auto gather = Gather<int>::create(
              topics.size(), [respond](const std::vector<int>&) { respond(noContent()); });
          for (size_t i = 0; i < topics.size(); ++i) {
            // Each topic as the topic unload: closed, forgotten, reopened on its next use.
            ctx->service.unloadTopic(topics[i], /*release=*/false,
                                     [gather, i](const Status&) { gather->set(i, 0); });
          }
        });
  addNs(r, ctx, "GET", "replication",
        [ctx](const HttpRequest&, const PathParams&, const std::string& ns) {
          return jsonResponse(namespaceReplication(*ctx, ns));
        });
  addNs(r, ctx, "POST", "replication",
        [ctx](const HttpRequest& req, const PathParams& p, const std::string& ns) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return err;
          auto clusters = replicationClustersOf(*ctx, p.at("tenant"), *v, &err);
          if (!clusters) return err;
          Status stored = ctx->service.policies().updateNamespacePolicies(
              ns, [&](broker::NamespacePolicies& pol) { pol.replicationClusters = *clusters; });
          // Pulsar 4.2.4 answers 200 with no body (an asynchronous resume of nothing).
          return stored ? HttpResponse{200, "", "", {}} : errorResponse(stored);
        });
}

void addSubscriptionExpirationRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addNs(r, ctx, "GET", "subscriptionExpirationTime",
        [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
          auto v = reg.namespacePolicies(ns).subscriptionExpirationTimeMinutes;
          return v ? jsonResponse(*v) : noContent();
        });
  addNs(r, ctx, "POST", "subscriptionExpirationTime",
        [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return err;
          auto n = javaInteger(*v, true);  // "30", 30.5: Jackson's coercions
          if (!n || *n < 0) {
            return HttpResponse::error(412, "Invalid value for subscription expiration time");
          }
          int32_t minutes = static_cast<int32_t>(*n);
          if (Status stored = reg.updateNamespacePolicies(ns,
                                                          [&](broker::NamespacePolicies& p) {
                                                            p.subscriptionExpirationTimeMinutes =
                                                                minutes;
                                                          });
              !stored)
            return errorResponse(stored);
          return noContent();
        });
  addNs(
      r, ctx, "DELETE", "subscriptionExpirationTime",
      [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
        if (Status stored = reg.updateNamespacePolicies(
                ns,
                [](broker::NamespacePolicies& p) { p.subscriptionExpirationTimeMinutes.reset(); });
            !stored)
          return errorResponse(stored);
        return noContent();
      });
}

void addCompactionThresholdRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  // Pulsar's compaction_threshold (bytes; 0 turns automatic compaction off for the namespace).
  addNs(r, ctx, "GET", "compactionThreshold",
        [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
          auto v = reg.namespacePolicies(ns).compactionThreshold;
          return v ? jsonResponse(*v) : noContent();
        });
  addNs(r, ctx, "PUT", "compactionThreshold",
        [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return err;
          auto n = javaInteger(*v, false);  // "1000", 1e3: Jackson's coercions
          if (!n || *n < 0)
            return HttpResponse::error(412, "compactionThreshold must be 0 or more");
          int64_t bytes = *n;
          if (Status stored = reg.updateNamespacePolicies(
                  ns, [&](broker::NamespacePolicies& p) { p.compactionThreshold = bytes; });
              !stored)
            return errorResponse(stored);
          return noContent();
        });
  addNs(r, ctx, "DELETE", "compactionThreshold",
        [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
          if (Status stored = reg.updateNamespacePolicies(
                  ns, [](broker::NamespacePolicies& p) { p.compactionThreshold.reset(); });
              !stored)
            return errorResponse(stored);
          return noContent();
        });
}

void addAutoTopicCreationRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addNs(r, ctx, "GET", "autoTopicCreation",
        [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
          auto a = reg.namespacePolicies(ns).autoTopicCreation;
          return a ? jsonResponse(autoTopicCreationJson(*a)) : noContent();
        });
  addNs(r, ctx, "POST", "autoTopicCreation",
        [&reg](const HttpRequest& req, const PathParams&, const std::string& ns) {
          HttpResponse err;
          auto v = parseJsonBody(req, &err);
          if (!v) return err;
          broker::AutoTopicCreationOverride a;
          std::string bad = validateAutoTopicCreation(*v, &a);
          if (!bad.empty()) {
            return HttpResponse::error(
                412, "Invalid configuration for autoTopicCreationOverride. the detail is " + bad);
          }
          if (Status stored = reg.updateNamespacePolicies(
                  ns, [&](broker::NamespacePolicies& p) { p.autoTopicCreation = a; });
              !stored)
            return errorResponse(stored);
          return noContent();
        });
  addNs(r, ctx, "DELETE", "autoTopicCreation",
        [&reg](const HttpRequest&, const PathParams&, const std::string& ns) {
          if (Status stored = reg.updateNamespacePolicies(
                  ns, [](broker::NamespacePolicies& p) { p.autoTopicCreation.reset(); });
              !stored)
            return errorResponse(stored);
          return noContent();
        });
}

void addNamespaceRoutes(Router& r, const AdminContext* ctx) {
  addNamespaceUnloadReplicationRoutes(r, ctx);
  addSubscriptionExpirationRoutes(r, ctx);
  addCompactionThresholdRoutes(r, ctx);
  addAutoTopicCreationRoutes(r, ctx);
}

}  // namespace

std::string objectFields(json::value& v,
                         const std::vector<std::pair<std::string, json::value>>& fields) {
  if (!v.is_object()) return "The body must be a JSON object";
  json::object out;
  for (const auto& [name, dflt] : fields) {
    const json::value* f = v.as_object().if_contains(name);
    if (!f || f->is_null()) {
      out[name] = dflt;
      continue;
    }
    // Jackson's coercions: "100" for a number, "true" or 1 for a boolean, 2.5 truncated
    // for an integer.
    json::value value;
    if (dflt.is_bool()) {
      if (auto b = javaBoolean(*f)) value = *b;
    } else if (dflt.is_double()) {
      if (f->is_number()) {
        value = f->to_number<double>();
      } else if (f->is_string()) {
        std::string text(f->as_string());
        char* end = nullptr;
        double d = std::strtod(text.c_str(), &end);
        if (!text.empty() && end != nullptr && *end == '\0') value = d;
      }
    } else if (dflt.is_string() || dflt.is_null()) {
      if (f->is_string() || f->is_number()) value = *f;
    } else if (auto n = javaInteger(*f, kIntFields.count(name) > 0)) {
      value = *n;
    }
    if (value.is_null()) return "Invalid value for field " + name;
    out[name] = std::move(value);
  }
  v = std::move(out);
  return "";
}

std::string validateAutoTopicCreation(const json::value& body,
                                      broker::AutoTopicCreationOverride* out) {
  const json::object* o = body.if_object();
  if (!o) return "The body must be a JSON object";
  const json::value* allow = o->if_contains("allowAutoTopicCreation");
  const json::value* type = o->if_contains("topicType");
  const json::value* parts = o->if_contains("defaultNumPartitions");
  std::optional<bool> allowValue = allow ? javaBoolean(*allow) : std::nullopt;
  if (!allowValue) return "allowAutoTopicCreation must be true or false";
  out->allowAutoTopicCreation = *allowValue;
  bool hasType = type && !type->is_null();
  bool hasParts = parts && !parts->is_null();
  if (hasType && (!type->is_string() ||
                  (type->as_string() != "partitioned" && type->as_string() != "non-partitioned"))) {
    return "Unknown topic type " + (type->is_string() ? std::string(type->as_string()) : "");
  }
  if (!out->allowAutoTopicCreation) {
    if (hasType) out->topicType = std::string(type->as_string());
    return "";
  }
  if (!hasType) return "Missing topicType field";
  out->topicType = std::string(type->as_string());
  if (out->topicType == "partitioned") {
    if (!hasParts) return "Missing defaultNumPartitions for partitioned topic";
    auto n = javaInteger(*parts, true);
    if (!n || *n <= 0 || *n > 100000) {
      return "defaultNumPartitions cannot be less than 1 for partitioned topic";
    }
    out->defaultNumPartitions = static_cast<int32_t>(*n);
  } else if (hasParts) {
    return "Field defaultNumPartitions must be null for non-partitioned topic";
  }
  return "";
}

void addTopicPolicyRoutes(Router& router, const AdminContext& ctx) {
  for (const Spec& s : specs()) addSpecRoutes(router, &ctx, s);
  for (const Spec& s : rateSpecs()) addSpecRoutes(router, &ctx, s);
  addBacklogQuotaRoutes(router, &ctx);
  addTopicReplicationRoutes(router, &ctx);
}

void addNamespacePolicyRoutes(Router& router, const AdminContext& ctx) {
  addNamespaceRoutes(router, &ctx);
  addNamespaceRateRoutes(router, ctx);
  addResourceGroupRoutes(router, ctx);
}

}  // namespace magnetar::admin
