#include "admin/cluster_routes.h"

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "admin/rest_util.h"
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
      f.wait_for(std::chrono::seconds(35));
    }
    if (servedByAnyBroker(pattern)) return std::nullopt;
    if (nsp->owns(*name)) return std::nullopt;
    if (!svc->namespaceExists(name->namespaceName())) return std::nullopt;  // the handler's 404
    if (name->partitionIndex() < 0) {
      auto n = svc->partitionsOf(*name, false);
      if (n.isOk() && *n > 0) return std::nullopt;  // a partitioned topic: fanned out here
    }
    // Pulsar's validateTopicOwnership: look the topic up (taking or placing its bundle when
    // unowned) and serve it here if this broker owns it now, else redirect to the owner.
    auto q = queryParam(req, "authoritative");
    auto promise = std::make_shared<std::promise<broker::LookupAnswer>>();
    auto answer = promise->get_future();
    nsp->lookup(*name, q && *q == "true", "", &svc->ioLoops().next(),
                [promise](broker::LookupAnswer a) { promise->set_value(std::move(a)); });
    if (answer.wait_for(std::chrono::seconds(35)) != std::future_status::ready) {
      return HttpResponse::error(500, "Finding owner for topic " + name->toString() + " timed out");
    }
    broker::LookupAnswer a = answer.get();
    if (!a.error.isOk()) {
      return HttpResponse::error(
          503, "Failed to find ownership for topic:" + name->toString() + ": " + a.error.message());
    }
    if (!a.redirect && a.url == nsp->self().pulsarServiceUrl) return std::nullopt;
    return redirectTo(a.httpUrl, req, nsp->isLeader());
  });
}

void addClusterRoutes(Router& r, NamespaceService& ns, broker::BrokerService& service,
                      const std::string& clusterName) {
  auto* nsp = &ns;
  auto* svc = &service;
  auto namespaceExists = [svc](const std::string& name) {
    if (svc->namespaceExists(name)) return true;
    if (auto* shared = svc->sharedConfig()) shared->refreshNamespace(name);
    return svc->namespaceExists(name);
  };
  // Namespace unload: every owned bundle released by its owner (Pulsar's internalUnloadNamespace).
  r.add(
      "PUT", "/admin/v2/namespaces/{tenant}/{namespace}/unload",
      [nsp, svc, namespaceExists](const HttpRequest&, const PathParams& p, const Respond& respond) {
        std::string nsName = p.at("tenant") + "/" + p.at("namespace");
        if (!broker::isValidNamePart(p.at("tenant")) ||
            !broker::isValidNamePart(p.at("namespace"))) {
          return respond(HttpResponse::error(412, "Invalid namespace name: " + nsName));
        }
        if (!namespaceExists(nsName)) {
          return respond(HttpResponse::error(404, "Namespace does not exist"));
        }
        nsp->unloadNamespace(nsName, &svc->ioLoops().next(), [respond](const Status& s) {
          respond(s.isOk() ? noContent() : storeError(s));
        });
      });
  // Bundle split on its owner (307 there from another broker), range_equally_divide.
  r.add(
      "PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
      [nsp, svc, namespaceExists](const HttpRequest& req, const PathParams& p,
                                  const Respond& respond) {
        std::string nsName = p.at("tenant") + "/" + p.at("namespace");
        std::string bundle = p.at("bundle");
        uint64_t lo = 0, hi = 0;
        if (Status s = broker::cluster::parseBundleName(bundle, &lo, &hi); !s.isOk()) {
          return respond(HttpResponse::error(412, s.message()));
        }
        if (!namespaceExists(nsName)) {
          return respond(HttpResponse::error(404, "Namespace does not exist"));
        }
        auto algorithm = queryParam(req, "splitAlgorithmName");
        if (algorithm && !algorithm->empty() && *algorithm != "range_equally_divide") {
          return respond(HttpResponse::error(
              412,
              "Unsupported namespace bundle split algorithm, supported algorithms are "
              "[range_equally_divide]"));
        }
        bool unload = queryFlag(req, "unload");
        net::Executor* ex = &svc->ioLoops().next();
        nsp->ownerOf(
            nsName + "/" + bundle, ex,
            [nsp, nsName, bundle, unload, req, ex,
             respond](Result<std::optional<broker::cluster::OwnerData>> o) {
              if (!o.isOk()) return respond(storeError(o.status()));
              if (o->has_value() && (*o)->urls.webServiceUrl != nsp->self().webServiceUrl) {
                return respond(redirectTo((*o)->urls.webServiceUrl, req, nsp->isLeader()));
              }
              nsp->splitBundle(nsName, bundle, unload, ex, [respond](const Status& s) {
                if (s.isOk()) return respond(noContent());
                if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument) {
                  return respond(HttpResponse::error(412, s.message()));
                }
                if (s.code() == StatusCode::kBusy) {
                  return respond(HttpResponse::error(409, s.message()));
                }
                respond(storeError(s));
              });
            });
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
      [nsp, svc, namespaceExists](const HttpRequest& req, const PathParams& p,
                                  const Respond& respond) {
        std::string nsName = p.at("tenant") + "/" + p.at("namespace");
        std::string bundle = p.at("bundle");
        uint64_t lo = 0, hi = 0;
        if (Status s = broker::cluster::parseBundleName(bundle, &lo, &hi); !s.isOk()) {
          return respond(HttpResponse::error(412, s.message()));
        }
        if (!namespaceExists(nsName)) {
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
              nsp->ownerOf(
                  key, ex,
                  [nsp, nsName, bundle, req, ex,
                   respond](Result<std::optional<broker::cluster::OwnerData>> o) {
                    if (!o.isOk()) return respond(storeError(o.status()));
                    if (!o->has_value()) return respond(noContent());
                    if ((*o)->urls.webServiceUrl != nsp->self().webServiceUrl) {
                      return respond(redirectTo((*o)->urls.webServiceUrl, req, nsp->isLeader()));
                    }
                    nsp->unloadBundle(nsName, bundle, ex, [respond](const Status& s) {
                      if (!s.isOk()) return respond(storeError(s));
                      respond(noContent());
                    });
                  });
            });
      });
  // The bundle a topic belongs to (Pulsar's TopicLookup getNamespaceBundle, `pulsar-admin
  // topics bundle-range`): its range as text, from the namespace's current cut.
  r.add(
      "GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}/bundle",
      [nsp, svc, namespaceExists](const HttpRequest&, const PathParams& p, const Respond& respond) {
        const std::string& domain = p.at("domain");
        if (domain != "persistent" && domain != "non-persistent") {
          return respond(HttpResponse::error(404, "Not found"));
        }
        HttpResponse err;
        auto name = topicFromParams(p, &err);
        if (!name) return respond(err);
        std::string nsName = name->namespaceName();
        if (!namespaceExists(nsName)) {
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

}  // namespace magnetar::admin
