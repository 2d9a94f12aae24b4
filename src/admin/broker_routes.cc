#include "admin/broker_routes.h"

#include <boost/json.hpp>

namespace magnetar::admin {

void addBrokerConfigurationRoutes(
    Router& router, const std::shared_ptr<const config::ServiceConfiguration>& config) {
  router.addSync("GET", "/admin/v2/brokers/configuration/runtime",
                 [config](const HttpRequest&, const PathParams&) {
                   boost::json::object o;
                   for (const auto& [key, value] : config->toStringMap()) o[key] = value;
                   return HttpResponse::json(boost::json::serialize(o));
                 });
  router.addSync("GET", "/admin/v2/brokers/configuration",
                 [](const HttpRequest&, const PathParams&) {
                   boost::json::array a;
                   for (const auto& key : config::ServiceConfiguration::dynamicKeys()) {
                     a.emplace_back(key);
                   }
                   return HttpResponse::json(boost::json::serialize(a));
                 });
}

void addHealthRoute(Router& router, std::function<bool()> ready) {
  router.addSync("GET", "/admin/v2/brokers/health",
                 [ready = std::move(ready)](const HttpRequest&, const PathParams&) {
                   if (!ready()) return HttpResponse::error(503, "Broker is not serving yet");
                   return HttpResponse::text("ok");
                 });
}

void addDynamicConfigurationRoutes(Router& router,
                                   const std::shared_ptr<config::ServiceConfiguration>& config) {
  router.addSync("POST", "/admin/v2/brokers/configuration/{key}/{value}",
                 [config](const HttpRequest&, const PathParams& p) {
                   // A blank value would reset the setting; Pulsar 4 stores it verbatim and
                   // fails later, so it is refused here as a value that does not parse.
                   const std::string& value = p.at("value");
                   if (value.find_first_not_of(" \t\r\n") == std::string::npos) {
                     return HttpResponse::error(412, "Invalid dynamic-config value: blank");
                   }
                   Status s = config->updateDynamic(p.at("key"), value);
                   // Pulsar's messages: an unknown or static key is "non-dynamic"; a value that
                   // does not parse is an invalid dynamic-config value (with the detail here).
                   if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kNotAllowed) {
                     return HttpResponse::error(412, "Cannot update non-dynamic configuration");
                   }
                   if (!s) {
                     return HttpResponse::error(412,
                                                "Invalid dynamic-config value: " + s.message());
                   }
                   return HttpResponse{204, "", "", {}};
                 });
  router.addSync("GET", "/admin/v2/brokers/configuration/values",
                 [config](const HttpRequest&, const PathParams&) {
                   boost::json::object o;
                   for (const auto& key : config::ServiceConfiguration::dynamicKeys()) {
                     if (auto v = config->getString(key); v.isOk()) o[key] = *v;
                   }
                   return HttpResponse::json(boost::json::serialize(o));
                 });
}

void addBrokersListRoute(Router& router,
                         const std::shared_ptr<const config::ServiceConfiguration>& config) {
  router.addSync("GET", "/admin/v2/brokers/{cluster}",
                 [config](const HttpRequest& req, const PathParams& p) {
                   if (p.at("cluster") != config->clusterName()) {
                     return HttpResponse::error(404, "Cluster does not exist");
                   }
                   std::string host = req.host;
                   if (!config->advertisedAddress().empty() || host.empty()) {
                     host = (config->advertisedAddress().empty() ? std::string("localhost")
                                                                 : config->advertisedAddress()) +
                            ":" + std::to_string(config->webServicePort());
                   }
                   boost::json::array a;
                   a.emplace_back(host);
                   return HttpResponse::json(boost::json::serialize(a));
                 });
}

}  // namespace magnetar::admin
