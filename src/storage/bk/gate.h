// Gate: how completions from BookKeeper's loops and ZooKeeper's threads reach the ml-workers of
// one BkManagedLedgerFactory, and how they stop at its shutdown. Every completion goes through a
// GatedExecutor (one per target executor, owned by the gate); after close() they are dropped
// instead of posted, so a factory (and the executors it was given) can go away while bookie and
// ZooKeeper requests are still outstanding. Thread: any.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "base/thread_annotations.h"
#include "net/executor.h"

namespace magnetar::storage::bk {

class Gate;

// Posts to `target` while the gate is open; drops the task once it is closed. The task is
// destroyed after the gate's lock is released, so a task holding the last reference to the gate
// may be dropped here.
class GatedExecutor : public net::Executor {
 public:
  GatedExecutor(Gate* gate, net::Executor* target) : gate_(gate), target_(target) {}
  void execute(net::Task t) override;
  bool inExecutorThread() const override { return target_->inExecutorThread(); }
  net::Executor* target() const { return target_; }

 private:
  Gate* gate_;
  net::Executor* target_;
};

class Gate {
 public:
  // The gated executor for `target`, created once; valid as long as the gate.
  GatedExecutor* wrap(net::Executor* target) {
    MutexLock lock(mu_);
    auto& g = wrapped_[target];
    if (!g) g = std::make_unique<GatedExecutor>(this, target);
    return g.get();
  }
  // From now on every task is dropped.
  void close() {
    MutexLock lock(mu_);
    open_ = false;
  }
  bool isOpen() const {
    MutexLock lock(mu_);
    return open_;
  }

 private:
  friend class GatedExecutor;
  mutable Mutex mu_;
  bool open_ GUARDED_BY(mu_) = true;
  std::map<net::Executor*, std::unique_ptr<GatedExecutor>> wrapped_ GUARDED_BY(mu_);
};

inline void GatedExecutor::execute(net::Task t) {
  {
    MutexLock lock(gate_->mu_);
    if (gate_->open_) {
      target_->execute(std::move(t));
      return;
    }
  }
  t = nullptr;  // dropped outside the lock; may release the gate itself
}

}  // namespace magnetar::storage::bk
