#include "config/cpu.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "config/text.h"

namespace magnetar::config {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> readSmallFile(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<double> parseNumber(std::string_view s) {
  s = trim(s);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// v2 cpu.max: "<quota|max> <period>".
std::optional<double> readCpuMax(const fs::path& dir) {
  auto text = readSmallFile(dir / "cpu.max");
  if (!text) return std::nullopt;
  std::string_view t = trim(*text);
  size_t sp = t.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  std::string_view quota = t.substr(0, sp);
  if (quota == "max") return std::nullopt;
  auto q = parseNumber(quota);
  auto p = parseNumber(t.substr(sp + 1));
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return *q / *p;
}

// v1: cpu.cfs_quota_us (-1 = none) / cpu.cfs_period_us.
std::optional<double> readCfsQuota(const fs::path& dir) {
  auto quota = readSmallFile(dir / "cpu.cfs_quota_us");
  auto period = readSmallFile(dir / "cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  auto q = parseNumber(*quota);
  auto p = parseNumber(*period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return *q / *p;
}

std::optional<double> minLimit(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// Reads `reader` at controllerRoot/<cgroupPath> and every ancestor up to controllerRoot, and
// returns the smallest limit. Falls back to controllerRoot alone when the path does not exist.
template <typename Reader>
std::optional<double> walkUp(const fs::path& controllerRoot, std::string_view cgroupPath,
                             Reader reader) {
  fs::path rel = fs::path(std::string(trim(cgroupPath))).relative_path();
  std::error_code ec;
  fs::path dir = controllerRoot / rel;
  if (rel.empty() || !fs::is_directory(dir, ec)) return reader(controllerRoot);
  std::optional<double> best;
  while (true) {
    best = minLimit(best, reader(dir));
    if (rel.empty()) break;
    rel = rel.parent_path();
    dir = controllerRoot / rel;
  }
  return best;
}

struct CgroupLine {
  std::string controllers;  // "" for v2, "cpu,cpuacct" for v1
  std::string path;
};

std::vector<CgroupLine> parseProcSelfCgroup(std::string_view text) {
  std::vector<CgroupLine> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    out.push_back(
        {std::string(line.substr(c1 + 1, c2 - c1 - 1)), std::string(line.substr(c2 + 1))});
  }
  return out;
}

bool hasController(std::string_view list, std::string_view name) {
  for (const auto& c : splitTrimmed(list, ',')) {
    if (c == name) return true;
  }
  return false;
}

// The v1 hierarchy holding `controller`: its mount directory and the process's path in it.
std::optional<std::pair<fs::path, std::string>> v1Hierarchy(const fs::path& root,
                                                            const std::vector<CgroupLine>& lines,
                                                            std::string_view controller) {
  std::error_code ec;
  for (const auto& l : lines) {
    if (!hasController(l.controllers, controller)) continue;
    std::vector<std::string> mounts = {std::string(controller), "cpu,cpuacct", "cpuacct,cpu"};
    if (!l.controllers.empty()) mounts.insert(mounts.begin(), l.controllers);
    for (const auto& mount : mounts) {
      if (fs::is_directory(root / mount, ec)) return std::pair{root / mount, l.path};
    }
  }
  return std::nullopt;
}

// The process's own directory under a controller root, or the root when the path is missing.
fs::path ownDirectory(const fs::path& controllerRoot, std::string_view cgroupPath) {
  fs::path rel = fs::path(std::string(trim(cgroupPath))).relative_path();
  std::error_code ec;
  if (!rel.empty() && fs::is_directory(controllerRoot / rel, ec)) return controllerRoot / rel;
  return controllerRoot;
}

// v2 cpu.stat "usage_usec N" in ns.
std::optional<double> readCpuStatUsage(const fs::path& dir) {
  auto text = readSmallFile(dir / "cpu.stat");
  if (!text) return std::nullopt;
  for (const auto& line : splitTrimmed(*text, '\n')) {
    std::string_view l = line;
    if (l.rfind("usage_usec ", 0) != 0) continue;
    auto v = parseNumber(l.substr(11));
    if (v) return *v * 1000;
  }
  return std::nullopt;
}

// memory.max ("max": none) or memory.limit_in_bytes (>= 2^62: none), bytes.
std::optional<double> readMemoryLimit(const fs::path& dir) {
  for (const char* file : {"memory.max", "memory.limit_in_bytes"}) {
    auto text = readSmallFile(dir / file);
    if (!text) continue;
    auto v = parseNumber(*text);
    if (!v || *v <= 0 || *v >= 4.6e18) return std::nullopt;
    return *v;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> cgroupCpuUsageNanos(const std::string& cgroupRoot,
                                           std::string_view procSelfCgroup) {
  fs::path root(cgroupRoot);
  std::error_code ec;
  auto lines = parseProcSelfCgroup(procSelfCgroup);
  if (fs::exists(root / "cgroup.controllers", ec)) {
    std::string path;
    for (const auto& l : lines) {
      if (l.controllers.empty()) path = l.path;
    }
    auto v = readCpuStatUsage(ownDirectory(root, path));
    if (!v) return std::nullopt;
    return static_cast<int64_t>(*v);
  }
  auto h = v1Hierarchy(root, lines, "cpuacct");
  if (!h) return std::nullopt;
  auto v = readSmallFile(ownDirectory(h->first, h->second) / "cpuacct.usage");
  if (!v) return std::nullopt;
  auto n = parseNumber(*v);
  if (!n) return std::nullopt;
  return static_cast<int64_t>(*n);
}

std::optional<double> cgroupMemoryLimit(const std::string& cgroupRoot,
                                        std::string_view procSelfCgroup) {
  fs::path root(cgroupRoot);
  std::error_code ec;
  auto lines = parseProcSelfCgroup(procSelfCgroup);
  if (fs::exists(root / "cgroup.controllers", ec)) {
    for (const auto& l : lines) {
      if (l.controllers.empty()) return walkUp(root, l.path, readMemoryLimit);
    }
    return readMemoryLimit(root);
  }
  auto h = v1Hierarchy(root, lines, "memory");
  if (!h) return std::nullopt;
  return walkUp(h->first, h->second, readMemoryLimit);
}

int defaultNumIOThreads(int n) {
  n = std::max(n, 1);
  return std::min(2 * n, std::max(8, n / 2));
}

std::optional<double> cgroupCpuLimit(const std::string& cgroupRoot,
                                     std::string_view procSelfCgroup) {
  fs::path root(cgroupRoot);
  std::error_code ec;
  auto lines = parseProcSelfCgroup(procSelfCgroup);
  // cgroup v2 (unified hierarchy mounted at the root).
  if (fs::exists(root / "cgroup.controllers", ec)) {
    for (const auto& l : lines) {
      if (l.controllers.empty()) return walkUp(root, l.path, readCpuMax);
    }
    return readCpuMax(root);
  }
  // cgroup v1: the hierarchy that has the cpu controller.
  for (const auto& l : lines) {
    if (!hasController(l.controllers, "cpu")) continue;
    for (const char* mount : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
      fs::path controllerRoot = root / mount;
      if (fs::is_directory(controllerRoot, ec)) {
        return walkUp(controllerRoot, l.path, readCfsQuota);
      }
    }
  }
  return std::nullopt;
}

int combineProcessorLimits(int affinityCount, std::optional<double> cpuLimit) {
  int n = std::max(affinityCount, 1);
  if (cpuLimit && *cpuLimit > 0) {
    // Round up (1.5 CPUs -> 2) as the JVM does; the small epsilon keeps 2.0000001 at 2.
    int quota = static_cast<int>(std::ceil(*cpuLimit - 1e-9));
    n = std::min(n, std::max(quota, 1));
  }
  return n;
}

int affinityProcessorCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

int availableProcessors() {
  static const int kAvailable = [] {
    std::string procSelf = readSmallFile("/proc/self/cgroup").value_or("");
    return combineProcessorLimits(affinityProcessorCount(),
                                  cgroupCpuLimit("/sys/fs/cgroup", procSelf));
  }();
  return kAvailable;
}

ThreadCountResolution resolveNumIOThreads(std::optional<int> configured, int availableProcessors) {
  ThreadCountResolution r;
  if (configured && *configured > 0) {
    r.value = *configured;
    r.configured = true;
    r.reason = fmt::format("{}, configured", r.value);
  } else {
    r.value = defaultNumIOThreads(availableProcessors);
    r.reason = fmt::format("{}, the default for {} available processor{}", r.value,
                           availableProcessors, availableProcessors == 1 ? "" : "s");
  }
  return r;
}

}  // namespace magnetar::config
