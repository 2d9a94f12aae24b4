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
// The key is the 4-byte little-endian device id (binary), so Key_Shared hashes per device; over
// the WebSocket API (whose keys are JSON strings) it is the text key: the device id as 8
// lowercase hex digits.
constexpr uint32_t kPayloadMagic = 0x3154504d;  // "MPT1"
constexpr size_t kPayloadHeaderBytes = 24;
constexpr size_t kKeyBytes = 4;
constexpr size_t kTextKeyBytes = 8;
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

// Writes the text key of device into key[kTextKeyBytes] ("0001e240" for 123456).
inline void encodeTextKey(uint32_t device, char* key) {
  constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < kTextKeyBytes; ++i) key[i] = kHex[(device >> (28 - 4 * i)) & 0xf];
}

// Standard base64 (RFC 4648, padded) of in[n] into out, which holds base64Size(n) bytes.
constexpr size_t base64Size(size_t n) { return (n + 2) / 3 * 4; }
inline void base64Encode(const char* in, size_t n, char* out) {
  constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* u = reinterpret_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + 3 <= n; i += 3, out += 4) {
    const uint32_t v = (u[i] << 16) | (u[i + 1] << 8) | u[i + 2];
    for (int k = 0; k < 4; ++k) out[k] = kAlphabet[(v >> (18 - 6 * k)) & 0x3f];
  }
  if (i < n) {
    const uint32_t v = (u[i] << 16) | (i + 1 < n ? u[i + 1] << 8 : 0);
    out[0] = kAlphabet[(v >> 18) & 0x3f];
    out[1] = kAlphabet[(v >> 12) & 0x3f];
    out[2] = i + 1 < n ? kAlphabet[(v >> 6) & 0x3f] : '=';
    out[3] = '=';
  }
}

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
// device >= devices, a key (binary or text) that is not the payload's device, or damaged padding
// (first and last byte checked, so a truncated or shifted payload is caught without reading every
// byte). keyless: an empty key is accepted too (MQTT gateways: MQTT messages carry no key).
inline bool decodePayload(std::string_view payload, std::string_view key, size_t expectedSize,
                          uint32_t devices, TelemetryRecord* out, bool keyless = false) {
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
  if (keyless && key.empty()) {
    // MQTT gateways: the message has no key (MQTT has none); the payload names the device.
  } else if (key.size() == kTextKeyBytes) {
    char text[kTextKeyBytes];
    encodeTextKey(out->device, text);
    if (std::memcmp(key.data(), text, kTextKeyBytes) != 0) return false;
  } else if (key.size() != kKeyBytes || std::memcmp(key.data(), p + 4, kKeyBytes) != 0) {
    return false;
  }
  if (payload.size() > kPayloadHeaderBytes &&
      (p[kPayloadHeaderBytes] != kPadByte || p[payload.size() - 1] != kPadByte)) {
    return false;
  }
  out->warmup = (flags & kFlagWarmup) != 0;
  out->flags = flags;
  return true;
}

}  // namespace magnetar::perf
