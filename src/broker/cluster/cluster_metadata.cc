#include "broker/cluster/cluster_metadata.h"

#include <boost/json.hpp>

#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace json = boost::json;

namespace {

json::value orNull(const std::string& s) {
  if (s.empty()) return nullptr;
  return json::value(s);
}

std::string str(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  if (!v || !v->is_string()) return {};
  return std::string(v->as_string());
}

Result<json::object> parseObject(std::string_view text, const std::string& path, const char* what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return Status::corruption(std::string("znode ") + path + " does not hold " + what + " JSON" +
                              (ec ? ": " + ec.message() : ""));
  }
  return std::move(v.as_object());
}

Status missing(const std::string& path, const char* what, const char* field) {
  return Status::corruption(std::string("znode ") + path + ": " + what + " without " + field);
}

json::array stringArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

}  // namespace

std::string namespaceEphemeralDataJson(const BrokerUrls& owner, bool disabled) {
  json::object o;
  o["nativeUrl"] = owner.pulsarServiceUrl;
  o["nativeUrlTls"] = orNull(owner.pulsarServiceUrlTls);
  o["httpUrl"] = owner.webServiceUrl;
  o["httpUrlTls"] = orNull(owner.webServiceUrlTls);
  o["disabled"] = disabled;
  o["advertisedListeners"] = json::object();
  return json::serialize(o);
}

Result<OwnerData> parseNamespaceEphemeralData(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "NamespaceEphemeralData");
  if (!o.isOk()) return o.status();
  OwnerData d;
  d.urls.pulsarServiceUrl = str(*o, "nativeUrl");
  d.urls.pulsarServiceUrlTls = str(*o, "nativeUrlTls");
  d.urls.webServiceUrl = str(*o, "httpUrl");
  d.urls.webServiceUrlTls = str(*o, "httpUrlTls");
  if (d.urls.pulsarServiceUrl.empty() && d.urls.pulsarServiceUrlTls.empty()) {
    return missing(path, "NamespaceEphemeralData", "nativeUrl");
  }
  if (auto* v = o->if_contains("disabled"); v && v->is_bool()) d.disabled = v->as_bool();
  return d;
}

std::string localBrokerDataJson(const BrokerUrls& self, const std::vector<std::string>& bundles,
                                int64_t startTimestampMs, int64_t lastUpdateMs) {
  auto usage = [] {
    json::object u;
    u["usage"] = 0.0;
    u["limit"] = 0.0;
    return u;
  };
  json::object o;
  o["webServiceUrl"] = self.webServiceUrl;
  o["webServiceUrlTls"] = orNull(self.webServiceUrlTls);
  o["pulsarServiceUrl"] = self.pulsarServiceUrl;
  o["pulsarServiceUrlTls"] = orNull(self.pulsarServiceUrlTls);
  o["persistentTopicsEnabled"] = true;
  o["nonPersistentTopicsEnabled"] = false;
  o["cpu"] = usage();
  o["memory"] = usage();
  o["directMemory"] = usage();
  o["bandwidthIn"] = usage();
  o["bandwidthOut"] = usage();
  o["msgThroughputIn"] = 0.0;
  o["msgThroughputOut"] = 0.0;
  o["msgRateIn"] = 0.0;
  o["msgRateOut"] = 0.0;
  o["lastUpdate"] = lastUpdateMs;
  o["lastStats"] = json::object();
  o["numTopics"] = 0;
  o["numBundles"] = static_cast<int64_t>(bundles.size());
  o["numConsumers"] = 0;
  o["numProducers"] = 0;
  o["bundles"] = stringArray(bundles);
  o["lastBundleGains"] = json::array();
  o["lastBundleLosses"] = json::array();
  o["brokerVersionString"] = "magnetar";
  o["protocols"] = json::object();
  o["advertisedListeners"] = json::object();
  o["loadManagerClassName"] = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl";
  o["startTimestamp"] = startTimestampMs;
  o["loadReportType"] = "LocalBrokerData";
  return json::serialize(o);
}

Result<BrokerReport> parseLocalBrokerData(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "LocalBrokerData");
  if (!o.isOk()) return o.status();
  BrokerReport r;
  r.urls.pulsarServiceUrl = str(*o, "pulsarServiceUrl");
  r.urls.pulsarServiceUrlTls = str(*o, "pulsarServiceUrlTls");
  r.urls.webServiceUrl = str(*o, "webServiceUrl");
  r.urls.webServiceUrlTls = str(*o, "webServiceUrlTls");
  if (r.urls.pulsarServiceUrl.empty() && r.urls.pulsarServiceUrlTls.empty()) {
    return missing(path, "LocalBrokerData", "pulsarServiceUrl");
  }
  if (auto* b = o->if_contains("bundles"); b && b->is_array()) {
    for (const auto& e : b->as_array()) {
      if (e.is_string()) r.bundles.emplace_back(e.as_string());
    }
  }
  return r;
}

