// InlineFunction<R(Args...), N>: a move-only callable holder with a fixed inline buffer of N bytes
// and no heap fallback, for callbacks made once per message (the managed ledger's add callback).
// std::function keeps only 16 bytes inline and allocates for anything larger; this never
// allocates: a callable that does not fit (size or alignment) or whose move may throw fails the
// build at the place it is converted, so a capture that grows is seen at compile time.
// Thread: not thread-safe (one owner at a time; it may be moved between threads).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "base/dcheck.h"

namespace magnetar {

template <typename Sig, size_t N>
class InlineFunction;

template <typename R, typename... Args, size_t N>
class InlineFunction<R(Args...), N> {
 public:
  // The inline buffer's size and alignment (bytes).
  static constexpr size_t kCapacity = N;
  static constexpr size_t kAlign = alignof(std::max_align_t);

  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): as std::function

  // Holds f (moved or copied in). REQUIRES at compile time: f fits kCapacity and kAlign, and
  // moves without throwing.
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    static_assert(sizeof(D) <= N,
                  "callable too large for this InlineFunction: shrink its captures or raise the "
                  "capacity (there is no heap fallback)");
    static_assert(alignof(D) <= kAlign, "callable over-aligned for InlineFunction");
    static_assert(std::is_nothrow_move_constructible_v<D>, "callable must move without throwing");
    ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
    invoke_ = [](void* p, Args... args) -> R {
      return (*static_cast<D*>(p))(std::forward<Args>(args)...);
    };
    if constexpr (!std::is_trivially_copyable_v<D> || !std::is_trivially_destructible_v<D>) {
      manage_ = [](void* from, void* to) noexcept {
        D* src = static_cast<D*>(from);
        if (to != nullptr) ::new (to) D(std::move(*src));
        src->~D();
      };
    }
  }

  InlineFunction(InlineFunction&& o) noexcept { take(o); }
  InlineFunction& operator=(InlineFunction&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  InlineFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return invoke_ != nullptr; }

  // Calls the held callable. REQUIRES: one is held.
  R operator()(Args... args) {
    MAGNETAR_DCHECK(invoke_ != nullptr);
    return invoke_(buf_, std::forward<Args>(args)...);
  }

 private:
  void take(InlineFunction& o) noexcept {
    if (o.invoke_ == nullptr) return;
    if (o.manage_ != nullptr) {
      o.manage_(o.buf_, buf_);
    } else {
      __builtin_memcpy(buf_, o.buf_, N);
    }
    invoke_ = std::exchange(o.invoke_, nullptr);
    manage_ = std::exchange(o.manage_, nullptr);
  }
  void reset() noexcept {
    if (manage_ != nullptr) manage_(buf_, nullptr);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

  alignas(kAlign) unsigned char buf_[N];
  R (*invoke_)(void*, Args...) = nullptr;
  void (*manage_)(void*, void*) noexcept = nullptr;  // move-construct into `to` (if any), destroy
};

}  // namespace magnetar
