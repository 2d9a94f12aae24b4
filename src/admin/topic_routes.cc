#include "admin/topic_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "admin/broker_info_routes.h"
#include "admin/stats_json.h"
#include "admin/topic_route_util.h"
#include "admin/topic_targets.h"
#include "base/blocking_wait.h"
#include "base/logging.h"

namespace magnetar::admin {
namespace {

// Registers `method kTopicPath + suffix` with the topic name parsed (412 on a bad name).
void onTopic(Router& r, const char* method, const std::string& suffix, TopicHandler h) {
  addTopicRoute(r, method, kTopicPath + suffix, std::move(h));
}

// Registers `GET kTopicPath + suffix` running fn(topic, respond) on the executor of the existing
// topic (withTopic answers 404 or 500 itself when it cannot be loaded).
using LoadedTopicHandler = std::function<void(const TopicPtr&, const Respond&)>;
void onLoadedTopicGet(Router& r, const AdminContext* ctx, const std::string& suffix,
                      LoadedTopicHandler fn) {
  onTopic(r, "GET", suffix,
          [ctx, fn = std::move(fn)](const HttpRequest&, const PathParams&, const TopicName& name,
                                    const Respond& respond) {
            withTopic(*ctx, name, respond, [fn, respond](const TopicPtr& t) { fn(t, respond); });
          });
}

// The body of PUT/POST .../partitions: an int (Jackson-coerced: "3", 3.7), or with the content
// type application/vnd.partitioned-topic-metadata+json (Pulsar's admin clients) also the
// PartitionedTopicMetadata object {"partitions":N,"properties":{...}}. 400 when Jackson would
// refuse it, 406 for fewer than 1 partition (Pulsar's text).
struct PartitionsBody {
  int partitions = 0;
  std::map<std::string, std::string> properties;
};
std::optional<PartitionsBody> partitionsBody(const HttpRequest& req, HttpResponse* error,
                                             bool create) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  PartitionsBody out;
  const json::value* count = &*v;
  std::string_view type = req.contentType;
  type = type.substr(0, type.find(';'));
  bool metadataType = type.find("vnd.partitioned-topic-metadata+json") != std::string_view::npos;
  if (create && metadataType && v->is_object()) {
    const json::object& o = v->as_object();
    static const json::value kZero = 0;
    count = o.if_contains("partitions");
    if (count == nullptr || count->is_null()) count = &kZero;
    if (const json::value* props = o.if_contains("properties"); props && !props->is_null()) {
      auto m = javaStringMap(*props);
      if (!m) {
        *error = jacksonError("java.util.Map", *props, "properties");
        return std::nullopt;
      }
      out.properties = std::move(*m);
    }
  }
  auto n = javaInteger(*count, true);
  if (!n) {
    *error = jacksonError("int", *count);
    return std::nullopt;
  }
  if (*n > 100000 || (create && *n < 1)) {  // an update below the current count: 422 later
    *error = HttpResponse::error(406, "Number of partitions should be more than 0");
    return std::nullopt;
  }
  out.partitions = static_cast<int>(*n);
  return out;
}

// Registers `method .../{topic}/partitions` with its body read by partitionsBody (its error
// answered before h runs).
using PartitionsHandler = std::function<void(const HttpRequest&, const TopicName&,
                                             const PartitionsBody&, const Respond&)>;
void onPartitionsBody(Router& r, const char* method, bool create, PartitionsHandler h) {
  onTopic(r, method, "/partitions",
          [create, h = std::move(h)](const HttpRequest& req, const PathParams&,
                                     const TopicName& name, const Respond& respond) {
            HttpResponse err;
            auto body = partitionsBody(req, &err, create);
            if (!body) return respond(err);
            h(req, name, *body, respond);
          });
}

// Pulsar's reason for a missing namespace (or tenant) on the lookup routes.
constexpr const char* kNamespaceNotFound = "Namespace not found";

// Whether a topic exists for the lookup routes' "not found" answers: loaded here, stored, or
// partitioned metadata; on storage shared by the brokers the storage is asked. In cluster mode
// on storage of each broker's own, a topic loaded by another broker is not seen here, so it
// counts as existing (as before). cb runs once, on this thread or an I/O loop.
void checkTopicExists(const AdminContext* ctx, const TopicName& name,
                      const std::function<void(bool)>& cb) {
  if (ctx->service.topicExists(name)) return cb(true);
  if (name.isPersistent() && ctx->service.storageShared()) {
    ctx->service.checkStoredTopic(name, &ctx->service.ioLoops().next(),
                                  [cb](Result<bool> r) { cb(!r.isOk() || *r); });
    return;
  }
  cb(ctx->service.topicOwnership() != nullptr);
}

// Registers GET `pattern` ({tenant}/{namespace}) answering the JSON array of
// names(namespace, domain); 412/404 for a bad or missing namespace (namespaceFromParams).
using NamespaceLister =
    std::function<std::vector<std::string>(const std::string& ns, broker::TopicDomain domain)>;
void addNamespaceList(Router& r, const AdminContext* ctx, const char* pattern,
                      NamespaceLister names) {
  r.addSync("GET", pattern,
            [ctx, names = std::move(names)](const HttpRequest&, const PathParams& p) {
              HttpResponse err;
              auto ns = namespaceFromParams(*ctx, p, &err);
              if (!ns) return err;
              json::array a;
              for (auto& name : names(*ns, domainFromParams(p))) a.emplace_back(name);
              return jsonResponse(a);
            });
}

void addListRoutes(Router& r, const AdminContext* ctx) {
  addNamespaceList(r, ctx, "/admin/v2/persistent/{tenant}/{namespace}",
                   [ctx](const std::string& ns, broker::TopicDomain domain) {
                     return listTopics(*ctx, ns, domain);
                   });
  addNamespaceList(r, ctx, "/admin/v2/persistent/{tenant}/{namespace}/partitioned",
                   [ctx](const std::string& ns, broker::TopicDomain domain) {
                     std::vector<std::string> names;
                     for (auto& [name, n] : ctx->service.partitionedTopicsOf(ns, domain)) {
                       names.push_back(name);
                     }
                     return names;
                   });
}

// Drops the topic-level grants of a deleted topic and of its `partitions` partitions, as Pulsar's
// PersistentTopic.delete (deleteTopicAuthenticationWithRetry) does, so that a topic created again
// under the name starts without them. No store write when there is none.
Status removeTopicGrants(const AdminContext* ctx, const TopicName& name, int partitions) {
  std::vector<std::string> names{name.toString()};
  for (int i = 0; i < partitions; ++i) names.push_back(name.partition(i).toString());
  broker::NamespacePolicies now = ctx->service.policies().namespacePolicies(name.namespaceName());
  if (std::none_of(names.begin(), names.end(),
                   [&](const std::string& n) { return now.topicPermissions.count(n) > 0; })) {
    return Status::ok();
  }
  return ctx->service.policies().updateNamespacePolicies(name.namespaceName(),
                                                         [&](broker::NamespacePolicies& pol) {
                                                           for (const std::string& n : names)
                                                             pol.topicPermissions.erase(n);
                                                         });
}

// After a topic (and its `partitions` partitions) is deleted: its topic policies and grants go,
// as Pulsar's delete does. May block on the configuration store (run it through runMayBlock).
Status forgetDeletedTopic(const AdminContext* ctx, const TopicName& name, int partitions) {
  ctx->service.policies().removeTopicPolicies(name.toString());
  return removeTopicGrants(ctx, name, partitions);
}

// A delete's error: Pulsar answers a replicated topic's refusal (BrokerService::deleteTopic's
// kNotAllowed) with 422, the others as errorResponse.
HttpResponse deleteError(const Status& s) {
  if (s.code() == StatusCode::kNotAllowed &&
      s.message().rfind("Delete forbidden topic is replicated", 0) == 0) {
    return HttpResponse::error(422, s.message());
  }
  return errorResponse(s);
}

void deletePartitioned(const AdminContext* ctx, const HttpRequest& req, const TopicName& name,
                       bool force, const Respond& respond) {
  Result<int> n = ctx->service.partitionsOf(name, false);
  if (!n.isOk() || *n == 0) {
    respond(HttpResponse::error(404, "Partitioned topic does not exist"));
    return;
  }
  int count = *n;
  auto gather =
      Gather<Status>::create(count, [ctx, name, count, respond](const std::vector<Status>& all) {
        for (const Status& s : all) {
          if (!s.isOk() && s.code() != StatusCode::kNotFound) return respond(deleteError(s));
        }
        runMayBlock(*ctx, [ctx, name, count, respond] {
          // Answered once the schema is gone too, as Pulsar (a GET of it right after is 404).
          auto gone = std::make_shared<std::promise<void>>();
          auto goneFuture = gone->get_future();
          Status s = ctx->service.removePartitionedTopic(name, [gone] { gone->set_value(); });
          if (s && !blockingReady(goneFuture, std::chrono::seconds(30), "deleting a schema")) {
            MLOG_WARN("{}: the schema's delete did not finish in 30 s", name.toString());
          }
          if (s) s = forgetDeletedTopic(ctx, name, count);
          respond(s ? noContent() : errorResponse(s));
        });
      });
  for (int i = 0; i < *n; ++i) {
    if (ownedElsewhere(*ctx, name.partition(i))) {  // cluster mode: its owner deletes it
      callPartitionOwner(
          *ctx, req, name.partition(i),
          [gather, i](const Result<HttpClientResponse>& r) { gather->set(i, remoteStatus(r)); });
      continue;
    }
    ctx->service.deleteTopic(name.partition(i), force,
                             [gather, i](const Status& s) { gather->set(i, s); });
  }
}

// PUT and DELETE of a (non-partitioned) topic.
void addTopicCreateDeleteRoutes(Router& r, const AdminContext* ctx) {
  onTopic(r, "PUT", "",
          [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                const Respond& respond) {
            if (!ctx->service.namespaceExists(name.namespaceName())) {
              return respond(HttpResponse::error(404, "Namespace does not exist"));
            }
            if (ctx->service.topicExists(name)) {
              return respond(HttpResponse::error(409, "This topic already exists"));
            }
            // An optional body of topic properties (pulsar-admin topics create -m k=v): Pulsar's
            // Map<String, String>, so null or no body is none and numbers/booleans are kept as
            // their text; kept with the topic (GET .../properties).
            std::optional<std::string> properties;
            if (!req.body.empty()) {
              HttpResponse err;
              auto v = parseJsonBody(req, &err);
              if (!v) return respond(err);
              if (!v->is_null()) {
                auto m = javaStringMap(*v);
                if (!m) {
                  return respond(jacksonError(
                      "java.util.LinkedHashMap<java.lang.String,java.lang.String>", *v));
                }
                json::object props;
                for (const auto& [k, val] : *m) props[k] = val;
                if (!props.empty()) properties = json::serialize(props);
              }
            }
            ctx->service.getOrCreateTopic(
                name, true, [ctx, name, properties, respond](const Result<TopicPtr>& t) {
                  if (t.isOk() && properties) {
                    ctx->service.policies().setTopicPolicy(name.toString(),
                                                           broker::kTopicPropertiesKey, properties);
                  }
                  respond(t.isOk() ? noContent() : errorResponse(t.status()));
                });
          });
  onTopic(r, "DELETE", "",
          [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                const Respond& respond) {
            bool force = queryFlag(req, "force");
            Result<int> n = ctx->service.partitionsOf(name, false);
            if (n.isOk() && *n > 0) return deletePartitioned(ctx, req, name, force, respond);
            ctx->service.deleteTopic(name, force, [ctx, name, respond](const Status& s) {
              if (!s) return respond(deleteError(s));
              runMayBlock(*ctx, [ctx, name, respond] {
                Status s = forgetDeletedTopic(ctx, name, 0);
                respond(s ? noContent() : errorResponse(s));
              });
            });
          });
}

// Pulsar's internalCreatePartitionedTopicToReplicatedClustersInBackground
// (createTopicToRemoteClusterForReplication, on by default): a partitioned topic created here
// is created with the same partitions on every other cluster of its namespace's
// replication_clusters, through that cluster's admin API (its ClusterData's serviceUrl) with
// createLocalTopicOnly=true. Not waited for; failures (409 when it exists there) are logged.
// `update`: the partitions of an existing one updated there instead (POST with
// updateLocalTopicOnly=true, Pulsar's updatePartitionInOtherCluster).
void partitionsOnReplicatedClusters(const AdminContext& ctx, const TopicName& name, int partitions,
                                    bool update) {
  auto clusters =
      ctx.service.policies().namespacePolicies(name.namespaceName()).replicationClusters;
  if (!clusters) return;
  std::string local;  // percent-encoded but for RFC 3986's unreserved characters
  for (unsigned char ch : name.localName()) {
    if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      local += static_cast<char>(ch);
    } else {
      local += fmt::format("%{:02X}", ch);
    }
  }
  const std::string path =
      fmt::format("/admin/v2/{}/{}/{}/partitions?{}=true",
                  name.isPersistent() ? "persistent" : "non-persistent", name.namespaceName(),
                  local, update ? "updateLocalTopicOnly" : "createLocalTopicOnly");
  const char* what = update ? "updated" : "created";
  for (const auto& c : *clusters) {
    if (c == ctx.config->clusterName()) continue;
    auto data = ctx.service.policies().cluster(c);
    boost::system::error_code ec;
    json::value v = data ? json::parse(*data, ec) : json::value();
    const json::value* url =
        !ec && v.is_object() ? v.as_object().if_contains("serviceUrl") : nullptr;
    if (!url || !url->is_string() || url->as_string().empty()) {
      MLOG_WARN("{}: cluster {} has no serviceUrl: partitioned topic not {} there", name.toString(),
                c, what);
      continue;
    }
    HttpClientRequest call;
    call.method = update ? "POST" : "PUT";
    call.url = std::string(url->as_string()) + path;
    call.body = std::to_string(partitions);
    call.contentType = "application/json";
    httpCall(
        ctx.service.ioLoops().next(), std::move(call),
        [topic = name.toString(), c, what](const Result<HttpClientResponse>& r) {
          if (r.isOk() && (r->status / 100 == 2 || r->status == 409)) {
            MLOG_INFO("{}: partitioned topic {} on cluster {} ({})", topic, what, c, r->status);
          } else {
            MLOG_WARN("{}: partitioned topic not {} on cluster {}: {}", topic, what, c,
                      r.isOk() ? std::to_string(r->status) + " " + r->body : r.status().toString());
          }
        });
  }
}

