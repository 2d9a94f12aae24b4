// Debug assertions for invariants of our own code (never for bad input from the network, which is
// answered and counted). On when NDEBUG is not defined or MAGNETAR_DCHECKS is defined (the CMake
// option of that name, on whenever tests are built; see src/base/README.md); otherwise the
// condition is not evaluated.
#pragma once

#if !defined(NDEBUG) || defined(MAGNETAR_DCHECKS)
#define MAGNETAR_DCHECK_IS_ON 1
#else
#define MAGNETAR_DCHECK_IS_ON 0
#endif

namespace magnetar {

// Prints "file:line: function: DCHECK failed: expr" to stderr and aborts.
[[noreturn]] void dcheckFailed(const char* expr, const char* file, int line, const char* function);

}  // namespace magnetar

#if MAGNETAR_DCHECK_IS_ON
#define MAGNETAR_DCHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::magnetar::dcheckFailed(#cond, __FILE__, __LINE__, __func__))
#else
#define MAGNETAR_DCHECK(cond) static_cast<void>(sizeof(!(cond)))
#endif

// The caller runs on `executor`'s own thread (a net::Executor, e.g. an EventLoop): the check at
// the entry of the methods of objects owned by one executor.
#define MAGNETAR_DCHECK_ON(executor) MAGNETAR_DCHECK((executor).inExecutorThread())
