#include "admin/thread_cpu.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace magnetar::admin {

bool parseTaskStat(std::string_view line, std::string* comm, uint64_t* ticks) {
  size_t open = line.find('(');
  size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return false;
  }
  *comm = std::string(line.substr(open + 1, close - open - 1));
  // Fields after ")": state is field 3; utime and stime are fields 14 and 15.
  std::string_view rest = line.substr(close + 1);
  uint64_t values[2] = {0, 0};
  int field = 2;
  size_t i = 0;
  while (i < rest.size() && field < 15) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    size_t start = i;
    while (i < rest.size() && rest[i] != ' ' && rest[i] != '\n') ++i;
    if (start == i) break;
    ++field;
    if (field == 14 || field == 15) {
      auto [p, ec] = std::from_chars(rest.data() + start, rest.data() + i, values[field - 14]);
      if (ec != std::errc()) return false;
    }
  }
  if (field < 15) return false;
  *ticks = values[0] + values[1];
  return true;
}

bool parseSchedstat(std::string_view line, uint64_t* cpuNs) {
  size_t end = line.find(' ');
  if (end == std::string_view::npos || end == 0) return false;
  auto [p, ec] = std::from_chars(line.data(), line.data() + end, *cpuNs);
  return ec == std::errc() && p == line.data() + end;
}

int64_t monotonicNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ThreadCpuSnapshot takeThreadCpuSnapshot(const std::string& taskDir) {
  ThreadCpuSnapshot s;
  s.monotonicNs = monotonicNowNs();
  static const double ticksPerSecond = [] {
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? static_cast<double>(hz) : 100.0;
  }();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(taskDir, ec)) {
    int tid = 0;
    std::string dir = entry.path().filename().string();
    auto [p, e] = std::from_chars(dir.data(), dir.data() + dir.size(), tid);
    if (e != std::errc()) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // the thread exited meanwhile
    ThreadCpuSnapshot::Thread t;
    uint64_t ticks = 0;
    if (!parseTaskStat(line, &t.name, &ticks)) continue;
    t.cpuNs = static_cast<uint64_t>(static_cast<double>(ticks) / ticksPerSecond * 1e9);
    std::ifstream sched(entry.path() / "schedstat");  // nanoseconds, when the kernel has it
    if (std::getline(sched, line)) parseSchedstat(line, &t.cpuNs);
    s.byTid[tid] = std::move(t);
  }
  return s;
}

std::map<std::string, double> threadUtilization(const ThreadCpuSnapshot& prev,
                                                const ThreadCpuSnapshot& cur) {
  std::map<std::string, double> out;
  double seconds = static_cast<double>(cur.monotonicNs - prev.monotonicNs) / 1e9;
  for (const auto& [tid, t] : cur.byTid) {
    uint64_t before = 0;
    auto it = prev.byTid.find(tid);
    if (it != prev.byTid.end() && it->second.name == t.name && it->second.cpuNs <= t.cpuNs) {
      before = it->second.cpuNs;
    }
    double used = seconds > 0 ? static_cast<double>(t.cpuNs - before) / 1e9 / seconds : 0;
    out[t.name] += std::min(used, 1.0);  // rounding over a short interval
  }
  return out;
}

}  // namespace magnetar::admin
