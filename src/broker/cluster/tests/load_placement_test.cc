// The leader's placement (Pulsar's ModularLoadManagerImpl.selectBroker with
// LeastLongTermMessageRate and LoadManagerShared's filters), the isolation policies' JSON and
// the preallocations.
#include "broker/cluster/load_placement.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace magnetar::broker::cluster {
namespace {

size_t first(size_t) { return 0; }

// A broker with `rate` msg/s in and out (long term) over `bundles` bundles of namespace `ns`.
BrokerLoad loaded(double rate, int bundles = 1, const std::string& ns = "t/other") {
  BrokerLoad b;
  b.timeAverage.longTermMsgRateIn = rate;
  b.timeAverage.longTermMsgRateOut = rate;
  for (int i = 0; i < bundles; ++i) {
    std::string key = ns + "/0x" + std::to_string(i) + "_0x" + std::to_string(i + 1);
    b.local.bundles.insert(key);
    b.local.lastStats[key] = {};
  }
  b.local.usage.cpu = {10, 100};
  return b;
}

PlacementInput inputFor(const std::string& bundle, const BrokerLoads& loads) {
  PlacementInput in;
  in.bundleKey = bundle;
  in.loads = &loads;
  for (const auto& [id, l] : loads) in.available.insert(id);
  return in;
}

TEST(LeastLongTermMessageRate, PicksTheLeastMessageRateNotTheFewestBundles) {
  // a: one hot bundle (10000 msg/s); b: five quiet ones. Counting bundles would pick a.
  BrokerLoads loads{{"a:1", loaded(5000, 1)}, {"b:1", loaded(10, 5)}};
  PlacementSettings s;
  auto in = inputFor("public/default/0x00000000_0x40000000", loads);
  EXPECT_EQ(selectBroker(in, s, first), "b:1");
  EXPECT_DOUBLE_EQ(leastLongTermMessageRateScore(loads["a:1"], s), 10000);
}

TEST(LeastLongTermMessageRate, PreallocatedBundlesCountTowardsTheScore) {
  BrokerLoads loads{{"a:1", loaded(100)}, {"b:1", loaded(50)}};
  loads["b:1"].preallocated["x/y/0x0_0x1"] = BundleData::withDefaults(defaultBundleStats());
  // b: 100 + 50 (in) + 50 (out) of the preallocated default bundle = 200 = a's.
  PlacementSettings s;
  EXPECT_DOUBLE_EQ(leastLongTermMessageRateScore(loads["b:1"], s), 200);
  loads["b:1"].preallocated["x/y/0x1_0x2"] = BundleData::withDefaults(defaultBundleStats());
  EXPECT_EQ(leastLongTermMessageRate({"a:1", "b:1"}, loads, s, first), "a:1");
}

TEST(LeastLongTermMessageRate, AnOverloadedBrokerScoresInfinite) {
  BrokerLoads loads{{"a:1", loaded(0)}, {"b:1", loaded(900)}};
  loads["a:1"].local.usage.cpu = {90, 100};  // 90 % > 85 %
  PlacementSettings s;
  EXPECT_TRUE(std::isinf(leastLongTermMessageRateScore(loads["a:1"], s)));
  EXPECT_EQ(leastLongTermMessageRate({"a:1", "b:1"}, loads, s, first), "b:1");
  // The weights count: CPU weighted 0.5 makes a 45 %, not overloaded.
  s.cpuWeight = 0.5;
  EXPECT_EQ(leastLongTermMessageRate({"a:1", "b:1"}, loads, s, first), "a:1");
  // All overloaded: any of them (here the first the pick names).
  s.cpuWeight = 1;
  loads["b:1"].local.usage.bandwidthOut = {95, 100};
  EXPECT_EQ(leastLongTermMessageRate({"a:1", "b:1"}, loads, s, first), "a:1");
  EXPECT_EQ(leastLongTermMessageRate({}, loads, s, first), std::nullopt);
}

TEST(LeastLongTermMessageRate, TiesArePickedAmongAllEquals) {
  BrokerLoads loads{{"a:1", loaded(10)}, {"b:1", loaded(10)}, {"c:1", loaded(20)}};
  PlacementSettings s;
  size_t seen = 0;
  auto last = [&](size_t n) {
    seen = n;
    return n - 1;
  };
  EXPECT_EQ(leastLongTermMessageRate({"a:1", "b:1", "c:1"}, loads, s, last), "b:1");
  EXPECT_EQ(seen, 2u);
}

TEST(SelectBroker, EvenDistributionComesBeforeTheRate) {
  // a is idle but already has a bundle of public/default; b and c have none of it.
  BrokerLoads loads{
      {"a:1", loaded(0, 1, "public/default")}, {"b:1", loaded(300)}, {"c:1", loaded(200)}};
  PlacementSettings s;
  auto in = inputFor("public/default/0x40000000_0x80000000", loads);
  EXPECT_EQ(selectBroker(in, s, first), "c:1");
  s.distributeBundlesEvenly = false;
  EXPECT_EQ(selectBroker(in, s, first), "a:1");
}

TEST(SelectBroker, SheddingExcludedNamespacesArePlacedRoundRobin) {
  // c is the least loaded: LeastLongTermMessageRate always picks it; a namespace of
  // loadBalancerSheddingExcludedNamespaces goes round robin (Pulsar's RoundRobinBrokerSelector).
  BrokerLoads loads{{"a:1", loaded(300)}, {"b:1", loaded(200)}, {"c:1", loaded(0)}};
  PlacementSettings s;
  s.distributeBundlesEvenly = false;
  s.sheddingExcludedNamespaces = {"public/pinned"};
  uint64_t counter = 0;
  auto other = inputFor("public/default/0x40000000_0x80000000", loads);
  other.roundRobin = &counter;
  EXPECT_EQ(selectBroker(other, s, first), "c:1");
  EXPECT_EQ(counter, 0u);
  auto pinned = inputFor("public/pinned/0x40000000_0x80000000", loads);
  pinned.roundRobin = &counter;
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) got.push_back(*selectBroker(pinned, s, first));
  EXPECT_EQ(got, (std::vector<std::string>{"a:1", "b:1", "c:1", "a:1"}));
  EXPECT_EQ(counter, 4u);
}

