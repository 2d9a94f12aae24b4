// CRC-32C (Castagnoli), the checksum Pulsar puts in payload frames (magic 0x0e01) and the one our
// journal uses. Computed with Intel ISA-L (crc32_iscsi), hardware-accelerated where available.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace magnetar {

// Standard CRC-32C of [data, data+len): reflected polynomial 0x82F63B78, initial value and final
// XOR 0xFFFFFFFF; crc32c("123456789") == 0xE3069283 (the same value Pulsar's Crc32cIntChecksum and
// pulsar-client-cpp compute). `seed` is the CRC of the bytes before this block (0 for none), so
// crc32c(b, nb, crc32c(a, na)) == crc32c(a||b). Thread: any.
uint32_t crc32c(const void* data, size_t len, uint32_t seed = 0);

inline uint32_t crc32c(std::string_view s, uint32_t seed = 0) {
  return crc32c(s.data(), s.size(), seed);
}

// Incremental CRC-32C over several pieces. Thread: value type, no sharing.
class Crc32c {
 public:
  void update(const void* data, size_t len) { crc_ = crc32c(data, len, crc_); }
  void update(std::string_view s) { update(s.data(), s.size()); }
  // CRC of everything passed to update() so far (0 when nothing was).
  uint32_t value() const { return crc_; }
  void reset() { crc_ = 0; }

 private:
  uint32_t crc_ = 0;
};

}  // namespace magnetar
