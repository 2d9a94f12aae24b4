#include "output_check.h"

#include <fmt/format.h>

namespace magnetar::perf {

Delivery OutputCheck::record(const TelemetryRecord& r, const char* where) {
  if ((r.flags & kFlagAborted) != 0) {
    abortedVisible_.fetch_add(1, std::memory_order_relaxed);
    return Delivery::kViolation;
  }
  if ((r.flags & kFlagDerived) == 0) {
    notDerived_.fetch_add(1, std::memory_order_relaxed);
    return Delivery::kViolation;
  }
  return tracker_.deliver(r.device, r.counter, where);
}

std::vector<std::string> OutputCheck::errors(const std::vector<uint32_t>& produced) const {
  std::vector<std::string> out;
  if (tracker_.duplicates() > 0) {
    out.push_back(fmt::format("{} duplicate outputs (each input must be transformed once)",
                              tracker_.duplicates()));
  }
  if (abortedVisible() > 0) {
    out.push_back(fmt::format("{} outputs of aborted transactions were read", abortedVisible()));
  }
  if (notDerived() > 0) out.push_back(fmt::format("{} outputs not derived", notDerived()));
  if (tracker_.violations() > 0) {
    out.push_back(fmt::format("{} output ordering violations", tracker_.violations()));
  }
  if (tracker_.invalidCount() > 0) {
    out.push_back(fmt::format("{} invalid outputs", tracker_.invalidCount()));
  }
  uint64_t missing = tracker_.missing(produced);
  if (missing > 0) out.push_back(fmt::format("{} inputs without output", missing));
  return out;
}

}  // namespace magnetar::perf
