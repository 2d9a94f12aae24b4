#include "admin/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace magnetar::admin
