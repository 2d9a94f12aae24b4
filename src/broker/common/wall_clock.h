// Wall-clock time for stats and records (connectedSince, schema and compaction timestamps).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <cstdint>

namespace magnetar::broker {

// Milliseconds since the Unix epoch. Thread: any.
inline int64_t wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace magnetar::broker
