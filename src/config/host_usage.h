// What the load report measures of the host, as Pulsar's LinuxBrokerHostUsageImpl: CPU (this
// process's cgroup accounting when there is one, else the host's /proc/stat), this process's
// resident memory against its cgroup's memory limit (or the host's memory), and the physical
// NICs' traffic against their speed. CPU limits come from the same cgroup lookup as
// availableProcessors() (cpu.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace magnetar::config {

struct HostFigures {
  double cpuUsage = 0;       // percent of one CPU, averaged since the previous sample
  double cpuLimit = 0;       // 100 per CPU: cgroup quota, else the available processors
  double memoryUsedMb = 0;   // this process's resident set, MiB
  double memoryLimitMb = 0;  // the cgroup's memory limit, else the host's MemTotal, MiB
  double nicRxKbps = 0;      // physical NICs, Kbit/s since the previous sample
  double nicTxKbps = 0;
  double nicLimitKbps = 0;  // their speeds (or the override) in Kbit/s
};

// Thread: one caller at a time (sample() keeps the previous counters).
class HostUsageSampler {
 public:
  // Where the figures are read; tests point them at a temp dir.
  struct Paths {
    std::string cgroupRoot = "/sys/fs/cgroup";
    std::string procSelfCgroup = "/proc/self/cgroup";
    std::string procStat = "/proc/stat";
    std::string procSelfStatus = "/proc/self/status";
    std::string procMeminfo = "/proc/meminfo";
    std::string sysClassNet = "/sys/class/net";
  };
  // availableProcessors: the CPU limit without a cgroup quota (100 each).
  // nicSpeedGbps: Pulsar's loadBalancerOverrideBrokerNicSpeedGbps (per NIC), nullopt: each NIC's
  // `speed` file (Mbit/s).
  HostUsageSampler(Paths paths, int availableProcessors,
                   std::optional<double> nicSpeedGbps = std::nullopt);

  // Figures at nowMs (ms, any monotonic clock). Rates are the counters' change since the
  // previous call; the first call has cpuUsage and NIC rates 0. A file that cannot be read
  // gives 0 for its figure (never an error: the report goes on).
  HostFigures sample(int64_t nowMs);

  // The physical NICs Pulsar counts (LinuxInfoUtils.getUsablePhysicalNICs): not under
  // /sys/devices/virtual, type 1 (ARPHRD_ETHER), operstate up, unknown or dormant.
  std::vector<std::string> physicalNics() const;

 private:
  double cpuPercent(double elapsedSec);

  Paths paths_;
  int availableProcessors_;
  std::optional<double> nicSpeedGbps_;
  int64_t lastMs_ = -1;
  double lastCgroupNs_ = -1;
  double lastHostBusy_ = -1;
  double lastHostTotal_ = -1;
  double lastRxBytes_ = 0;
  double lastTxBytes_ = 0;
};

}  // namespace magnetar::config
