// The modular load manager's data (load_data.h) and the report's update rule and the leader's
// aggregation (load_report.h): Pulsar's field names, its arithmetic and thresholds.
#include "broker/cluster/load_report.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <thread>

#include "base/thread_annotations.h"
#include "broker/cluster/load_data.h"
#include "broker/cluster/namespace_service.h"
#include "metadata/local_store.h"
#include "net/event_loop.h"

namespace magnetar::broker::cluster {
namespace {

namespace json = boost::json;

constexpr const char* kB1 = "public/default/0x00000000_0x40000000";
constexpr const char* kB2 = "public/default/0x40000000_0x80000000";

NamespaceBundleStats stats(double rateIn, double tpIn, int64_t topics = 1) {
  NamespaceBundleStats s;
  s.msgRateIn = rateIn;
  s.msgThroughputIn = tpIn;
  s.msgRateOut = rateIn / 2;
  s.msgThroughputOut = tpIn / 2;
  s.producerCount = 2;
  s.consumerCount = 3;
  s.topics = topics;
  s.cacheSize = 7;
  return s;
}

LocalBrokerData sampleReport() {
  LocalBrokerData d;
  d.urls.webServiceUrl = "http://127.0.0.1:8080";
  d.urls.pulsarServiceUrl = "pulsar://127.0.0.1:6650";
  d.urls.listeners["internal"] = {"pulsar://10.0.0.1:6650", ""};
  d.brokerVersionString = "4.2.4";
  d.loadManagerClassName = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl";
  d.startTimestamp = 1764649990000;
  d.lastUpdate = 1764650000000;
  SystemResourceUsage u;
  u.cpu = {150, 200};
  u.memory = {512, 2048};
  u.directMemory = {10, 100};
  u.bandwidthIn = {800, 1000000};
  u.bandwidthOut = {400, 1000000};
  d.update(u, {{kB1, stats(1000, 100000)}, {kB2, stats(10, 1000, 2)}});
  return d;
}

// What Pulsar 4.2.4's ObjectMapper writes for a LocalBrokerData (names and order, tools/pulsar-
// reference jshell with ObjectMapperFactory), nulls left out, plus Magnetar's listeners.
TEST(LoadData, LocalBrokerDataHasPulsarsFieldsInItsOrder) {
  LocalBrokerData d = sampleReport();
  json::object o = json::parse(toJson(d)).as_object();
  std::vector<std::string> keys;
  for (const auto& kv : o) keys.emplace_back(kv.key());
  const std::vector<std::string> kPulsar = {"webServiceUrl",
                                            "pulsarServiceUrl",
                                            "persistentTopicsEnabled",
                                            "nonPersistentTopicsEnabled",
                                            "cpu",
                                            "memory",
                                            "directMemory",
                                            "bandwidthIn",
                                            "bandwidthOut",
                                            "msgThroughputIn",
                                            "msgThroughputOut",
                                            "msgRateIn",
                                            "msgRateOut",
                                            "lastUpdate",
                                            "lastStats",
                                            "numTopics",
                                            "numBundles",
                                            "numConsumers",
                                            "numProducers",
                                            "bundles",
                                            "lastBundleGains",
                                            "lastBundleLosses",
                                            "brokerVersionString",
                                            "protocols",
                                            "advertisedListeners",
                                            "loadManagerClassName",
                                            "startTimestamp",
                                            "maxResourceUsage",
                                            "loadReportType"};
  EXPECT_EQ(keys, kPulsar);
  EXPECT_EQ(o.at("loadReportType").as_string(), "LocalBrokerData");
  EXPECT_DOUBLE_EQ(o.at("msgRateIn").as_double(), 1010);
  EXPECT_EQ(o.at("numTopics").as_int64(), 3);
  EXPECT_EQ(o.at("numBundles").as_int64(), 2);
  EXPECT_EQ(o.at("numProducers").as_int64(), 4);
  EXPECT_EQ(o.at("numConsumers").as_int64(), 6);
  EXPECT_DOUBLE_EQ(o.at("cpu").at("usage").as_double(), 150);
  EXPECT_DOUBLE_EQ(o.at("maxResourceUsage").as_double(), 0.75);  // cpu 150 of 200
  const json::object& b1 = o.at("lastStats").at(kB1).as_object();
  std::vector<std::string> statKeys;
  for (const auto& kv : b1) statKeys.emplace_back(kv.key());
  EXPECT_EQ(statKeys, (std::vector<std::string>{"msgRateIn", "msgThroughputIn", "msgRateOut",
                                                "msgThroughputOut", "consumerCount",
                                                "producerCount", "topics", "cacheSize"}));
  EXPECT_EQ(o.at("lastBundleGains").as_array().size(), 2u);
  EXPECT_FALSE(o.contains("webServiceUrlTls"));  // Jackson leaves nulls out
}

TEST(LoadData, LocalBrokerDataRoundTrips) {
  LocalBrokerData d = sampleReport();
  auto back = parseLoadReport(toJson(d), "/loadbalance/brokers/127.0.0.1:8080");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(toJson(*back), toJson(d));
  EXPECT_EQ(back->lastStats.at(kB1), stats(1000, 100000));
  EXPECT_EQ(back->urls.listeners.at("internal").brokerServiceUrl, "pulsar://10.0.0.1:6650");
}

// A report as Pulsar 4.2.4 writes it (tools/pulsar-reference) parses, with its figures.
TEST(LoadData, ParsesPulsarsOwnReport) {
  const char* kPulsar =
      R"({"webServiceUrl":"http://a:8080","pulsarServiceUrl":"pulsar://a:6650",)"
      R"("persistentTopicsEnabled":true,"nonPersistentTopicsEnabled":true,)"
      R"("cpu":{"usage":12.5,"limit":400.0},"memory":{"usage":-1.0,"limit":-1.0},)"
      R"("directMemory":{"usage":-1.0,"limit":-1.0},"bandwidthIn":{"usage":-1.0,"limit":-1.0},)"
      R"("bandwidthOut":{"usage":-1.0,"limit":-1.0},"msgThroughputIn":0.0,)"
      R"("msgThroughputOut":0.0,"msgRateIn":1.5,"msgRateOut":0.0,"lastUpdate":1796525607904,)"
      R"("lastStats":{"public/default/0x00000000_0x40000000":{"msgRateIn":1.5,)"
      R"("msgThroughputIn":0.0,"msgRateOut":0.0,"msgThroughputOut":0.0,"consumerCount":2,)"
      R"("producerCount":1,"topics":3,"cacheSize":7}},"numTopics":3,"numBundles":1,)"
      R"("numConsumers":2,"numProducers":1,"bundles":["public/default/0x00000000_0x40000000"],)"
      R"("lastBundleGains":["public/default/0x00000000_0x40000000"],"lastBundleLosses":[],)"
      R"("protocols":{},"advertisedListeners":{},"startTimestamp":1796525607904,)"
      R"("maxResourceUsage":0.0,"loadReportType":"LocalBrokerData"})";
  auto d = parseLoadReport(kPulsar, "/loadbalance/brokers/a:8080");
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  EXPECT_DOUBLE_EQ(d->usage.cpu.usage, 12.5);
  EXPECT_DOUBLE_EQ(d->usage.cpu.limit, 400);
  EXPECT_EQ(d->lastStats.at(kB1).topics, 3);
  EXPECT_EQ(d->lastStats.at(kB1).producerCount, 1);
  EXPECT_EQ(d->numTopics, 3);
  EXPECT_TRUE(d->nonPersistentTopicsEnabled);
  EXPECT_EQ(d->lastUpdate, 1796525607904);
}

TEST(LoadData, BadReportsNameThePath) {
  auto notJson = parseLoadReport("{nope", "/loadbalance/brokers/x:1");
  ASSERT_FALSE(notJson.isOk());
  EXPECT_NE(notJson.status().message().find("/loadbalance/brokers/x:1"), std::string::npos);
  EXPECT_FALSE(parseLoadReport("{}", "/loadbalance/brokers/x:1").isOk());
  EXPECT_FALSE(parseBundleData("[]", "/loadbalance/bundle-data/a").isOk());
  EXPECT_FALSE(parseTimeAverageBrokerData("1", "/loadbalance/broker-time-average/a").isOk());
}

TEST(LoadData, BundleDataAndTimeAverageRoundTripWithPulsarsNames) {
  BundleData b = BundleData::withDefaults(defaultBundleStats());
  b.update(stats(100, 1000, 4));
  json::object o = json::parse(toJson(b)).as_object();
  EXPECT_EQ(o.at("shortTermData").at("maxSamples").as_int64(), 10);
  EXPECT_EQ(o.at("longTermData").at("maxSamples").as_int64(), 1000);
  EXPECT_EQ(o.at("shortTermData").at("numSamples").as_int64(), 1);
  EXPECT_DOUBLE_EQ(o.at("longTermData").at("msgRateIn").as_double(), 100);  // 1st replaces
  EXPECT_EQ(o.at("topics").as_int64(), 4);
  auto back = parseBundleData(toJson(b), "/loadbalance/bundle-data/x");
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(*back, b);

  TimeAverageBrokerData t;
  t.reset({kB1, kB2}, {{kB1, b}}, defaultBundleStats());
  EXPECT_DOUBLE_EQ(t.shortTermMsgRateIn, 100 + kDefaultMessageRate);  // kB2 unseen: defaults
  EXPECT_DOUBLE_EQ(t.longTermMsgThroughputIn, 1000 + kDefaultMessageThroughput);
  json::object to = json::parse(toJson(t)).as_object();
  std::vector<std::string> keys;
  for (const auto& kv : to) keys.emplace_back(kv.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"shortTermMsgThroughputIn", "shortTermMsgThroughputOut",
                                            "shortTermMsgRateIn", "shortTermMsgRateOut",
                                            "longTermMsgThroughputIn", "longTermMsgThroughputOut",
                                            "longTermMsgRateIn", "longTermMsgRateOut"}));
  auto tb = parseTimeAverageBrokerData(toJson(t), "/loadbalance/broker-time-average/x");
  ASSERT_TRUE(tb.isOk());
  EXPECT_EQ(*tb, t);
}

