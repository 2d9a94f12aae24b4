// The /admin/v2/brokers routes that need only the configuration (more arrive with the broker).
#pragma once

#include <functional>
#include <memory>

#include "admin/router.h"
#include "config/service_configuration.h"

namespace magnetar::admin {

// GET /admin/v2/brokers/configuration/runtime: a JSON object of every effective setting, values
// as strings (Pulsar's shape; numIOThreads shows the resolved count).
// GET /admin/v2/brokers/configuration: a JSON array of the keys that can change at run time
// (Pulsar's "dynamic configuration names").
void addBrokerConfigurationRoutes(
    Router& router, const std::shared_ptr<const config::ServiceConfiguration>& config);

// GET /admin/v2/brokers/health: 200 "ok" (text/plain) while ready() returns true, else 503
// {"reason": ...}. ready() runs on an HTTP thread.
void addHealthRoute(Router& router, std::function<bool()> ready);

// POST /admin/v2/brokers/configuration/{key}/{value}: ServiceConfiguration::updateDynamic
// (204; 412 "Cannot update non-dynamic configuration" for an unknown or static key, 412
// "Invalid dynamic-config value: ..." for a bad value, as Pulsar). Every key Pulsar marks dynamic
// is accepted (settings.def declares the ones Magnetar does not enforce yet).
// GET /admin/v2/brokers/configuration/values: the dynamic keys with their current values.
void addDynamicConfigurationRoutes(Router& router,
                                   const std::shared_ptr<config::ServiceConfiguration>& config);

// GET /admin/v2/brokers/{cluster}: the active brokers' "host:webServicePort" (this one). Register
// after the other /admin/v2/brokers/x routes (the pattern matches any one segment).
void addBrokersListRoute(Router& router,
                         const std::shared_ptr<const config::ServiceConfiguration>& config);

}  // namespace magnetar::admin
