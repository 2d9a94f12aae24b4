// magnetar-admin tenants, brokers and namespaces commands (pulsar-admin's names).
#include <nlohmann/json.hpp>

#include "cli.h"
#include "http_client.h"

namespace magnetar::admintool {
namespace {

std::vector<std::string> splitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    size_t comma = s.find(',', start);
    std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// set-clusters / get-clusters and the namespace's replicator dispatch rate.
void addNamespaceReplicationCommands(CLI::App* nss, Pending& pending) {
  struct ReplOpts {
    std::string ns, clusters;
    DispatchRateOpts rate;
  };
  auto o = std::make_shared<ReplOpts>();
  const OptsLeaves<ReplOpts> nsLeaf{
      nss, pending, o, &ReplOpts::ns, "namespace", "tenant/namespace", namespacePath};
  nsLeaf("set-clusters", "Set the clusters the namespace replicates to",
         [](const ReplOpts& x) {
           std::vector<std::string> names = splitComma(x.clusters);
           if (names.empty()) throw UsageError("give --clusters NAME[,NAME...]");
           return Call{"POST", namespacePath(x.ns) + "/replication", nlohmann::json(names).dump()};
         })
      ->add_option("-c,--clusters", o->clusters, "Comma-separated cluster names")
      ->required();
  nsLeaf.call("get-clusters", "Get the clusters the namespace replicates to", "GET",
              "/replication");
  auto* set = nsLeaf("set-replicator-dispatch-rate",
                     "Set the geo-replicators' dispatch rate of the namespace's topics",
                     [](const ReplOpts& x) {
                       return Call{"POST", namespacePath(x.ns) + "/replicatorDispatchRate",
                                   dispatchRateBody(x.rate)};
                     });
  addDispatchRateOptions(set, o->rate, false);
  nsLeaf.call("get-replicator-dispatch-rate", "Get the replicators' dispatch rate", "GET",
              "/replicatorDispatchRate");
  nsLeaf.call("remove-replicator-dispatch-rate", "Remove the replicators' dispatch rate", "DELETE",
              "/replicatorDispatchRate");
}

}  // namespace

void addTenantClusterBrokerCommands(CLI::App& app, Pending& pending) {
  addClusterCommands(app, pending);

  auto* tenants = app.add_subcommand("tenants", "Tenants");
  tenants->require_subcommand(1);
  leaf(tenants, "list", "List tenants", pending, [] { return Call{"GET", "/admin/v2/tenants"}; });
  struct TenantOpts {
    std::string name, roles, clusters = "standalone";
  };
  auto t = std::make_shared<TenantOpts>();
  auto body = [t] {
    nlohmann::json j{{"adminRoles", splitComma(t->roles)},
                     {"allowedClusters", splitComma(t->clusters)}};
    return j.dump();
  };
  leaf(tenants, "get", "Get a tenant", pending,
       [t] {
         return Call{"GET", "/admin/v2/tenants/" + encodeSegment(t->name)};
       })
      ->add_option("tenant", t->name)
      ->required();
  for (const char* verb : {"create", "update"}) {
    bool create = std::string(verb) == "create";
    auto* c = leaf(tenants, verb, create ? "Create a tenant" : "Update a tenant", pending,
                   [t, body, create] {
                     return Call{create ? "PUT" : "POST",
                                 "/admin/v2/tenants/" + encodeSegment(t->name), body()};
                   });
    c->add_option("tenant", t->name)->required();
    c->add_option("-r,--admin-roles", t->roles, "Comma-separated admin roles");
    c->add_option("-c,--allowed-clusters", t->clusters, "Comma-separated clusters");
  }
  leaf(tenants, "delete", "Delete a tenant (it must have no namespaces)", pending,
       [t] {
         return Call{"DELETE", "/admin/v2/tenants/" + encodeSegment(t->name)};
       })
      ->add_option("tenant", t->name)
      ->required();

  auto* brokers = app.add_subcommand("brokers", "Brokers");
  brokers->require_subcommand(1);
  leaf(brokers, "healthcheck", "Check the broker's health", pending, [] {
    return Call{"GET", "/admin/v2/brokers/health"};
  });
  leaf(brokers, "get-runtime-config", "Every effective setting", pending, [] {
    return Call{"GET", "/admin/v2/brokers/configuration/runtime"};
  });
  leaf(brokers, "list-dynamic-config", "Names of the settings that can change at run time", pending,
       [] {
         return Call{"GET", "/admin/v2/brokers/configuration"};
       });
  leaf(brokers, "get-all-dynamic-config", "The dynamic settings with their values", pending, [] {
    return Call{"GET", "/admin/v2/brokers/configuration/values"};
  });
  auto kv = std::make_shared<std::pair<std::string, std::string>>();
  auto* upd = leaf(brokers, "update-dynamic-config", "Change a dynamic setting", pending, [kv] {
    return Call{"POST", "/admin/v2/brokers/configuration/" + encodeSegment(kv->first) + "/" +
                            encodeSegment(kv->second)};
  });
  upd->add_option("--config", kv->first, "Setting name")->required();
  upd->add_option("--value", kv->second, "New value")->required();
  auto clusterName = std::make_shared<std::string>("standalone");
  leaf(brokers, "list", "Active brokers of a cluster", pending, [clusterName] {
    return Call{"GET", "/admin/v2/brokers/" + encodeSegment(*clusterName)};
  })->add_option("cluster", *clusterName);
}

void addNamespaceCommands(CLI::App& app, Pending& pending) {
  auto* nss = app.add_subcommand("namespaces", "Namespaces and their policies");
  nss->require_subcommand(1);
  struct NsOpts {
    std::string tenant, ns, time, size, policy = "producer_request_hold",
                                        type = "destination_storage", limitSize = "-1",
                                        limitTime = "-1", role, actions;
    int64_t ttl = 0;
    bool enable = false, disable = false, force = false;
  };
  auto o = std::make_shared<NsOpts>();
  leaf(nss, "list", "Namespaces of a tenant", pending,
       [o] {
         return Call{"GET", "/admin/v2/namespaces/" + encodeSegment(o->tenant)};
       })
      ->add_option("tenant", o->tenant)
      ->required();
  const OptsLeaves<NsOpts> nsLeaf{
      nss, pending, o, &NsOpts::ns, "namespace", "tenant/namespace", namespacePath};
  nsLeaf.call("create", "Create a namespace", "PUT", "");
  nsLeaf("delete", "Delete a namespace", [](const NsOpts& x) {
    return Call{"DELETE", namespacePath(x.ns) + (x.force ? "?force=true" : "")};
  })->add_flag("-f,--force", o->force, "Delete its topics too");
  nsLeaf.call("policies", "All policies of a namespace", "GET", "");
  nsLeaf.call("topics", "Topics of a namespace", "GET", "/topics");

  auto* ret = nsLeaf("set-retention", "Set the retention policy", [](const NsOpts& x) {
    nlohmann::json j{
        {"retentionTimeInMinutes", x.time == "-1" ? -1 : parseDurationSeconds(x.time) / 60},
        {"retentionSizeInMB", parseSizeMB(x.size)}};
    return Call{"POST", namespacePath(x.ns) + "/retention", j.dump()};
  });
  ret->add_option("-t,--time", o->time, "Retention time (s, m, h, d, w; -1 unlimited)")->required();
  ret->add_option("-s,--size", o->size, "Retention size (K, M, G, T; -1 unlimited)")->required();
  nsLeaf.call("get-retention", "Get the retention policy", "GET", "/retention");
  nsLeaf.call("remove-retention", "Remove the retention policy", "DELETE", "/retention");

  auto* dedup = nsLeaf("set-deduplication", "Enable or disable deduplication", [](const NsOpts& x) {
    if (x.enable == x.disable) throw UsageError("give exactly one of --enable, --disable");
    return Call{"POST", namespacePath(x.ns) + "/deduplication", x.enable ? "true" : "false"};
  });
  dedup->add_flag("-e,--enable", o->enable, "Enable");
  dedup->add_flag("-d,--disable", o->disable, "Disable");
  nsLeaf.call("get-deduplication", "Get the deduplication setting", "GET", "/deduplication");
  nsLeaf.call("remove-deduplication", "Remove the deduplication setting (broker default applies)",
              "DELETE", "/deduplication");

  nsLeaf("set-message-ttl", "Set the message TTL",
         [](const NsOpts& x) {
           return Call{"POST", namespacePath(x.ns) + "/messageTTL", std::to_string(x.ttl)};
         })
      ->add_option("-t,--ttl", o->ttl, "Seconds")
      ->required();
  nsLeaf.call("get-message-ttl", "Get the message TTL", "GET", "/messageTTL");
  nsLeaf.call("remove-message-ttl", "Remove the message TTL", "DELETE", "/messageTTL");

  auto* bq = nsLeaf("set-backlog-quota", "Set a backlog quota", [](const NsOpts& x) {
    nlohmann::json j{{"limitSize", parseSizeBytes(x.limitSize)},
                     {"limitTime", parseDurationSeconds(x.limitTime)},
                     {"policy", x.policy}};
    return Call{"POST", namespacePath(x.ns) + "/backlogQuota?backlogQuotaType=" + x.type, j.dump()};
  });
  bq->add_option("-l,--limit", o->limitSize, "Size limit (K, M, G, T; -1 none)");
  bq->add_option("--limitTime", o->limitTime, "Time limit (s, m, h, d, w; -1 none)");
  bq->add_option("-p,--policy", o->policy,
                 "producer_request_hold | producer_exception | consumer_backlog_eviction");
  bq->add_option("--type", o->type, "destination_storage | message_age");
  nsLeaf.call("get-backlog-quotas", "Get the backlog quotas", "GET", "/backlogQuotaMap");
  nsLeaf("remove-backlog-quota", "Remove a backlog quota", [](const NsOpts& x) {
    return Call{"DELETE", namespacePath(x.ns) + "/backlogQuota?backlogQuotaType=" + x.type};
  })->add_option("--type", o->type, "destination_storage | message_age");

  nsLeaf.call("permissions", "Roles and their actions", "GET", "/permissions");
  auto* grant = nsLeaf("grant-permission", "Grant actions to a role", [](const NsOpts& x) {
    return Call{"POST", namespacePath(x.ns) + "/permissions/" + encodeSegment(x.role),
                nlohmann::json(splitComma(x.actions)).dump()};
  });
  grant->add_option("--role", o->role)->required();
  grant->add_option("--actions", o->actions, "Comma-separated: produce,consume,...")->required();
  nsLeaf("revoke-permission", "Revoke a role's actions",
         [](const NsOpts& x) {
           return Call{"DELETE", namespacePath(x.ns) + "/permissions/" + encodeSegment(x.role)};
         })
      ->add_option("--role", o->role)
      ->required();
  addNamespaceReplicationCommands(nss, pending);
}

}  // namespace magnetar::admintool
