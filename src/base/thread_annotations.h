// Clang thread-safety annotations (checked with -Wthread-safety in the clang builds; empty on
// other compilers), plus a std::mutex wrapper the analysis understands.
#pragma once

#include <mutex>

#if defined(__clang__)
#define MAGNETAR_TSA(x) __attribute__((x))
#else
#define MAGNETAR_TSA(x)
#endif

// On a member: only read or written with the given mutex held.
#define GUARDED_BY(m) MAGNETAR_TSA(guarded_by(m))
// On a pointer member: the pointee is guarded by the given mutex.
#define PT_GUARDED_BY(m) MAGNETAR_TSA(pt_guarded_by(m))
// On a function: the caller holds (REQUIRES) / does not hold (EXCLUDES) the mutex.
#define REQUIRES(...) MAGNETAR_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) MAGNETAR_TSA(locks_excluded(__VA_ARGS__))
#define CAPABILITY(x) MAGNETAR_TSA(capability(x))
#define SCOPED_CAPABILITY MAGNETAR_TSA(scoped_lockable)
#define ACQUIRE(...) MAGNETAR_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) MAGNETAR_TSA(release_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS MAGNETAR_TSA(no_thread_safety_analysis)

namespace magnetar {

// std::mutex as a capability. native() is for std::condition_variable waits (through
// UniqueLock::native()).
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::lock_guard).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds a Mutex for its scope (std::unique_lock): may unlock() and lock() again, and can wait on
// a std::condition_variable through native(); the analysis treats the mutex as held across a
// wait (which releases and re-takes it).
class SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~UniqueLock() RELEASE() {}
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;
  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace magnetar
