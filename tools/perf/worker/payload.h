// The IoT telemetry message format of the perf worker: key and payload encoding/decoding.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace magnetar::perf {

// Payload layout (little endian), padded with a fixed byte pattern to the scenario's size:
//   0  u32 magic 'MPT1'   4  u32 device id   8  u32 device counter   12 u32 flags (bit 0: warmup,
//   bit 1: derived (a transforming application's output), bit 2: written by a transaction that
//   was aborted on purpose (must never be read))
//   16 u64 send time (CLOCK_MONOTONIC ns of the worker process)
// The key is the 4-byte little-endian device id (binary), so Key_Shared hashes per device.
constexpr uint32_t kPayloadMagic = 0x3154504d;  // "MPT1"
constexpr size_t kPayloadHeaderBytes = 24;
constexpr size_t kKeyBytes = 4;
constexpr uint32_t kFlagWarmup = 1;
constexpr uint32_t kFlagDerived = 2;
constexpr uint32_t kFlagAborted = 4;
constexpr uint32_t kFlagsKnown = kFlagWarmup | kFlagDerived | kFlagAborted;
constexpr char kPadByte = 'p';

struct TelemetryRecord {
  uint32_t device = 0;
  uint32_t counter = 0;
  bool warmup = false;
  uint64_t sendTimeNs = 0;
  uint32_t flags = 0;  // decoded: every flag bit (kFlagWarmup included)
};

// Writes the key of device into key[kKeyBytes].
inline void encodeKey(uint32_t device, char* key) { std::memcpy(key, &device, kKeyBytes); }

// Prepares buf[size] once: header zeroed, padding written. size >= kPayloadHeaderBytes.
inline void initPayload(char* buf, size_t size) {
  std::memset(buf, 0, kPayloadHeaderBytes);
  std::memset(buf + kPayloadHeaderBytes, kPadByte, size - kPayloadHeaderBytes);
}

// Fills the header of a buffer prepared by initPayload (no allocation, 24 bytes written).
inline void encodeHeader(const TelemetryRecord& r, char* buf) {
  uint32_t flags = r.warmup ? kFlagWarmup : 0;
  std::memcpy(buf, &kPayloadMagic, 4);
  std::memcpy(buf + 4, &r.device, 4);
  std::memcpy(buf + 8, &r.counter, 4);
  std::memcpy(buf + 12, &flags, 4);
  std::memcpy(buf + 16, &r.sendTimeNs, 8);
}

// Sets the flags word of an encoded payload (buf holds at least kPayloadHeaderBytes).
inline void setFlags(char* buf, uint32_t flags) { std::memcpy(buf + 12, &flags, 4); }

// Parses payload; false when it is not a message of this workload: wrong size, magic, flags,
// device >= devices, a key that is not the payload's device, or damaged padding (first and last
// byte checked, so a truncated or shifted payload is caught without reading every byte).
inline bool decodePayload(std::string_view payload, std::string_view key, size_t expectedSize,
                          uint32_t devices, TelemetryRecord* out) {
  if (payload.size() != expectedSize || payload.size() < kPayloadHeaderBytes) return false;
  const char* p = payload.data();
  uint32_t magic, flags;
  std::memcpy(&magic, p, 4);
  std::memcpy(&out->device, p + 4, 4);
  std::memcpy(&out->counter, p + 8, 4);
  std::memcpy(&flags, p + 12, 4);
  std::memcpy(&out->sendTimeNs, p + 16, 8);
  if (magic != kPayloadMagic || (flags & ~kFlagsKnown) != 0 || out->device >= devices) {
    return false;
  }
  if (key.size() != kKeyBytes || std::memcmp(key.data(), p + 4, kKeyBytes) != 0) return false;
  if (payload.size() > kPayloadHeaderBytes &&
      (p[kPayloadHeaderBytes] != kPadByte || p[payload.size() - 1] != kPadByte)) {
    return false;
  }
  out->warmup = (flags & kFlagWarmup) != 0;
  out->flags = flags;
  return true;
}

}  // namespace magnetar::perf
