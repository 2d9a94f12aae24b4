#include "admin/resource_group_routes.h"

#include <set>
#include <string>

namespace magnetar::admin {
namespace {

namespace json = boost::json;

// Pulsar's ResourceGroup fields in its order; Integer (int32) or Long.
struct GroupField {
  const char* name;
  bool int32;
};
constexpr GroupField kFields[] = {{"publishRateInMsgs", true},
                                  {"publishRateInBytes", false},
                                  {"dispatchRateInMsgs", true},
                                  {"dispatchRateInBytes", false}};

// The group's stored JSON, nullopt when there is none (or it is not an object).
std::optional<json::object> storedGroup(const AdminContext& ctx, const std::string& name) {
  auto text = ctx.service.policies().resourceGroup(name);
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(*text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return v.as_object();
}

// Pulsar's internalCreateOrUpdateResourceGroup: a new group takes -1 for the fields not given,
// an existing one keeps them (a field given as null counts as not given). Unknown fields are
// ignored, as Jackson does there. Answers 400 for a body that is not an object or a field
// Jackson cannot read as its Integer/Long.
HttpResponse putGroup(const AdminContext& ctx, const std::string& name, const HttpRequest& req) {
  HttpResponse err;
  auto body = parseJsonBody(req, &err);
  if (!body) return err;
  if (!body->is_object()) return HttpResponse::error(400, "The body must be a JSON object");
  json::object out;
  const std::optional<json::object> old = storedGroup(ctx, name);
  for (const GroupField& f : kFields) {
    const json::value* given = body->as_object().if_contains(f.name);
    if (given && !given->is_null()) {
      auto n = javaInteger(*given, f.int32);
      if (!n) return jacksonError(f.int32 ? "java.lang.Integer" : "java.lang.Long", *given, f.name);
      out[f.name] = *n;
    } else if (const json::value* kept = old ? old->if_contains(f.name) : nullptr) {
      out[f.name] = *kept;
    } else {
      out[f.name] = -1;
    }
  }
  if (Status s = ctx.service.policies().putResourceGroup(name, json::serialize(out)); !s) {
    return errorResponse(s);
  }
  ctx.service.onResourceGroupChanged(name);
  return noContent();
}

HttpResponse deleteGroup(const AdminContext& ctx, const std::string& name) {
  auto& reg = ctx.service.policies();
  // Pulsar checks the namespaces first: a missing group that none names is the store's
  // "not found" (Pulsar answers it with 500; 404 here).
  if (reg.resourceGroupInUse(name)) return HttpResponse::error(412, "ResourceGroup is in use");
  // A node without a group's JSON (the parent the store made for a name with '/') is no group.
  if (!storedGroup(ctx, name)) return HttpResponse::error(404, "ResourceGroup does not exist");
  if (Status s = reg.deleteResourceGroup(name); !s) return errorResponse(s);
  ctx.service.onResourceGroupChanged(name);
  return noContent();
}

// Sets (a name) or removes (nullopt) the namespace's resource_group_name.
HttpResponse setNamespaceGroup(const AdminContext& ctx, const std::string& ns,
                               const std::optional<std::string>& group) {
  Status s = ctx.service.policies().updateNamespacePolicies(ns, [&](broker::NamespacePolicies& p) {
    if (group) {
      p.keptFields["resource_group_name"] = json::serialize(json::value(*group));
    } else {
      p.keptFields.erase("resource_group_name");
    }
  });
  if (!s) return errorResponse(s);
  ctx.service.onNamespacePoliciesChanged(ns);
  return noContent();
}

void addNamespaceGroupRoutes(Router& r, const AdminContext* ctx) {
  const std::string base = "/admin/v2/namespaces/{tenant}/{namespace}/resourcegroup";
  r.addSync("GET", base, [ctx](const HttpRequest&, const PathParams& p) {
    HttpResponse err;
    auto ns = namespaceFromParams(*ctx, p, &err);
    if (!ns) return err;
    auto group = broker::resourceGroupOf(ctx->service.policies().namespacePolicies(*ns));
    // Pulsar writes the bare name (not a JSON string) as application/json; unset: no body.
    if (!group) return HttpResponse{200, "", "", {}};
    return HttpResponse{200, "application/json", *group, {}};
  });
  r.addSync("POST", base + "/{group}", [ctx](const HttpRequest&, const PathParams& p) {
    HttpResponse err;
    auto ns = namespaceFromParams(*ctx, p, &err);
    if (!ns) return HttpResponse::error(404, "Namespace policies does not exist");
    const std::string& group = p.at("group");
    if (!storedGroup(*ctx, group)) {
      return HttpResponse::error(412, "ResourceGroup does not exist");
    }
    return setNamespaceGroup(*ctx, *ns, group);
  });
  r.addSync("DELETE", base, [ctx](const HttpRequest&, const PathParams& p) {
    HttpResponse err;
    auto ns = namespaceFromParams(*ctx, p, &err);
    if (!ns) return err;
    return setNamespaceGroup(*ctx, *ns, std::nullopt);
  });
}

}  // namespace

void addResourceGroupRoutes(Router& r, const AdminContext& ctxRef) {
  const AdminContext* ctx = &ctxRef;
  r.addSync("GET", "/admin/v2/resourcegroups", [ctx](const HttpRequest&, const PathParams&) {
    // Pulsar lists the children of /admin/resourcegroups: a name with '/' ("p/child", from
    // p%2Fchild) shows as its first part, and a node without a group's JSON under no group is
    // not listed (checked on Pulsar 4.2.4).
    std::set<std::string> listed;
    for (const auto& n : ctx->service.policies().resourceGroups()) {
      if (storedGroup(*ctx, n)) listed.insert(n.substr(0, n.find('/')));
    }
    json::array names;
    for (const auto& n : listed) names.emplace_back(n);
    return jsonResponse(names);
  });
  const std::string one = "/admin/v2/resourcegroups/{resourcegroup}";
  r.addSync("GET", one, [ctx](const HttpRequest&, const PathParams& p) {
    auto group = storedGroup(*ctx, p.at("resourcegroup"));
    if (!group) return HttpResponse::error(404, "ResourceGroup does not exist");
    return jsonResponse(*group);
  });
  r.addSync("PUT", one, [ctx](const HttpRequest& req, const PathParams& p) {
    return putGroup(*ctx, p.at("resourcegroup"), req);
  });
  r.addSync("DELETE", one, [ctx](const HttpRequest&, const PathParams& p) {
    return deleteGroup(*ctx, p.at("resourcegroup"));
  });
  addNamespaceGroupRoutes(r, ctx);
}

}  // namespace magnetar::admin
