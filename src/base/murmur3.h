// Murmur3 32-bit (x86 variant), as Pulsar's Murmur3_32Hash uses for Key_Shared sticky keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace magnetar {

// MurmurHash3_x86_32 of the bytes with the given seed (Pulsar uses seed 0).
uint32_t murmur3_32(const void* data, size_t len, uint32_t seed = 0);

// Pulsar 4's sticky-key hash (StickyKeyConsumerSelectorUtils.makeStickyKeyHash): Murmur3_32 (seed
// 0) & Integer.MAX_VALUE, then % rangeSize + rangeStart, and 0 becomes 1 (0 means "not set"). The
// STICKY/range selectors use [0, 65535] (the defaults); consistent hashing uses [1, 65535].
inline uint32_t stickyKeyHash(std::string_view key, uint32_t rangeStart = 0,
                              uint32_t rangeSize = 65536) {
  uint32_t h = (murmur3_32(key.data(), key.size(), 0) & 0x7fffffffu) % rangeSize + rangeStart;
  return h == 0 ? 1 : h;
}

}  // namespace magnetar
