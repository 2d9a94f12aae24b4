#include "net/event_loop.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "base/blocking_wait.h"
#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar::net {

namespace {
// The loop whose inbox pass is running on this thread; nullptr outside drain().
thread_local EventLoop* tDraining = nullptr;
}  // namespace

EventLoop::EventLoop(std::string name, Kind kind)
    : name_(std::move(name)), kind_(kind), work_(ctx_.get_executor()) {}

EventLoop::~EventLoop() { stop(); }

void EventLoop::start() {
  thread_ = std::thread([this] {
    setThreadName(name_);
    // Blocking waits on an executor are bugs (base/blocking_wait.h).
    if (kind_ == Kind::kExecutor) markExecutorThread(name_.c_str());
    tid_ = static_cast<int>(::syscall(SYS_gettid));
    for (;;) {
      try {
        ctx_.run();
        break;
      } catch (const std::exception& e) {
        // A handler must not throw; keep the loop alive and say so.
        MLOG_ERROR("{}: uncaught exception in handler: {}", name_, e.what());
      }
    }
  });
  threadId_ = thread_.get_id();
}

void EventLoop::stop() {
  if (!thread_.joinable()) return;
  work_.reset();
  ctx_.stop();
  if (std::this_thread::get_id() != thread_.get_id()) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

uint8_t* EventLoop::readBuffer() {
  if (!readBuffer_) readBuffer_ = std::make_unique_for_overwrite<uint8_t[]>(kReadBufferSize);
  return readBuffer_.get();
}

bool EventLoop::inExecutorThread() const { return std::this_thread::get_id() == threadId_; }

void EventLoop::execute(Task t) {
  bool wake;
  {
    MutexLock lock(mu_);
    inbox_.push_back(std::move(t));
    wake = !drainScheduled_;
    drainScheduled_ = true;
  }
  stats_.tasks.fetch_add(1, std::memory_order_relaxed);
  if (wake) {
    stats_.wakeups.fetch_add(1, std::memory_order_relaxed);
    boost::asio::post(ctx_, [this] { drain(); });
  }
}

void EventLoop::executeAfterPass(Task t) {
  EventLoop* current = tDraining;
  if (current == nullptr || current == this) {
    execute(std::move(t));
    return;
  }
  current->hold(*this, std::move(t));
}

void EventLoop::hold(EventLoop& target, Task t) {
  MAGNETAR_DCHECK(tDraining == this);
  for (auto& h : held_) {
    if (h.target == &target) {
      h.tasks.push_back(std::move(t));
      return;
    }
  }
  held_.push_back(Held{&target, {}});
  held_.back().tasks.push_back(std::move(t));
}

void EventLoop::executeAll(std::vector<Task>& ts) {
  if (ts.empty()) return;
  const size_t n = ts.size();
  bool wake;
  {
    MutexLock lock(mu_);
    for (auto& t : ts) inbox_.push_back(std::move(t));
    wake = !drainScheduled_;
    drainScheduled_ = true;
  }
  ts.clear();
  stats_.tasks.fetch_add(n, std::memory_order_relaxed);
  stats_.heldTasks.fetch_add(n, std::memory_order_relaxed);
  stats_.heldHandovers.fetch_add(1, std::memory_order_relaxed);
  if (wake) {
    stats_.wakeups.fetch_add(1, std::memory_order_relaxed);
    boost::asio::post(ctx_, [this] { drain(); });
  }
}

void EventLoop::releaseHeld() {
  for (auto& h : held_) h.target->executeAll(h.tasks);
}

void EventLoop::drain() {
  stats_.passes.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    running_.swap(inbox_);
    drainScheduled_ = false;
  }
  EventLoop* outer = tDraining;
  tDraining = this;
  for (auto& t : running_) {
    // A task must not throw; if one does, say so and run the rest of the pass.
    try {
      t();
    } catch (const std::exception& e) {
      MLOG_ERROR("{}: uncaught exception in task: {}", name_, e.what());
    } catch (...) {
      MLOG_ERROR("{}: uncaught non-standard exception in task", name_);
    }
  }
  running_.clear();
  tDraining = outer;
  releaseHeld();
}

EventLoopGroup::EventLoopGroup(const std::string& prefix, int count) {
  loops_.reserve(count);
  for (int i = 0; i < count; ++i) {
    loops_.push_back(std::make_unique<EventLoop>(prefix + "-" + std::to_string(i)));
  }
}

EventLoopGroup::~EventLoopGroup() { stop(); }

void EventLoopGroup::start() {
  for (auto& l : loops_) l->start();
}

void EventLoopGroup::stop() {
  for (auto& l : loops_) l->stop();
}

EventLoop& EventLoopGroup::next() {
  return *loops_[rr_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
}

}  // namespace magnetar::net
