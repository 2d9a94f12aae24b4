#include "base/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace magnetar {

uint32_t crc32c(const void* data, size_t len, uint32_t seed) {
  // ISA-L's crc32_iscsi takes the raw register value and applies no final XOR; the standard CRC
  // starts from ~0 and inverts at the end, so a finished CRC resumes as ~crc.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~seed;
  while (len > 0) {
    int n = len > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(len);
    reg = crc32_iscsi(p, n, reg);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~reg;
}

}  // namespace magnetar
