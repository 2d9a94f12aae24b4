// RingQueue<T>: a FIFO in one power-of-two array that grows by doubling and is reused, for
// queues that every message passes through (the managed ledger's adds in the journal). A
// std::deque allocates and frees a 512-byte node every few elements as the queue moves; this
// allocates only while the queue grows past its largest size so far, and gives the array back
// once it empties after holding more than kKeepSlots. Thread: not thread-safe (one owner).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#include "base/dcheck.h"

namespace magnetar {

template <typename T>
class RingQueue {
 public:
  // An emptied queue keeps an array of at most this many slots.
  static constexpr size_t kKeepSlots = 4096;

  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& o) noexcept
      : slots_(std::exchange(o.slots_, nullptr)),
        cap_(std::exchange(o.cap_, 0)),
        head_(std::exchange(o.head_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  RingQueue& operator=(RingQueue&& o) noexcept {
    if (this != &o) {
      release();
      slots_ = std::exchange(o.slots_, nullptr);
      cap_ = std::exchange(o.cap_, 0);
      head_ = std::exchange(o.head_, 0);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~RingQueue() { release(); }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Slots allocated (tests).
  size_t capacity() const { return cap_; }

  T& front() {
    MAGNETAR_DCHECK(size_ > 0);
    return slots_[head_];
  }
  const T& front() const {
    MAGNETAR_DCHECK(size_ > 0);
    return slots_[head_];
  }
  // The i-th element from the front (i < size()).
  T& operator[](size_t i) {
    MAGNETAR_DCHECK(i < size_);
    return slots_[(head_ + i) & (cap_ - 1)];
  }

  void push_back(T v) {
    if (size_ == cap_) grow();
    new (&slots_[(head_ + size_) & (cap_ - 1)]) T(std::move(v));
    ++size_;
  }
  void pop_front() {
    MAGNETAR_DCHECK(size_ > 0);
    slots_[head_].~T();
    head_ = (head_ + 1) & (cap_ - 1);
    if (--size_ == 0) {
      head_ = 0;
      if (cap_ > kKeepSlots) release();
    }
  }
  void clear() {
    while (size_ > 0) pop_front();
  }

 private:
  void grow() {
    const size_t cap = cap_ == 0 ? 16 : cap_ * 2;
    T* slots = static_cast<T*>(::operator new (cap * sizeof(T), std::align_val_t{alignof(T)}));
    for (size_t i = 0; i < size_; ++i) {
      T& from = slots_[(head_ + i) & (cap_ - 1)];
      new (&slots[i]) T(std::move(from));
      from.~T();
    }
    if (slots_) ::operator delete (slots_, std::align_val_t{alignof(T)});
    slots_ = slots;
    cap_ = cap;
    head_ = 0;
  }
  void release() {
    for (size_t i = 0; i < size_; ++i) slots_[(head_ + i) & (cap_ - 1)].~T();
    if (slots_) ::operator delete (slots_, std::align_val_t{alignof(T)});
    slots_ = nullptr;
    cap_ = head_ = size_ = 0;
  }

  T* slots_ = nullptr;
  size_t cap_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace magnetar
