// magnetar-admin clusters commands (pulsar-admin's `clusters` names and options) and the
// DispatchRate options shared by the namespace and topic rate commands.
#include <nlohmann/json.hpp>

#include "cli.h"
#include "http_client.h"

namespace magnetar::admintool {
namespace {

// What `clusters create|update` sends: Pulsar's ClusterData fields, each only when given, as
// pulsar-admin leaves unset fields out. The TLS and authentication fields are those Magnetar's
// replicator reads (docs/geo-replication.md).
struct ClusterOpts {
  std::string name;
  std::string url, urlSecure, brokerUrl, brokerUrlSecure;
  std::string authPlugin, authParameters, trustCerts, keyFile, certFile;
  bool tlsEnable = false, tlsAllowInsecure = false;
};

std::string clusterPath(const std::string& name) {
  return "/admin/v2/clusters/" + encodeSegment(name);
}

std::string clusterBody(const ClusterOpts& o) {
  if (o.url.empty() && o.urlSecure.empty()) {
    throw UsageError(
        "give the cluster's web service URL: --url http://HOST:PORT (or --url-secure)");
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  const std::pair<const char*, const std::string*> kStrings[] = {
      {"serviceUrl", &o.url},
      {"serviceUrlTls", &o.urlSecure},
      {"brokerServiceUrl", &o.brokerUrl},
      {"brokerServiceUrlTls", &o.brokerUrlSecure},
      {"authenticationPlugin", &o.authPlugin},
      {"authenticationParameters", &o.authParameters},
      {"brokerClientTrustCertsFilePath", &o.trustCerts},
      {"brokerClientKeyFilePath", &o.keyFile},
      {"brokerClientCertificateFilePath", &o.certFile}};
  for (const auto& [field, value] : kStrings) {
    if (!value->empty()) j[field] = *value;
  }
  if (o.tlsEnable) j["brokerClientTlsEnabled"] = true;
  if (o.tlsAllowInsecure) j["tlsAllowInsecureConnection"] = true;
  return j.dump();
}

void addClusterDataOptions(CLI::App* c, ClusterOpts& o) {
  c->add_option("--url", o.url, "Web service URL (http://host:8080); this or --url-secure");
  c->add_option("--url-secure", o.urlSecure, "Web service TLS URL (https://host:8443)");
  c->add_option("--broker-url", o.brokerUrl, "Broker service URL (pulsar://host:6650)");
  c->add_option("--broker-url-secure", o.brokerUrlSecure,
                "Broker service TLS URL (pulsar+ssl://host:6651)");
  c->add_option("--auth-plugin", o.authPlugin,
                "Authentication plugin other clusters' replicators use towards this one");
  c->add_option("--auth-parameters", o.authParameters, "Parameters of --auth-plugin");
  c->add_flag("--tls-enable", o.tlsEnable, "Replicate to this cluster over TLS");
  c->add_flag("--tls-allow-insecure", o.tlsAllowInsecure, "Accept any server certificate");
  c->add_option("--tls-trust-certs-filepath", o.trustCerts, "CA certificates file (PEM)");
  c->add_option("--tls-certs-filepath", o.certFile, "Client certificate file (PEM)");
  c->add_option("--tls-key-filepath", o.keyFile, "Client private key file (PEM)");
}

// "-1" or a whole number >= -1 (-1: the option was not given, as pulsar-admin's default).
int64_t parseRate(const std::string& text, const char* option, int64_t min) {
  size_t end = 0;
  int64_t n = 0;
  try {
    n = std::stoll(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end == 0 || end != text.size() || n < min) {
    throw UsageError(std::string("bad ") + option + ": " + text +
                     " (a whole number >= " + std::to_string(min) + ")");
  }
  return n;
}

}  // namespace

void addClusterCommands(CLI::App& app, Pending& pending) {
  auto* clusters = app.add_subcommand("clusters", "Clusters");
  clusters->require_subcommand(1);
  leaf(clusters, "list", "List clusters", pending, [] {
    return Call{"GET", "/admin/v2/clusters"};
  });
  auto o = std::make_shared<ClusterOpts>();
  leaf(clusters, "get", "Get a cluster's URLs", pending,
       [o] {
         return Call{"GET", clusterPath(o->name)};
       })
      ->add_option("cluster", o->name)
      ->required();
  for (const char* verb : {"create", "update"}) {
    bool create = std::string(verb) == "create";
    auto* c = leaf(clusters, verb,
                   create ? "Create a cluster (another cluster to replicate to)"
                          : "Replace a cluster's ClusterData",
                   pending, [o, create] {
                     return Call{create ? "PUT" : "POST", clusterPath(o->name), clusterBody(*o)};
                   });
    c->add_option("cluster", o->name)->required();
    addClusterDataOptions(c, *o);
  }
  leaf(clusters, "delete", "Delete a cluster", pending,
       [o] {
         return Call{"DELETE", clusterPath(o->name)};
       })
      ->add_option("cluster", o->name)
      ->required();
}

void addDispatchRateOptions(CLI::App* c, DispatchRateOpts& o, bool relative) {
  c->add_option("--msg-dispatch-rate", o.msg, "Messages per period (-1 or 0: no limit)");
  c->add_option("--byte-dispatch-rate", o.bytes, "Bytes per period (-1 or 0: no limit)");
  c->add_option("--dispatch-rate-period", o.period, "Period in seconds (default 1)");
  if (relative) {
    c->add_flag("--relative-to-publish-rate", o.relative,
                "Add the topic's publish rate to the limit");
  }
}

std::string dispatchRateBody(const DispatchRateOpts& o) {
  nlohmann::ordered_json j{
      {"dispatchThrottlingRateInMsg", parseRate(o.msg, "--msg-dispatch-rate", -1)},
      {"dispatchThrottlingRateInByte", parseRate(o.bytes, "--byte-dispatch-rate", -1)},
      {"relativeToPublishRate", o.relative},
      {"ratePeriodInSecond", parseRate(o.period, "--dispatch-rate-period", 1)}};
  return j.dump();
}

}  // namespace magnetar::admintool
