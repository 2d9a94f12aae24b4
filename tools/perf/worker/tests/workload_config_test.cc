#include "workload_config.h"

#include <gtest/gtest.h>

namespace magnetar::perf {
namespace {

TEST(WorkloadConfigTest, ParsesResolvedScenario) {
  auto c = WorkloadConfig::fromJson(R"({
    "serviceUrl": "pulsar://127.0.0.1:1234",
    "broker": {"settings": {"numIOThreads": 8}},
    "workload": {"devices": 1000, "gateways": 20, "topics": 3, "payloadBytes": 64,
                 "rate": 5000, "connectMode": "concurrent", "applications": 2, "pods": 4,
                 "joinSeconds": [0, 2.5], "measuredMessages": 10000, "warmupRounds": 1,
                 "warmupMessages": 100},
    "loadgen": {"producerIoThreads": 2}
  })");
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c->serviceUrl, "pulsar://127.0.0.1:1234");
  EXPECT_EQ(c->devices, 1000u);
  EXPECT_EQ(c->topics, 3u);
  EXPECT_DOUBLE_EQ(c->rate, 5000);
  EXPECT_EQ(c->connectMode, "concurrent");
  EXPECT_DOUBLE_EQ(c->joinOf(1), 2.5);
  EXPECT_DOUBLE_EQ(c->joinOf(0), 0);
  EXPECT_EQ(c->producerIoThreads, 2);
  EXPECT_EQ(c->maxOutstanding, 100000u);  // default kept
}

TEST(WorkloadConfigTest, RejectsUnknownKeysAndBadValues) {
  EXPECT_FALSE(WorkloadConfig::fromJson(R"({"workload": {"devicez": 5}})").isOk());
  EXPECT_FALSE(WorkloadConfig::fromJson(R"({"workload": {"devices": "many"}})").isOk());
  EXPECT_FALSE(WorkloadConfig::fromJson(R"({"workload": {"payloadBytes": 8}})").isOk());
  EXPECT_FALSE(WorkloadConfig::fromJson(R"({"workload": {"connectMode": "parallel"}})").isOk());
  EXPECT_FALSE(
      WorkloadConfig::fromJson(R"({"workload": {"applications": 1, "joinSeconds": [0, 1]}})")
          .isOk());
  EXPECT_FALSE(WorkloadConfig::fromJson("not json").isOk());
  auto s = WorkloadConfig::fromJson(R"({"loadgen": {"threads": 5}})").status();
  EXPECT_NE(s.message().find("loadgen.threads"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace magnetar::perf
