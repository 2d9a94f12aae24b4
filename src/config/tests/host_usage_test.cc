#include "config/host_usage.h"

#include <gtest/gtest.h>

#include <string>

#include "config/cpu.h"
#include "config/tests/test_util.h"

namespace magnetar::config {
namespace {

using testing::TempDir;

HostUsageSampler::Paths pathsIn(const TempDir& d) {
  HostUsageSampler::Paths p;
  p.cgroupRoot = (d.path() / "cgroup").string();
  p.procSelfCgroup = (d.path() / "proc-self-cgroup").string();
  p.procStat = (d.path() / "proc-stat").string();
  p.procSelfStatus = (d.path() / "proc-self-status").string();
  p.procMeminfo = (d.path() / "meminfo").string();
  p.sysClassNet = (d.path() / "net").string();
  return p;
}

TEST(CgroupCpuUsage, V2ReadsUsageUsecOfTheProcessCgroup) {
  TempDir d;
  d.write("cgroup.controllers", "cpu memory\n");
  d.write("kubepods/c1/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n");
  d.write("cpu.stat", "usage_usec 99\n");
  EXPECT_EQ(cgroupCpuUsageNanos(d.path().string(), "0::/kubepods/c1\n"), 2500000000);
  // A path that is not there (the container's own view): the root's figure.
  EXPECT_EQ(cgroupCpuUsageNanos(d.path().string(), "0::/elsewhere\n"), 99000);
}

TEST(CgroupCpuUsage, V1ReadsCpuacctUsageOfItsHierarchy) {
  TempDir d;
  d.write("cpuacct/docker/abc/cpuacct.usage", "123456789\n");
  d.write("cpu/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroupCpuUsageNanos(d.path().string(), "3:cpu:/\n2:cpuacct:/docker/abc\n"), 123456789);
  TempDir combined;
  combined.write("cpu,cpuacct/cpuacct.usage", "42\n");
  EXPECT_EQ(cgroupCpuUsageNanos(combined.path().string(), "4:cpu,cpuacct:/\n"), 42);
  TempDir none;
  EXPECT_FALSE(cgroupCpuUsageNanos(none.path().string(), "0::/\n").has_value());
}

TEST(CgroupMemoryLimit, SmallestOnThePathAndUnlimitedValues) {
  TempDir v2;
  v2.write("cgroup.controllers", "memory\n");
  v2.write("a/memory.max", "1073741824\n");
  v2.write("a/b/memory.max", "max\n");
  EXPECT_DOUBLE_EQ(cgroupMemoryLimit(v2.path().string(), "0::/a/b\n").value(), 1073741824.0);
  TempDir v1;
  v1.write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_FALSE(cgroupMemoryLimit(v1.path().string(), "4:memory:/\n").has_value());
}

// Pulsar's cgroup CPU figure: 100 x CPU ns used / elapsed ns, limit 100 x quota.
TEST(HostUsageSampler, CgroupCpuUsageAndQuotaLimit) {
  TempDir d;
  d.write("proc-self-cgroup", "3:cpu:/\n2:cpuacct:/\n");
  d.write("cgroup/cpu/cpu.cfs_quota_us", "150000\n");
  d.write("cgroup/cpu/cpu.cfs_period_us", "100000\n");
  d.write("cgroup/cpuacct/cpuacct.usage", "1000000000\n");
  d.write("proc-self-status", "Name:\tmagnetar\nVmRSS:\t  204800 kB\n");
  d.write("meminfo", "MemTotal:       8388608 kB\n");
  HostUsageSampler s(pathsIn(d), 8);
  HostFigures first = s.sample(10000);
  EXPECT_EQ(first.cpuUsage, 0);  // no previous sample
  EXPECT_DOUBLE_EQ(first.cpuLimit, 150);
  EXPECT_DOUBLE_EQ(first.memoryUsedMb, 200);
  EXPECT_DOUBLE_EQ(first.memoryLimitMb, 8192);
  d.write("cgroup/cpuacct/cpuacct.usage", "2200000000\n");  // 1.2 CPU s in 2 s
  HostFigures second = s.sample(12000);
  EXPECT_NEAR(second.cpuUsage, 60, 1e-9);
}

// Without cgroup accounting: the busy share of /proc/stat times the limit (the processors).
TEST(HostUsageSampler, HostProcStatWithoutCgroup) {
  TempDir d;
  d.write("proc-self-cgroup", "0::/\n");
  d.write("proc-stat", "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 1 1 1\n");
  HostUsageSampler s(pathsIn(d), 4);
  EXPECT_DOUBLE_EQ(s.sample(0).cpuLimit, 400);
  // +300 busy (user, system), +100 idle, +0 iowait: 75 % of 400.
  d.write("proc-stat", "cpu  250 0 250 800 100 0 0 0 0 0\n");
  EXPECT_NEAR(s.sample(1000).cpuUsage, 300, 1e-9);
}

TEST(HostUsageSampler, PhysicalNicTrafficInKbitPerSecond) {
  TempDir d;
  d.write("net/eth0/type", "1\n");
  d.write("net/eth0/operstate", "up\n");
  d.write("net/eth0/speed", "1000\n");
  d.write("net/eth0/statistics/rx_bytes", "1000000\n");
  d.write("net/eth0/statistics/tx_bytes", "0\n");
  d.write("net/down0/type", "1\n");
  d.write("net/down0/operstate", "down\n");
  d.write("net/lo/type", "772\n");
  d.write("net/lo/operstate", "unknown\n");
  HostUsageSampler s(pathsIn(d), 1);
  EXPECT_EQ(s.physicalNics(), std::vector<std::string>{"eth0"});
  HostFigures a = s.sample(0);
  EXPECT_DOUBLE_EQ(a.nicLimitKbps, 1000000);  // 1000 Mbit/s
  EXPECT_EQ(a.nicRxKbps, 0);
  d.write("net/eth0/statistics/rx_bytes", "3000000\n");  // 2 MB in 2 s: 8000 Kbit/s
  d.write("net/eth0/statistics/tx_bytes", "250000\n");
  HostFigures b = s.sample(2000);
  EXPECT_NEAR(b.nicRxKbps, 8000, 1e-9);
  EXPECT_NEAR(b.nicTxKbps, 1000, 1e-9);
  HostUsageSampler overridden(pathsIn(d), 1, 2.5);  // loadBalancerOverrideBrokerNicSpeedGbps
  EXPECT_DOUBLE_EQ(overridden.sample(0).nicLimitKbps, 2500000);
}

}  // namespace
}  // namespace magnetar::config
