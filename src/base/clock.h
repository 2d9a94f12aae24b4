// Wall-clock time in Pulsar's unit for message timestamps; the steady clock for intervals.
#pragma once

#include <chrono>
#include <cstdint>

namespace magnetar {

// Milliseconds since the Unix epoch (system clock; may jump), as Pulsar's publish_time and
// event_time. Thread: any.
inline uint64_t nowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Nanoseconds on the steady clock (monotonic, arbitrary epoch): for intervals only. Thread: any.
inline int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace magnetar
