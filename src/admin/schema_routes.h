// The schema admin API (Pulsar's SchemasResource, /admin/v2/schemas) and the namespace schema
// policies, so `pulsar-admin schemas ...` and `pulsar-admin namespaces
// set-schema-compatibility-strategy` work.
#pragma once

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

// /admin/v2/schemas/{tenant}/{namespace}/{topic}/...:
//   GET schema (latest), GET schema/{version}, GET schemas (the live versions, as
//   {"getSchemaResponses": [...]}): {"version","type","timestamp","data","properties"}, 404
//   "Schema not found";
//   POST schema {"type","schema","properties"}: {"version": {"version": N}}, 409 incompatible,
//   422 a definition that does not parse;
//   DELETE schema [?force=true]: {"version": N};
//   POST compatibility: 202 {"schemaCompatibilityStrategy","compatibility": true}, 500 with the
//   reason when incompatible (as Pulsar 4.2);
//   POST version: {"version": N}, -1 when that schema is not stored.
// /admin/v2/namespaces/{t}/{ns}/schemaCompatibilityStrategy (GET, PUT/POST a JSON string),
// .../isAllowAutoUpdateSchema and .../schemaValidationEnforced (GET, POST a JSON boolean).
// Handlers run on the admin threads (the registry writes the metadata store synchronously).
void addSchemaRoutes(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