// TimeAverageMessageData: the mean of the last samples, capped at maxSamples.
TEST(LoadData, ShortTermWindowIsARunningMeanCappedAtTenSamples) {
  BundleData b = BundleData::withDefaults(defaultBundleStats());
  for (int i = 1; i <= 3; ++i) b.update(stats(10.0 * i, 0));
  EXPECT_DOUBLE_EQ(b.shortTermData.msgRateIn, 20);  // (10 + 20 + 30) / 3
  EXPECT_EQ(b.shortTermData.numSamples, 3);
  for (int i = 0; i < 20; ++i) b.update(stats(100, 0));
  EXPECT_EQ(b.shortTermData.numSamples, kNumShortSamples);
  EXPECT_EQ(b.longTermData.numSamples, 23);
  EXPECT_GT(b.shortTermData.msgRateIn, b.longTermData.msgRateIn);  // forgets faster
}

TEST(LoadData, GainsAndLossesSinceTheLastWrite) {
  LocalBrokerData d;
  d.update({}, {{kB1, {}}, {kB2, {}}});
  d.cleanDeltas();
  d.update({}, {{kB2, {}}});
  EXPECT_EQ(d.lastBundleLosses, std::set<std::string>{kB1});
  EXPECT_TRUE(d.lastBundleGains.empty());
  EXPECT_EQ(d.bundles, std::set<std::string>{kB2});
  EXPECT_EQ(d.numBundles, 1);
}

