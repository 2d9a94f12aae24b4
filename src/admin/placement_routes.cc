#include "admin/placement_routes.h"

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cctype>
#include <memory>
#include <optional>
#include <utility>

#include "base/logging.h"
#include "broker/cluster/bundles.h"
#include "broker/cluster/cluster_metadata.h"
#include "broker/cluster/load_placement.h"

namespace magnetar::admin {

namespace json = boost::json;
using broker::cluster::NamespaceIsolationPolicies;
using broker::cluster::NamespaceIsolationPolicy;
using GetResult = Result<std::optional<metadata::GetResult>>;

namespace {

constexpr const char* kLocalPoliciesRoot = "/admin/local-policies/";

HttpResponse storeFailure(const Status& s) { return HttpResponse::error(500, s.message()); }

net::Executor* executor(const AdminContext& ctx) { return &ctx.service.ioLoops().next(); }

// Pulsar's validateClusterExistAsync: `missing` (404 or 412) "Cluster {c} does not exist."
void withCluster(const AdminContext& ctx, metadata::Store* config, const std::string& cluster,
                 int missing, const Respond& respond, std::function<void()> next) {
  // The local cluster exists even without its node (standalone writes none).
  bool local = cluster == ctx.config->clusterName();
  config->exists(
      "/admin/clusters/" + cluster, executor(ctx),
      [cluster, missing, local, respond, next = std::move(next)](const Result<bool>& found) {
        if (!found.isOk()) return respond(storeFailure(found.status()));
        if (!*found && !local) {
          return respond(HttpResponse::error(missing, "Cluster " + cluster + " does not exist."));
        }
        next();
      });
}

// The cluster's policies and the znode's version (nullopt: no znode), or the error answered.
using PoliciesRead =
    std::function<void(NamespaceIsolationPolicies, std::optional<metadata::Version>)>;
void readPolicies(const AdminContext& ctx, metadata::Store* config, const std::string& cluster,
                  const Respond& respond, PoliciesRead next) {
  std::string path = broker::cluster::isolationPoliciesPath(cluster);
  config->get(path, executor(ctx), [path, respond, next = std::move(next)](const GetResult& r) {
    if (!r.isOk()) return respond(storeFailure(r.status()));
    if (!r->has_value()) return next({}, std::nullopt);
    auto p = (*r)->value.empty()
                 ? Result<NamespaceIsolationPolicies>(NamespaceIsolationPolicies{})
                 : broker::cluster::parseNamespaceIsolationPolicies((*r)->value, path);
    if (!p.isOk()) return respond(storeFailure(p.status()));
    next(std::move(*p), (*r)->stat.version);
  });
}

HttpResponse notConfigured(const std::string& cluster) {
  return HttpResponse::error(
      404, "NamespaceIsolationPolicies for cluster " + cluster + " does not exist");
}

// BrokerNamespaceIsolationData of broker id `broker` (Pulsar matches the whole id here).
json::object brokerIsolation(const std::string& broker, const NamespaceIsolationPolicies& p) {
  json::object o;
  o["brokerName"] = broker;
  json::array regexes;
  std::optional<std::string> policyName;
  std::optional<bool> primary;
  for (const auto& [name, policy] : p) {
    if (policy.isPrimary(broker) || policy.isSecondary(broker)) {
      for (const auto& ns : policy.namespaces) regexes.emplace_back(ns);
      primary = policy.isPrimary(broker);
      policyName = name;
    }
  }
  if (policyName) o["policyName"] = *policyName;
  o["namespaceRegex"] = std::move(regexes);
  o["primary"] = primary.value_or(false);
  return o;
}

void addIsolationGetRoutes(Router& r, const AdminContext& ctx, const PlacementStores& st) {
  const AdminContext* c = &ctx;
  metadata::Store* config = st.config;
  r.add("GET", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies",
        [c, config](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          withCluster(*c, config, cluster, 404, respond, [c, config, cluster, respond] {
            readPolicies(*c, config, cluster, respond, [cluster, respond](auto all, auto v) {
              if (!v) return respond(notConfigured(cluster));
              respond(HttpResponse::json(broker::cluster::toJson(all)));
            });
          });
        });
  r.add("GET", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/{policyName}",
        [c, config](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          std::string name = p.at("policyName");
          withCluster(*c, config, cluster, 412, respond, [c, config, cluster, name, respond] {
            readPolicies(*c, config, cluster, respond, [cluster, name, respond](auto all, auto v) {
              if (!v) return respond(notConfigured(cluster));
              auto it = all.find(name);
              if (it == all.end()) {
                return respond(HttpResponse::error(404, "Cannot find NamespaceIsolationPolicy " +
                                                            name + " for cluster " + cluster));
              }
              respond(HttpResponse::json(broker::cluster::toJson(it->second)));
            });
          });
        });
}

void addIsolationBrokerRoutes(Router& r, const AdminContext& ctx, const PlacementStores& st) {
  const AdminContext* c = &ctx;
  metadata::Store* config = st.config;
  auto brokers = st.activeBrokers;
  r.add("GET", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/brokers",
        [c, config, brokers](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          withCluster(*c, config, cluster, 412, respond, [c, config, cluster, brokers, respond] {
            readPolicies(*c, config, cluster, respond,
                         [cluster, brokers, respond](auto all, auto v) {
                           if (!v) return respond(notConfigured(cluster));
                           auto answer = [all, respond](Result<std::vector<std::string>> ids) {
                             if (!ids.isOk()) return respond(storeFailure(ids.status()));
                             json::array a;
                             for (const auto& id : *ids) a.emplace_back(brokerIsolation(id, all));
                             respond(jsonResponse(a));
                           };
                           if (!brokers) return answer(std::vector<std::string>{});
                           brokers(answer);
                         });
          });
        });
  r.add("GET", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/brokers/{broker}",
        [c, config](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          std::string broker = p.at("broker");
          withCluster(*c, config, cluster, 412, respond, [c, config, cluster, broker, respond] {
            readPolicies(*c, config, cluster, respond,
                         [cluster, broker, respond](auto all, auto v) {
                           if (!v) return respond(notConfigured(cluster));
                           respond(jsonResponse(brokerIsolation(broker, all)));
                         });
          });
        });
}

// Writes the cluster's policies as `change` makes them from what was read (compare-and-set,
// retried once on a concurrent change).
void updatePolicies(const AdminContext& ctx, metadata::Store* config, const std::string& cluster,
                    const std::function<void(NamespaceIsolationPolicies&)>& change,
                    const Respond& respond, const std::function<void()>& done, int tries = 2) {
  readPolicies(
      ctx, config, cluster, respond,
      [&ctx, config, cluster, change, respond, done, tries](auto all, auto version) {
        change(all);
        metadata::PutOptions o;
        o.expectedVersion = version ? *version : metadata::kNotExists;
        config->put(
            broker::cluster::isolationPoliciesPath(cluster), broker::cluster::toJson(all), o,
            executor(ctx),
            [&ctx, config, cluster, change, respond, done, tries](const Result<metadata::Stat>& w) {
              if (w.isOk()) return done();
              if (w.status().code() == StatusCode::kBadVersion && tries > 1) {
                return updatePolicies(ctx, config, cluster, change, respond, done, tries - 1);
              }
              respond(storeFailure(w.status()));
            });
      });
}

// Pulsar's filterAndUnloadMatchedNamespaceAsync: every namespace of this cluster the policy
// matches is unloaded, so that the leader places its bundles again under the policy.
void unloadMatched(const AdminContext& ctx, const PlacementStores& st,
                   const NamespaceIsolationPolicy& policy, const Respond& respond) {
  std::vector<std::string> matched;
  if (st.unloadNamespace) {
    for (const auto& ns : ctx.service.namespaces()) {
      if (policy.matchesNamespace(ns)) matched.push_back(ns);
    }
  }
  if (matched.empty()) return respond(noContent());
  auto left = std::make_shared<std::atomic<size_t>>(matched.size());
  for (const auto& ns : matched) {
    st.unloadNamespace(ns, [ns, left, respond](const Status& s) {
      if (!s.isOk()) MLOG_WARN("Cannot unload {} for its isolation policy: {}", ns, s.message());
      if (--*left == 0) respond(noContent());
    });
  }
}

void addIsolationWriteRoutes(Router& r, const AdminContext& ctx, const PlacementStores& st) {
  const AdminContext* c = &ctx;
  metadata::Store* config = st.config;
  r.add("POST", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/{policyName}",
        [c, config, st](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          std::string name = p.at("policyName");
          auto policy = broker::cluster::parseNamespaceIsolationData(req.body);
          bool unload = queryParam(req, "unloadBundles").value_or("true") != "false";
          withCluster(*c, config, cluster, 412, respond, [=] {
            if (!policy.isOk()) {
              return respond(HttpResponse::error(
                  400, "Invalid format of input policy data. policy: " + name +
                           "; data: " + req.body + " (" + policy.status().message() + ")"));
            }
            auto set = [name, v = *policy](NamespaceIsolationPolicies& all) { all[name] = v; };
            updatePolicies(*c, config, cluster, set, respond,
                           [c, st, v = *policy, unload, respond] {
                             if (!unload) return respond(noContent());
                             unloadMatched(*c, st, v, respond);
                           });
          });
        });
  r.add("DELETE", "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/{policyName}",
        [c, config](const HttpRequest&, const PathParams& p, const Respond& respond) {
          std::string cluster = p.at("cluster");
          std::string name = p.at("policyName");
          withCluster(*c, config, cluster, 412, respond, [c, config, cluster, name, respond] {
            auto drop = [name](NamespaceIsolationPolicies& all) { all.erase(name); };
            updatePolicies(*c, config, cluster, drop, respond, [respond] { respond(noContent()); });
          });
        });
}

// Pulsar compares groups with equalsIgnoreCase.
bool sameGroup(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool isBlank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// The namespace's cut for a LocalPolicies made here: its Policies' bundles, else the default.
void boundariesFor(const AdminContext& ctx, metadata::Store* config, const std::string& ns,
                   std::function<void(std::vector<uint64_t>)> next) {
  std::string path = "/admin/policies/" + ns;
  config->get(path, executor(ctx), [&ctx, path, next = std::move(next)](const GetResult& r) {
    if (r.isOk() && r->has_value()) {
      auto b = broker::cluster::boundariesFromPolicies((*r)->value, path);
      if (b.isOk() && b->has_value()) return next(**b);
    }
    auto d = broker::cluster::defaultBoundaries(ctx.config->defaultNumberOfNamespaceBundles());
    next(d.isOk() ? *d : std::vector<uint64_t>{});
  });
}

// Sets (group) or removes (nullopt) the namespace's anti-affinity group in its LocalPolicies.
void writeGroup(const AdminContext& ctx, const PlacementStores& st, const std::string& ns,
                const std::optional<std::string>& group, const Respond& respond) {
  std::string path = kLocalPoliciesRoot + ns;
  st.local->get(path, executor(ctx), [&ctx, st, ns, path, group, respond](const GetResult& r) {
    if (!r.isOk()) return respond(storeFailure(r.status()));
    auto write = [&ctx, st, path, group, respond](const std::string& base,
                                                  std::optional<metadata::Version> v,
                                                  const std::vector<uint64_t>& cut) {
      metadata::PutOptions o;
      o.expectedVersion = v ? *v : metadata::kNotExists;
      st.local->put(path, broker::cluster::localPoliciesWithAntiAffinityGroup(base, cut, group), o,
                    executor(ctx), [respond](const Result<metadata::Stat>& w) {
                      if (w.isOk()) return respond(noContent());
                      if (w.status().code() == StatusCode::kBadVersion) {
                        return respond(HttpResponse::error(409, "Concurrent modification"));
                      }
                      respond(storeFailure(w.status()));
                    });
    };
    if (r->has_value()) return write((*r)->value, (*r)->stat.version, {});
    if (!group) return respond(HttpResponse::error(404, ""));  // Pulsar's NotFound, no reason
    boundariesFor(ctx, st.config, ns,
                  [write](const std::vector<uint64_t>& cut) { write("", std::nullopt, cut); });
  });
}

void addAntiAffinityRoutes(Router& r, const AdminContext& ctx, const PlacementStores& st) {
  const AdminContext* c = &ctx;
  const std::string pattern = "/admin/v2/namespaces/{tenant}/{namespace}/antiAffinity";
  // As Pulsar, the namespace's existence is not checked (its LocalPolicies are written anyway).
  auto nsOf = [](const PathParams& p, const Respond&) -> std::optional<std::string> {
    return p.at("tenant") + "/" + p.at("namespace");
  };
  r.add("POST", pattern,
        [c, st, nsOf](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          auto ns = nsOf(p, respond);
          if (!ns) return;
          const std::string& group = req.body;  // Pulsar stores the body as it is
          if (isBlank(group)) {
            return respond(HttpResponse::error(412, "Anti-affinity group can't be empty"));
          }
          writeGroup(*c, st, *ns, group, respond);
        });
  r.add("DELETE", pattern,
        [c, st, nsOf](const HttpRequest&, const PathParams& p, const Respond& respond) {
          if (auto ns = nsOf(p, respond)) writeGroup(*c, st, *ns, std::nullopt, respond);
        });
  r.add("GET", pattern,
        [c, st, nsOf](const HttpRequest&, const PathParams& p, const Respond& respond) {
          auto ns = nsOf(p, respond);
          if (!ns) return;
          st.local->get(kLocalPoliciesRoot + *ns, executor(*c), [respond](const GetResult& g) {
            if (!g.isOk()) return respond(storeFailure(g.status()));
            std::string group =
                g->has_value() ? broker::cluster::antiAffinityGroupOf((*g)->value) : std::string();
            // Pulsar writes the String as it is; none: 200 with an empty body.
            HttpResponse out = HttpResponse::json(group);
            if (group.empty()) out.contentType.clear();
            respond(std::move(out));
          });
        });
}

void addAntiAffinityNamespacesRoute(Router& r, const AdminContext& ctx, const PlacementStores& st) {
  const AdminContext* c = &ctx;
  r.add(
      "GET", "/admin/v2/namespaces/{cluster}/antiAffinity/{group}",
      [c, st](const HttpRequest& req, const PathParams& p, const Respond& respond) {
        std::string group = p.at("group");
        auto tenant = queryParam(req, "tenant");
        if (!tenant) return respond(HttpResponse::error(400, "Tenant should not be null"));
        withCluster(*c, st.config, p.at("cluster"), 412, respond, [c, st, group, tenant, respond] {
          std::vector<std::string> candidates;
          for (const auto& ns : c->service.namespaces()) {
            if (ns.rfind(*tenant + "/", 0) == 0) candidates.push_back(ns);
          }
          auto found = std::make_shared<std::vector<std::string>>();
          auto left = std::make_shared<size_t>(candidates.size());
          if (candidates.empty()) return respond(jsonResponse(json::array{}));
          net::Executor* ex = executor(*c);  // one executor: its callbacks run one at a time
          for (const auto& ns : candidates) {
            st.local->get(
                kLocalPoliciesRoot + ns, ex, [ns, group, found, left, respond](const GetResult& g) {
                  if (g.isOk() && g->has_value() &&
                      sameGroup(broker::cluster::antiAffinityGroupOf((*g)->value), group)) {
                    found->push_back(ns);
                  }
                  if (--*left > 0) return;
                  json::array a;
                  std::sort(found->begin(), found->end());
                  for (const auto& n : *found) a.emplace_back(n);
                  respond(jsonResponse(a));
                });
          }
        });
      });
}

}  // namespace

void addPlacementPolicyRoutes(Router& r, const AdminContext& ctx, const PlacementStores& stores) {
  addIsolationGetRoutes(r, ctx, stores);
  addIsolationBrokerRoutes(r, ctx, stores);
  addIsolationWriteRoutes(r, ctx, stores);
  addAntiAffinityRoutes(r, ctx, stores);
  addAntiAffinityNamespacesRoute(r, ctx, stores);
}

}  // namespace magnetar::admin
