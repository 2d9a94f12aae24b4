// The znode JSON of cluster mode: Pulsar's field names, values read back, and foreign or damaged
// data refused with an error naming the path.
#include "broker/cluster/cluster_metadata.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {
namespace {

namespace json = boost::json;

BrokerUrls urls() {
  return BrokerUrls{
      "127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", "", {}};
}

TEST(ClusterMetadata, NamespaceEphemeralDataHasPulsarsFields) {
  std::string text = namespaceEphemeralDataJson(urls());
  auto o = json::parse(text).as_object();
  EXPECT_EQ(o.at("nativeUrl").as_string(), "pulsar://127.0.0.1:6650");
  EXPECT_TRUE(o.at("nativeUrlTls").is_null());
  EXPECT_EQ(o.at("httpUrl").as_string(), "http://127.0.0.1:8080");
  EXPECT_TRUE(o.at("httpUrlTls").is_null());
  EXPECT_EQ(o.at("disabled").as_bool(), false);
  EXPECT_TRUE(o.at("advertisedListeners").as_object().empty());
  auto back = parseNamespaceEphemeralData(text, "/namespace/public/default/0x00000000_0x40000000");
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->urls.pulsarServiceUrl, "pulsar://127.0.0.1:6650");
  EXPECT_EQ(back->urls.webServiceUrl, "http://127.0.0.1:8080");
  EXPECT_FALSE(back->disabled);
  // Written by Pulsar itself (with TLS URLs, disabled while unloading).
  auto pulsar = parseNamespaceEphemeralData(
      R"({"nativeUrl":"pulsar://b:6650","nativeUrlTls":"pulsar+ssl://b:6651",)"
      R"("httpUrl":"http://b:8080","httpUrlTls":"https://b:8443","disabled":true,)"
      R"("advertisedListeners":{}})",
      "/p");
  ASSERT_TRUE(pulsar.isOk());
  EXPECT_EQ(pulsar->urls.pulsarServiceUrlTls, "pulsar+ssl://b:6651");
  EXPECT_TRUE(pulsar->disabled);
}

TEST(ClusterMetadata, ForeignOrDamagedDataNamesThePath) {
  for (const char* bad : {"", "not json", "[1,2]", R"({"httpUrl":"http://x:1"})"}) {
    auto r = parseNamespaceEphemeralData(bad, "/namespace/t/ns/0x00000000_0xffffffff");
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find("/namespace/t/ns/0x00000000_0xffffffff"),
              std::string::npos);
  }
  EXPECT_FALSE(parseLocalBrokerData("{}", "/loadbalance/brokers/x:1").isOk());
  EXPECT_FALSE(parseLeaderBroker("{}", "/loadbalance/leader").isOk());
  auto pol = boundariesFromPolicies(R"({"bundles":{"boundaries":["0x00000000","0x10"]}})",
                                    "/admin/policies/t/ns");
  ASSERT_FALSE(pol.isOk());
  EXPECT_NE(pol.status().message().find("/admin/policies/t/ns"), std::string::npos);
  // Garbage names the document kind the path holds.
  auto local = boundariesFromPolicies("not json", "/admin/local-policies/t/ns");
  ASSERT_FALSE(local.isOk());
  EXPECT_NE(local.status().message().find("does not hold LocalPolicies JSON"), std::string::npos)
      << local.status().message();
  auto global = boundariesFromPolicies("not json", "/admin/policies/t/ns");
  ASSERT_FALSE(global.isOk());
  EXPECT_NE(global.status().message().find("does not hold Policies JSON"), std::string::npos);
}

TEST(ClusterMetadata, RegistrationLeaderAndPoliciesRoundTrip) {
  std::string reg = localBrokerDataJson(urls(), {"public/default/0x00000000_0x40000000"}, 1, 2);
  auto o = json::parse(reg).as_object();
  EXPECT_EQ(o.at("numBundles").as_int64(), 1);
  EXPECT_EQ(o.at("webServiceUrl").as_string(), "http://127.0.0.1:8080");
  EXPECT_EQ(o.at("startTimestamp").as_int64(), 1);
  EXPECT_EQ(o.at("lastUpdate").as_int64(), 2);
  auto rep = parseLocalBrokerData(reg, "/loadbalance/brokers/127.0.0.1:8080");
  ASSERT_TRUE(rep.isOk());
  EXPECT_EQ(rep->urls.pulsarServiceUrl, "pulsar://127.0.0.1:6650");
  EXPECT_EQ(rep->bundles, std::vector<std::string>{"public/default/0x00000000_0x40000000"});

  auto leader = parseLeaderBroker(leaderBrokerJson(urls()), "/loadbalance/leader");
  ASSERT_TRUE(leader.isOk());
  EXPECT_EQ(leader->brokerId, "127.0.0.1:8080");
  EXPECT_EQ(leader->serviceUrl, "http://127.0.0.1:8080");
  auto old = parseLeaderBroker(R"({"serviceUrl":"http://b:8080"})", "/loadbalance/leader");
  ASSERT_TRUE(old.isOk());
  EXPECT_EQ(old->brokerId, "b:8080");

  auto four = defaultBoundaries(4).value();
  std::string pol = namespacePoliciesJson({"c1"}, four);
  auto p = json::parse(pol).as_object();
  EXPECT_EQ(p.at("bundles").at("numBundles").as_int64(), 4);
  EXPECT_EQ(p.at("bundles").at("boundaries").as_array().at(1).as_string(), "0x40000000");
  EXPECT_EQ(p.at("replication_clusters").as_array().at(0).as_string(), "c1");
  auto b = boundariesFromPolicies(pol, "/admin/policies/public/default");
  ASSERT_TRUE(b.isOk());
  ASSERT_TRUE(b->has_value());
  EXPECT_EQ(**b, four);
  auto none = boundariesFromPolicies("{}", "/admin/policies/public/default");
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->has_value());
}