TEST(LoadReport, PercentChangeAsPulsar) {
  EXPECT_EQ(percentChange(0, 0), 0);
  EXPECT_EQ(percentChange(0, 1), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(percentChange(200, 150), 25);
  EXPECT_DOUBLE_EQ(percentChange(100, 150), 50);
}

// needBrokerDataUpdate: the threshold on rates, throughput, bundles and weighted usage, and the
// max interval.
TEST(LoadReport, UpdateThresholdsAndMaxInterval) {
  LoadReportSettings s;  // 10 %, 15 minutes, cpu weight 1, direct memory 0
  const int64_t now = 1000000000;
  LocalBrokerData last = sampleReport();
  last.lastUpdate = now - 1000;
  LocalBrokerData cur = last;
  std::string why;
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s, &why));

  cur.msgRateIn = last.msgRateIn * 1.05;  // +5 % of in: under the threshold
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s));
  cur.msgRateIn = last.msgRateIn * 1.2;  // in+out up more than 10 %
  EXPECT_TRUE(needBrokerDataUpdate(last, cur, now, s, &why));
  EXPECT_NE(why.find("threshold"), std::string::npos) << why;
  s.reportUpdateThresholdPercentage = 50;
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s));

  cur = last;
  s.reportUpdateThresholdPercentage = 10;
  cur.numBundles = last.numBundles + 1;  // 2 -> 3 bundles: 50 %
  EXPECT_TRUE(needBrokerDataUpdate(last, cur, now, s));

  cur = last;
  cur.usage.cpu.usage = 180;  // 75 % -> 90 % of the CPU limit: 15 points
  EXPECT_TRUE(needBrokerDataUpdate(last, cur, now, s));
  s.cpuWeight = 0.5;  // 7.5 points
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s));
  cur = last;
  cur.usage.directMemory.usage = 90;  // weight 0 by default: ignored
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s));

  cur = last;
  cur.lastUpdate = now - 15 * 60000 - 1;  // nothing changed, but 15 minutes went by
  EXPECT_TRUE(needBrokerDataUpdate(last, cur, now, s, &why));
  EXPECT_NE(why.find("time since"), std::string::npos) << why;
  cur.lastUpdate = now - 15 * 60000;
  EXPECT_FALSE(needBrokerDataUpdate(last, cur, now, s));
}

