// Per-thread CPU time of this process from /proc/self/task/*/ (comm from stat; CPU time from
// schedstat in nanoseconds, else utime + stime from stat in clock ticks), and the utilization
// per thread name between two samples (magnetar_thread_cpu_utilization).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace magnetar::admin {

// Nanoseconds on the steady clock (monotonic; the time line of ThreadCpuSnapshot::monotonicNs and
// of the pulsar-stats thread's ticks). Thread: any.
int64_t monotonicNowNs();

struct ThreadCpuSnapshot {
  int64_t monotonicNs = 0;
  struct Thread {
    std::string name;    // comm, e.g. "pulsar-io-0"
    uint64_t cpuNs = 0;  // CPU time used so far
  };
  std::map<int, Thread> byTid;
};

// Parses one /proc/<pid>/task/<tid>/stat line: comm and utime + stime (clock ticks). False when
// malformed.
bool parseTaskStat(std::string_view line, std::string* comm, uint64_t* ticks);
// Parses a schedstat line ("<cpu ns> <wait ns> <slices>"): the CPU nanoseconds. False if malformed.
bool parseSchedstat(std::string_view line, uint64_t* cpuNs);

// Reads every thread of this process (taskDir: "/proc/self/task" unless testing).
ThreadCpuSnapshot takeThreadCpuSnapshot(const std::string& taskDir = "/proc/self/task");

// CPU utilization (seconds of CPU per second of wall time) per thread name over (prev, cur].
// A thread absent from prev started after it and counts from 0. Threads sharing a name are
// summed (so a name may exceed 1; one thread is capped at 1).
std::map<std::string, double> threadUtilization(const ThreadCpuSnapshot& prev,
                                                const ThreadCpuSnapshot& cur);

}  // namespace magnetar::admin
