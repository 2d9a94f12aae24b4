// /admin/v2 routes for clusters, tenants and namespaces (with their policies and permissions),
// Pulsar's paths, JSON shapes and status codes (Clusters, Tenants, Namespaces resources).
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// GET /admin/v2/clusters, /clusters/{cluster};
// /admin/v2/tenants[/{tenant}] (GET, PUT, POST, DELETE);
// /admin/v2/namespaces/{tenant}[/{namespace}] (GET, PUT, DELETE), .../topics,
// .../retention, .../messageTTL, .../deduplication (GET, POST, DELETE), .../backlogQuotaMap,
// .../backlogQuota (POST, DELETE), .../permissions[/{role}] (GET, POST, DELETE).
// ctx must outlive the router.
void addNamespaceRoutes(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
