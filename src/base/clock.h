// Wall-clock time in Pulsar's unit for message timestamps.
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

}  // namespace magnetar
