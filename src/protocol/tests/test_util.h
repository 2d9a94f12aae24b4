// Helpers shared by the protocol tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/buffer.h"
#include "protocol/frame.h"

namespace magnetar::protocol::testing {

struct DecodedFrame {
  proto::BaseCommand cmd;
  std::string entry;
};

// Feeds `bytes` in chunks of `chunk` bytes (0: all at once) and collects the frames.
inline Status decodeAll(std::string_view bytes, std::vector<DecodedFrame>* out, size_t chunk = 0,
                        size_t maxFrameSize = kDefaultMaxFrameSize) {
  FrameDecoder dec(maxFrameSize);
  auto handler = [&](const proto::BaseCommand& cmd, Buffer entry) {
    out->push_back(DecodedFrame{cmd, std::string(entry.view())});
  };
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (chunk == 0) chunk = bytes.size() ? bytes.size() : 1;
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    size_t n = std::min(chunk, bytes.size() - off);
    Status s = dec.feed(p + off, n, handler);
    if (!s.isOk()) return s;
  }
  if (!dec.idle()) return Status::corruption("partial frame left in decoder");
  return Status::ok();
}

// Decodes exactly one frame from `frame` (must be complete) or fails the test.
inline DecodedFrame decodeOne(const Buffer& frame) {
  std::vector<DecodedFrame> frames;
  Status s = decodeAll(frame.view(), &frames);
  EXPECT_TRUE(s.isOk()) << s.toString();
  EXPECT_EQ(frames.size(), 1u);
  if (frames.empty()) return {};
  return frames[0];
}

}  // namespace magnetar::protocol::testing
