// Admin REST routes of the placement policies (Pulsar's paths and JSON): namespace isolation
// policies (ClustersBase: GET/POST/DELETE /admin/v2/clusters/{cluster}/namespaceIsolationPolicies
// [/{policyName}], GET .../namespaceIsolationPolicies/brokers[/{broker}]; the znode
// /admin/clusters/{cluster}/namespaceIsolationPolicies in the configuration store) and a
// namespace's anti-affinity group (NamespacesBase: GET/POST/DELETE
// /admin/v2/namespaces/{tenant}/{namespace}/antiAffinity, GET
// /admin/v2/namespaces/{cluster}/antiAffinity/{group}?tenant=; namespaceAntiAffinityGroup of
// /admin/local-policies/{tenant}/{ns} in the local store). The leader's placement reads both
// (broker/cluster/load_placement.h). Standalone: both stores are the local record store.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "admin/rest_util.h"
#include "admin/router.h"
#include "metadata/store.h"

namespace magnetar::admin {

struct PlacementStores {
  metadata::Store* config = nullptr;  // the configuration store (isolation policies, Policies)
  metadata::Store* local = nullptr;   // the local store (LocalPolicies)
  // The registered brokers' ids ("host:webport"), cb on any thread; unset: none.
  std::function<void(std::function<void(Result<std::vector<std::string>>)>)> activeBrokers;
  // Unloads namespace `ns` (a new isolation policy matching it, unloadBundles=true); cb on any
  // thread. Unset (standalone): nothing to move.
  std::function<void(const std::string& ns, std::function<void(Status)>)> unloadNamespace;
};

// stores' members outlive the router. Thread: before serving.
void addPlacementPolicyRoutes(Router& r, const AdminContext& ctx, const PlacementStores& stores);

}  // namespace magnetar::admin