// PUT/GET/POST/DELETE of a partitioned topic's /partitions.
void addPartitionedTopicRoutes(Router& r, const AdminContext* ctx) {
  onPartitionsBody(r, "PUT", true,
                   [ctx](const HttpRequest& req, const TopicName& name, const PartitionsBody& body,
                         const Respond& respond) {
                     if (!ctx->service.namespaceExists(name.namespaceName())) {
                       return respond(HttpResponse::error(404, "Namespace does not exist"));
                     }
                     if (ctx->service.topicExists(name)) {
                       return respond(HttpResponse::error(409, "This topic already exists"));
                     }
                     Status s = ctx->service.createPartitionedTopic(name, body.partitions);
                     if (s && !body.properties.empty()) {  // kept as a non-partitioned topic's are
                       json::object props;
                       for (const auto& [k, v] : body.properties) props[k] = v;
                       ctx->service.policies().setTopicPolicy(
                           name.toString(), broker::kTopicPropertiesKey, json::serialize(props));
                     }
                     if (s && !queryFlag(req, "createLocalTopicOnly")) {
                       partitionsOnReplicatedClusters(*ctx, name, body.partitions, false);
                     }
                     respond(s ? noContent() : errorResponse(s));
                   });
  // Pulsar's getPartitionedMetadata (the HTTP lookup's first call, with
  // ?checkAllowAutoCreation=true): 404 "Namespace not found" for a missing namespace; a topic
  // with no partitions answers 404 "Topic ... not found" unless it exists or the client may
  // auto-create it (checkAllowAutoCreation and auto-creation allowed).
  onTopic(
      r, "GET", "/partitions",
      [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
            const Respond& respond) {
        HttpResponse err;
        if (!namespaceFromParams(*ctx, p, &err)) {
          return respond(err.status == 404 ? HttpResponse::error(404, kNamespaceNotFound) : err);
        }
        bool check = queryFlag(req, "checkAllowAutoCreation");
        Result<int> n = ctx->service.partitionsOf(name, check);
        if (!n.isOk()) return respond(HttpResponse::error(404, kNamespaceNotFound));
        json::object body{{"partitions", *n}, {"deleted", false}};
        if (*n > 0) {  // the properties given at creation, as Pulsar shows them
          auto all = ctx->service.policies().topicPolicies(name.toString());
          auto it = all.find(broker::kTopicPropertiesKey);
          boost::system::error_code ec;
          json::value props = it == all.end() ? json::value() : json::parse(it->second, ec);
          if (!ec && props.is_object() && !props.as_object().empty()) body["properties"] = props;
        }
        if (*n > 0 || (check && ctx->service.allowAutoTopicCreation(name))) {
          return respond(jsonResponse(body));
        }
        checkTopicExists(ctx, name, [respond, name, body](bool exists) {
          respond(exists ? jsonResponse(body)
                         : HttpResponse::error(404, "Topic " + name.toString() + " not found"));
        });
      });
  onPartitionsBody(r, "POST", false,
                   [ctx](const HttpRequest& req, const TopicName& name, const PartitionsBody& body,
                         const Respond& respond) {
                     Status s = ctx->service.updatePartitions(name, body.partitions);
                     if (s.code() == StatusCode::kInvalidArgument) {
                       return respond(HttpResponse::error(422, s.message()));
                     }
                     if (s && !queryFlag(req, "updateLocalTopicOnly")) {
                       partitionsOnReplicatedClusters(*ctx, name, body.partitions, true);
                     }
                     respond(s ? noContent() : errorResponse(s));
                   });
  onTopic(r, "DELETE", "/partitions",
          [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                const Respond& respond) {
            deletePartitioned(ctx, req, name, queryFlag(req, "force"), respond);
          });
}

