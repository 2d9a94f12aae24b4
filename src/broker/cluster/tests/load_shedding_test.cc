// The shedding strategies (load_shedding.h) on the cases of Pulsar's ThresholdShedderTest,
// OverloadShedderTest and UniformLoadShedderTest, plus the auto split's figures from the
// leader's data.
#include "broker/cluster/load_shedding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace magnetar::broker::cluster {
namespace {

constexpr double kMiB = 1024 * 1024;

BundleData withShortTermThroughput(double each) {
  BundleData d;
  d.shortTermData.msgThroughputIn = each;
  d.shortTermData.msgThroughputOut = each;
  return d;
}

// broker-1 owns bundle-1..n (bundle-i: i MiB/s each way) and reports their sum; broker2 owns
// copies of them named broker2-bundle-(n+i) and reports nothing (Pulsar's test set-up).
SheddingInput twoBrokers(int n, ResourceUsage bandwidth, ResourceUsage cpu = {}) {
  SheddingInput in;
  LocalBrokerData b1;
  LocalBrokerData b2;
  b1.usage.bandwidthIn = bandwidth;
  b1.usage.bandwidthOut = bandwidth;
  b1.usage.cpu = cpu;
  double total = 0;
  for (int i = 1; i <= n; ++i) {
    std::string name = "bundle-" + std::to_string(i);
    b1.bundles.insert(name);
    in.bundles[name] = withShortTermThroughput(i * kMiB);
    std::string other = "broker2-bundle-" + std::to_string(n + i);
    b2.bundles.insert(other);
    in.bundles[other] = withShortTermThroughput(i * kMiB);
    total += i * kMiB;
  }
  b1.msgThroughputIn = b1.msgThroughputOut = total;
  in.brokers["broker-1"] = b1;
  in.brokers["broker2"] = b2;
  return in;
}

std::vector<std::string> picksOf(const BundlesToUnload& u, const std::string& broker) {
  std::vector<std::string> out;
  for (const auto& [b, bundle] : u) {
    if (b == broker) out.push_back(bundle);
  }
  return out;
}

TEST(ThresholdShedder, NothingWithoutBrokersOrBundles) {
  ThresholdShedder t;
  EXPECT_TRUE(t.findBundlesForUnloading({}, {}).empty());
  SheddingInput in;
  in.brokers["broker-1"].usage.bandwidthIn = {999, 1000};
  in.brokers["broker-1"].usage.bandwidthOut = {999, 1000};
  EXPECT_TRUE(t.findBundlesForUnloading(in, {}).empty());
}

TEST(ThresholdShedder, SoleBrokerOrSoleBundleIsNotShed) {
  SheddingInput in;
  LocalBrokerData& b = in.brokers["broker-1"];
  b.usage.bandwidthIn = b.usage.bandwidthOut = {999, 1000};
  b.bundles = {"bundle-1"};
  b.msgThroughputIn = b.msgThroughputOut = 100 * kMiB;
  in.bundles["bundle-1"] = withShortTermThroughput(1000);
  ThresholdShedder t;
  EXPECT_TRUE(t.findBundlesForUnloading(in, {}).empty());  // alone: at the mean
  in.brokers["broker2"] = LocalBrokerData{};
  ThresholdShedder t2;
  EXPECT_TRUE(t2.findBundlesForUnloading(in, {}).empty());  // above it, but one bundle
}

TEST(ThresholdShedder, BusiestBundlesUntilTheExcessIsCovered) {
  // cpu 1000 % is a mis-configured signal (> 100 %): skipped, bandwidth 99.9 % counts. Mean
  // 0.4995; share 0.999 - 0.4995 - 0.1 + 0.05 = 0.4495 of 110 MiB/s = 49.4 MiB/s: 20 + 18 + 16.
  SheddingInput in = twoBrokers(10, {999, 1000}, {1000, 100});
  ThresholdShedder t;
  auto picks = t.findBundlesForUnloading(in, {});
  EXPECT_EQ(picksOf(picks, "broker-1"),
            (std::vector<std::string>{"bundle-10", "bundle-9", "bundle-8"}));
  EXPECT_TRUE(picksOf(picks, "broker2").empty());
  EXPECT_NEAR(t.averageUsage("broker-1"), 0.999, 1e-6);  // percentUsage is a float, as Pulsar's
}

TEST(ThresholdShedder, RecentlyUnloadedBundlesAreSkipped) {
  SheddingInput in = twoBrokers(10, {999, 1000});
  in.recentlyUnloaded = {{"bundle-10", 1}, {"bundle-9", 1}};
  ThresholdShedder t;
  EXPECT_EQ(picksOf(t.findBundlesForUnloading(in, {}), "broker-1"),
            (std::vector<std::string>{"bundle-8", "bundle-7", "bundle-6", "bundle-5"}));
}

TEST(ThresholdShedder, HistoryWeighsInAndSmallAmountsAreNotShed) {
  SheddingInput in = twoBrokers(10, {999, 1000});
  ThresholdShedder t;
  ASSERT_FALSE(t.findBundlesForUnloading(in, {}).empty());
  // The load is gone now: 0.9 x 0.999 + 0.1 x 0.1 stays high for a while.
  in.brokers["broker-1"].usage.bandwidthIn =
      in.brokers["broker-1"].usage.bandwidthOut = {100, 1000};
  t.findBundlesForUnloading(in, {});
  EXPECT_NEAR(t.averageUsage("broker-1"), 0.9 * 0.999 + 0.1 * 0.1, 1e-6);
  // Under loadBalancerBundleUnloadMinThroughputThreshold (MiB/s): nothing.
  SheddingSettings s;
  s.bundleUnloadMinThroughputThreshold = 1000;
  ThresholdShedder t2;
  EXPECT_TRUE(t2.findBundlesForUnloading(twoBrokers(10, {999, 1000}), s).empty());
}

TEST(ThresholdShedder, SystemNamespacesAreNotShed) {
  SheddingInput in = twoBrokers(2, {999, 1000});
  // Rename bundle-2 (the busiest) as a heartbeat namespace's bundle.
  const std::string hb = "pulsar/standalone/127.0.0.1:8080/0x00000000_0xffffffff";
  in.bundles[hb] = in.bundles["bundle-2"];
  in.bundles.erase("bundle-2");
  in.brokers["broker-1"].bundles.erase("bundle-2");
  in.brokers["broker-1"].bundles.insert(hb);
  SheddingSettings s;
  s.bundleUnloadMinThroughputThreshold = 0;
  ThresholdShedder t;
  EXPECT_EQ(picksOf(t.findBundlesForUnloading(in, s), "broker-1"),
            std::vector<std::string>{"bundle-1"});
  EXPECT_TRUE(isSystemServiceNamespace("pulsar/standalone/127.0.0.1:8080"));
  EXPECT_TRUE(isSystemServiceNamespace("pulsar/127.0.0.1:8080"));
  EXPECT_TRUE(isSystemServiceNamespace("sla-monitor/c1/host:8080"));
  EXPECT_FALSE(isSystemServiceNamespace("public/default"));
}

// broker-1 (bundles 1..10, 110 MiB/s), broker2 and broker-3 at bandwidth usages u1, u2, u3
// (per mille).
SheddingInput threeBrokers(double u1, double u2, double u3) {
  SheddingInput in = twoBrokers(10, {u1, 1000});
  in.brokers["broker2"].usage.bandwidthIn = in.brokers["broker2"].usage.bandwidthOut = {u2, 1000};
  LocalBrokerData& b3 = in.brokers["broker-3"];
  b3.usage.bandwidthIn = b3.usage.bandwidthOut = {u3, 1000};
  b3.bundles = {"broker-3-bundle"};
  in.bundles["broker-3-bundle"] = withShortTermThroughput(kMiB);
  return in;
}

TEST(ThresholdShedder, LowerBoundarySheddingUnloadsFromTheBusiestWhenOneIsBelow) {
  // Mean 0.4: nobody at 0.5 or above, broker-3 below 0.3. Off (Pulsar's default): nothing.
  SheddingSettings s;
  s.bundleUnloadMinThroughputThreshold = 0;
  ThresholdShedder off;
  EXPECT_TRUE(off.findBundlesForUnloading(threeBrokers(480, 450, 270), s).empty());
  // On: the busiest (broker-1) sheds 110 MiB/s x 0.1 x 0.5 = 5.5 MiB/s: bundle-10 (20 MiB/s).
  s.lowerBoundarySheddingEnabled = true;
  ThresholdShedder on;
  auto picks = on.findBundlesForUnloading(threeBrokers(480, 450, 270), s);
  EXPECT_EQ(picksOf(picks, "broker-1"), std::vector<std::string>{"bundle-10"});
  EXPECT_EQ(picks.size(), 1U);
  // Nobody below mean - threshold (0.35 > 0.427 - 0.1): nothing.
  ThresholdShedder none;
  EXPECT_TRUE(none.findBundlesForUnloading(threeBrokers(480, 450, 350), s).empty());
  // 5.5 MiB/s is under loadBalancerBundleUnloadMinThroughputThreshold (10 MiB/s): nothing.
  s.bundleUnloadMinThroughputThreshold = 10;
  ThresholdShedder small;
  EXPECT_TRUE(small.findBundlesForUnloading(threeBrokers(480, 450, 270), s).empty());
}

TEST(OverloadShedder, OnlyOverloadedBrokersShedTheirBusiestBundles) {
  // Under 85 %: nothing.
  EXPECT_TRUE(overloadShedder(twoBrokers(10, {500, 1000}), {}).empty());
  // 99.9 %: 0.999 - 0.85 + 0.05 = 0.199 of 110 MiB/s = 21.9 MiB/s: 20 + 18.
  SheddingInput in = twoBrokers(10, {999, 1000});
  EXPECT_EQ(picksOf(overloadShedder(in, {}), "broker-1"),
            (std::vector<std::string>{"bundle-10", "bundle-9"}));
  in.recentlyUnloaded = {{"bundle-10", 1}};
  EXPECT_EQ(picksOf(overloadShedder(in, {}), "broker-1"),
            (std::vector<std::string>{"bundle-9", "bundle-8"}));
  // A single bundle is never shed.
  EXPECT_TRUE(overloadShedder(twoBrokers(1, {999, 1000}), {}).empty());
}

TEST(UniformLoadShedder, ThroughputMultiplierPicksAtMostMaxUnloadBundleNumPerShedding) {
  // 20 bundles of 2 MiB/s on broker-1, nothing on broker2: max / min throughput far above 4.
  SheddingInput in;
  LocalBrokerData b1;
  for (int i = 1; i <= 20; ++i) {
    std::string name = "bundle-" + std::to_string(i);
    b1.bundles.insert(name);
    in.bundles[name] = withShortTermThroughput(kMiB);
  }
  b1.msgThroughputIn = b1.msgThroughputOut = 20 * kMiB;
  in.brokers["broker-1"] = b1;
  in.brokers["broker2"] = LocalBrokerData{};
  SheddingSettings s;
  s.maxUnloadBundleNumPerShedding = 2;
  EXPECT_EQ(uniformLoadShedder(in, s).size(), 2U);
  // No limit: (40 MiB - 1) x 0.2 = 8 MiB wanted, each bundle 2 MiB <= wanted + 1000: four.
  s.maxUnloadBundleNumPerShedding = -1;
  EXPECT_EQ(uniformLoadShedder(in, s).size(), 4U);
  // Threshold off: nothing.
  s.msgThroughputMultiplierDifferenceShedderThreshold = 0;
  EXPECT_TRUE(uniformLoadShedder(in, s).empty());
}

TEST(UniformLoadShedder, MsgRateDifferencePicksFromTheBusiestBroker) {
  SheddingInput in;
  LocalBrokerData hot;
  LocalBrokerData cold;
  for (int i = 1; i <= 4; ++i) {
    std::string name = "t/n/b" + std::to_string(i);
    hot.bundles.insert(name);
    BundleData d;
    d.shortTermData.msgRateIn = 1000.0 * i;  // 1000 .. 4000 msg/s
    in.bundles[name] = d;
  }
  hot.msgRateIn = 10000;
  cold.msgRateIn = 1000;
  cold.bundles = {"t/n/c"};
  in.bundles["t/n/c"].shortTermData.msgRateIn = 1000;
  in.brokers["hot"] = hot;
  in.brokers["cold"] = cold;
  // 900 % apart > 50 %; wanted (10000 - 1000) x 0.2 = 1800: b2 (2000 <= 2800), then b1
  // (1000 <= -200 + 1000? no).
  SheddingSettings s;
  EXPECT_EQ(picksOf(uniformLoadShedder(in, s), "hot"), std::vector<std::string>{"t/n/b2"});
  // More allowed (4500): b4 (4000 <= 5500), not b3 nor b2 (> 500 + 1000), then b1 (1000).
  s.maxUnloadPercentage = 0.5;
  EXPECT_EQ(picksOf(uniformLoadShedder(in, s), "hot"),
            (std::vector<std::string>{"t/n/b4", "t/n/b1"}));
  // Wanted below minUnloadMessage: nothing.
  s.minUnloadMessage = 100000;
  EXPECT_TRUE(uniformLoadShedder(in, s).empty());
}

TEST(SheddingStrategy, ByClassName) {
  EXPECT_EQ(sheddingStrategyByName("org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"),
            SheddingStrategy::kThreshold);
  EXPECT_EQ(sheddingStrategyByName("org.apache.pulsar.broker.loadbalance.impl.OverloadShedder"),
            SheddingStrategy::kOverload);
  EXPECT_EQ(sheddingStrategyByName("UniformLoadShedder"), SheddingStrategy::kUniform);
  EXPECT_EQ(sheddingStrategyByName("org.apache.pulsar.broker.loadbalance.impl.AvgShedder"),
            std::nullopt);
}

TEST(AutoSplit, FiguresFromReportsAndLongTermData) {
  std::map<std::string, LocalBrokerData> reports;
  NamespaceBundleStats st;
  st.topics = 3;
  st.producerCount = 2;
  st.consumerCount = 4;
  st.msgRateIn = 999999;  // the report's own rate does not count: the long-term mean does
  reports["b1:8080"].lastStats["t/n/0x00000000_0x80000000"] = st;
  reports["b2:8080"].lastStats["t/n/0x80000000_0xffffffff"] = st;
  std::map<std::string, BundleData> data;
  BundleData d;
  d.longTermData.msgRateIn = 40;
  d.longTermData.msgRateOut = 20;
  d.longTermData.msgThroughputIn = 1000;
  data["t/n/0x00000000_0x80000000"] = d;
  std::map<std::string, std::string> owners;
  auto loads = bundleLoadsForSplit(reports, data, &owners);
  ASSERT_EQ(loads.size(), 2U);
  const BundleLoad& a = loads.at("t/n/0x00000000_0x80000000");
  EXPECT_EQ(a.topics, 3);
  EXPECT_EQ(a.producers + a.consumers, 6);
  EXPECT_DOUBLE_EQ(a.msgRate, 60);
  EXPECT_DOUBLE_EQ(a.throughput, 1000);
  EXPECT_DOUBLE_EQ(loads.at("t/n/0x80000000_0xffffffff").msgRate, 0);
  EXPECT_EQ(owners.at("t/n/0x80000000_0xffffffff"), "b2:8080");
  SplitThresholds t;
  t.maxMsgRate = 50;
  EXPECT_EQ(findBundlesToSplit(loads, {{"t/n", 2}}, t),
            std::vector<std::string>{"t/n/0x00000000_0x80000000"});
}

}  // namespace
}  // namespace magnetar::broker::cluster
