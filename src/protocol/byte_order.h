// Big-endian and protobuf varint primitives for the codec (internal to src/protocol).
#pragma once

#include <cstddef>
#include <cstdint>

namespace magnetar::protocol::wire {

inline uint32_t readBE32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint16_t readBE16(const uint8_t* p) {
  return static_cast<uint16_t>((uint16_t{p[0]} << 8) | uint16_t{p[1]});
}
inline uint8_t* writeBE32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
  return p + 4;
}
inline uint8_t* writeBE16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
  return p + 2;
}

// Bytes of the base-128 varint encoding of v (1..10).
inline size_t varintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
inline uint8_t* putVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
// Protobuf tag byte for fields 1..15.
constexpr uint8_t tag(int field, int wireType) {
  return static_cast<uint8_t>((field << 3) | wireType);
}
inline constexpr int kVarint = 0;
inline constexpr int kLengthDelimited = 2;

}  // namespace magnetar::protocol::wire
