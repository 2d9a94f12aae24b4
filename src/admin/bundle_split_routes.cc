#include "admin/bundle_split_routes.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <memory>
#include <set>

#include "admin/cluster_routes.h"
#include "base/logging.h"
#include "broker/cluster/bundles.h"
#include "broker/topic/stats.h"
#include "broker/topic/topic.h"

namespace magnetar::admin {

namespace json = boost::json;
using broker::cluster::BundleLoad;
using broker::cluster::NamespaceService;
using broker::cluster::SplitAlgorithm;
using broker::cluster::SplitTopic;

namespace {

using Cut = std::vector<uint64_t>;

bool inRange(uint32_t hash, uint64_t lo, uint64_t hi) {
  return hash >= lo && (hash < hi || (hi == broker::cluster::kFullUpperBound && hash == hi));
}

// Pulsar's getNamespaceBundleSplitAlgorithmByName: the name, else the default, else range.
SplitAlgorithm algorithmOf(const AdminContext& ctx, const std::optional<std::string>& name) {
  if (name) {
    if (auto a = broker::cluster::splitAlgorithmByName(*name)) return *a;
  }
  if (auto a = broker::cluster::splitAlgorithmByName(
          ctx.config->defaultNamespaceBundleSplitAlgorithm())) {
    return *a;
  }
  return SplitAlgorithm::kRangeEquallyDivide;
}

// Standalone: the namespace's cut as its Policies keep it (bundles.boundaries), else the default
// cut of defaultNumberOfNamespaceBundles.
Result<Cut> standaloneCut(const AdminContext& ctx, const std::string& ns) {
  auto p = ctx.service.policies().namespacePolicies(ns);
  auto it = p.keptFields.find("bundles");
  if (it != p.keptFields.end()) {
    boost::system::error_code ec;
    json::value v = json::parse(it->second, ec);
    const json::value* b = !ec && v.is_object() ? v.as_object().if_contains("boundaries") : nullptr;
    if (b && b->is_array()) {
      std::vector<std::string> values;
      for (const auto& e : b->as_array()) {
        if (e.is_string()) values.emplace_back(e.as_string());
      }
      return broker::cluster::parseBoundaries(values);
    }
  }
  return broker::cluster::defaultBoundaries(ctx.config->defaultNumberOfNamespaceBundles());
}

// The namespace's current cut: NamespaceService's (cluster) or the Policies' (standalone).
void currentCut(const AdminContext& ctx, NamespaceService* nsp, const std::string& ns,
                std::function<void(Result<Cut>)> cb) {
  if (nsp == nullptr) return cb(standaloneCut(ctx, ns));
  nsp->boundariesOf(ns, &ctx.service.ioLoops().next(), std::move(cb));
}

// The bundle's topics (Pulsar's getOwnedTopicListForNamespaceBundle: the namespace's persistent
// topics, stored or loaded, every partition of its partitioned topics, its loaded non-persistent
// ones; on shared storage those the storage holds too), with the rates of those loaded here.
void bundleTopics(const AdminContext& ctx, const std::string& ns, uint64_t lo, uint64_t hi,
                  const std::function<void(Result<std::vector<SplitTopic>>)>& done) {
  auto withRates = [&ctx, lo, hi, done](const std::set<std::string>& names) {
    std::map<std::string, SplitTopic> byName;
    for (const auto& n : names) {
      uint32_t h = broker::cluster::topicHash(n);
      if (inRange(h, lo, hi)) byName[n] = SplitTopic{h, 0, 0};
    }
    std::vector<std::shared_ptr<broker::PersistentTopic>> loaded;
    for (auto& t : ctx.service.topics()) {
      if (byName.count(t->name().toString())) loaded.push_back(t);
    }
    auto gather = Gather<broker::TopicSnapshot>::create(
        loaded.size(), [byName, done](const std::vector<broker::TopicSnapshot>& snaps) mutable {
          for (const auto& s : snaps) {
            auto it = byName.find(s.name);
            if (it == byName.end()) continue;
            it->second.msgRate = s.rateIn.msgRate + s.rateOut.msgRate;
            it->second.throughput = s.rateIn.byteRate + s.rateOut.byteRate;
          }
          std::vector<SplitTopic> out;
          out.reserve(byName.size());
          for (const auto& [n, t] : byName) out.push_back(t);
          done(std::move(out));
        });
    for (size_t i = 0; i < loaded.size(); ++i) {
      auto t = loaded[i];
      auto rates = ctx.rates.find(t->name().toString());
      t->executor().execute(
          [t, rates, gather, i] { gather->set(i, broker::snapshotTopic(*t, rates.get())); });
    }
  };
  std::set<std::string> names;
  for (auto d : {broker::TopicDomain::kPersistent, broker::TopicDomain::kNonPersistent}) {
    for (auto& n : listTopics(ctx, ns, d)) names.insert(std::move(n));
  }
  if (!ctx.service.storageShared()) return withRates(names);
  ctx.service.sharedStoredTopicsOf(
      ns, broker::TopicDomain::kPersistent, &ctx.service.ioLoops().next(),
      [names = std::move(names), withRates, done](Result<std::vector<std::string>> stored) mutable {
        if (!stored.isOk()) return done(stored.status());
        names.insert(stored->begin(), stored->end());
        withRates(names);
      });
}

// Standalone: the new cut into the namespace's Policies (bundles), then with unload the loaded
// topics of the split range unloaded (their clients look them up again, here).
void standaloneSplit(const AdminContext& ctx, const std::string& ns, uint64_t lo, uint64_t hi,
                     Cut next, bool unload, const std::function<void(Status)>& done) {
  runMayBlock(ctx, [&ctx, ns, lo, hi, next = std::move(next), unload, done] {
    json::array a;
    for (uint64_t v : next) a.emplace_back(broker::cluster::formatBoundary(v));
    std::string text = json::serialize(json::object{
        {"boundaries", std::move(a)}, {"numBundles", static_cast<int64_t>(next.size()) - 1}});
    Status s = ctx.service.policies().updateNamespacePolicies(
        ns, [&text](broker::NamespacePolicies& p) { p.keptFields["bundles"] = text; });
    if (!s.isOk()) return done(s);
    MLOG_INFO("Split bundle {}/{} into {} bundles", ns, broker::cluster::bundleName(lo, hi),
              next.size());
    if (unload) {
      for (auto& t : ctx.service.topics()) {
        if (t->name().namespaceName() == ns &&
            inRange(broker::cluster::topicHash(t->name().toString()), lo, hi)) {
          ctx.service.unloadTopic(t, /*release=*/false);
        }
      }
    }
    done(Status::ok());
  });
}

// The bundle's index in `cut` (Pulsar's NamespaceBundles.validateBundle); kInvalidArgument with
// its texts otherwise.
Result<size_t> bundleIndex(const Cut& cut, const std::string& ns, const std::string& bundle) {
  uint64_t lo = 0, hi = 0;
  if (!broker::cluster::parseBundleName(bundle, &lo, &hi).isOk()) {
    return Status::invalidArgument("Invalid bundle range: " + bundle);
  }
  for (size_t i = 0; i + 1 < cut.size(); ++i) {
    if (cut[i] != lo) continue;
    if (cut[i + 1] == hi) return i;
    return Status::invalidArgument(
        fmt::format("Invalid upper boundary for bundle {}/{}. Expected upper boundary of {}/{}", ns,
                    bundle, ns, broker::cluster::bundleName(cut[i], cut[i + 1])));
  }
  return Status::invalidArgument(
      fmt::format("Cannot find bundle {}/{} in the bundles list", ns, bundle));
}

}  // namespace

void splitBundle(const AdminContext& ctx, NamespaceService* nsp, const BundleSplitParams& p,
                 const std::function<void(Status)>& done) {
  SplitAlgorithm algorithm = algorithmOf(ctx, p.algorithm);
  if (algorithm == SplitAlgorithm::kFlowOrQpsEquallyDivide &&
      broker::cluster::splitAlgorithmByName(ctx.config->defaultNamespaceBundleSplitAlgorithm()) !=
          SplitAlgorithm::kFlowOrQpsEquallyDivide) {
    // Pulsar 4.2 gives the algorithm its topic stats and thresholds only when it is the default
    // (NamespaceService.getBundleSplitOption); otherwise the split fails (500 there, a
    // ClassCastException).
    return done(Status::internal(
        "flow_or_qps_equally_divide needs defaultNamespaceBundleSplitAlgorithm="
        "flow_or_qps_equally_divide (as Pulsar, which has no topic stats for it otherwise)"));
  }
  currentCut(ctx, nsp, p.ns, [&ctx, nsp, p, algorithm, done](Result<Cut> cut) {
    if (!cut.isOk()) return done(cut.status());
    auto index = bundleIndex(*cut, p.ns, p.bundle);
    if (!index.isOk()) return done(index.status());
    uint64_t lo = (*cut)[*index];
    uint64_t hi = (*cut)[*index + 1];
    bundleTopics(ctx, p.ns, lo, hi,
                 [&ctx, nsp, p, algorithm, was = *cut, at = *index, lo, hi,
                  done](Result<std::vector<SplitTopic>> topics) {
                   if (!topics.isOk()) return done(topics.status());
                   broker::cluster::SplitRequest r;
                   r.lower = lo;
                   r.upper = hi;
                   r.topics = std::move(*topics);
                   r.positions = p.positions;
                   r.maxMsgRate = ctx.config->loadBalancerNamespaceBundleMaxMsgRate();
                   r.maxBandwidthMbytes =
                       ctx.config->loadBalancerNamespaceBundleMaxBandwidthMbytes();
                   r.diffThresholdPercentage = ctx.config->flowOrQpsDifferenceThresholdPercentage();
                   auto points = broker::cluster::splitBoundaries(algorithm, r);
                   if (!points.isOk()) return done(points.status());
                   if (points->empty()) {
                     MLOG_INFO("[{}] No valid boundary found to split bundle {} ({})", p.ns,
                               p.bundle, broker::cluster::splitAlgorithmName(algorithm));
                     return done(Status::ok());
                   }
                   if (nsp != nullptr) {
                     return nsp->splitBundle(p.ns, p.bundle, *points, p.unload,
                                             &ctx.service.ioLoops().next(), done);
                   }
                   auto next = broker::cluster::cutAfterSplit(was, at, *points);
                   if (!next.isOk()) return done(next.status());
                   standaloneSplit(ctx, p.ns, lo, hi, std::move(*next), p.unload, done);
                 });
  });
}

namespace {

// Java's List.toString: "[a, b]".
std::string javaList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out + "]";
}

// The request's split options as Pulsar's internalSplitNamespaceBundleAsync checks them; an
// error response otherwise.
std::optional<HttpResponse> readSplitParams(const AdminContext& ctx, const HttpRequest& req,
                                            BundleSplitParams* p) {
  p->unload = queryFlag(req, "unload");
  p->algorithm = queryParam(req, "splitAlgorithmName");
  if (!req.body.empty()) {
    HttpResponse err;
    auto v = parseJsonBody(req, &err);
    if (!v) return err;
    if (!v->is_null()) {
      if (!v->is_array()) return jacksonError("java.util.ArrayList<java.lang.Long>", *v);
      for (const auto& e : v->as_array()) {
        auto n = javaInteger(e, false);
        if (!n) return jacksonError("java.lang.Long", e);
        p->positions.push_back(*n);
      }
    }
  }
  const auto supported = ctx.config->supportedNamespaceBundleSplitAlgorithms();
  bool blank = !p->algorithm || p->algorithm->find_first_not_of(" \t") == std::string::npos;
  if (!blank && std::find(supported.begin(), supported.end(), *p->algorithm) == supported.end()) {
    return HttpResponse::error(
        412, "Unsupported namespace bundle split algorithm, supported algorithms are " +
                 javaList(supported));
  }
  if (!blank && p->positions.empty() &&
      broker::cluster::splitAlgorithmByName(*p->algorithm) ==
          SplitAlgorithm::kSpecifiedPositionsDivide) {
    return HttpResponse::error(
        412, "With specified_positions_divide split algorithm, splitBoundaries must not be empty");
  }
  return std::nullopt;
}

HttpResponse splitError(const Status& s) {
  if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument) {
    return HttpResponse::error(412, s.message());
  }
  if (s.code() == StatusCode::kBusy) return HttpResponse::error(409, s.message());
  return HttpResponse::error(500, s.message());
}