// Pulsar 4.2.4's Jackson mapper (ObjectMapperFactory) writes these exact bytes: a new namespace
// with one bundle, and one with every policy Magnetar models set (both checked by reading them
// into Pulsar's Policies class and writing them back; docs/cluster-mode.md).
constexpr const char* kPulsarNewNamespace =
    R"({"auth_policies":{"namespace_auth":{},"destination_auth":{},"subscription_auth_roles":{}},)"
    R"("replication_clusters":["magnetar-cluster"],"allowed_clusters":[],"bundles":{"boundaries":)"
    R"(["0x00000000","0xffffffff"],"numBundles":1},"backlog_quota_map":{},"clusterDispatchRate":{)"
    R"(},"topicDispatchRate":{},"subscriptionDispatchRate":{},"replicatorDispatchRate":{},"cluste)"
    R"(rSubscribeRate":{},"publishMaxMessageRate":{},"latency_stats_sample_rate":{},"deleted":fal)"
    R"(se,"encryption_required":false,"subscription_auth_mode":"None","offload_threshold":-1,"off)"
    R"(load_threshold_in_seconds":-1,"schema_compatibility_strategy":"UNDEFINED","schema_validati)"
    R"(on_enforced":false,"subscription_types_enabled":[],"properties":{},"migrated":false})";
constexpr const char* kPulsarRichPolicies =
    R"({"auth_policies":{"namespace_auth":{"role1":["produce","consume"]},"destination_auth":{"pe)"
    R"(rsistent://t1/ns1/tp":{"role2":["consume"]}},"subscription_auth_roles":{}},"replication_cl)"
    R"(usters":["magnetar-cluster"],"allowed_clusters":[],"bundles":{"boundaries":["0x00000000",")"
    R"(0x40000000","0x80000000","0xc0000000","0xffffffff"],"numBundles":4},"backlog_quota_map":{")"
    R"(destination_storage":{"limit":1000,"limitSize":1000,"limitTime":60,"policy":"producer_exce)"
    R"(ption"}},"clusterDispatchRate":{},"topicDispatchRate":{},"subscriptionDispatchRate":{},"re)"
    R"(plicatorDispatchRate":{},"clusterSubscribeRate":{},"deduplicationEnabled":true,"autoTopicC)"
    R"(reationOverride":{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumParti)"
    R"(tions":2},"publishMaxMessageRate":{},"latency_stats_sample_rate":{},"message_ttl_in_second)"
    R"(s":300,"subscription_expiration_time_minutes":30,"retention_policies":{"retentionTimeInMin)"
    R"(utes":60,"retentionSizeInMB":10},"deleted":false,"encryption_required":false,"delayed_deli)"
    R"(very_policies":{"tickTime":500,"active":true,"maxDeliveryDelayInMillis":0},"inactive_topic)"
    R"(_policies":{"inactiveTopicDeleteMode":"delete_when_no_subscriptions","maxInactiveDurationS)"
    R"(econds":60,"deleteWhileInactive":true},"subscription_auth_mode":"None","max_producers_per_)"
    R"(topic":5,"compaction_threshold":1000000,"offload_threshold":-1,"offload_threshold_in_secon)"
    R"(ds":-1,"schema_compatibility_strategy":"FORWARD","is_allow_auto_update_schema":false,"sche)"
    R"(ma_validation_enforced":true,"subscription_types_enabled":[],"properties":{},"migrated":fa)"
    R"(lse})";

TEST(ClusterMetadata, PoliciesOfANewNamespaceAreWhatPulsarWrites) {
  EXPECT_EQ(policiesJson(NamespacePolicies{}, defaultBoundaries(1).value(), "", "magnetar-cluster"),
            kPulsarNewNamespace);
  EXPECT_EQ(namespacePoliciesJson({"magnetar-cluster"}, defaultBoundaries(1).value()),
            kPulsarNewNamespace);
}