// Pulsar's GetStatsOptions from a stats request's query parameters: Jersey reads a boolean as
// true only for "true", in any case.
StatsOptions statsOptions(const HttpRequest& req) {
  auto flag = [&req](std::string_view key) {
    std::optional<std::string> v = queryParam(req, key);
    if (!v || v->size() != 4) return false;
    std::string lower = *v;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower == "true";
  };
  return StatsOptions{flag("excludePublishers"), flag("excludeConsumers")};
}

// Snapshot of one topic with its rates (executor thread).
void snapshotOp(const AdminContext* ctx, const TopicPtr& t,
                const std::function<void(broker::TopicSnapshot)>& cb) {
  auto rates = ctx->rates.find(t->name().toString());
  cb(broker::snapshotTopic(*t, rates.get()));
}

// Cluster mode's partitioned-stats: each partition's TopicStats from here when owned here, else
// from its owner (GET .../{partition}/stats there), merged as Pulsar's
// PartitionedTopicStatsImpl; a partition that cannot be read counts as empty.
void clusterPartitionedStats(const AdminContext* ctx, const HttpRequest& req, const TopicName& name,
                             int n, bool perPartition, const Respond& respond) {
  const StatsOptions opts = statsOptions(req);  // the owners elsewhere get the same query
  std::vector<std::string> names;
  names.reserve(n);
  for (int i = 0; i < n; ++i) names.push_back(name.partition(i).toString());
  auto gather =
      Gather<json::value>::create(n, [respond, full = name.toString(), names,
                                      perPartition](const std::vector<json::value>& parts) {
        respond(jsonResponse(partitionedStatsFromJson(full, names, parts, perPartition)));
      });
  for (int i = 0; i < n; ++i) {
    TopicName part = name.partition(i);
    if (ownedElsewhere(*ctx, part)) {
      callPartitionOwner(*ctx, req, part, [gather, i](const Result<HttpClientResponse>& r) {
        gather->set(i, remoteJson(r, nullptr));
      });
      continue;
    }
    ctx->service.getOrCreateTopic(part, false, [ctx, gather, i, part, opts](Result<TopicPtr> t) {
      if (!t.isOk()) {
        broker::TopicSnapshot empty;
        empty.name = part.toString();
        empty.namespaceName = part.namespaceName();
        gather->set(i, topicStatsJson(empty));
        return;
      }
      snapshotOp(ctx, *t, [gather, i, opts](const broker::TopicSnapshot& s) {
        gather->set(i, topicStatsJson(s, opts));
      });
    });
  }
}

