#include "admin/cluster_routes.h"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <utility>

#include "admin/http_client.h"
#include "admin/remote_partition.h"
#include "admin/rest_util.h"
#include "base/blocking_wait.h"
#include "broker/cluster/bundles.h"

namespace magnetar::admin {

namespace json = boost::json;
using broker::cluster::NamespaceService;

namespace {

HttpResponse storeError(const Status& s) {
  return HttpResponse::error(s.code() == StatusCode::kNotFound ? 404 : 500, s.message());
}

// The request's query with authoritative=<value> (replaced or added), as Pulsar's redirects
// build it (UriBuilder.replaceQueryParam).
std::string withAuthoritative(const std::string& query, bool value) {
  std::string out;
  size_t pos = 0;
  while (pos <= query.size() && !query.empty()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!kv.empty() && kv.rfind("authoritative=", 0) != 0 && kv != "authoritative") {
      out += (out.empty() ? "" : "&") + kv;
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return out + (out.empty() ? "" : "&") + "authoritative=" + (value ? "true" : "false");
}

// The query without parameter `name` (Pulsar's replaceQueryParam(name, null)).
std::string withoutParam(const std::string& query, std::string_view name) {
  std::string out;
  size_t pos = 0;
  while (!query.empty() && pos <= query.size()) {
    size_t amp = query.find('&', pos);
    std::string kv = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    std::string_view key = std::string_view(kv).substr(0, kv.find('='));
    if (!kv.empty() && key != name) out += (out.empty() ? "" : "&") + kv;
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return out;
}

// 307 to `webUrl` + the request's path and query (authoritative replaced).
HttpResponse redirectTo(const std::string& webUrl, const HttpRequest& req, bool authoritative) {
  HttpResponse r = HttpResponse::json("", 307);
  r.headers.emplace_back("Location",
                         webUrl + req.path + "?" + withAuthoritative(req.query, authoritative));
  return r;
}

// Topic routes whose topic is a partitioned topic's metadata or its fan-out over partitions:
// served by any broker (Pulsar validates no ownership there).
bool servedByAnyBroker(const std::string& pattern) {
  static const char* kSuffixes[] = {"/partitions", "/partitioned-stats",
                                    "/partitioned-internalStats", "/permissions",
                                    "/permissions/{role}"};
  for (const char* s : kSuffixes) {
    std::string suffix = std::string("{topic}") + s;
    if (pattern.size() >= suffix.size() &&
        pattern.compare(pattern.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

bool isTopicPattern(const std::string& pattern) {
  for (const char* prefix : {"/admin/v2/persistent/{tenant}/{namespace}/{topic}",
                             "/admin/v2/non-persistent/{tenant}/{namespace}/{topic}"}) {
    std::string p(prefix);
    if (pattern.compare(0, p.size(), p) == 0 &&
        (pattern.size() == p.size() || pattern[p.size()] == '/')) {
      return true;
    }
  }
  return false;
}

// The query parameter that marks a broker's call to another for its own topic list (the
// answer is that broker's view only, no fan-out again).
constexpr const char* kLocalListParam = "magnetarLocalList";

// Sorted, the persistent topics before the non-persistent ones (Pulsar's order for mode ALL).
HttpResponse topicListResponse(const std::set<std::string>& topics) {
  json::array a;
  for (bool persistent : {true, false}) {
    for (const auto& t : topics) {
      if ((t.rfind("persistent://", 0) == 0) == persistent) a.emplace_back(t);
    }
  }
  return jsonResponse(a);
}

// Local storage: `local` plus the topics of each other registered broker (GET of `target`
// there, a path marked kLocalListParam); any broker that does not answer fails the list (naming
// it), as Pulsar's fan-out of a non-persistent list over the bundles' owners does. done on loop.
void unionWithOtherBrokers(NamespaceService* nsp, net::EventLoop* loop,
                           const std::optional<std::string>& authorization,
                           const std::string& target, std::set<std::string> local,
                           std::function<void(Result<std::set<std::string>>)> done) {
  HttpClientRequest call;
  call.authorization = authorization;
  nsp->activeBrokers(loop, [nsp, loop, call, target, local = std::move(local),
                            done =
                                std::move(done)](Result<std::vector<std::string>> brokers) mutable {
    if (!brokers.isOk()) {
      return done(Status::error(brokers.status().code(), "Failed to list the registered brokers: " +
                                                             brokers.status().message()));
    }
    std::vector<std::string> others;
    for (const auto& b : *brokers) {
      if (b != nsp->self().brokerId) others.push_back(b);
    }
    using Answer = std::pair<std::string, Result<HttpClientResponse>>;
    auto gather = Gather<std::optional<Answer>>::create(
        others.size(),
        [local = std::move(local), done](const std::vector<std::optional<Answer>>& all) {
          std::set<std::string> topics = local;
          for (const auto& a : all) {
            const Result<HttpClientResponse>& r = a->second;
            if (!r.isOk() || r->status != 200) {
              return done(
                  Status::error(StatusCode::kIoError,
                                "Failed to list the topics of broker " + a->first + ": " +
                                    (r.isOk() ? remoteStatus(r).message() : r.status().message())));
            }
            for (auto& t : remoteStrings(r, {})) topics.insert(std::move(t));
          }
          done(std::move(topics));
        });
    for (size_t i = 0; i < others.size(); ++i) {
      HttpClientRequest one = call;
      one.url = "http://" + others[i] + target;
      one.timeoutMs = 10000;
      httpCall(*loop, std::move(one), [gather, i, b = others[i]](Result<HttpClientResponse> r) {
        gather->set(i, Answer(b, std::move(r)));
      });
    }
  });
}

void unionOfBrokers(NamespaceService* nsp, broker::BrokerService* svc, const HttpRequest& req,
                    std::set<std::string> local, const Respond& respond) {
  std::string target =
      req.path + "?" + (req.query.empty() ? "" : req.query + "&") + kLocalListParam + "=true";
  unionWithOtherBrokers(nsp, &svc->ioLoops().next(), req.authorization, target, std::move(local),
                        [respond](Result<std::set<std::string>> topics) {
                          if (!topics.isOk()) {
                            return respond(HttpResponse::error(500, topics.status().message()));
                          }
                          respond(topicListResponse(*topics));
                        });
}

// Cluster mode's topic list of a namespace, as Pulsar's (NamespaceService.getListOfTopics reads
// the metadata store, not the loaded topics): on BookKeeper the topics the storage holds
// (/managed-ledgers/{t}/{ns}/{domain}) plus this broker's view (loaded topics, partitions of the
// partitioned topics); with each broker's own local storage the union of every registered
// broker's view (unionOfBrokers).
void clusterTopicList(NamespaceService* nsp, broker::BrokerService* svc, const HttpRequest& req,
                      const std::string& ns, broker::TopicDomain domain, const Respond& respond) {
  std::vector<std::string> mine = listTopics(*svc, ns, domain);
  std::set<std::string> local(mine.begin(), mine.end());
  if (svc->storageShared()) {
    svc->sharedStoredTopicsOf(
        ns, domain, &svc->ioLoops().next(),
        [ns, local = std::move(local), respond](Result<std::vector<std::string>> stored) mutable {
          if (!stored.isOk()) {
            return respond(HttpResponse::error(
                500, "Failed to list the topics of " + ns + ": " + stored.status().message()));
          }
          local.insert(stored->begin(), stored->end());
          respond(topicListResponse(local));
        });
    return;
  }
  if (queryFlag(req, kLocalListParam)) return respond(topicListResponse(local));
  unionOfBrokers(nsp, svc, req, std::move(local), respond);
}

// On the topic's owner, before a topic route runs: with shared storage, a topic not loaded here
// is looked up in the storage every time (created or deleted through another broker since this
// one last looked), so that the routes' existence checks (topic policies, create's 409) see the
// storage's answer. Blocks the pulsar-web thread for one ZooKeeper read; an error there answers
// 500.
std::optional<HttpResponse> checkStoredTopic(broker::BrokerService& svc,
                                             const broker::TopicName& name) {
  if (!svc.storageShared() || svc.topicLoadedOrPartitioned(name)) return std::nullopt;
  auto promise = std::make_shared<std::promise<Result<bool>>>();
  auto answer = promise->get_future();
  svc.checkStoredTopic(name, &svc.ioLoops().next(),
                       [promise](Result<bool> r) { promise->set_value(std::move(r)); });
  auto checked = blockingGetFor(answer, std::chrono::seconds(35), "checking a stored topic");
  if (!checked) {
    return HttpResponse::error(500, "Checking whether " + name.toString() + " exists timed out");
  }
  Result<bool> exists = std::move(*checked);
  if (!exists.isOk()) {
    return HttpResponse::error(500, "Failed to check whether " + name.toString() +
                                        " exists: " + exists.status().message());
  }
  return std::nullopt;
}

// Pulsar's ClusterData znode of a cluster in the configuration store.
std::string clusterPath(const std::string& cluster) { return "/admin/clusters/" + cluster; }

// The ClusterData a PUT/POST body describes, as Pulsar stores it (ClusterDataImpl through
// Jackson): the URLs given, then Pulsar's defaults of the fields not given, then every other
// field of the body as given. nullopt with a 400 on a body that is not a ClusterData object.
std::optional<std::string> clusterDataFrom(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  if (!v->is_object()) {
    *error = HttpResponse::error(400, "ClusterData must be a JSON object");
    return std::nullopt;
  }
  const json::object& body = v->as_object();
  std::string urls[4];
  const char* kUrlFields[4] = {"serviceUrl", "serviceUrlTls", "brokerServiceUrl",
                               "brokerServiceUrlTls"};
  for (int i = 0; i < 4; ++i) {
    const json::value* u = body.if_contains(kUrlFields[i]);
    if (!u || u->is_null()) continue;
    if (!u->is_string()) {
      *error = HttpResponse::error(400, std::string(kUrlFields[i]) + " must be a string");
      return std::nullopt;
    }
    urls[i] = std::string(u->as_string());
  }
  json::object out =
      json::parse(broker::cluster::clusterDataJson(urls[0], urls[1], urls[2], urls[3])).as_object();
  for (const auto& [k, val] : body) {
    if (!val.is_null()) out[k] = val;
  }
  return json::serialize(out);
}

// Removes `path` and every node under it, children first; cb gets kNotFound when `path` does
// not exist. Runs on ex.
void removeTree(metadata::Store* config, const std::string& path, net::Executor* ex,
                std::function<void(const Status&)> cb) {
  config->getChildren(
      path, ex,
      [config, path, ex, cb = std::move(cb)](const Result<std::vector<std::string>>& children) {
        if (!children.isOk()) return cb(children.status());
        auto left = std::make_shared<size_t>(children->size());
        auto failed = std::make_shared<Status>(Status::ok());
        auto removeSelf = [config, path, ex, cb, failed] {
          if (!failed->isOk()) return cb(*failed);
          config->remove(path, std::nullopt, ex, cb);
        };
        if (*left == 0) return removeSelf();
        for (const auto& child : *children) {  // the callbacks run on ex, one at a time
          std::string childPath = path;
          childPath.append("/").append(child);
          removeTree(config, childPath, ex, [left, failed, removeSelf](const Status& s) {
            if (!s.isOk() && s.code() != StatusCode::kNotFound) *failed = s;
            if (--*left == 0) removeSelf();
          });
        }
      });
}

// DELETE of Pulsar's ClustersBase, on the configuration store's /admin/clusters.
void addClusterDeleteRoute(Router& r, metadata::Store* config, broker::BrokerService* svc) {
  // Pulsar's deleteCluster removes the cluster with its failure domains and isolation policies
  // (the znodes under it); 404 when it does not exist. The cluster the brokers serve is refused
  // (412, as in standalone): each broker checks it at start.
  r.add(
      "DELETE", "/admin/v2/clusters/{cluster}",
      [config, svc, local = svc->options().clusterName](const HttpRequest&, const PathParams& p,
                                                        const Respond& respond) {
        const std::string& cluster = p.at("cluster");
        if (cluster == local) {
          return respond(HttpResponse::error(412, "Cannot delete the cluster this broker serves"));
        }
        std::string path = clusterPath(cluster);
        net::Executor* ex = &svc->ioLoops().next();
        config->exists(path, ex, [config, path, ex, respond](const auto& found) {
          if (!found.isOk()) return respond(storeError(found.status()));
          if (!*found) return respond(HttpResponse::error(404, "Cluster does not exist"));
          removeTree(config, path, ex, [respond](const Status& s) {
            if (s.isOk()) return respond(noContent());
            if (s.code() == StatusCode::kNotFound) {
              return respond(HttpResponse::error(404, "Cluster does not exist"));
            }
            respond(storeError(s));
          });
        });
      });
}

// GET of Pulsar's ClustersBase: the cluster names, one cluster's ClusterData.
void addClusterGetRoutes(Router& r, metadata::Store* config, broker::BrokerService* svc) {
  r.add("GET", "/admin/v2/clusters",
        [config, svc](const HttpRequest&, const PathParams&, const Respond& respond) {
          config->getChildren("/admin/clusters", &svc->ioLoops().next(),
                              [respond](const Result<std::vector<std::string>>& names) {
                                if (!names.isOk()) return respond(storeError(names.status()));
                                json::array a;
                                for (const auto& n : *names) {
                                  if (n != "global")
                                    a.emplace_back(n);  // Pulsar's GLOBAL_CLUSTER is not listed
                                }
                                respond(jsonResponse(a));
                              });
        });
  r.add("GET", "/admin/v2/clusters/{cluster}",
        [config, svc](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string path = clusterPath(p.at("cluster"));
          config->get(path, &svc->ioLoops().next(),
                      [path, respond](const Result<std::optional<metadata::GetResult>>& d) {
                        if (!d.isOk()) return respond(storeError(d.status()));
                        if (!d->has_value()) {
                          return respond(HttpResponse::error(404, "Cluster does not exist"));
                        }
                        boost::system::error_code ec;
                        json::value v = json::parse((*d)->value, ec);
                        if (ec || !v.is_object()) {
                          return respond(HttpResponse::error(
                              500, "znode " + path + " does not hold ClusterData JSON"));
                        }
                        respond(jsonResponse(v));
                      });
        });
}

// PUT creates (409 when it exists), POST replaces (404 when it does not), as Pulsar's
// createCluster and updateCluster.
void addClusterWriteRoutes(Router& r, metadata::Store* config, broker::BrokerService* svc) {
  for (const char* method : {"PUT", "POST"}) {
    bool create = std::string(method) == "PUT";
    r.add(
        method, "/admin/v2/clusters/{cluster}",
        [config, svc, create](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          const std::string& cluster = p.at("cluster");
          if (!broker::isValidNamePart(cluster)) {
            return respond(HttpResponse::error(412, "Cluster name is not valid"));
          }
          HttpResponse err;
          auto data = clusterDataFrom(req, &err);
          if (!data) return respond(err);
          std::string path = clusterPath(cluster);
          net::Executor* ex = &svc->ioLoops().next();
          auto put = [config, ex, path, data = *data, create,
                      respond](std::optional<metadata::Version> version) {
            metadata::PutOptions o;
            o.expectedVersion = version;
            config->put(path, data, o, ex, [create, respond](const Result<metadata::Stat>& w) {
              if (w.isOk()) return respond(noContent());
              if (w.status().code() == StatusCode::kBadVersion) {
                return respond(create ? HttpResponse::error(409, "Cluster already exists")
                                      : HttpResponse::error(409, "Cluster changed meanwhile"));
              }
              if (w.status().code() == StatusCode::kNotFound) {
                return respond(HttpResponse::error(404, "Cluster does not exist"));
              }
              respond(storeError(w.status()));
            });
          };
          if (create) return put(metadata::kNotExists);
          config->get(path, ex,
                      [put, respond](const Result<std::optional<metadata::GetResult>>& d) {
                        if (!d.isOk()) return respond(storeError(d.status()));
                        if (!d->has_value()) {
                          return respond(HttpResponse::error(404, "Cluster does not exist"));
                        }
                        put((*d)->stat.version);
                      });
        });
  }
}

// GET/PUT/POST/DELETE of Pulsar's ClustersBase, on the configuration store's /admin/clusters.
void addClusterDataRoutes(Router& r, NamespaceService* nsp, broker::BrokerService* svc) {
  metadata::Store* config = nsp->configStore();
  addClusterDeleteRoute(r, config, svc);
  addClusterGetRoutes(r, config, svc);
  addClusterWriteRoutes(r, config, svc);
}

}  // namespace

void installTopicOwnershipGuard(Router& r, NamespaceService& ns, broker::BrokerService& service) {
  auto* nsp = &ns;
  auto* svc = &service;
  r.setGuard([nsp, svc](const HttpRequest& req, const std::string& pattern,
                        const PathParams& params) -> std::optional<HttpResponse> {
    if (!isTopicPattern(pattern)) return std::nullopt;
    HttpResponse err;
    auto name = topicFromParams(params, &err);
    if (!name) return std::nullopt;  // the handler answers the bad name
    // Made through another broker a moment ago? (partitioned metadata, the namespace)
    if (broker::SharedConfig* shared = svc->sharedConfig()) {
      auto done = std::make_shared<std::promise<void>>();
      auto f = done->get_future();
      shared->refresh(*name, &svc->ioLoops().next(), [done](const Status&) { done->set_value(); });
      (void)blockingReady(f, std::chrono::seconds(35), "refreshing the configuration store");
    }
    if (!svc->namespaceExists(name->namespaceName())) return std::nullopt;  // the handler's 404
    // Pulsar's validateGlobalNamespaceOwnership: a namespace not replicated to this cluster.
    if (Status s = svc->checkLocalCluster(name->namespaceName()); !s.isOk()) {
      return HttpResponse::error(412, s.message());
    }
    if (servedByAnyBroker(pattern)) return std::nullopt;
    if (name->partitionIndex() < 0) {
      auto n = svc->partitionsOf(*name, false);
      if (n.isOk() && *n > 0) return std::nullopt;  // a partitioned topic: fanned out here
    }
    if (nsp->owns(*name)) return checkStoredTopic(*svc, *name);
    // Pulsar's validateTopicOwnership: look the topic up (taking or placing its bundle when
    // unowned) and serve it here if this broker owns it now, else redirect to the owner.
    auto q = queryParam(req, "authoritative");
    auto promise = std::make_shared<std::promise<broker::LookupAnswer>>();
    auto answer = promise->get_future();
    nsp->lookup(*name, q && *q == "true", "", &svc->ioLoops().next(),
                [promise](broker::LookupAnswer a) { promise->set_value(std::move(a)); });
    auto found = blockingGetFor(answer, std::chrono::seconds(35), "looking a topic up");
    if (!found) {
      return HttpResponse::error(500, "Finding owner for topic " + name->toString() + " timed out");
    }
    broker::LookupAnswer a = std::move(*found);
    if (!a.error.isOk()) {
      return HttpResponse::error(
          503, "Failed to find ownership for topic:" + name->toString() + ": " + a.error.message());
    }
    if (!a.redirect && a.url == nsp->self().pulsarServiceUrl) return checkStoredTopic(*svc, *name);
    return redirectTo(a.httpUrl, req, nsp->isLeader());
  });
}

void clusterTopicsOfNamespace(NamespaceService& ns, broker::BrokerService& service,
                              const std::string& nsName, broker::TopicDomain domain,
                              const std::optional<std::string>& authorization,
                              std::function<void(Result<std::vector<std::string>>)> done) {
  std::vector<std::string> mine = listTopics(service, nsName, domain);
  const char* mode = domain == broker::TopicDomain::kNonPersistent ? "NON_PERSISTENT"
                     : domain == broker::TopicDomain::kAll         ? "ALL"
                                                                   : "PERSISTENT";
  std::string target =
      "/admin/v2/namespaces/" + nsName + "/topics?mode=" + mode + "&" + kLocalListParam + "=true";
  unionWithOtherBrokers(&ns, &service.ioLoops().next(), authorization, target,
                        std::set<std::string>(mine.begin(), mine.end()),
                        [done = std::move(done)](Result<std::set<std::string>> topics) {
                          if (!topics.isOk()) return done(topics.status());
                          done(std::vector<std::string>(topics->begin(), topics->end()));
                        });
}

namespace {

// Whether the namespace exists, asking the shared configuration again when not known here.
bool namespaceKnown(broker::BrokerService* svc, const std::string& name) {
  if (svc->namespaceExists(name)) return true;
  if (auto* shared = svc->sharedConfig()) shared->refreshNamespace(name);
  return svc->namespaceExists(name);
}

// The path's tenant/namespace when valid (412) and existing (404), else nullopt and *err.
std::optional<std::string> validNamespace(broker::BrokerService* svc, const PathParams& p,
                                          HttpResponse* err) {
  std::string nsName = p.at("tenant") + "/" + p.at("namespace");
  if (!broker::isValidNamePart(p.at("tenant")) || !broker::isValidNamePart(p.at("namespace"))) {
    *err = HttpResponse::error(412, "Invalid namespace name: " + nsName);
    return std::nullopt;
  }
  if (!namespaceKnown(svc, nsName)) {
    *err = HttpResponse::error(404, "Namespace does not exist");
    return std::nullopt;
  }
  return nsName;
}

// The namespace's topics (also /admin/v2/non-persistent/..., whose alias runs this handler,
// and pulsar-admin namespaces topics with its ?mode=).
void addNamespaceTopicListRoutes(Router& r, NamespaceService* nsp, broker::BrokerService* svc) {
  r.add("GET", "/admin/v2/persistent/{tenant}/{namespace}",
        [nsp, svc](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto nsName = validNamespace(svc, p, &err);
          if (!nsName) return respond(err);
          clusterTopicList(nsp, svc, req, *nsName, domainFromParams(p), respond);
        });
  r.add("GET", "/admin/v2/namespaces/{tenant}/{namespace}/topics",
        [nsp, svc](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto nsName = validNamespace(svc, p, &err);
          if (!nsName) return respond(err);
          // Pulsar's ?mode=PERSISTENT (default) | NON_PERSISTENT | ALL.
          std::string mode = queryParam(req, "mode").value_or("PERSISTENT");
          broker::TopicDomain domain = broker::TopicDomain::kPersistent;
          if (mode == "NON_PERSISTENT") {
            domain = broker::TopicDomain::kNonPersistent;
          } else if (mode == "ALL") {
            domain = broker::TopicDomain::kAll;
          } else if (mode != "PERSISTENT") {
            return respond(HttpResponse::error(404, "Unknown mode: " + mode));  // as JAX-RS
          }
          clusterTopicList(nsp, svc, req, *nsName, domain, respond);
        });
}

void addNamespaceUnloadRoutes(Router& r, NamespaceService* nsp, broker::BrokerService* svc) {
  // Namespace unload: every owned bundle released by its owner (Pulsar's internalUnloadNamespace).
  r.add("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/unload",
        [nsp, svc](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string nsName = p.at("tenant") + "/" + p.at("namespace");
          if (!broker::isValidNamePart(p.at("tenant")) ||
              !broker::isValidNamePart(p.at("namespace"))) {
            return respond(HttpResponse::error(412, "Invalid namespace name: " + nsName));
          }
          if (!namespaceKnown(svc, nsName)) {
            return respond(HttpResponse::error(404, "Namespace does not exist"));
          }
          nsp->unloadNamespace(nsName, &svc->ioLoops().next(), [respond](const Status& s) {
            respond(s.isOk() ? noContent() : storeError(s));
          });
        });
}

void addBrokerRoutes(Router& r, NamespaceService* nsp, broker::BrokerService* svc,
                     const std::string& clusterName) {
  // The bundles this broker owns (Pulsar's getOwnedNameSpacesStatus: every owned bundle, by the
  // namespace's real cut); another broker named: 307 there (Pulsar's validateBrokerName).
  r.add("GET", "/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
        [nsp, clusterName](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          if (p.at("cluster") != clusterName) {
            return respond(HttpResponse::error(404, "Cluster does not exist"));
          }
          const std::string& broker = p.at("broker");
          if (broker != nsp->self().brokerId) {
            if (broker.find(':') == std::string::npos) {
              return respond(HttpResponse::error(412, "Invalid broker url " + broker));
            }
            HttpResponse redirect = HttpResponse::json("", 307);
            redirect.headers.emplace_back(
                "Location",
                "http://" + broker + req.path + (req.query.empty() ? "" : "?" + req.query));
            return respond(redirect);
          }
          json::object o;
          for (const auto& key : nsp->ownedBundles()) {
            o[key] = json::object{
                {"broker_assignment", "shared"}, {"is_controlled", false}, {"is_active", true}};
          }
          respond(jsonResponse(o));
        });
  r.add(
      "GET", "/admin/v2/brokers/leaderBroker",
      [nsp, svc](const HttpRequest&, const PathParams&, const Respond& respond) {
        nsp->leaderBroker(&svc->ioLoops().next(), [respond](Result<broker::cluster::LeaderData> d) {
          if (!d.isOk()) return respond(storeError(d.status()));
          respond(
              jsonResponse(json::object{{"serviceUrl", d->serviceUrl}, {"brokerId", d->brokerId}}));
        });
      });
  r.add("GET", "/admin/v2/brokers/{cluster}",
        [nsp, svc, clusterName](const HttpRequest&, const PathParams& p, const Respond& respond) {
          if (p.at("cluster") != clusterName) {
            return respond(HttpResponse::error(404, "Cluster does not exist"));
          }
          nsp->activeBrokers(&svc->ioLoops().next(),
                             [respond](Result<std::vector<std::string>> names) {
                               if (!names.isOk()) return respond(storeError(names.status()));
                               json::array a;
                               for (const auto& n : *names) a.emplace_back(n);
                               respond(jsonResponse(a));
                             });
        });
}

// Unloads `bundle` of nsName here when owned here; 307 to its owner otherwise (without
// destinationBroker); 204 when unowned.
void unloadOrRedirect(NamespaceService* nsp, const std::string& nsName, const std::string& bundle,
                      const HttpRequest& req, net::Executor* ex, const Respond& respond) {
  nsp->ownerOf(
      nsName + "/" + bundle, ex,
      [nsp, nsName, bundle, req, ex, respond](Result<std::optional<broker::cluster::OwnerData>> o) {
        if (!o.isOk() && o.status().code() == StatusCode::kCorruption) {
          // An ownership znode naming no broker: removed here (unloadBundle), so the bundle is
          // placed again at the next lookup.
          return nsp->unloadBundle(nsName, bundle, ex, [respond](const Status& s) {
            respond(s.isOk() ? noContent() : storeError(s));
          });
        }
        if (!o.isOk()) return respond(storeError(o.status()));
        if (!o->has_value()) return respond(noContent());
        if ((*o)->urls.webServiceUrl != nsp->self().webServiceUrl) {
          // The destination stays with the leader (Pulsar drops it on this hop).
          HttpRequest toOwner = req;
          toOwner.query = withoutParam(req.query, "destinationBroker");
          return respond(redirectTo((*o)->urls.webServiceUrl, toOwner, nsp->isLeader()));
        }
        nsp->unloadBundle(nsName, bundle, ex, [respond](const Status& s) {
          if (!s.isOk()) return respond(storeError(s));
          respond(noContent());
        });
      });
}

// Pulsar's setNamespaceBundleAffinityAsync for an unload with ?destinationBroker= (its
// http(s):// prefix dropped): not a registered broker: 409; on a broker that is not the leader:
// 307 to the leader (authoritative=false); on the leader: the bundle's next placement goes
// there (NamespaceService::setBundleAffinity). then(response) ends the request early, then({})
// goes on with the unload. then runs on ex.
void withUnloadDestination(NamespaceService* nsp, const HttpRequest& req, const std::string& key,
                           net::Executor* ex,
                           const std::function<void(std::optional<HttpResponse>)>& then) {
  std::string dest = queryParam(req, "destinationBroker").value_or("");
  static const std::regex kScheme("https?://");
  dest = std::regex_replace(dest, kScheme, "", std::regex_constants::format_first_only);
  if (dest.find_first_not_of(" \t") == std::string::npos) return then(std::nullopt);
  nsp->activeBrokers(ex, [nsp, req, key, dest, ex, then](Result<std::vector<std::string>> brokers) {
    if (!brokers.isOk()) return then(storeError(brokers.status()));
    if (std::find(brokers->begin(), brokers->end(), dest) == brokers->end()) {
      return then(HttpResponse::error(
          409, "Not allowed unload namespace bundle to inactive destination broker"));
    }
    if (nsp->isLeader()) {
      nsp->setBundleAffinity(key, dest);
      return then(std::nullopt);
    }
    nsp->leaderBroker(ex, [req, then](Result<broker::cluster::LeaderData> l) {
      if (!l.isOk()) {
        return then(HttpResponse::error(412, "The current leader is empty."));
      }
      then(redirectTo(l->serviceUrl, req, false));
    });
  });
}

void addBundleRoutes(Router& r, NamespaceService* nsp, broker::BrokerService* svc) {
  r.add("GET", "/admin/v2/namespaces/{tenant}/{namespace}/bundles",
        [nsp, svc](const HttpRequest&, const PathParams& p, const Respond& respond) {
          nsp->boundariesOf(p.at("tenant") + "/" + p.at("namespace"), &svc->ioLoops().next(),
                            [respond](Result<std::vector<uint64_t>> b) {
                              if (!b.isOk()) return respond(storeError(b.status()));
                              json::array a;
                              for (uint64_t v : *b) {
                                a.emplace_back(broker::cluster::formatBoundary(v));
                              }
                              respond(jsonResponse(json::object{
                                  {"boundaries", std::move(a)},
                                  {"numBundles", static_cast<int64_t>(b->size()) - 1}}));
                            });
        });
  // Unload one bundle: here when owned here; 307 to the owner otherwise (Pulsar's
  // validateNamespaceBundleOwnership redirect); nothing to do when unowned.
  r.add(
      "PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
      [nsp, svc](const HttpRequest& req, const PathParams& p, const Respond& respond) {
        std::string nsName = p.at("tenant") + "/" + p.at("namespace");
        std::string bundle = p.at("bundle");
        uint64_t lo = 0, hi = 0;
        if (Status s = broker::cluster::parseBundleName(bundle, &lo, &hi); !s.isOk()) {
          return respond(HttpResponse::error(412, s.message()));
        }
        if (!namespaceKnown(svc, nsName)) {
          return respond(HttpResponse::error(404, "Namespace does not exist"));
        }
        std::string key = nsName + "/" + bundle;
        net::Executor* ex = &svc->ioLoops().next();
        // Pulsar's validateNamespaceBundleRange: a range that is not one of the namespace's
        // bundles is refused (412), not "unloaded".
        nsp->boundariesOf(
            nsName, ex,
            [nsp, nsName, bundle, key, lo, hi, req, ex, respond](Result<std::vector<uint64_t>> b) {
              if (!b.isOk()) return respond(storeError(b.status()));
              bool isBundle = false;
              for (size_t i = 0; i + 1 < b->size(); ++i) {
                isBundle = isBundle || ((*b)[i] == lo && (*b)[i + 1] == hi);
              }
              if (!isBundle) {
                return respond(HttpResponse::error(
                    412, "Bundle " + bundle + " is not a bundle of namespace " + nsName));
              }
              withUnloadDestination(nsp, req, key, ex, [=](std::optional<HttpResponse> early) {
                if (early) return respond(std::move(*early));
                unloadOrRedirect(nsp, nsName, bundle, req, ex, respond);
              });
            });
      });
}

void addTopicBundleRoute(Router& r, NamespaceService* nsp, broker::BrokerService* svc) {
  // The bundle a topic belongs to (Pulsar's TopicLookup getNamespaceBundle, `pulsar-admin
  // topics bundle-range`): its range as text, from the namespace's current cut.
  r.add("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle",
        [nsp, svc](const HttpRequest&, const PathParams& p, const Respond& respond) {
          const std::string& domain = p.at("domain");
          if (domain != "persistent" && domain != "non-persistent") {
            return respond(HttpResponse::error(404, "Not found"));
          }
          HttpResponse err;
          auto name = topicFromParams(p, &err);
          if (!name) return respond(err);
          std::string nsName = name->namespaceName();
          if (!namespaceKnown(svc, nsName)) {
            return respond(HttpResponse::error(404, "Namespace does not exist"));
          }
          uint32_t hash = broker::cluster::topicHash(name->toString());
          nsp->boundariesOf(
              nsName, &svc->ioLoops().next(), [respond, hash](Result<std::vector<uint64_t>> b) {
                if (!b.isOk()) return respond(storeError(b.status()));
                size_t i = broker::cluster::findBundle(*b, hash);
                respond(HttpResponse::text(broker::cluster::bundleName((*b)[i], (*b)[i + 1])));
              });
        });
}

}  // namespace

HttpResponse clusterRedirect(const std::string& webUrl, const HttpRequest& req,
                             bool authoritative) {
  return redirectTo(webUrl, req, authoritative);
}

void addClusterRoutes(Router& r, NamespaceService& ns, broker::BrokerService& service,
                      const std::string& clusterName) {
  auto* nsp = &ns;
  auto* svc = &service;
  addNamespaceTopicListRoutes(r, nsp, svc);
  addNamespaceUnloadRoutes(r, nsp, svc);
  addClusterDataRoutes(r, nsp, svc);
  addBrokerRoutes(r, nsp, svc, clusterName);
  addBundleRoutes(r, nsp, svc);
  addTopicBundleRoute(r, nsp, svc);
}

}  // namespace magnetar::admin
