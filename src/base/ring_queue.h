// RingQueue<T>: a double-ended queue in one power-of-two array that grows by doubling and is
// reused, for queues that every message passes through (the managed ledger's adds, the entry
// cache, a consumer's pending acks). A std::deque allocates and frees a 512-byte node every few
// elements as the queue moves; this allocates only while the queue grows past its largest size
// so far. An array above kKeepSlots is kept while the queue fills it by more than a quarter
// between emptyings (at max rate the journal's adds fill and empty 100,000 slots many times a
// second: giving the array back at each emptying cost 20 % of the topic's thread in page faults
// and moves), and given back after kShrinkAfter emptyings in a row that each used a quarter or
// less, or by trim() once idle. Random access iterators (for binary searches); insert and
// eraseIf in the middle are O(n).
// Thread: not thread-safe (one owner).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "base/dcheck.h"

namespace magnetar {

template <typename T>
class RingQueue {
  template <bool kConst>
  class Iter;

 public:
  using value_type = T;
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;
  // An emptied queue always keeps an array of at most this many slots.
  static constexpr size_t kKeepSlots = 4096;
  // A larger array is given back after this many emptyings in a row that each used at most a
  // quarter of it.
  static constexpr uint32_t kShrinkAfter = 16;

  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& o) noexcept
      : slots_(std::exchange(o.slots_, nullptr)),
        cap_(std::exchange(o.cap_, 0)),
        head_(std::exchange(o.head_, 0)),
        size_(std::exchange(o.size_, 0)),
        peak_(std::exchange(o.peak_, 0)),
        smallFills_(std::exchange(o.smallFills_, 0)),
        pushedSinceTrim_(std::exchange(o.pushedSinceTrim_, false)) {}
  RingQueue& operator=(RingQueue&& o) noexcept {
    if (this != &o) {
      release();
      slots_ = std::exchange(o.slots_, nullptr);
      cap_ = std::exchange(o.cap_, 0);
      head_ = std::exchange(o.head_, 0);
      size_ = std::exchange(o.size_, 0);
      peak_ = std::exchange(o.peak_, 0);
      smallFills_ = std::exchange(o.smallFills_, 0);
      pushedSinceTrim_ = std::exchange(o.pushedSinceTrim_, false);
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
  T& back() {
    MAGNETAR_DCHECK(size_ > 0);
    return (*this)[size_ - 1];
  }
  // The i-th element from the front (i < size()).
  T& operator[](size_t i) {
    MAGNETAR_DCHECK(i < size_);
    return slots_[(head_ + i) & (cap_ - 1)];
  }
  const T& operator[](size_t i) const {
    MAGNETAR_DCHECK(i < size_);
    return slots_[(head_ + i) & (cap_ - 1)];
  }
  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  void push_back(T v) {
    if (size_ == cap_) grow();
    new (&slots_[(head_ + size_) & (cap_ - 1)]) T(std::move(v));
    pushed();
  }
  void push_front(T v) {
    if (size_ == cap_) grow();
    head_ = (head_ + cap_ - 1) & (cap_ - 1);
    new (&slots_[head_]) T(std::move(v));
    pushed();
  }
  // Inserts v before the element at `pos` (end(): at the back); moves the elements after it.
  void insert(const_iterator pos, T v) {
    const size_t at = pos.index();
    MAGNETAR_DCHECK(at <= size_);
    push_back(std::move(v));
    for (size_t i = size_ - 1; i > at; --i) std::swap((*this)[i], (*this)[i - 1]);
  }
  // Removes every element for which pred is true, keeping the order of the rest.
  template <typename Pred>
  void eraseIf(Pred pred) {
    size_t kept = 0;
    for (size_t i = 0; i < size_; ++i) {
      if (pred(static_cast<const T&>((*this)[i]))) continue;
      if (kept != i) (*this)[kept] = std::move((*this)[i]);
      ++kept;
    }
    while (size_ > kept) pop_back();
  }
  void pop_back() {
    MAGNETAR_DCHECK(size_ > 0);
    (*this)[size_ - 1].~T();
    if (--size_ == 0) emptied();
  }
  void pop_front() {
    MAGNETAR_DCHECK(size_ > 0);
    slots_[head_].~T();
    head_ = (head_ + 1) & (cap_ - 1);
    if (--size_ == 0) emptied();
  }
  void clear() {
    while (size_ > 0) pop_front();
  }
  // Gives back an array above kKeepSlots if the queue is empty and nothing was pushed since the
  // previous trim() (the owner calls it from a periodic tick: idle for a whole interval).
  void trim() {
    if (size_ == 0 && cap_ > kKeepSlots && !pushedSinceTrim_) release();
    pushedSinceTrim_ = false;
  }

 private:
  // A position in the queue, as an index from the front (stays valid while nothing is pushed
  // or popped at the front).
  template <bool kConst>
  class Iter {
    using Queue = std::conditional_t<kConst, const RingQueue, RingQueue>;

   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<kConst, const T*, T*>;
    using reference = std::conditional_t<kConst, const T&, T&>;

    Iter() = default;
    Iter(Queue* q, size_t i) : q_(q), i_(i) {}
    operator Iter<true>() const { return Iter<true>(q_, i_); }  // NOLINT: iterator -> const

    size_t index() const { return i_; }
    reference operator*() const { return (*q_)[i_]; }
    pointer operator->() const { return &(*q_)[i_]; }
    reference operator[](difference_type n) const { return (*q_)[i_ + n]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++i_;
      return t;
    }
    Iter& operator--() {
      --i_;
      return *this;
    }
    Iter operator--(int) {
      Iter t = *this;
      --i_;
      return t;
    }
    Iter& operator+=(difference_type n) {
      i_ = static_cast<size_t>(static_cast<difference_type>(i_) + n);
      return *this;
    }
    Iter& operator-=(difference_type n) { return *this += -n; }
    friend Iter operator+(Iter a, difference_type n) { return a += n; }
    friend Iter operator+(difference_type n, Iter a) { return a += n; }
    friend Iter operator-(Iter a, difference_type n) { return a -= n; }
    friend difference_type operator-(const Iter& a, const Iter& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const Iter& a, const Iter& b) { return a.i_ <=> b.i_; }

   private:
    Queue* q_ = nullptr;
    size_t i_ = 0;
  };

  void pushed() {
    if (++size_ > peak_) peak_ = size_;
    pushedSinceTrim_ = true;
  }
  void emptied() {
    head_ = 0;
    if (cap_ > kKeepSlots) {
      smallFills_ = peak_ * 4 <= cap_ ? smallFills_ + 1 : 0;
      if (smallFills_ >= kShrinkAfter) release();
    }
    peak_ = 0;
  }
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
    cap_ = head_ = size_ = peak_ = 0;
    smallFills_ = 0;
  }

  T* slots_ = nullptr;
  size_t cap_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
  size_t peak_ = 0;          // the largest size since the queue last emptied
  uint32_t smallFills_ = 0;  // emptyings in a row that used at most a quarter of a large array
  bool pushedSinceTrim_ = false;
};

}  // namespace magnetar