// Registers `GET kTopicPath + suffix` for a partitioned topic: h(req, name, partitions, respond);
// 404 "Partitioned topic not found" for a topic without partitions.
using PartitionedHandler =
    std::function<void(const HttpRequest&, const TopicName&, int, const Respond&)>;
void onPartitionedTopicGet(Router& r, const AdminContext* ctx, const std::string& suffix,
                           PartitionedHandler h) {
  onTopic(r, "GET", suffix,
          [ctx, h = std::move(h)](const HttpRequest& req, const PathParams&, const TopicName& name,
                                  const Respond& respond) {
            Result<int> n = ctx->service.partitionsOf(name, false);
            if (!n.isOk() || *n == 0) {
              return respond(HttpResponse::error(404, "Partitioned topic not found"));
            }
            h(req, name, *n, respond);
          });
}

void addStatsRoutes(Router& r, const AdminContext* ctx) {
  onTopic(r, "GET", "/stats",
          [ctx](const HttpRequest& req, const PathParams&, const TopicName& name,
                const Respond& respond) {
            StatsOptions opts = statsOptions(req);
            withTopic(*ctx, name, respond, [ctx, opts, respond](const TopicPtr& t) {
              snapshotOp(ctx, t, [opts, respond](const broker::TopicSnapshot& s) {
                respond(jsonResponse(topicStatsJson(s, opts)));
              });
            });
          });
  onPartitionedTopicGet(
      r, ctx, "/partitioned-stats",
      [ctx](const HttpRequest& req, const TopicName& name, int n, const Respond& respond) {
        bool perPartition = queryParam(req, "perPartition").value_or("true") != "false";
        const std::string& full = name.toString();
        if (ctx->service.topicOwnership() != nullptr) {
          return clusterPartitionedStats(ctx, req, name, n, perPartition, respond);
        }
        auto gather = Gather<broker::TopicSnapshot>::create(
            n, [respond, full, perPartition,
                opts = statsOptions(req)](const std::vector<broker::TopicSnapshot>& parts) {
              respond(jsonResponse(partitionedStatsJson(full, parts, perPartition, opts)));
            });
        for (int i = 0; i < n; ++i) {
          TopicName part = name.partition(i);
          ctx->service.getOrCreateTopic(part, false, [ctx, gather, i, part](Result<TopicPtr> t) {
            if (!t.isOk()) {
              broker::TopicSnapshot empty;
              empty.name = part.toString();
              empty.namespaceName = part.namespaceName();
              gather->set(i, std::move(empty));
              return;
            }
            snapshotOp(ctx, *t,
                       [gather, i](broker::TopicSnapshot s) { gather->set(i, std::move(s)); });
          });
        }
      });
  onLoadedTopicGet(r, ctx, "/internalStats", [](const TopicPtr& t, const Respond& respond) {
    respond(jsonResponse(internalStatsJson(broker::snapshotInternalStats(*t))));
  });
  onPartitionedTopicGet(
      r, ctx, "/partitioned-internalStats",
      [ctx](const HttpRequest& req, const TopicName& name, int count, const Respond& respond) {
        onEachTarget<json::value>(
            ctx, req, name, false, json::value(nullptr), respond,
            [](const TopicPtr& t, const std::function<void(json::value)>& reply) {
              reply(internalStatsJson(broker::snapshotInternalStats(*t)));
            },
            [respond, name, count](std::vector<json::value> all) {
              json::object parts;
              for (int i = 0; i < count; ++i) {
                if (!all[i].is_null()) parts[name.partition(i).toString()] = std::move(all[i]);
              }
              respond(jsonResponse(json::object{{"metadata", json::object{{"partitions", count}}},
                                                {"partitions", std::move(parts)}}));
            });
      });
}

