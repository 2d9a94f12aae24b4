#include "config/cpu.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/service_configuration.h"
#include "config/tests/test_util.h"

namespace magnetar::config {
namespace {

using testing::TempDir;

// The formula's table plus the odd counts around its break points.
TEST(DefaultNumIOThreads, MatchesTheFormulaTable) {
  const std::pair<int, int> kTable[] = {
      {1, 2},  {2, 4},  {3, 6},  {4, 8},   {5, 8},   {7, 8},    {8, 8},
      {16, 8}, {17, 8}, {18, 9}, {32, 16}, {64, 32}, {128, 64},
  };
  for (auto [n, expected] : kTable) {
    EXPECT_EQ(defaultNumIOThreads(n), expected) << n << " available processors";
  }
}

TEST(DefaultNumIOThreads, NeverMoreThanOldDefaultNorFewerThanEightUnlessFewCores) {
  for (int n = 1; n <= 512; ++n) {
    int t = defaultNumIOThreads(n);
    EXPECT_LE(t, 2 * n) << n;
    EXPECT_GE(t, std::min(8, 2 * n)) << n;
    EXPECT_GE(t, n / 2) << n;
  }
}

TEST(ResolveNumIOThreads, UnsetAndZeroUseTheDefaultExplicitWins) {
  auto unset = resolveNumIOThreads(std::nullopt, 16);
  EXPECT_EQ(unset.value, 8);
  EXPECT_FALSE(unset.configured);
  EXPECT_EQ(unset.reason, "8, the default for 16 available processors");

  auto zero = resolveNumIOThreads(0, 32);
  EXPECT_EQ(zero.value, 16);
  EXPECT_FALSE(zero.configured);

  auto one = resolveNumIOThreads(std::nullopt, 1);
  EXPECT_EQ(one.reason, "2, the default for 1 available processor");

  auto explicitValue = resolveNumIOThreads(12, 16);
  EXPECT_EQ(explicitValue.value, 12);
  EXPECT_TRUE(explicitValue.configured);
  EXPECT_EQ(explicitValue.reason, "12, configured");

  // An explicit value wins even where it is far from the formula.
  EXPECT_EQ(resolveNumIOThreads(1, 128).value, 1);
  EXPECT_EQ(resolveNumIOThreads(300, 2).value, 300);
}

TEST(ServiceConfigurationThreads, NumIOThreadsResolvesAgainstAvailableProcessors) {
  for (auto [n, expected] : {std::pair{1, 2}, {4, 8}, {16, 8}, {128, 64}}) {
    ServiceConfiguration cfg(n);
    EXPECT_EQ(cfg.numIOThreads(), expected) << n;
    EXPECT_FALSE(cfg.configuredThreads(SettingId::numIOThreads).has_value());
    EXPECT_EQ(cfg.managedLedgerNumWorkerThreads(), n);
  }
  ServiceConfiguration cfg(16);
  ASSERT_TRUE(cfg.set("numIOThreads", "12", ""));
  EXPECT_EQ(cfg.numIOThreads(), 12);
  EXPECT_EQ(cfg.ioThreads().reason, "12, configured");
  ASSERT_TRUE(cfg.set("numIOThreads", "0", ""));
  EXPECT_EQ(cfg.numIOThreads(), 8);
  ASSERT_TRUE(cfg.set("numIOThreads", "", ""));
  EXPECT_EQ(cfg.numIOThreads(), 8);
  EXPECT_EQ(cfg.ioThreads().reason, "8, the default for 16 available processors");
}

TEST(CombineProcessorLimits, QuotaRoundsUpAndNeverExceedsAffinity) {
  EXPECT_EQ(combineProcessorLimits(4, std::nullopt), 4);
  EXPECT_EQ(combineProcessorLimits(16, 2.5), 3);
  EXPECT_EQ(combineProcessorLimits(16, 2.0), 2);
  EXPECT_EQ(combineProcessorLimits(4, 0.5), 1);
  EXPECT_EQ(combineProcessorLimits(2, 8.0), 2);
  EXPECT_EQ(combineProcessorLimits(0, std::nullopt), 1);
}

// A cgroup tree (files under the mount root), /proc/self/cgroup, and the limit read from them.
struct CgroupCase {
  const char* name;
  std::vector<std::pair<std::string, std::string>> files;
  const char* procSelfCgroup;
  std::optional<double> limit;
  // When set: the processor count the limit is combined with, and the result.
  std::optional<std::pair<int, int>> combined = std::nullopt;
};

class CgroupCpuLimit : public ::testing::TestWithParam<CgroupCase> {};

TEST_P(CgroupCpuLimit, ReadsTheQuotaOfTheProcessCgroup) {
  const CgroupCase& c = GetParam();
  TempDir d;
  for (const auto& [file, content] : c.files) d.write(file, content);
  auto limit = cgroupCpuLimit(d.path().string(), c.procSelfCgroup);
  ASSERT_EQ(limit.has_value(), c.limit.has_value());
  if (limit) {
    EXPECT_DOUBLE_EQ(*limit, *c.limit);
  }
  if (c.combined) {
    EXPECT_EQ(combineProcessorLimits(c.combined->first, limit), c.combined->second);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CgroupCpuLimit,
    ::testing::Values(
        CgroupCase{
            "V2RootQuota",
            {{"cgroup.controllers", "cpuset cpu io memory pids\n"}, {"cpu.max", "250000 100000\n"}},
            "0::/\n",
            2.5,
            std::pair{16, 3}},
        CgroupCase{"V2MaxMeansNoLimit",
                   {{"cgroup.controllers", "cpu\n"}, {"cpu.max", "max 100000\n"}},
                   "0::/\n",
                   std::nullopt},
        CgroupCase{"V2NestedTakesSmallestOnThePathToRoot",
                   {{"cgroup.controllers", "cpu\n"},
                    {"kubepods/cpu.max", "150000 100000\n"},
                    {"kubepods/pod1/cpu.max", "max 100000\n"},
                    {"kubepods/pod1/c1/cpu.max", "400000 100000\n"}},
                   "0::/kubepods/pod1/c1\n",
                   1.5},
        // Inside a container with its own cgroup namespace view the host path does not exist.
        CgroupCase{"V2PathMissingUnderRootReadsTheRoot",
                   {{"cgroup.controllers", "cpu\n"}, {"cpu.max", "100000 100000\n"}},
                   "0::/docker/abcdef\n",
                   1.0},
        CgroupCase{"V1Quota",
                   {{"cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n"},
                    {"cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"},
                    {"cpu,cpuacct/cpu.cfs_quota_us", "-1\n"},
                    {"cpu,cpuacct/cpu.cfs_period_us", "100000\n"}},
                   "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
                   3.0},
        CgroupCase{"V1UnlimitedQuota",
                   {{"cpu/cpu.cfs_quota_us", "-1\n"}, {"cpu/cpu.cfs_period_us", "100000\n"}},
                   "1:cpu:/\n2:cpuacct:/\n",
                   std::nullopt},
        CgroupCase{"V1SeparateCpuMount",
                   {{"cpu/cpu.cfs_quota_us", "50000\n"}, {"cpu/cpu.cfs_period_us", "100000\n"}},
                   "1:cpu:/\n",
                   0.5,
                   std::pair{8, 1}},
        CgroupCase{"NoCgroupFilesMeansNoLimit", {}, "0::/\n", std::nullopt},
        CgroupCase{"NoCgroupFilesNorProcEntryMeansNoLimit", {}, "", std::nullopt}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(AvailableProcessors, WithinAffinityAndStable) {
  int n = availableProcessors();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, affinityProcessorCount());
  EXPECT_EQ(availableProcessors(), n);
}

}  // namespace
}  // namespace magnetar::config