TEST(SelectBroker, AStaleSplitParentDoesNotCountForItsOldOwner) {
  // a still reports the parent of a split it just made (its next report drops it); b was given
  // the first half. The second half goes to a, not to b beside its sibling.
  BrokerLoad a = loaded(300, 0);
  a.local.bundles.insert("public/hot/0x00000000_0xffffffff");
  BrokerLoad b = loaded(100, 0);
  b.local.bundles.insert("public/hot/0x00000000_0x7fffffff");
  BrokerLoads loads{{"a:1", a}, {"b:1", b}};
  PlacementSettings s;
  EXPECT_EQ(selectBroker(inputFor("public/hot/0x7fffffff_0xffffffff", loads), s, first), "a:1");
  // The half b holds still counts for b: a third broker without any gets the next bundle.
  loads.emplace("c:1", loaded(500, 0));
  EXPECT_EQ(selectBroker(inputFor("public/hot/0x7fffffff_0xffffffff", loads), s, first), "a:1");
  std::set<std::string> candidates{"a:1", "b:1", "c:1"};
  removeMostServicingBrokersForNamespace("public/hot/0x7fffffff_0xffffffff", candidates,
                                         brokerNamespaces(loads));
  EXPECT_EQ(candidates, (std::set<std::string>{"a:1", "c:1"}));
}

TEST(SelectBroker, BrokersWithTooManyTopicsArePassedOverUnlessAllHaveThem) {
  BrokerLoads loads{{"a:1", loaded(0)}, {"b:1", loaded(500)}};
  loads["a:1"].local.numTopics = 60000;
  PlacementSettings s;
  auto in = inputFor("t/n/0x0_0x1", loads);
  EXPECT_EQ(selectBroker(in, s, first), "b:1");
  loads["b:1"].local.numTopics = 60000;
  EXPECT_EQ(selectBroker(in, s, first), "a:1");
}

TEST(SelectBroker, AnOverloadedChoiceFallsBackToEveryAllowedBroker) {
  // Even distribution leaves only a (b has a bundle of t/n), and a is overloaded.
  BrokerLoads loads{{"a:1", loaded(0)}, {"b:1", loaded(10, 1, "t/n")}};
  loads["a:1"].local.usage.cpu = {99, 100};
  PlacementSettings s;
  EXPECT_EQ(selectBroker(inputFor("t/n/0x1_0x2", loads), s, first), "b:1");
}