std::string leaderBrokerJson(const BrokerUrls& leader) {
  json::object o;
  o["brokerId"] = leader.brokerId;
  o["serviceUrl"] = leader.webServiceUrl;
  return json::serialize(o);
}

Result<LeaderData> parseLeaderBroker(std::string_view text, const std::string& path) {
  auto o = parseObject(text, path, "LeaderBroker");
  if (!o.isOk()) return o.status();
  LeaderData d;
  d.serviceUrl = str(*o, "serviceUrl");
  d.brokerId = str(*o, "brokerId");
  if (d.brokerId.empty()) {
    auto p = d.serviceUrl.find("://");
    if (p != std::string::npos) d.brokerId = d.serviceUrl.substr(p + 3);
  }
  if (d.brokerId.empty()) return missing(path, "LeaderBroker", "brokerId or serviceUrl");
  return d;
}

std::string clusterDataJson(const std::string& webServiceUrl, const std::string& webServiceUrlTls,
                            const std::string& brokerServiceUrl,
                            const std::string& brokerServiceUrlTls) {
  json::object o;
  if (!webServiceUrl.empty()) o["serviceUrl"] = webServiceUrl;
  if (!webServiceUrlTls.empty()) o["serviceUrlTls"] = webServiceUrlTls;
  if (!brokerServiceUrl.empty()) o["brokerServiceUrl"] = brokerServiceUrl;
  if (!brokerServiceUrlTls.empty()) o["brokerServiceUrlTls"] = brokerServiceUrlTls;
  o["brokerClientTlsEnabled"] = false;
  o["tlsAllowInsecureConnection"] = false;
  o["brokerClientTlsEnabledWithKeyStore"] = false;
  o["brokerClientTlsKeyStoreType"] = "JKS";
  o["brokerClientTlsTrustStoreType"] = "JKS";
  return json::serialize(o);
}

std::string tenantInfoJson(const std::vector<std::string>& adminRoles,
                           const std::vector<std::string>& allowedClusters) {
  json::object o;
  o["adminRoles"] = stringArray(adminRoles);
  o["allowedClusters"] = stringArray(allowedClusters);
  return json::serialize(o);
}

std::string namespacePoliciesJson(const std::vector<std::string>& replicationClusters,
                                  const std::vector<uint64_t>& boundaries) {
  json::object auth;
  auth["namespace_auth"] = json::object();
  auth["destination_auth"] = json::object();
  auth["subscription_auth_roles"] = json::object();
  json::object bundles;
  json::array b;
  for (uint64_t v : boundaries) b.emplace_back(formatBoundary(v));
  bundles["boundaries"] = std::move(b);
  bundles["numBundles"] = static_cast<int64_t>(boundaries.size()) - 1;
  json::object o;
  o["auth_policies"] = std::move(auth);
  o["replication_clusters"] = stringArray(replicationClusters);
  o["bundles"] = std::move(bundles);
  o["backlog_quota_map"] = json::object();
  o["clusterDispatchRate"] = json::object();
  o["topicDispatchRate"] = json::object();
  o["subscriptionDispatchRate"] = json::object();
  o["replicatorDispatchRate"] = json::object();
  o["clusterSubscribeRate"] = json::object();
  o["publishMaxMessageRate"] = json::object();
  o["latency_stats_sample_rate"] = json::object();
  o["deleted"] = false;
  o["encryption_required"] = false;
  o["subscription_auth_mode"] = "None";
  o["schema_auto_update_compatibility_strategy"] = "Full";
  o["schema_compatibility_strategy"] = "UNDEFINED";
  o["is_allow_auto_update_schema"] = true;
  o["schema_validation_enforced"] = false;
  o["subscription_types_enabled"] = json::array();
  o["properties"] = json::object();
  o["migrated"] = false;
  return json::serialize(o);
}

Result<std::optional<std::vector<uint64_t>>> boundariesFromPolicies(std::string_view text,
                                                                    const std::string& path) {
  auto o = parseObject(text, path, "Policies");
  if (!o.isOk()) return o.status();
  auto* bundles = o->if_contains("bundles");
  if (!bundles || !bundles->is_object()) return std::optional<std::vector<uint64_t>>();
  auto* b = bundles->as_object().if_contains("boundaries");
  if (!b || !b->is_array()) return std::optional<std::vector<uint64_t>>();
  std::vector<std::string> values;
  for (const auto& e : b->as_array()) {
    if (!e.is_string())
      return Status::corruption("znode " + path + ": a bundle boundary is not a string");
    values.emplace_back(e.as_string());
  }
  auto parsed = parseBoundaries(values);
  if (!parsed.isOk()) return Status::corruption("znode " + path + ": " + parsed.status().message());
  return std::optional<std::vector<uint64_t>>(std::move(*parsed));
}

}  // namespace magnetar::broker::cluster