TEST(ClusterMetadata, PoliciesReadAndWrittenBackAreUnchanged) {
  auto doc = parsePolicies(kPulsarRichPolicies, "/admin/policies/t1/ns1");
  ASSERT_TRUE(doc.isOk()) << doc.status().toString();
  const NamespacePolicies& p = doc->policies;
  EXPECT_EQ(p.permissions.at("role1"), (std::set<std::string>{"produce", "consume"}));
  EXPECT_EQ(p.topicPermissions.at("persistent://t1/ns1/tp").at("role2"),
            std::set<std::string>{"consume"});
  EXPECT_EQ(p.backlogQuotas.at("destination_storage").limitSize, 1000);
  EXPECT_EQ(p.backlogQuotas.at("destination_storage").policy, "producer_exception");
  EXPECT_EQ(p.deduplicationEnabled, true);
  ASSERT_TRUE(p.autoTopicCreation);
  EXPECT_EQ(p.autoTopicCreation->defaultNumPartitions, 2);
  EXPECT_EQ(p.messageTtlSeconds, 300);
  EXPECT_EQ(p.subscriptionExpirationTimeMinutes, 30);
  EXPECT_EQ(p.retention->retentionSizeInMB, 10);
  EXPECT_EQ(p.delayedDelivery->tickTime, 500);
  EXPECT_TRUE(p.inactiveTopicPolicies->deleteWhileInactive);
  EXPECT_EQ(p.limits.at("maxProducersPerTopic"), 5);
  EXPECT_EQ(p.compactionThreshold, 1000000);
  EXPECT_EQ(p.schemaCompatibilityStrategy, "FORWARD");
  EXPECT_EQ(p.isAllowAutoUpdateSchema, false);
  EXPECT_EQ(p.schemaValidationEnforced, true);
  EXPECT_EQ(doc->boundaries, defaultBoundaries(4).value());
  EXPECT_EQ(policiesJson(p, doc->boundaries, doc->raw, "other"), kPulsarRichPolicies);
  // Unset again: the field goes (Pulsar's mapper leaves nulls out).
  NamespacePolicies q = p;
  q.messageTtlSeconds.reset();
  auto again = json::parse(policiesJson(q, doc->boundaries, doc->raw, "")).as_object();
  EXPECT_FALSE(again.contains("message_ttl_in_seconds"));
}

TEST(ClusterMetadata, PoliciesKeepFieldsMagnetarDoesNotModel) {
  std::string base =
      R"({"auth_policies":{"namespace_auth":{},"destination_auth":{},"subscription_auth_roles":)"
      R"({"sub":["r"]}},"replication_clusters":["a","b"],"persistence":{"bookkeeperEnsemble":3},)"
      R"("resource_group_name":"rg","aFieldOfANewerPulsar":[1,2]})";
  auto doc = parsePolicies(base, "/admin/policies/t/n");
  ASSERT_TRUE(doc.isOk());
  EXPECT_TRUE(doc->boundaries.empty());
  NamespacePolicies p = doc->policies;
  p.messageTtlSeconds = 5;
  auto o = json::parse(policiesJson(p, {}, doc->raw, "c")).as_object();
  EXPECT_EQ(o.at("replication_clusters").as_array().size(), 2u);
  EXPECT_EQ(o.at("persistence").at("bookkeeperEnsemble").as_int64(), 3);
  EXPECT_EQ(o.at("resource_group_name").as_string(), "rg");
  EXPECT_EQ(o.at("auth_policies").at("subscription_auth_roles").at("sub").as_array().size(), 1u);
  EXPECT_EQ(o.at("message_ttl_in_seconds").as_int64(), 5);
  EXPECT_FALSE(o.contains("bundles"));
  // Pulsar's order first, unknown fields last.
  std::vector<std::string> keys;
  for (auto& [k, v] : o) keys.emplace_back(k);
  EXPECT_EQ(keys.front(), "auth_policies");
  EXPECT_EQ(keys.back(), "aFieldOfANewerPulsar");
  // withBundles replaces only the bundles.
  auto w = withBundles(kPulsarRichPolicies, defaultBoundaries(2).value(), "/x");
  ASSERT_TRUE(w.isOk());
  auto wo = json::parse(*w).as_object();
  EXPECT_EQ(wo.at("bundles").at("numBundles").as_int64(), 2);
  EXPECT_EQ(wo.at("message_ttl_in_seconds").as_int64(), 300);
}

