// Blocking waits, in one place. A broker executor (an I/O loop `pulsar-io-*`, a topic executor
// `ml-worker-*`, a metadata callback loop: every net::EventLoop thread) must never block on
// another thread's work; the waits that remain legitimate (start and stop on the main thread, the
// CLI tools, storage's own threads) go through these helpers, which check the calling thread at
// run time. scripts/check_blocking_waits.sh fails the lint on a wait written anywhere else.
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <utility>

namespace magnetar {

// Marks the calling thread as a broker executor named `name` (static storage; set by
// net::EventLoop on its thread). Thread: the thread itself.
void markExecutorThread(const char* name);
// The executor's name when the calling thread is one, else nullptr.
const char* executorThreadName();
// A blocking wait named `what` is about to start: on an executor thread it logs an error naming
// the thread (at most once a minute, with the count held back) and, with the environment
// variable MAGNETAR_STRICT_BLOCKING_WAITS=1, aborts (dcheckFailed). Not aborting by default:
// cluster mode's ConfigurationStore calls still block an I/O loop on some paths (issue 46).
void checkMayBlock(const char* what);

// f.get() after checkMayBlock: the value (or the future's exception).
template <typename T>
T blockingGet(std::future<T>& f, const char* what) {
  checkMayBlock(what);
  return f.get();
}

// The value when f is ready within `timeout`, else nullopt (f stays valid).
template <typename T, typename Rep, typename Period>
std::optional<T> blockingGetFor(std::future<T>& f, std::chrono::duration<Rep, Period> timeout,
                                const char* what) {
  checkMayBlock(what);
  if (f.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return f.get();
}

// Whether f is ready within `timeout` (f stays valid; for std::future<void> too).
template <typename T, typename Rep, typename Period>
bool blockingReady(std::future<T>& f, std::chrono::duration<Rep, Period> timeout,
                   const char* what) {
  checkMayBlock(what);
  return f.wait_for(timeout) == std::future_status::ready;
}

// Waits on cv (lock holds cv's mutex) until pred() holds or `timeout` passed; returns pred().
template <typename Pred, typename Rep, typename Period>
bool blockingWaitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                     std::chrono::duration<Rep, Period> timeout, Pred pred, const char* what) {
  checkMayBlock(what);
  return cv.wait_for(lock, timeout, pred);
}

}  // namespace magnetar
