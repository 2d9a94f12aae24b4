#include "base/blocking_wait.h"

#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar {

namespace {
thread_local const char* tExecutorName = nullptr;
}  // namespace

void markExecutorThread(const char* name) { tExecutorName = name; }

const char* executorThreadName() { return tExecutorName; }

void checkMayBlock(const char* what) {
  if (!tExecutorName) return;
  MLOG_ERROR("blocking wait ({}) on executor thread {}: a broker executor must not block", what,
             tExecutorName);
#if MAGNETAR_DCHECK_IS_ON
  dcheckFailed("blocking wait on an executor thread", __FILE__, __LINE__, what);
#endif
}

}  // namespace magnetar
