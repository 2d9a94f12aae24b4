#include "admin/cluster_routes.h"

#include <boost/json.hpp>

#include "admin/rest_util.h"
#include "broker/cluster/bundles.h"

namespace magnetar::admin {

namespace json = boost::json;
using broker::cluster::NamespaceService;

namespace {

HttpResponse storeError(const Status& s) {
  return HttpResponse::error(s.code() == StatusCode::kNotFound ? 404 : 500, s.message());
}

}  // namespace

void addClusterRoutes(Router& r, NamespaceService& ns, broker::BrokerService& service,
                      const std::string& clusterName) {
  auto* nsp = &ns;
  auto* svc = &service;
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
  r.add("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
        [nsp, svc](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          std::string nsName = p.at("tenant") + "/" + p.at("namespace");
          std::string bundle = p.at("bundle");
          uint64_t lo = 0, hi = 0;
          if (Status s = broker::cluster::parseBundleName(bundle, &lo, &hi); !s.isOk()) {
            return respond(HttpResponse::error(412, s.message()));
          }
          std::string key = nsName + "/" + bundle;
          std::string path = req.path;
          net::Executor* ex = &svc->ioLoops().next();
          nsp->ownerOf(key, ex,
                       [nsp, nsName, bundle, path, ex,
                        respond](Result<std::optional<broker::cluster::OwnerData>> o) {
                         if (!o.isOk()) return respond(storeError(o.status()));
                         if (!o->has_value()) return respond(noContent());
                         if ((*o)->urls.webServiceUrl != nsp->self().webServiceUrl) {
                           HttpResponse r = HttpResponse::json("", 307);
                           r.headers.emplace_back("Location", (*o)->urls.webServiceUrl + path);
                           return respond(std::move(r));
                         }
                         nsp->unloadBundle(nsName, bundle, ex, [respond](const Status& s) {
                           if (!s.isOk()) return respond(storeError(s));
                           respond(noContent());
                         });
                       });
        });
}

}  // namespace magnetar::admin
