// Test helper: the bytes a FrameBatch puts on the wire, in order, as one string (its copied
// ranges and its shared Buffer segments alike), to compare with expected frames or decode.
#pragma once

#include <string>

#include "net/frame_batch.h"

namespace magnetar::net {

inline std::string flatten(const FrameBatch& b) {
  std::string out;
  for (const auto& s : b.segments()) {
    if (s.buffer) {
      out.append(s.buffer.view());
    } else {
      out.append(b.bytes(), s.offset, s.length);
    }
  }
  return out;
}

}  // namespace magnetar::net
