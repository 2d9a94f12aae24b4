#include "base/blocking_wait.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/dcheck.h"
#include "base/log_rate_limiter.h"
#include "base/logging.h"

namespace magnetar {

namespace {
thread_local const char* tExecutorName = nullptr;

bool strict() {
  static const bool on = [] {
    const char* v = std::getenv("MAGNETAR_STRICT_BLOCKING_WAITS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}
}  // namespace

void markExecutorThread(const char* name) { tExecutorName = name; }

const char* executorThreadName() { return tExecutorName; }

void checkMayBlock(const char* what) {
  if (!tExecutorName) return;
  if (strict()) {
    MLOG_ERROR("blocking wait ({}) on executor thread {}", what, tExecutorName);
    dcheckFailed("blocking wait on an executor thread", __FILE__, __LINE__, what);
  }
  static std::mutex mu;
  static LogRateLimiter limiter(std::chrono::seconds(60));
  int64_t held = 0;
  {
    std::lock_guard lock(mu);
    if (!limiter.allow(&held)) return;
  }
  MLOG_ERROR(
      "blocking wait ({}) on executor thread {}: a broker executor must not block ({} "
      "more held back)",
      what, tExecutorName, held);
}

}  // namespace magnetar