TEST(LoadReport, LeaderAggregatesBundlesAndBrokers) {
  LoadAggregator agg;
  LocalBrokerData a = sampleReport();  // kB1 hot, kB2 cold
  LocalBrokerData b;
  b.urls.pulsarServiceUrl = "pulsar://b:6650";
  b.update({}, {{"t/ns/0x00000000_0xffffffff", stats(500, 50)}});
  std::map<std::string, LocalBrokerData> reports{{"a:8080", a}, {"b:8080", b}};
  EXPECT_EQ(agg.unknownBundles(reports).size(), 3u);
  // kB2 was written by an earlier leader: it continues from there.
  BundleData stored = BundleData::withDefaults(defaultBundleStats());
  for (int i = 0; i < 4; ++i) stored.update(stats(1, 1));
  auto gone = agg.update(reports, {{kB2, stored}});
  EXPECT_TRUE(gone.bundles.empty());
  EXPECT_EQ(agg.bundleData().at(kB1).shortTermData.numSamples, 1);
  EXPECT_DOUBLE_EQ(agg.bundleData().at(kB1).shortTermData.msgRateIn, 1000);
  EXPECT_EQ(agg.bundleData().at(kB2).shortTermData.numSamples, 5);
  EXPECT_DOUBLE_EQ(agg.timeAverages().at("a:8080").shortTermMsgRateIn,
                   1000 + agg.bundleData().at(kB2).shortTermData.msgRateIn);
  EXPECT_DOUBLE_EQ(agg.timeAverages().at("b:8080").longTermMsgRateIn, 500);
  EXPECT_TRUE(agg.unknownBundles(reports).empty());

  // Top k per broker, most loaded first (k x 2 brokers = all 3 with k = 2; 2 with k = 1).
  EXPECT_EQ(agg.topBundles(1), (std::vector<std::string>{kB1, "t/ns/0x00000000_0xffffffff"}));
  EXPECT_EQ(agg.topBundles(-1).size(), 3u);
  // loadBalancerSheddingExcludedNamespaces: left out before the top k are taken.
  EXPECT_EQ(agg.topBundles(1, {"t/ns"}), (std::vector<std::string>{kB1, kB2}));

  // Broker b gone, a lost kB2: both forgotten and reported for deletion.
  LocalBrokerData a2 = a;
  a2.update({}, {{kB1, stats(1000, 100000)}});
  gone = agg.update({{"a:8080", a2}}, {});
  EXPECT_EQ(gone.bundles, (std::vector<std::string>{kB2, "t/ns/0x00000000_0xffffffff"}));
  EXPECT_EQ(gone.brokers, std::vector<std::string>{"b:8080"});
  EXPECT_EQ(agg.bundleData().at(kB1).shortTermData.numSamples, 2);
}

