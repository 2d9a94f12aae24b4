// Murmur3 32-bit (x86 variant), as Pulsar's Murmur3_32Hash uses for Key_Shared sticky keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace magnetar {

// MurmurHash3_x86_32 of the bytes with the given seed (Pulsar uses seed 0).
uint32_t murmur3_32(const void* data, size_t len, uint32_t seed = 0);

// Pulsar's sticky-key hash: Murmur3_32(seed 0) & Integer.MAX_VALUE, then % 65536
// (StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE).
inline uint32_t stickyKeyHash(std::string_view key) {
  return (murmur3_32(key.data(), key.size(), 0) & 0x7fffffffu) % 65536u;
}

}  // namespace magnetar