NamespaceIsolationPolicy policy(std::vector<std::string> ns, std::vector<std::string> primary,
                                std::vector<std::string> secondary, int minLimit) {
  NamespaceIsolationPolicy p;
  p.namespaces = std::move(ns);
  p.primary = std::move(primary);
  p.secondary = std::move(secondary);
  p.parameters = {{"min_limit", std::to_string(minLimit)}, {"usage_threshold", "80"}};
  return p;
}

TEST(NamespacePolicies, PrimariesThenSecondariesBelowMinLimit) {
  BrokerLoads loads{{"h1:8080", loaded(0)}, {"h2:8080", loaded(0)}, {"h3:8080", loaded(0)}};
  std::set<std::string> all{"h1:8080", "h2:8080", "h3:8080"};
  NamespaceIsolationPolicies p{{"iso", policy({"t/iso.*"}, {"h1"}, {"h2"}, 1)}};
  EXPECT_EQ(applyNamespacePolicies("t/iso-a", p, all, loads), (std::set<std::string>{"h1:8080"}));
  // Other namespaces use the shared brokers only: not h1 (some policy's primary).
  EXPECT_EQ(applyNamespacePolicies("t/other", p, all, loads),
            (std::set<std::string>{"h2:8080", "h3:8080"}));
  // min_limit 2 with one primary: the secondaries join.
  p["iso"] = policy({"t/iso.*"}, {"h1"}, {"h2"}, 2);
  EXPECT_EQ(applyNamespacePolicies("t/iso-a", p, all, loads),
            (std::set<std::string>{"h1:8080", "h2:8080"}));
  // The primary gone, min_limit 1: the secondaries.
  p["iso"] = policy({"t/iso.*"}, {"h1"}, {"h2"}, 1);
  EXPECT_EQ(applyNamespacePolicies("t/iso-a", p, {"h2:8080", "h3:8080"}, loads),
            (std::set<std::string>{"h2:8080"}));
  // Regexes match whole names: "t/iso" does not match "xt/isoa".
  EXPECT_EQ(policyOf(p, "xt/iso-a"), nullptr);
}

TEST(NamespacePolicies, PlacementNeverLeavesTheAllowedBrokers) {
  // The primary is the busiest: isolation still wins over the rate.
  BrokerLoads loads{{"h1:1", loaded(5000)}, {"h2:1", loaded(0)}};
  NamespaceIsolationPolicies p{{"iso", policy({"t/iso"}, {"h1"}, {}, 1)}};
  auto in = inputFor("t/iso/0x0_0x1", loads);
  in.policies = &p;
  PlacementSettings s;
  EXPECT_EQ(selectBroker(in, s, first), "h1:1");
  in.bundleKey = "t/free/0x0_0x1";
  EXPECT_EQ(selectBroker(in, s, first), "h2:1");
  // No broker allowed (the primary is gone, no secondary): nothing.
  in.bundleKey = "t/iso/0x0_0x1";
  in.available = {"h2:1"};
  EXPECT_EQ(selectBroker(in, s, first), std::nullopt);
}

TEST(AntiAffinity, NamespacesOfAGroupGoToBrokersWithoutOne) {
  BrokerLoads loads{{"a:1", loaded(0, 1, "t/ns1")}, {"b:1", loaded(900)}, {"c:1", loaded(1000)}};
  std::map<std::string, std::string> groups{{"t/ns1", "G"}, {"t/ns2", "g"}};
  auto counts = antiAffinityNamespaceCounts(brokerNamespaces(loads), groups, "g");
  EXPECT_EQ(counts, (std::map<std::string, int>{{"a:1", 1}}));  // case-insensitive
  auto in = inputFor("t/ns2/0x0_0x1", loads);
  in.antiAffinityCounts = counts;
  PlacementSettings s;
  EXPECT_EQ(selectBroker(in, s, first), "b:1");  // a is idle but holds t/ns1
  // Every broker holds one: the fewest wins, then the rate.
  std::set<std::string> c{"a:1", "b:1", "c:1"};
  filterAntiAffinityGroupOwnedBrokers(c, {{"a:1", 2}, {"b:1", 1}, {"c:1", 1}});
  EXPECT_EQ(c, (std::set<std::string>{"b:1", "c:1"}));
}

