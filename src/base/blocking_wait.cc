#include "base/blocking_wait.h"

#include <execinfo.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/dcheck.h"
#include "base/log_rate_limiter.h"
#include "base/logging.h"

namespace magnetar {

namespace {
thread_local const char* tExecutorName = nullptr;

// MAGNETAR_STRICT_BLOCKING_WAITS: "1" aborts on a blocking wait on an executor, "trace" logs
// each one with its stack and goes on (to list every caller in one test run).
const char* strictMode() {
  static const char* mode = [] {
    const char* v = std::getenv("MAGNETAR_STRICT_BLOCKING_WAITS");
    return v ? v : "";
  }();
  return mode;
}
}  // namespace

void markExecutorThread(const char* name) { tExecutorName = name; }

const char* executorThreadName() { return tExecutorName; }

void checkMayBlock(const char* what) {
  if (!tExecutorName) return;
  const bool abortIt = std::strcmp(strictMode(), "1") == 0;
  if (abortIt || std::strcmp(strictMode(), "trace") == 0) {
    MLOG_ERROR("blocking wait ({}) on executor thread {}; stack on stderr", what, tExecutorName);
    void* frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);  // to find the caller (addr2line)
    if (abortIt) dcheckFailed("blocking wait on an executor thread", __FILE__, __LINE__, what);
    return;
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
