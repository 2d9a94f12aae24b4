#include "admin/io_saturation.h"

#include <fmt/format.h>

#include <algorithm>

namespace magnetar::admin {

std::optional<std::string> IoSaturationDetector::addSample(
    int64_t nowNs, const std::string& busiestThread, double utilization,
    const std::map<std::string, int64_t>& backlogs) {
  if (utilization <= options_.threshold) {
    samples_.clear();  // the condition broke: start over
    return std::nullopt;
  }
  samples_.push_back(Sample{nowNs, busiestThread, utilization, backlogs});
  // Keep the newest sample at or before the window start as the baseline.
  while (samples_.size() > 1 && samples_[1].nowNs <= nowNs - options_.windowNs) {
    samples_.pop_front();
  }
  const Sample& first = samples_.front();
  if (nowNs - first.nowNs < options_.windowNs) return std::nullopt;

  std::string grewKey;
  int64_t from = 0;
  int64_t to = 0;
  for (const auto& [key, backlog] : backlogs) {
    auto it = first.backlogs.find(key);
    if (it == first.backlogs.end() || backlog <= it->second) continue;
    if (grewKey.empty() || backlog - it->second > to - from) {
      grewKey = key;
      from = it->second;
      to = backlog;
    }
  }
  if (grewKey.empty()) return std::nullopt;
  double minUtil = 1e9;
  for (const auto& s : samples_) minUtil = std::min(minUtil, s.utilization);
  std::string text = fmt::format(
      "I/O threads saturated: the busiest pulsar-io thread ({}) used {:.0f}% CPU (at least "
      "{:.0f}% for {} s) while the backlog of {} grew from {} to {} entries; consider raising "
      "numIOThreads",
      busiestThread, utilization * 100, minUtil * 100, (nowNs - first.nowNs) / 1'000'000'000,
      grewKey, from, to);
  samples_.clear();
  return text;
}

}  // namespace magnetar::admin
