// Available processors and the numIOThreads default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace magnetar::config {

// The default number of pulsar-io threads for n available processors: min(2n, max(8, n/2)).
// 1->2, 2->4, 4->8, 8->8, 16->8, 32->16, 64->32, 128->64 (Pulsar's old default was 2n).
// REQUIRES: n >= 1.
int defaultNumIOThreads(int availableProcessors);

// The CPU quota of this process's cgroup in CPUs (may be fractional), or nullopt when there is
// none. `cgroupRoot` is where cgroupfs is mounted ("/sys/fs/cgroup"; tests pass a temp dir) and
// `procSelfCgroup` the text of /proc/self/cgroup. v2 (a "0::<path>" line and
// <root>/cgroup.controllers): the smallest quota/period of cpu.max ("max" = none) from the
// process's cgroup up to the root. v1: the same for cpu.cfs_quota_us / cpu.cfs_period_us
// (quota -1 = none) under <root>/cpu (or cpu,cpuacct). A cgroup path missing under the root
// (a container's own namespace) is read at the controller's top directory instead.
std::optional<double> cgroupCpuLimit(const std::string& cgroupRoot,
                                     std::string_view procSelfCgroup);

// CPU time used by this process's cgroup, in ns, from the same cgroup lookup as cgroupCpuLimit:
// v2 usage_usec of <root>/<path>/cpu.stat (x1000); v1 cpuacct.usage of the hierarchy with the
// cpuacct controller (<root>/cpuacct, cpu,cpuacct or cpuacct,cpu), at the process's path or, when
// that path is missing under the root (a container's own view), at the controller's top. nullopt
// without cgroup CPU accounting (Pulsar's LinuxInfoUtils.getCpuUsageForCGroup; then the host's
// /proc/stat is read instead).
std::optional<int64_t> cgroupCpuUsageNanos(const std::string& cgroupRoot,
                                           std::string_view procSelfCgroup);

// The memory limit of this process's cgroup in bytes (v2 memory.max, v1 memory.limit_in_bytes of
// the memory hierarchy; the smallest from the process's cgroup up), nullopt when unlimited.
std::optional<double> cgroupMemoryLimit(const std::string& cgroupRoot,
                                        std::string_view procSelfCgroup);

// min(affinityCount, ceil(cpuLimit)), at least 1.
int combineProcessorLimits(int affinityCount, std::optional<double> cpuLimit);

// Number of CPUs in this process's sched_getaffinity mask (cpuset included), at least 1.
int affinityProcessorCount();

// The processors this process may use: affinity limited by the cgroup CPU quota. Computed once,
// on first call, from /sys/fs/cgroup and /proc/self/cgroup. Thread-safe.
int availableProcessors();

// A resolved thread count and why, for the start-up log line.
struct ThreadCountResolution {
  int value = 0;
  bool configured = false;  // an explicit non-zero value was set
  std::string reason;       // "8, the default for 16 available processors" or "12, configured"
};
// Explicit value (> 0) wins; otherwise defaultNumIOThreads(availableProcessors).
ThreadCountResolution resolveNumIOThreads(std::optional<int> configured, int availableProcessors);

}  // namespace magnetar::config
