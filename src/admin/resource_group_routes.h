// Pulsar's resource groups in the admin API (docs/rate-limits.md): /admin/v2/resourcegroups
// (list), /admin/v2/resourcegroups/{name} GET, PUT (create, or update the fields given) and
// DELETE, stored as Pulsar's ResourceGroup JSON at /admin/resourcegroups/{name} in the
// configuration store (docs/broker-metadata-format.md); and a namespace's resource group,
// /admin/v2/namespaces/{t}/{ns}/resourcegroup GET, POST .../{name}, DELETE (the Policies'
// resource_group_name). Super-user only for the groups (auth_filter.cc), tenant admin for a
// namespace's. Answers checked against Pulsar 4.2.4: 404 "ResourceGroup does not exist", 412
// "ResourceGroup is in use" (delete while a namespace names it), 412 "ResourceGroup does not
// exist" (a namespace set to a missing one).
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// Registers the routes above. Thread: the handlers run on pulsar-web (they block on the
// configuration store) and apply a change to the broker's limiters before answering.
void addResourceGroupRoutes(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
