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
  return BrokerUrls{"127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", ""};
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

}  // namespace
}  // namespace magnetar::broker::cluster
