// Reference-counted immutable byte buffers: one allocation holds the count and the bytes.
// Entry bytes of a published message live in one Buffer from the SEND frame through storage, the
// entry cache and every MESSAGE frame (scatter/gather writes), never copied per consumer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

namespace magnetar {

// Shared handle to an immutable byte block. Thread: any; the count is atomic.
class Buffer {
 public:
  Buffer() = default;
  // Allocates size bytes (uninitialized); fill through mutableData() before sharing.
  static Buffer allocate(size_t size) {
    void* mem = std::malloc(sizeof(Block) + size);
    if (!mem) throw std::bad_alloc();
    auto* b = new (mem) Block();
    b->size = size;
    return Buffer(b);
  }
  static Buffer copyOf(const void* data, size_t size) {
    Buffer b = allocate(size);
    if (size) std::memcpy(b.mutableData(), data, size);
    return b;
  }
  static Buffer copyOf(std::string_view s) { return copyOf(s.data(), s.size()); }

  Buffer(const Buffer& o) : b_(o.b_) { ref(); }
  Buffer(Buffer&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  Buffer& operator=(const Buffer& o) {
    if (this != &o) {
      unref();
      b_ = o.b_;
      ref();
    }
    return *this;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      unref();
      b_ = std::exchange(o.b_, nullptr);
    }
    return *this;
  }
  ~Buffer() { unref(); }

  const uint8_t* data() const { return b_ ? b_->bytes() : nullptr; }
  uint8_t* mutableData() { return b_->bytes(); }
  size_t size() const { return b_ ? b_->size : 0; }
  bool empty() const { return size() == 0; }
  std::string_view view() const {
    return {reinterpret_cast<const char*>(data()), size()};
  }
  explicit operator bool() const { return b_ != nullptr; }
  long useCount() const { return b_ ? b_->refs.load(std::memory_order_relaxed) : 0; }

 private:
  struct Block {
    std::atomic<long> refs{1};
    size_t size = 0;
    uint8_t* bytes() { return reinterpret_cast<uint8_t*>(this + 1); }
  };
  explicit Buffer(Block* b) : b_(b) {}
  void ref() {
    if (b_) b_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void unref() {
    if (b_ && b_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      b_->~Block();
      std::free(b_);
    }
    b_ = nullptr;
  }
  Block* b_ = nullptr;
};

}  // namespace magnetar