TEST(ClusterMetadata, DamagedPoliciesNameTheZnode) {
  auto bad = parsePolicies("not json", "/admin/policies/t/n");
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find("/admin/policies/t/n"), std::string::npos);
  auto badCut =
      parsePolicies(R"({"bundles":{"boundaries":["0x10","0x05"]}})", "/admin/policies/t/n");
  EXPECT_EQ(badCut.status().code(), StatusCode::kCorruption);
  auto t = parseTenantInfo(R"({"adminRoles":"x"})", "/admin/policies/t");
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("/admin/policies/t"), std::string::npos);
  auto ok = parseTenantInfo(R"({"adminRoles":["a"],"allowedClusters":["c"]})", "/x");
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(ok->adminRoles, std::vector<std::string>{"a"});
}

TEST(ClusterMetadata, PoliciesFieldsOfTheWrongTypeFailTheRead) {
  // Pulsar's Jackson mapper fails on them; dropping them would lose them at the next update.
  for (const char* text :
       {R"({"message_ttl_in_seconds":"soon"})", R"({"retention_policies":[1]})",
        R"({"retention_policies":{"retentionTimeInMinutes":"x","retentionSizeInMB":1}})",
        R"({"deduplicationEnabled":"yes"})", R"({"max_producers_per_topic":{}})",
        R"({"replication_clusters":"c"})", R"({"auth_policies":{"namespace_auth":[]}})"}) {
    auto bad = parsePolicies(text, "/admin/policies/t/n");
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << text;
    EXPECT_NE(bad.status().message().find("/admin/policies/t/n"), std::string::npos) << text;
  }
  // null is unset; unknown fields are kept, whatever they hold.
  auto ok = parsePolicies(R"({"message_ttl_in_seconds":null,"someday":"x",)"
                          R"("replication_clusters":["a","b"]})",
                          "/admin/policies/t/n");
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_FALSE(ok->policies.messageTtlSeconds.has_value());
  EXPECT_EQ(ok->policies.replicationClusters, (std::vector<std::string>{"a", "b"}));
}

TEST(ClusterMetadata, PartitionedTopicMetadataAndPaths) {
  EXPECT_EQ(partitionedTopicMetadataJson(3), R"({"partitions":3,"deleted":false})");
  EXPECT_EQ(
      partitionedTopicMetadataJson(4, R"({"partitions":3,"deleted":false,"properties":{"k":"v"}})"),
      R"({"partitions":4,"deleted":false,"properties":{"k":"v"}})");
  EXPECT_EQ(parsePartitionedTopicMetadata(R"({"partitions":7})", "/p").value(), 7);
  EXPECT_EQ(parsePartitionedTopicMetadata(R"({"partitions":0})", "/p").status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(partitionedTopicPath("persistent://t/ns/a b:c=d%e"),
            "/admin/partitioned-topics/t/ns/persistent/a+b%3Ac%3Dd%25e");
  EXPECT_EQ(urlDecode("a+b%3Ac%3Dd%25e"), "a b:c=d%e");
  EXPECT_EQ(urlDecode("%zz%4"), "%zz%4");
  EXPECT_EQ(tenantPath("t"), "/admin/policies/t");
  EXPECT_EQ(namespacePath("t/n"), "/admin/policies/t/n");
  EXPECT_EQ(
      localPoliciesJson(defaultBoundaries(1).value(), ""),
      R"({"bundles":{"boundaries":["0x00000000","0xffffffff"],"numBundles":1},"migrated":false})");
}

TEST(ClusterMetadata, AdvertisedListenersAreWrittenAndReadBack) {
  BrokerUrls u = urls();
  u.listeners["internal"] = ListenerUrls{"pulsar://10.0.0.1:6650", ""};
  u.listeners["external"] = ListenerUrls{"pulsar://h.example:6650", "pulsar+ssl://h.example:6651"};
  std::string own = namespaceEphemeralDataJson(u);
  auto o = json::parse(own).as_object();
  EXPECT_EQ(o.at("advertisedListeners").at("external").at("brokerServiceUrlTls").as_string(),
            "pulsar+ssl://h.example:6651");
  EXPECT_TRUE(o.at("advertisedListeners").at("internal").at("brokerServiceUrlTls").is_null());
  auto back = parseNamespaceEphemeralData(own, "/namespace/t/n/0x00000000_0xffffffff");
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->urls.listeners, u.listeners);
  auto rep = parseLocalBrokerData(localBrokerDataJson(u, {}, 1, 2), "/loadbalance/brokers/x");
  ASSERT_TRUE(rep.isOk());
  EXPECT_EQ(rep->urls.listeners, u.listeners);
  // None: an empty map, as before.
  EXPECT_TRUE(json::parse(namespaceEphemeralDataJson(urls()))
                  .as_object()
                  .at("advertisedListeners")
                  .as_object()
                  .empty());
}

}  // namespace
}  // namespace magnetar::broker::cluster
