// Executor: something that runs tasks serially on one thread (an event loop or an ml-worker).
#pragma once

#include <functional>

namespace magnetar::net {

using Task = std::function<void()>;

// Runs tasks in submission order on one owning thread. Implementations coalesce wake-ups: a target
// that already has a wake-up pending or is running is not woken again. Thread: execute() from any.
class Executor {
 public:
  virtual ~Executor() = default;
  // Queues t to run on this executor's thread, after everything queued before it.
  virtual void execute(Task t) = 0;
  // True when called on this executor's own thread.
  virtual bool inExecutorThread() const = 0;
  // Runs t before returning when called on this executor's thread (ahead of tasks still queued,
  // as a direct call would), else queues it as execute(t) does. Thread: any.
  void dispatch(Task t) {
    if (inExecutorThread()) {
      t();
    } else {
      execute(std::move(t));
    }
  }
};

}  // namespace magnetar::net
