#include "admin/auth_filter.h"

#include <fmt/format.h>

namespace magnetar::admin {
namespace {

using broker::TopicOperation;

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

std::optional<HttpResponse> deny(TopicOperation op, int status, const std::string& reason) {
  broker::AuthorizationStats::record(op);
  return HttpResponse::error(status, reason);
}

const char* kTenantDenied = "Don't have permission to administrate resources on this tenant";

// A topic route: Pulsar's TopicOperation name and the check it needs.
struct TopicCheck {
  const char* operation;
  TopicOperation op;
};

TopicCheck topicCheckOf(const HttpRequest& req, const std::string& pattern) {
  const std::string& m = req.method;
  if (pattern.rfind("/lookup/", 0) == 0) return {"LOOKUP", TopicOperation::kLookup};
  // Pulsar's getPartitionedMetadata checks LOOKUP.
  if (m == "GET" && pattern.size() >= 11 &&
      pattern.compare(pattern.size() - 11, 11, "/partitions") == 0) {
    return {"LOOKUP", TopicOperation::kLookup};
  }
  if (contains(pattern, "/subscription")) {
    if (contains(pattern, "resetcursor")) return {"RESET_CURSOR", TopicOperation::kConsume};
    if (contains(pattern, "/skip")) return {"SKIP", TopicOperation::kConsume};
    if (contains(pattern, "expireMessages")) return {"EXPIRE_MESSAGES", TopicOperation::kConsume};
    if (contains(pattern, "/position/")) return {"PEEK_MESSAGES", TopicOperation::kConsume};
    if (m == "GET" && pattern.size() >= 14 &&
        pattern.compare(pattern.size() - 14, 14, "/subscriptions") == 0) {
      return {"GET_SUBSCRIPTIONS", TopicOperation::kConsume};
    }
    if (m == "PUT") return {"SUBSCRIBE", TopicOperation::kConsume};
    if (m == "DELETE") return {"UNSUBSCRIBE", TopicOperation::kConsume};
    return {"CONSUME", TopicOperation::kConsume};
  }
  if (m == "GET" && (contains(pattern, "stats") || contains(pattern, "Stats") ||
                     contains(pattern, "/partitions") || contains(pattern, "/schema") ||
                     contains(pattern, "backlog") || contains(pattern, "lastMessageId"))) {
    return {"GET_STATS", TopicOperation::kLookup};
  }
  return {"", TopicOperation::kAdmin};
}

std::optional<HttpResponse> checkTopic(const AdminContext& ctx, const HttpRequest& req,
                                       const std::string& pattern, const PathParams& params,
                                       const std::string& role) {
  HttpResponse err;
  auto name = topicFromParams(params, &err);
  if (!name) return std::nullopt;  // the handler answers the bad name
  auto& authz = ctx.service.authorization();
  // Standalone: Pulsar's HTTP lookup looks the namespace up before it authorizes, so any role
  // gets its 404 "Namespace not found" (the route answers it).
  if (pattern == "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}" &&
      ctx.service.topicOwnership() == nullptr &&
      !ctx.service.namespaceExists(name->namespaceName())) {
    return std::nullopt;
  }
  // Pulsar's check of the tenant's admins finds no tenant: 404 for a role that is not one.
  TopicCheck c = topicCheckOf(req, pattern);
  if (!authz.tenantExists(name->tenant())) return deny(c.op, 404, "Tenant does not exist");
  if (c.op == TopicOperation::kAdmin || contains(pattern, "/permissions")) {
    if (authz.isTenantAdmin(name->tenant(), role)) return std::nullopt;
    // Pulsar answers its tenant-admin check on topic permissions with 401, the namespace
    // operations on topics (create, delete, ...) with 403.
    return deny(TopicOperation::kAdmin, contains(pattern, "/permissions") ? 401 : 403,
                kTenantDenied);
  }
  // The subscription operations check the subscription too (Pulsar's canConsumeAsync with the
  // route's subscription): its role list, and subscription_auth_mode Prefix.
  std::string sub;
  if (auto it = params.find("subscription");
      it != params.end() && c.op == TopicOperation::kConsume) {
    sub = it->second;
  }
  if (authz.allowTopicOperation(*name, role, c.op, sub)) return std::nullopt;
  if (auto prefix = authz.subscriptionPrefixError(*name, role, sub)) {
    // Pulsar throws there: its 500 with the exception's message (no stack trace here).
    const size_t cls = prefix->find(": ");
    return deny(c.op, 500,
                "\n --- An unexpected error occurred in the server ---\n\nMessage: " +
                    (cls == std::string::npos ? *prefix : prefix->substr(cls + 2)) + "\n");
  }
  return deny(c.op, 401,
              fmt::format("Unauthorized to validateTopicOperation for operation [{}] on topic [{}]",
                          c.operation, name->toString()));
}

const char* namespaceOperationOf(const HttpRequest& req, const std::string& pattern) {
  if (contains(pattern, "/permissions")) {
    if (req.method == "GET") return "GET_PERMISSION";
    if (req.method == "POST") return "GRANT_PERMISSION";
    return "REVOKE_PERMISSION";
  }
  return nullptr;
}

}  // namespace

std::optional<HttpResponse> checkHttpAccess(const AdminContext& ctx, const HttpRequest& req,
                                            const std::string& pattern, const PathParams& params) {
  const auto& authn = ctx.service.authentication();
  if (!authn.enabled()) return std::nullopt;
  const std::string& path = req.path;
  bool isMetrics = path == "/metrics" || path.rfind("/metrics/", 0) == 0;
  if (isMetrics && !ctx.config->authenticateMetricsEndpoint()) return std::nullopt;
  if (!isMetrics && path.rfind("/admin/", 0) != 0 && path.rfind("/lookup/", 0) != 0) {
    return std::nullopt;
  }
  auto who = authn.authenticateHttp(req.authorization, req.peerCommonName);
  if (!who) return HttpResponse::error(401, "Authentication required");
  auto& authz = ctx.service.authorization();
  if (!authz.enabled() || isMetrics || pattern.empty()) return std::nullopt;
  const std::string& role = who->role;
  if (authz.isSuperUser(role)) return std::nullopt;
  // Listing the clusters needs only an authenticated role, as do the coordinator-wide
  // transaction reads (coordinatorStats, transactionMetadata, slowTransactions): Pulsar's
  // TransactionsBase checks no role there (the Go client's TestTxn_TCClient reads a
  // transaction's metadata as the anonymous role of a broker with authorization on).
  if (req.method == "GET" && pattern == "/admin/v2/clusters") return std::nullopt;
  if (req.method == "GET" && pattern.rfind("/admin/v3/transactions/", 0) == 0 &&
      !params.count("topic")) {
    return std::nullopt;
  }
  // A namespace's topic lists: Pulsar's NamespaceOperation.GET_TOPICS, which produce or consume
  // granted on the namespace allows too (as GET_TOPICS_OF_NAMESPACE; cluster mode's brokers
  // ask each other these lists with the client's credentials).
  if (req.method == "GET" && (pattern == "/admin/v2/namespaces/{tenant}/{namespace}/topics" ||
                              pattern == "/admin/v2/persistent/{tenant}/{namespace}" ||
                              pattern == "/admin/v2/non-persistent/{tenant}/{namespace}")) {
    const std::string ns = params.at("tenant") + "/" + params.at("namespace");
    broker::NamespacePolicies p = ctx.service.policies().namespacePolicies(ns);
    auto grant = p.permissions.find(role);
    if (grant != p.permissions.end() &&
        (grant->second.count("produce") || grant->second.count("consume"))) {
      return std::nullopt;
    }
  }
  if (params.count("topic")) return checkTopic(ctx, req, pattern, params, role);
  auto tenant = params.find("tenant");
  if (pattern.rfind("/admin/v2/tenants", 0) == 0) {
    // Creating, updating and deleting tenants, and listing them, need a super-user.
    if (tenant != params.end() && req.method == "GET" &&
        authz.isTenantAdmin(tenant->second, role)) {
      return std::nullopt;
    }
    return deny(TopicOperation::kCount, 401, "This operation requires super-user access");
  }
  if (tenant != params.end()) {
    if (authz.isTenantAdmin(tenant->second, role)) return std::nullopt;
    auto ns = params.find("namespace");
    const char* op = namespaceOperationOf(req, pattern);
    if (ns != params.end() && op) {
      return deny(TopicOperation::kCount, 403,
                  fmt::format("Unauthorized to validateNamespaceOperation for operation [{}] on "
                              "namespace [{}/{}]",
                              op, tenant->second, ns->second));
    }
    // Tenant operations (list or create namespaces) are 401 in Pulsar, namespace ones 403.
    return deny(TopicOperation::kCount, ns != params.end() ? 403 : 401, kTenantDenied);
  }
  return deny(TopicOperation::kCount, 401, "This operation requires super-user access");
}

void installAuthFilter(Router& router, const AdminContext& ctx) {
  if (!ctx.service.authentication().enabled()) return;
  router.setFilter(
      [&ctx](const HttpRequest& req, const std::string& pattern, const PathParams& params) {
        return checkHttpAccess(ctx, req, pattern, params);
      });
}

}  // namespace magnetar::admin