// Pulsar's LookupData as Jackson writes it: the TLS URLs left out when there are none (null in
// Pulsar), nativeUrl = brokerUrl, and the legacy "brokerUrlSsl", always "" (older C++ clients
// fail a lookup without it).
json::object lookupDataJson(const std::string& url, const std::string& urlTls,
                            const std::string& httpUrl, const std::string& httpUrlTls) {
  json::object o;
  o["brokerUrl"] = url;
  if (!urlTls.empty()) o["brokerUrlTls"] = urlTls;
  o["httpUrl"] = httpUrl;
  if (!httpUrlTls.empty()) o["httpUrlTls"] = httpUrlTls;
  o["nativeUrl"] = url;
  o["brokerUrlSsl"] = "";
  return o;
}

// The owner's LookupData, or (cluster mode) 307 to the broker to ask.
void answerLookup(const AdminContext* ctx, const HttpRequest& req, const TopicName& name,
                  const Respond& respond) {
  // Pulsar's listenerName: the owner's address on that advertised listener; the
  // X-Pulsar-ListenerName header when the query has none (TopicLookup).
  std::string listener = queryParam(req, "listenerName").value_or("");
  if (listener.empty()) listener = req.listenerName;
  // Cluster mode: Pulsar's TopicLookup redirect carries ?authoritative=.
  if (auto* ownership = ctx->service.topicOwnership()) {
    auto q = queryParam(req, "authoritative");
    bool authoritative = q && *q == "true";
    std::string path = req.path;
    ownership->lookup(
        name, authoritative, listener, &ctx->service.ioLoops().next(),
        [respond, path, listener](const broker::LookupAnswer& a) {
          if (!a.error.isOk()) {
            // Pulsar: an unknown listener is a PulsarServerException, answered 500; no owner
            // reachable 503.
            int code = a.error.code() == StatusCode::kInvalidArgument ? 500 : 503;
            return respond(HttpResponse::error(code, a.error.message()));
          }
          if (a.redirect) {
            HttpResponse r = HttpResponse::json("", 307);
            r.headers.emplace_back("Location",
                                   a.httpUrl + path +
                                       "?authoritative=" + (a.authoritative ? "true" : "false") +
                                       (listener.empty() ? "" : "&listenerName=" + listener));
            return respond(std::move(r));
          }
          respond(jsonResponse(lookupDataJson(a.url, a.urlTls, a.httpUrl, a.httpUrlTls)));
        });
    return;
  }
  // Standalone: this broker, on the named listener (500 for one it does not have, as Pulsar's
  // PulsarServerException), else the internal listener when advertisedListeners is set, else
  // the host the client reached us at.
  const broker::AdvertisedListeners& listeners = ctx->service.options().advertisedListeners;
  std::string broker;
  std::string brokerTls;
  if (!listener.empty()) {
    auto it = listeners.byName.find(listener);
    if (it == listeners.byName.end()) {
      return respond(HttpResponse::error(500, "the broker do not have " + listener + " listener"));
    }
    broker = it->second.brokerServiceUrl;
    brokerTls = it->second.brokerServiceUrlTls;
  } else {
    broker = standaloneBrokerUrl(*ctx, req);
    if (!listeners.byName.empty()) {
      brokerTls = ctx->service.brokerServiceUrlTls();
    } else if (int tlsPort = ctx->service.brokerServicePortTls(); tlsPort > 0) {
      brokerTls = fmt::format("pulsar+ssl://{}:{}", advertisedHost(*ctx, req), tlsPort);
    }
  }
  respond(jsonResponse(
      lookupDataJson(broker, brokerTls, webServiceUrl(*ctx, req), webServiceUrlTls(*ctx, req))));
}

