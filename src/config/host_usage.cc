#include "config/host_usage.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/cpu.h"
#include "config/text.h"

namespace magnetar::config {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<double> number(std::string_view s) {
  s = trim(s);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

// "Key:   123 kB" lines of /proc/self/status and /proc/meminfo: the number after `key`.
std::optional<double> kbField(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return number(std::string_view(line).substr(key.size()));
  }
  return std::nullopt;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

HostUsageSampler::HostUsageSampler(Paths paths, int availableProcessors,
                                   std::optional<double> nicSpeedGbps)
    : paths_(std::move(paths)),
      availableProcessors_(availableProcessors),
      nicSpeedGbps_(nicSpeedGbps) {}

std::vector<std::string> HostUsageSampler::physicalNics() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(paths_.sysClassNet, ec)) {
    fs::path real = fs::weakly_canonical(e.path(), ec);
    if (real.string().find("/virtual/") != std::string::npos) continue;
    if (number(readFile(e.path() / "type")) != 1.0) continue;
    std::string state(trim(readFile(e.path() / "operstate")));
    if (state != "up" && state != "unknown" && state != "dormant") continue;
    out.push_back(e.path().filename().string());
  }
  return out;
}

// Pulsar: with cgroup accounting 100 * (CPU ns used) / elapsed ns; else the busy share of
// /proc/stat's first line times the limit.
double HostUsageSampler::cpuPercent(double elapsedSec) {
  std::string procSelf = readFile(paths_.procSelfCgroup);
  if (auto ns = cgroupCpuUsageNanos(paths_.cgroupRoot, procSelf)) {
    double used = static_cast<double>(*ns);
    double pct = lastCgroupNs_ >= 0 && elapsedSec > 0
                     ? 100.0 * (used - lastCgroupNs_) / elapsedSec / 1e9
                     : 0.0;
    lastCgroupNs_ = used;
    return pct;
  }
  std::istringstream in(readFile(paths_.procStat));
  std::string cpu;
  in >> cpu;
  double total = 0, idle = 0;
  double v = 0;
  for (int i = 0; in >> v; ++i) {
    total += v;
    if (i == 3 || i == 4) idle += v;  // user nice system idle iowait ...
  }
  double busy = total - idle;
  double pct = 0;
  if (lastHostTotal_ >= 0 && total > lastHostTotal_) {
    double limit = 100.0 * availableProcessors_;
    if (auto q = cgroupCpuLimit(paths_.cgroupRoot, procSelf)) limit = 100.0 * *q;
    pct = (busy - lastHostBusy_) / (total - lastHostTotal_) * limit;
  }
  lastHostBusy_ = busy;
  lastHostTotal_ = total;
  return pct;
}

HostFigures HostUsageSampler::sample(int64_t nowMs) {
  HostFigures f;
  double elapsedSec = lastMs_ >= 0 ? static_cast<double>(nowMs - lastMs_) / 1000.0 : 0.0;
  std::string procSelf = readFile(paths_.procSelfCgroup);
  auto quota = cgroupCpuLimit(paths_.cgroupRoot, procSelf);
  f.cpuLimit = 100.0 * (quota ? *quota : availableProcessors_);
  f.cpuUsage = cpuPercent(elapsedSec);
  f.memoryUsedMb = kbField(readFile(paths_.procSelfStatus), "VmRSS:").value_or(0) / 1024.0;
  double totalMb = kbField(readFile(paths_.procMeminfo), "MemTotal:").value_or(0) / 1024.0;
  auto limit = cgroupMemoryLimit(paths_.cgroupRoot, procSelf);
  f.memoryLimitMb = limit && *limit / kMiB < totalMb ? *limit / kMiB : totalMb;
  double rx = 0, tx = 0;
  auto nics = physicalNics();
  for (const auto& nic : nics) {
    fs::path dir = fs::path(paths_.sysClassNet) / nic;
    rx += number(readFile(dir / "statistics" / "rx_bytes")).value_or(0);
    tx += number(readFile(dir / "statistics" / "tx_bytes")).value_or(0);
    if (!nicSpeedGbps_) f.nicLimitKbps += number(readFile(dir / "speed")).value_or(0) * 1000;
  }
  if (nicSpeedGbps_) f.nicLimitKbps = *nicSpeedGbps_ * 1e6 * static_cast<double>(nics.size());
  if (elapsedSec > 0) {
    f.nicRxKbps = (rx - lastRxBytes_) * 8 / 1000 / elapsedSec;
    f.nicTxKbps = (tx - lastTxBytes_) * 8 / 1000 / elapsedSec;
  }
  lastRxBytes_ = rx;
  lastTxBytes_ = tx;
  lastMs_ = nowMs;
  return f;
}

}  // namespace magnetar::config
