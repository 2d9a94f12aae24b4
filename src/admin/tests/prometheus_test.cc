#include "admin/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "admin/metrics.h"

namespace magnetar::admin {
namespace {

TEST(Prometheus, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escapeLabelValue(R"(a"b\c)"
                             "\n"
                             "d"),
            R"(a\"b\\c\nd)");
  EXPECT_EQ(escapeLabelValue("plain"), "plain");
  EXPECT_EQ(escapeHelp("back\\slash \"quotes\"\nnext"), "back\\\\slash \"quotes\"\\nnext");
}

TEST(Prometheus, FormatsValues) {
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(42), "42");
  EXPECT_EQ(formatValue(-3), "-3");
  EXPECT_EQ(formatValue(0.25), "0.25");
  EXPECT_EQ(formatValue(std::nan("")), "NaN");
  EXPECT_EQ(formatValue(INFINITY), "+Inf");
  EXPECT_EQ(formatValue(-INFINITY), "-Inf");
  EXPECT_EQ(formatValue(1e20), "1e+20");
}

TEST(Prometheus, GroupsSamplesUnderOneHelpAndType) {
  PrometheusWriter w;
  w.family("b_total", MetricType::kCounter, "B things");
  w.family("a", MetricType::kGauge, "A level");
  w.sample("a", {{"x", "1"}}, 1);
  w.sample("b_total", {}, 7);
  w.sample("a", {{"x", "2"}, {"y", "q\""}}, 2.5);
  w.family("a", MetricType::kCounter, "ignored: first declaration wins");
  w.family("empty", MetricType::kGauge, "no samples: not printed");
  w.sample("undeclared", {}, 3);
  EXPECT_EQ(w.render(),
            "# HELP b_total B things\n"
            "# TYPE b_total counter\n"
            "b_total 7\n"
            "# HELP a A level\n"
            "# TYPE a gauge\n"
            "a{x=\"1\"} 1\n"
            "a{x=\"2\",y=\"q\\\"\"} 2.5\n"
            "# TYPE undeclared gauge\n"
            "undeclared 3\n");
}

TEST(Prometheus, SampleInAddsOtherNamesToAFamily) {
  PrometheusWriter w;
  w.family("lat", MetricType::kSummary, "L");
  w.family("c", MetricType::kCounter, "C");
  w.sampleIn("lat", "lat", {{"quantile", "0.5"}}, 3);
  w.sampleIn("c", "c_total", {}, 1);
  w.sampleIn("lat", "lat_count", {}, 1);
  EXPECT_EQ(w.render(),
            "# HELP lat L\n"
            "# TYPE lat summary\n"
            "lat{quantile=\"0.5\"} 3\n"
            "lat_count 1\n"
            "# HELP c C\n"
            "# TYPE c counter\n"
            "c_total 1\n");
}

// Pulsar's pulsar_replication_* samples: per topic and remote cluster, or summed per namespace;
// the remote's replicator producer is the inbound side, not a producer of the topic.
TEST(Prometheus, ReplicationMetricsPerTopicAndNamespace) {
  std::vector<broker::TopicSnapshot> topics(2);
  for (int i = 0; i < 2; ++i) {
    topics[i].name = "persistent://geo/ns/t" + std::to_string(i);
    topics[i].namespaceName = "geo/ns";
    broker::ReplicatorStats r;
    r.msgRateOut = 10.0 * (i + 1);
    r.msgThroughputOut = 1000;
    r.replicationBacklog = 5;
    r.connected = i == 0;
    r.replicationDelayInSeconds = 3;
    topics[i].replication["c2"] = r;
    broker::PublisherSnapshot in;
    in.producerName = "pulsar.repl.c2";
    in.rateIn.msgRate = 2;
    topics[i].publishers.push_back(in);
  }
  topics.emplace_back().name = "persistent://geo/ns/plain";
  topics.back().namespaceName = "geo/ns";
  MetricsOptions o;
  o.cluster = "c1";
  PrometheusWriter w;
  writeTopicMetrics(w, topics, o);
  const std::string text = w.render();
  const std::string t0 =
      R"({cluster="c1",namespace="geo/ns",topic="persistent://geo/ns/t0",remote_cluster="c2"})";
  EXPECT_NE(text.find("pulsar_replication_rate_out" + t0 + " 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pulsar_replication_rate_in" + t0 + " 2\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_replication_throughput_out" + t0 + " 1000\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_replication_backlog" + t0 + " 5\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_replication_connected_count" + t0 + " 1\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_replication_disconnected_count" + t0 + " 0\n"), std::string::npos);
  EXPECT_NE(text.find("pulsar_replication_delay_in_seconds" + t0 + " 3\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pulsar_replication_rate_out gauge\n"), std::string::npos);
  EXPECT_NE(text.find(R"(pulsar_producers_count{cluster="c1",namespace="geo/ns",)"
                      R"(topic="persistent://geo/ns/t0"} 0)"),
            std::string::npos);
  // A topic without replicators has no replication samples.
  EXPECT_EQ(text.find(R"(pulsar_replication_rate_out{cluster="c1",namespace="geo/ns",)"
                      R"(topic="persistent://geo/ns/plain")"),
            std::string::npos);

  o.topicLevel = false;
  PrometheusWriter ns;
  writeTopicMetrics(ns, topics, o);
  const std::string agg = ns.render();
  const std::string l = R"({cluster="c1",namespace="geo/ns",remote_cluster="c2"})";
  EXPECT_NE(agg.find("pulsar_replication_rate_out" + l + " 30\n"), std::string::npos) << agg;
  EXPECT_NE(agg.find("pulsar_replication_rate_in" + l + " 4\n"), std::string::npos);
  EXPECT_NE(agg.find("pulsar_replication_backlog" + l + " 10\n"), std::string::npos);
  EXPECT_NE(agg.find("pulsar_replication_connected_count" + l + " 1\n"), std::string::npos);
  EXPECT_NE(agg.find("pulsar_replication_disconnected_count" + l + " 1\n"), std::string::npos);
  EXPECT_NE(agg.find("pulsar_replication_delay_in_seconds" + l + " 6\n"), std::string::npos);
  EXPECT_EQ(agg.find(R"(topic="persistent://geo/ns/t0")"), std::string::npos);
}

}  // namespace
}  // namespace magnetar::admin
