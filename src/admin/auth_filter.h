// Authentication and authorization of the HTTP API, as Pulsar's AuthenticationFilter and the
// checks of its admin resources: 401 "Authentication required" without valid credentials, then
// super-user, tenant-admin, namespace and topic checks by route with Pulsar's status codes and
// messages (validateSuperUserAccess 401, validateAdminAccessForTenant 403,
// validateNamespaceOperation 403, validateTopicOperation 401).
#pragma once

#include <optional>
#include <string>

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// The Router filter: nullopt lets the request through. Paths outside /admin and /lookup pass,
// and /metrics passes unless authenticateMetricsEndpoint. Thread: any (pulsar-web).
std::optional<HttpResponse> checkHttpAccess(const AdminContext& ctx, const HttpRequest& req,
                                            const std::string& pattern, const PathParams& params);

// Installs checkHttpAccess on `router` when authentication is enabled. ctx outlives router.
void installAuthFilter(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
