// DynamicSetting<T>: one value of a setting that may change while the broker runs (Pulsar's
// dynamic settings, `brokers update-dynamic-config`). The app stores the new value from the
// thread that took the update (pulsar-web); the owning thread (an ml-worker, an I/O loop) loads
// it at its next use. Numbers and bools are relaxed atomics (no other data is published with
// the value); a string is copied under a mutex. Copying a DynamicSetting copies its value.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

namespace magnetar {

template <typename T>
class DynamicSetting {
 public:
  DynamicSetting(T v) : v_(v) {}  // NOLINT(google-explicit-constructor): `int x = 5;` style
  DynamicSetting(const DynamicSetting& o) : v_(o.load()) {}
  DynamicSetting& operator=(const DynamicSetting& o) {
    store(o.load());
    return *this;
  }
  // Thread: any.
  T load() const { return v_.load(std::memory_order_relaxed); }
  void store(T v) { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<T> v_;
};

template <>
class DynamicSetting<std::string> {
 public:
  DynamicSetting(std::string v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  DynamicSetting(const DynamicSetting& o) : v_(o.load()) {}
  DynamicSetting& operator=(const DynamicSetting& o) {
    store(o.load());
    return *this;
  }
  // Thread: any (a copy, under the mutex).
  std::string load() const {
    std::lock_guard<std::mutex> l(mu_);
    return v_;
  }
  void store(std::string v) {
    std::lock_guard<std::mutex> l(mu_);
    v_ = std::move(v);
  }

 private:
  mutable std::mutex mu_;
  std::string v_;  // GUARDED_BY(mu_)
};

}  // namespace magnetar
