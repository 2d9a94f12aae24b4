// FrameBatch: bytes to write to one connection, as a list of segments that are either ranges of an
// owned byte string (small frames, MESSAGE headers) or shared Buffers (stored entries, never copied).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/buffer.h"

namespace magnetar::net {

// Thread: not synchronized; owned by one thread at a time.
class FrameBatch {
 public:
  struct Segment {
    uint32_t offset = 0;  // into bytes() when buffer is empty
    uint32_t length = 0;
    Buffer buffer;        // when set, the segment is the whole buffer
  };

  // Reserves n bytes at the end and returns where to write them (valid until the next append).
  uint8_t* appendSpace(size_t n) {
    size_t off = bytes_.size();
    bytes_.resize(off + n);
    extendBytes(off, n);
    return reinterpret_cast<uint8_t*>(bytes_.data() + off);
  }
  void appendBytes(const void* p, size_t n) { std::memcpy(appendSpace(n), p, n); }
  // Gives back the last `n` bytes reserved by appendSpace (an encoder that used less).
  void trimBytes(size_t n) {
    bytes_.resize(bytes_.size() - n);
    segments_.back().length -= static_cast<uint32_t>(n);
    totalBytes_ -= n;
  }
  void appendBuffer(Buffer b) {
    if (b.empty()) return;
    uint32_t len = static_cast<uint32_t>(b.size());
    segments_.push_back(Segment{0, len, std::move(b)});
    totalBytes_ += len;
  }
  // Moves all of other's segments to the end of this batch.
  void append(FrameBatch&& other);

  bool empty() const { return segments_.empty(); }
  size_t totalBytes() const { return totalBytes_; }
  size_t segmentCount() const { return segments_.size(); }
  const std::vector<Segment>& segments() const { return segments_; }
  const std::string& bytes() const { return bytes_; }
  void clear() {
    segments_.clear();
    bytes_.clear();
    totalBytes_ = 0;
  }
  void swap(FrameBatch& o) {
    segments_.swap(o.segments_);
    bytes_.swap(o.bytes_);
    std::swap(totalBytes_, o.totalBytes_);
  }

 private:
  void extendBytes(size_t off, size_t n) {
    if (!segments_.empty() && !segments_.back().buffer &&
        segments_.back().offset + segments_.back().length == off) {
      segments_.back().length += static_cast<uint32_t>(n);
    } else {
      segments_.push_back(Segment{static_cast<uint32_t>(off), static_cast<uint32_t>(n), {}});
    }
    totalBytes_ += n;
  }

  std::vector<Segment> segments_;
  std::string bytes_;
  size_t totalBytes_ = 0;
};

inline void FrameBatch::append(FrameBatch&& other) {
  uint32_t base = static_cast<uint32_t>(bytes_.size());
  bytes_.append(other.bytes_);
  for (auto& s : other.segments_) {
    if (s.buffer) {
      segments_.push_back(std::move(s));
    } else if (!segments_.empty() && !segments_.back().buffer &&
               segments_.back().offset + segments_.back().length == base + s.offset) {
      segments_.back().length += s.length;
    } else {
      segments_.push_back(Segment{base + s.offset, s.length, {}});
    }
  }
  totalBytes_ += other.totalBytes_;
  other.clear();
}

}  // namespace magnetar::net