// The topic of a /lookup/v2/topic/{domain}/... path; nullopt after answering 500 for a bad domain
// or name (Pulsar's TopicName.get throws there).
std::optional<TopicName> lookupTopic(const PathParams& p, const Respond& respond) {
  const std::string& domain = p.at("domain");
  if (domain != "persistent" && domain != "non-persistent") {
    respond(HttpResponse::error(500, "Invalid topic domain: " + domain));
    return std::nullopt;
  }
  HttpResponse err;
  auto name = topicFromParams(p, &err);
  if (!name) {
    err.status = 500;
    respond(err);
  }
  return name;
}

// GET /lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}, Pulsar's TopicLookup for both
// domains (the HTTP lookup of clients given an http:// service URL, after the partitioned
// metadata).
void addLookupRoute(Router& r, const AdminContext* ctx) {
  r.add("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
        [ctx](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          auto name = lookupTopic(p, respond);
          if (!name) return;
          // Pulsar's validateGlobalNamespaceOwnership: 412 for a namespace not replicated here.
          if (Status s = ctx->service.checkLocalCluster(name->namespaceName()); !s.isOk()) {
            return respond(HttpResponse::error(412, s.message()));
          }
          // Standalone: 404 for a namespace that does not exist. Cluster mode's lookups (HTTP
          // and binary) place the bundle of any namespace, as before.
          HttpResponse err;
          if (ctx->service.topicOwnership() == nullptr && !namespaceFromParams(*ctx, p, &err)) {
            return respond(err.status == 404 ? HttpResponse::error(404, kNamespaceNotFound) : err);
          }
          // Pulsar's internalLookupTopicAsync: without auto-creation a persistent topic must
          // exist (a non-persistent one lives only in a broker, so it is not checked).
          if (!name->isPersistent() || ctx->service.allowAutoTopicCreation(*name)) {
            return answerLookup(ctx, req, *name, respond);
          }
          checkTopicExists(ctx, *name, [ctx, req, name = *name, respond](bool exists) {
            if (!exists) {
              return respond(HttpResponse::error(404, "Topic not found " + name.toString()));
            }
            answerLookup(ctx, req, name, respond);
          });
        });
  // Standalone's GET .../{topic}/bundle (Pulsar's getNamespaceBundle, `pulsar-admin topics
  // bundle-range`): the range as text from the default 4-bundle cut; Pulsar answers the whole
  // range for a namespace it does not know. Cluster mode registers its own route first.
  r.add("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle",
        [ctx](const HttpRequest&, const PathParams& p, const Respond& respond) {
          auto name = lookupTopic(p, respond);
          if (!name) return;
          bool known = ctx->service.namespaceExists(name->namespaceName());
          respond(HttpResponse::json(known ? bundleOf(name->toString()) : "0x00000000_0xffffffff"));
        });
}

