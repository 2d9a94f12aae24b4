// joinStatuses: one callback for N asynchronous results. Internal to src/client.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "base/status.h"
#include "base/thread_annotations.h"

namespace magnetar::client {

// Returns a callback to be called exactly n times; after the n-th call, done runs once with the
// first error reported (or OK). n == 0: done(OK) runs at once. Thread: the returned callback from
// any thread; done runs on the thread of the last call.
inline std::function<void(const Status&)> joinStatuses(size_t n,
                                                       std::function<void(const Status&)> done) {
  if (n == 0) {
    done(Status::ok());
    return [](const Status&) {};
  }
  struct State {
    Mutex mu;
    size_t left GUARDED_BY(mu) = 0;
    Status first GUARDED_BY(mu);
    std::function<void(const Status&)> done;
  };
  auto st = std::make_shared<State>();
  {
    MutexLock lock(st->mu);
    st->left = n;
  }
  st->done = std::move(done);
  return [st](const Status& s) {
    Status result;
    {
      MutexLock lock(st->mu);
      if (!s.isOk() && st->first.isOk()) st->first = s;
      if (--st->left != 0) return;
      result = st->first;
    }
    st->done(result);
  };
}

}  // namespace magnetar::client