void splitRoute(const AdminContext* ctx, NamespaceService* nsp, const HttpRequest& req,
                const PathParams& params, const Respond& respond) {
  HttpResponse err;
  auto ns = namespaceFromParams(*ctx, params, &err);
  if (!ns) return respond(err);
  BundleSplitParams p;
  p.ns = *ns;
  p.bundle = params.at("bundle");
  uint64_t lo = 0, hi = 0;
  if (!broker::cluster::parseBundleName(p.bundle, &lo, &hi).isOk()) {
    return respond(HttpResponse::error(412, "Invalid bundle range: " + p.bundle));
  }
  if (auto bad = readSplitParams(*ctx, req, &p)) return respond(*bad);
  auto run = [ctx, nsp, p, respond] {
    splitBundle(*ctx, nsp, p,
                [respond](const Status& s) { respond(s.isOk() ? noContent() : splitError(s)); });
  };
  if (nsp == nullptr) return run();
  // Cluster mode: on the owner (Pulsar's validateNamespaceBundleOwnership redirects there).
  nsp->ownerOf(p.ns + "/" + p.bundle, &ctx->service.ioLoops().next(),
               [nsp, req, respond, run](Result<std::optional<broker::cluster::OwnerData>> o) {
                 if (!o.isOk()) return respond(splitError(o.status()));
                 if (o->has_value() && (*o)->urls.webServiceUrl != nsp->self().webServiceUrl) {
                   return respond(clusterRedirect((*o)->urls.webServiceUrl, req, nsp->isLeader()));
                 }
                 run();
               });
}

}  // namespace

void addBundleSplitRoutes(Router& r, const AdminContext* ctx, NamespaceService* nsp) {
  r.add("PUT", "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
        [ctx, nsp](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          splitRoute(ctx, nsp, req, p, respond);
        });
  if (nsp != nullptr) return;
  // Standalone: the namespace's cut as its Policies keep it (split included).
  r.addSync(
      "GET", "/admin/v2/namespaces/{tenant}/{namespace}/bundles",
      [ctx](const HttpRequest&, const PathParams& p) {
        HttpResponse err;
        auto ns = namespaceFromParams(*ctx, p, &err);
        if (!ns) return err;
        auto cut = standaloneCut(*ctx, *ns);
        if (!cut.isOk()) return HttpResponse::error(500, cut.status().message());
        json::array a;
        for (uint64_t v : *cut) a.emplace_back(broker::cluster::formatBoundary(v));
        return jsonResponse(json::object{{"boundaries", std::move(a)},
                                         {"numBundles", static_cast<int64_t>(cut->size()) - 1}});
      });
}

}  // namespace magnetar::admin
