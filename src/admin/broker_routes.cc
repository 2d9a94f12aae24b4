#include "admin/broker_routes.h"

#include <boost/json.hpp>

namespace magnetar::admin {

void addBrokerConfigurationRoutes(Router& router,
                                  std::shared_ptr<const config::ServiceConfiguration> config) {
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

}  // namespace magnetar::admin