TEST(IsolationPolicyJson, RoundTripsInPulsarsFieldOrder) {
  const std::string body =
      R"({"namespaces":["t/iso.*"],"primary":["host1"],"secondary":[],)"
      R"("auto_failover_policy":{"parameters":{"min_limit":"1","usage_threshold":"80"},)"
      R"("policy_type":"min_available"}})";
  auto p = parseNamespaceIsolationData(body);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(toJson(*p), body);
  NamespaceIsolationPolicies all{{"p1", *p}};
  auto back = parseNamespaceIsolationPolicies(toJson(all), "/admin/clusters/c/x");
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->at("p1").primary, std::vector<std::string>{"host1"});
}

TEST(IsolationPolicyJson, InvalidPoliciesAreRefusedWithTheReason) {
  auto bad = [](const std::string& body) {
    auto p = parseNamespaceIsolationData(body);
    EXPECT_FALSE(p.isOk()) << body;
    return p.isOk() ? std::string() : p.status().message();
  };
  EXPECT_NE(bad("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad(R"({"namespaces":[],"primary":["a"],"secondary":[]})").find("namespaces"),
            std::string::npos);
  EXPECT_NE(bad(R"({"namespaces":["a"],"primary":["a"],"secondary":[]})").find("auto_failover"),
            std::string::npos);
  EXPECT_NE(bad(R"({"namespaces":["a"],"primary":["(a"],"secondary":[],)"
                R"("auto_failover_policy":{"policy_type":"min_available",)"
                R"("parameters":{"min_limit":"1","usage_threshold":"80"}}})")
                .find("regex"),
            std::string::npos);
  EXPECT_NE(bad(R"({"namespaces":["a"],"primary":["a"],"secondary":[],)"
                R"("auto_failover_policy":{"policy_type":"min_available",)"
                R"("parameters":{"min_limit":"x","usage_threshold":"80"}}})")
                .find("min_limit"),
            std::string::npos);
  EXPECT_FALSE(parseNamespaceIsolationPolicies("nope", "/p").isOk());
}

TEST(AntiAffinityJson, TheGroupIsSetAndRemovedInLocalPolicies) {
  std::string base = R"({"bundles":{"boundaries":["0x00000000","0xffffffff"],"numBundles":1},)"
                     R"("migrated":false})";
  std::string with = localPoliciesWithAntiAffinityGroup(base, {}, "g1");
  EXPECT_EQ(antiAffinityGroupOf(with), "g1");
  EXPECT_LT(with.find("namespaceAntiAffinityGroup"), with.find("migrated"));
  std::string without = localPoliciesWithAntiAffinityGroup(with, {}, std::nullopt);
  EXPECT_EQ(without, base);
  // No LocalPolicies yet: the namespace's cut is written with the group.
  std::string fresh = localPoliciesWithAntiAffinityGroup("", {0, 0x80000000, 0x100000000}, "g");
  EXPECT_NE(fresh.find("0x80000000"), std::string::npos);
  EXPECT_EQ(antiAffinityGroupOf(fresh), "g");
  EXPECT_EQ(antiAffinityGroupOf("not json"), "");
}

TEST(Preallocations, KeptUntilTheReportNamesTheBundle) {
  Preallocations p;
  p.add("t/n/0x0_0x1", "a:1", BundleData::withDefaults(defaultBundleStats()), 1000);
  p.add("t/n/0x1_0x2", "b:1", BundleData::withDefaults(defaultBundleStats()), 1000);
  std::map<std::string, LocalBrokerData> reports{{"a:1", {}}, {"b:1", {}}};
  p.prune(reports, 2000, 30000);
  EXPECT_EQ(p.brokerOf("t/n/0x0_0x1"), "a:1");
  EXPECT_EQ(p.of("a:1").size(), 1u);
  reports["a:1"].bundles.insert("t/n/0x0_0x1");
  p.prune(reports, 2000, 30000);
  EXPECT_EQ(p.brokerOf("t/n/0x0_0x1"), std::nullopt);
  EXPECT_EQ(p.brokerOf("t/n/0x1_0x2"), "b:1");
  // Its broker gone: dropped; likewise past the age limit.
  p.add("t/n/0x2_0x3", "a:1", {}, 2000);
  reports.erase("b:1");
  p.prune(reports, 3000, 30000);
  EXPECT_EQ(p.brokerOf("t/n/0x1_0x2"), std::nullopt);
  EXPECT_EQ(p.brokerOf("t/n/0x2_0x3"), "a:1");
  p.prune(reports, 40000, 30000);
  EXPECT_EQ(p.size(), 0u);
}

}  // namespace
}  // namespace magnetar::broker::cluster