// One broker on the in-process metadata store: its registration carries the load manager's
// report, a change past the threshold is written within the min interval, a small one is not,
// and (it leads) it aggregates its own reports into BundleData.
TEST(LoadManager, RegistrationCarriesTheReportWrittenByTheThresholdRule) {
  auto backend = metadata::LocalBackend::create();
  auto store = backend->openSession();
  net::EventLoop replies{"test-replies"};
  replies.start();
  auto get = [&](const std::string& path) -> std::optional<std::string> {
    std::promise<std::optional<std::string>> p;
    store->get(path, &replies, [&p](Result<std::optional<metadata::GetResult>> r) {
      p.set_value(r.isOk() && r->has_value() ? std::optional((*r)->value) : std::nullopt);
    });
    return p.get_future().get();
  };
  std::promise<bool> made;
  store->put("/admin/clusters/c", "{}", {}, &replies,
             [&made](const Result<metadata::Stat>& r) { made.set_value(r.isOk()); });
  ASSERT_TRUE(made.get_future().get());
  NamespaceServiceOptions no;
  no.clusterName = "c";
  NamespaceService ns(store.get(), store.get(), no);
  Mutex mu;
  BundleStatsMap figures;  // what the "topics" report, guarded by mu
  LoadManager::Options lo;
  lo.enabled = true;
  lo.settings = [] {
    LoadReportSettings s;
    s.reportUpdateMinIntervalMillis = 50;
    return s;
  };
  lo.hostUsage = [] {
    SystemResourceUsage u;
    u.cpu = {10, 100};
    return u;
  };
  lo.bundleStats = [&] {
    MutexLock lock(mu);
    return figures;
  };
  lo.brokerVersion = "test-1";
  LoadManager lm(&ns, store.get(), lo);
  BrokerUrls self{"127.0.0.1:8080", "pulsar://127.0.0.1:6650", "", "http://127.0.0.1:8080", "", {}};
  ASSERT_TRUE(ns.start(self).isOk());
  lm.start(self);
  const std::string path = "/loadbalance/brokers/127.0.0.1:8080";
  auto report = [&] { return parseLoadReport(get(path).value_or("{}"), path); };
  auto first = report();
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  EXPECT_DOUBLE_EQ(first->usage.cpu.usage, 10);
  EXPECT_EQ(first->brokerVersionString, "test-1");
  EXPECT_EQ(first->msgRateIn, 0);

  auto waitFor = [&](auto pred) {
    for (int i = 0; i < 200; ++i) {
      auto r = report();
      if (r.isOk() && pred(*r)) return *r;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return *report();
  };
  {
    MutexLock lock(mu);
    figures[kB1] = stats(500, 50000);
  }
  LocalBrokerData loaded = waitFor([](const LocalBrokerData& d) { return d.msgRateIn == 500; });
  ASSERT_EQ(loaded.msgRateIn, 500);
  EXPECT_EQ(loaded.lastStats.at(kB1).producerCount, 2);
  EXPECT_EQ(loaded.lastBundleGains.count(kB1), 1u);
  {
    MutexLock lock(mu);
    figures[kB1] = stats(520, 52000);  // +4 %: under loadBalancerReportUpdateThresholdPercentage
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(report()->lastUpdate, loaded.lastUpdate);
  EXPECT_EQ(report()->msgRateIn, 500);
  EXPECT_EQ(lm.lastWritten().msgRateIn, 500);
  auto now = parseLoadReport(lm.generateLoadReport(), "load-report");  // the figures of now
  ASSERT_TRUE(now.isOk());
  EXPECT_EQ(now->msgRateIn, 520);

  // Alone, it leads: its reports are sampled into BundleData; its time average was written.
  for (int i = 0; i < 200 && lm.bundleData().count(kB1) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(lm.bundleData().count(kB1), 1u);
  EXPECT_DOUBLE_EQ(lm.bundleData().at(kB1).shortTermData.msgRateIn, 500);
  auto average = get("/loadbalance/broker-time-average/127.0.0.1:8080");
  ASSERT_TRUE(average.has_value());
  EXPECT_TRUE(parseTimeAverageBrokerData(*average, "x").isOk());
  lm.stop();
  ns.stop();
  replies.stop();
}

}  // namespace
}  // namespace magnetar::broker::cluster
