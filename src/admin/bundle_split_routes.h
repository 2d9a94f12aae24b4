// Namespace bundle splits: `PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split`
// (Pulsar's NamespacesBase.internalSplitNamespaceBundleAsync and
// NamespaceService.splitAndOwnBundle, with every NamespaceBundleSplitAlgorithm), standalone's
// `GET .../bundles`. The algorithms and the cut are
// broker/cluster/bundle_split.h's; ownership and the stores NamespaceService's (cluster mode) or
// the namespace's Policies (standalone, where every bundle is this broker's). The automatic
// split is the leader's LoadManager (broker/cluster/load_report.h), which calls the split route
// of the bundle's owner.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "admin/rest_util.h"
#include "admin/router.h"
#include "broker/cluster/bundle_split.h"
#include "broker/cluster/namespace_service.h"

namespace magnetar::admin {

// Registers the split route (both modes: nsp null in standalone) and standalone's GET bundles
// (cluster mode's comes from cluster_routes.h, added first). ctx and nsp outlive the router.
// Thread: before serving.
void addBundleSplitRoutes(Router& r, const AdminContext* ctx,
                          broker::cluster::NamespaceService* nsp);

// One split as the admin route asks it: the bundle ("0x..._0x...") of ns, unload, the algorithm
// name (nullopt or "": defaultNamespaceBundleSplitAlgorithm, then range_equally_divide, as
// Pulsar's getNamespaceBundleSplitAlgorithmByName) and the positions of
// specified_positions_divide.
struct BundleSplitParams {
  std::string ns;
  std::string bundle;
  bool unload = false;
  std::optional<std::string> algorithm;
  std::vector<int64_t> positions;
};
// Splits a bundle this broker owns (or, unowned, takes), or in standalone one of the namespace's
// Policies cut: the bundle's topics and figures are gathered, the algorithm picks the points
// (none: nothing changes, OK), then NamespaceService::splitBundle (cluster) or the Policies'
// bundles rewritten and, with unload, the children's loaded topics unloaded (standalone). done
// on any thread. Errors: kNotFound / kInvalidArgument (not a bundle of ns, cannot split: the
// route answers 412), NamespaceService::splitBundle's, the stores'.
void splitBundle(const AdminContext& ctx, broker::cluster::NamespaceService* nsp,
                 const BundleSplitParams& p, const std::function<void(Status)>& done);

}  // namespace magnetar::admin
