#include "admin/rate_limit_routes.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;

// A broker setting as a JSON number or boolean (its text when it is neither).
json::value settingValue(const AdminContext& ctx, const char* key) {
  auto v = ctx.config->getString(key);
  if (!v.isOk()) return nullptr;
  boost::system::error_code ec;
  json::value parsed = json::parse(*v, ec);
  return ec ? json::value(*v) : parsed;
}

// The namespace's map field entry for this cluster; nullopt when unset.
std::optional<json::value> namespaceRate(const AdminContext& ctx, const std::string& ns,
                                         const RateKind& k) {
  auto p = ctx.service.policies().namespacePolicies(ns);
  auto it = p.keptFields.find(k.nsField);
  if (it == p.keptFields.end()) return std::nullopt;
  boost::system::error_code ec;
  json::value map = json::parse(it->second, ec);
  if (ec || !map.is_object()) return std::nullopt;
  const json::value* v = map.as_object().if_contains(ctx.config->clusterName());
  if (!v || !v->is_object()) return std::nullopt;
  return *v;
}

// Sets (value) or removes (nullopt) this cluster's entry of the namespace's map field.
HttpResponse setNamespaceRate(const AdminContext* ctx, const std::string& ns, const RateKind& k,
                              const std::optional<json::value>& value) {
  const std::string cluster = ctx->config->clusterName();
  Status stored =
      ctx->service.policies().updateNamespacePolicies(ns, [&](broker::NamespacePolicies& p) {
        json::object map;
        if (auto it = p.keptFields.find(k.nsField); it != p.keptFields.end()) {
          boost::system::error_code ec;
          json::value old = json::parse(it->second, ec);
          if (!ec && old.is_object()) map = old.as_object();
        }
        if (value) {
          map[cluster] = *value;
        } else {
          map.erase(cluster);
        }
        p.keptFields[k.nsField] = json::serialize(map);
      });
  if (!stored) return errorResponse(stored);
  ctx->service.onNamespacePoliciesChanged(ns);
  return noContent();
}

}  // namespace

const std::vector<RateKind>& rateKinds() {
  static const std::vector<RateKind> kKinds = {
      {"publishRate",
       "publishMaxMessageRate",
       {{"publishThrottlingRateInMsg", -1}, {"publishThrottlingRateInByte", -1}}},
      // Pulsar 4.2.4 keeps Jackson's 0 for the fields a dispatch rate's body leaves out,
      // ratePeriodInSecond included (the limiters take a period of 0 s as 1 s).
      {"dispatchRate",
       "topicDispatchRate",
       {{"dispatchThrottlingRateInMsg", 0},
        {"dispatchThrottlingRateInByte", 0},
        {"relativeToPublishRate", false},
        {"ratePeriodInSecond", 0}}},
      {"subscriptionDispatchRate",
       "subscriptionDispatchRate",
       {{"dispatchThrottlingRateInMsg", 0},
        {"dispatchThrottlingRateInByte", 0},
        {"relativeToPublishRate", false},
        {"ratePeriodInSecond", 0}}},
      {"replicatorDispatchRate",
       "replicatorDispatchRate",
       {{"dispatchThrottlingRateInMsg", 0},
        {"dispatchThrottlingRateInByte", 0},
        {"relativeToPublishRate", false},
        {"ratePeriodInSecond", 0}}},
      {"subscribeRate",
       "clusterSubscribeRate",
       {{"subscribeThrottlingRatePerConsumer", -1}, {"ratePeriodInSecond", 30}}},
  };
  return kKinds;
}

json::value appliedRate(const AdminContext& ctx, const std::string& ns, const RateKind& k) {
  if (auto v = namespaceRate(ctx, ns, k)) return *v;
  const std::string path = k.path;
  // The broker defaults, as Pulsar's topicPolicies hierarchy fills them.
  if (path == "publishRate") {
    return json::object{
        {"publishThrottlingRateInMsg", settingValue(ctx, "maxPublishRatePerTopicInMessages")},
        {"publishThrottlingRateInByte", settingValue(ctx, "maxPublishRatePerTopicInBytes")}};
  }
  if (path == "subscribeRate") {
    return json::object{
        {"subscribeThrottlingRatePerConsumer",
         settingValue(ctx, "subscribeThrottlingRatePerConsumer")},
        {"ratePeriodInSecond", settingValue(ctx, "subscribeRatePeriodPerConsumerInSecond")}};
  }
  // dispatchRate: the topic's; subscriptionDispatchRate; replicatorDispatchRate.
  const std::string per = path == "dispatchRate"             ? "Topic"
                          : path == "replicatorDispatchRate" ? "Replicator"
                                                             : "Subscription";
  const std::string msgKey = "dispatchThrottlingRatePer" + per + "InMsg";
  const std::string byteKey = "dispatchThrottlingRatePer" + per + "InByte";
  return json::object{
      {"dispatchThrottlingRateInMsg", settingValue(ctx, msgKey.c_str())},
      {"dispatchThrottlingRateInByte", settingValue(ctx, byteKey.c_str())},
      {"relativeToPublishRate", settingValue(ctx, "dispatchThrottlingRateRelativeToPublishRate")},
      {"ratePeriodInSecond", 1}};
}

void addNamespaceRateRoutes(Router& r, const AdminContext& ctxRef) {
  const AdminContext* ctx = &ctxRef;
  for (const RateKind& k : rateKinds()) {
    const std::string path = std::string("/admin/v2/namespaces/{tenant}/{namespace}/") + k.path;
    r.addSync("GET", path, [ctx, &k](const HttpRequest&, const PathParams& p) {
      HttpResponse err;
      auto ns = namespaceFromParams(*ctx, p, &err);
      if (!ns) return err;
      auto v = namespaceRate(*ctx, *ns, k);
      return v ? jsonResponse(*v) : noContent();
    });
    r.addSync("POST", path, [ctx, &k](const HttpRequest& req, const PathParams& p) {
      HttpResponse err;
      auto ns = namespaceFromParams(*ctx, p, &err);
      if (!ns) return err;
      auto body = parseJsonBody(req, &err);
      if (!body) return err;
      std::string bad = objectFields(*body, k.fields);
      if (!bad.empty()) return HttpResponse::error(400, bad);
      return setNamespaceRate(ctx, *ns, k, *body);
    });
    r.addSync("DELETE", path, [ctx, &k](const HttpRequest&, const PathParams& p) {
      HttpResponse err;
      auto ns = namespaceFromParams(*ctx, p, &err);
      if (!ns) return err;
      return setNamespaceRate(ctx, *ns, k, std::nullopt);
    });
  }
}

}  // namespace magnetar::admin
