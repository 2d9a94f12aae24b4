// The rate-limit policies of the admin API (docs/rate-limits.md), with Pulsar's paths and JSON:
// topic policies publishRate (PublishRate), dispatchRate, subscriptionDispatchRate and
// replicatorDispatchRate (DispatchRateImpl), subscribeRate (SubscribeRate) under
// /admin/v2/persistent/.../{topic}/ (topic_policy_routes.h serves them as its other policies),
// and the namespace ones under /admin/v2/namespaces/{t}/{ns}/ publishRate, dispatchRate,
// subscriptionDispatchRate, replicatorDispatchRate, subscribeRate: stored in the namespace's
// Policies maps (publishMaxMessageRate, topicDispatchRate, subscriptionDispatchRate,
// replicatorDispatchRate, clusterSubscribeRate) under this cluster's name.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "admin/rest_util.h"
#include "admin/router.h"

namespace magnetar::admin {

struct RateKind {
  const char* path;     // the REST path segment, also the topic policy's name
  const char* nsField;  // the Policies map field of the namespace policy
  // The JSON fields with the values Pulsar shows for a missing one (Jackson: DispatchRateImpl 0,
  // PublishRate and SubscribeRate their -1 defaults), in Pulsar's order.
  std::vector<std::pair<std::string, boost::json::value>> fields;
};
const std::vector<RateKind>& rateKinds();

// The value in force for a topic of `ns` without a topic policy: the namespace's for this
// cluster, else the broker's defaults (the topic GET's applied=true).
boost::json::value appliedRate(const AdminContext& ctx, const std::string& ns, const RateKind& k);

// Reads an object body's fields with defaults (Jackson's coercions); "" or the error text.
std::string objectFields(boost::json::value& v,
                         const std::vector<std::pair<std::string, boost::json::value>>& fields);

// GET (204 when unset), POST, DELETE of the namespace rate policies; a change applies to the
// loaded topics at once (BrokerService::onNamespacePoliciesChanged). Errors: 404 namespace
// missing, 400 bad JSON.
void addNamespaceRateRoutes(Router& router, const AdminContext& ctx);

}  // namespace magnetar::admin
