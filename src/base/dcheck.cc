#include "base/dcheck.h"

#include <cstdio>
#include <cstdlib>

namespace magnetar {

void dcheckFailed(const char* expr, const char* file, int line, const char* function) {
  std::fprintf(stderr, "%s:%d: %s: DCHECK failed: %s\n", file, line, function, expr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace magnetar