// Topic-level grants (Pulsar's destination_auth), stored in the namespace policies under the
// topic's own name (a partition's grants apart from its partitioned topic's; the authorizer
// reads both). Pulsar 4.2's PersistentTopicsBase permission operations on a topic that does not
// exist: 404 "Tenant does not exist" for a missing tenant, else 404 "Topic <topic> not found"
// (also for a missing namespace or a partition beyond the count).
void onPermissionTopic(Router& r, const AdminContext* ctx, const char* method,
                       const std::string& suffix, TopicHandler h) {
  onTopic(r, method, suffix,
          [ctx, h = std::move(h)](const HttpRequest& req, const PathParams& p,
                                  const TopicName& name, const Respond& respond) {
            if (!ctx->service.namespaceExists(name.namespaceName())) {
              if (!ctx->service.policies().tenant(name.tenant())) {
                return respond(HttpResponse::error(404, "Tenant does not exist"));
              }
              return respond(HttpResponse::error(404, "Topic " + name.toString() + " not found"));
            }
            checkTopicExists(ctx, name, [h, req, p, name, respond](bool exists) {
              if (!exists) {
                return respond(HttpResponse::error(404, "Topic " + name.toString() + " not found"));
              }
              h(req, p, name, respond);
            });
          });
}

// GET lists the namespace's grants merged with the topic's; DELETE of a role without a grant on
// the topic is 204 as in Pulsar 4.2.
void addTopicPermissionRoutes(Router& r, const AdminContext* ctx) {
  onPermissionTopic(
      r, ctx, "GET", "/permissions",
      [ctx](const HttpRequest&, const PathParams&, const TopicName& name, const Respond& respond) {
        broker::NamespacePolicies p =
            ctx->service.policies().namespacePolicies(name.namespaceName());
        auto merged = p.permissions;
        if (auto it = p.topicPermissions.find(name.toString()); it != p.topicPermissions.end()) {
          for (const auto& [role, actions] : it->second) {
            merged[role].insert(actions.begin(), actions.end());
          }
        }
        respond(jsonResponse(permissionsJson(merged)));
      });
  onPermissionTopic(r, ctx, "POST", "/permissions/{role}",
                    [ctx](const HttpRequest& req, const PathParams& p, const TopicName& name,
                          const Respond& respond) {
                      HttpResponse err;
                      auto actions = parseAuthActions(req, &err);
                      if (!actions) return respond(err);
                      const std::string& role = p.at("role");
                      Status stored = ctx->service.policies().updateNamespacePolicies(
                          name.namespaceName(), [&](broker::NamespacePolicies& pol) {
                            pol.topicPermissions[name.toString()][role] = *actions;
                          });
                      respond(stored ? noContent() : errorResponse(stored));
                    });
  onPermissionTopic(r, ctx, "DELETE", "/permissions/{role}",
                    [ctx](const HttpRequest&, const PathParams& p, const TopicName& name,
                          const Respond& respond) {
                      const std::string& role = p.at("role");
                      Status stored = ctx->service.policies().updateNamespacePolicies(
                          name.namespaceName(), [&](broker::NamespacePolicies& pol) {
                            auto it = pol.topicPermissions.find(name.toString());
                            if (it == pol.topicPermissions.end()) return;
                            it->second.erase(role);
                            if (it->second.empty()) pol.topicPermissions.erase(it);
                          });
                      respond(stored ? noContent() : errorResponse(stored));
                    });
}

}  // namespace

void addTopicRoutes(Router& router, const AdminContext& ctx) {
  addRouteGroups(router, ctx,
                 {addTopicPermissionRoutes, addListRoutes, addTopicCreateDeleteRoutes,
                  addPartitionedTopicRoutes, addStatsRoutes, addLookupRoute});
}

}  // namespace magnetar::admin
