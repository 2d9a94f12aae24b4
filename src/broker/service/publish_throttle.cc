#include "broker/service/publish_throttle.h"

#include <algorithm>

#include "broker/service/server_cnx.h"

namespace magnetar::broker {

void PublishBufferThrottle::registerConnection(const std::shared_ptr<ServerCnx>& c) {
  connections_.push_back(c);
  if (paused_.load(std::memory_order_relaxed)) c->setThrottled(true);
}

void PublishBufferThrottle::unregisterConnection(ServerCnx* c) {
  connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                    [c](const std::weak_ptr<ServerCnx>& w) {
                                      auto p = w.lock();
                                      return !p || p.get() == c;
                                    }),
                     connections_.end());
}

std::vector<std::shared_ptr<ServerCnx>> PublishBufferThrottle::connections() const {
  std::vector<std::shared_ptr<ServerCnx>> out;
  out.reserve(connections_.size());
  for (const auto& w : connections_) {
    if (auto c = w.lock()) out.push_back(std::move(c));
  }
  return out;
}

bool FrameAdmission::tryCharge(int64_t bytes) {
  const int64_t limit = limitBytes_.load(std::memory_order_relaxed);
  int64_t p = pending_.load(std::memory_order_relaxed);
  while (limit <= 0 || p == 0 || p + bytes <= limit) {
    if (pending_.compare_exchange_weak(p, p + bytes, std::memory_order_relaxed)) return true;
  }
  return false;
}

bool FrameAdmission::admitOrQueue(const std::shared_ptr<ServerCnx>& cnx, int64_t bytes) {
  // Nobody overtakes a waiter: with a queue, the frame joins it.
  if (waiting_.load(std::memory_order_relaxed) == 0 && tryCharge(bytes)) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Waiter{cnx, cnx.get(), bytes});
    waiting_.fetch_add(1, std::memory_order_relaxed);
  }
  waitedTotal_.fetch_add(1, std::memory_order_relaxed);
  drain();  // charges may have come back since the check
  return false;
}

void FrameAdmission::release(int64_t bytes) {
  pending_.fetch_sub(bytes, std::memory_order_relaxed);
  if (waiting_.load(std::memory_order_relaxed) > 0) drain();
}

void FrameAdmission::cancel(const ServerCnx* cnx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->id == cnx) {
      it = queue_.erase(it);
      waiting_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      ++it;
    }
  }
}

void FrameAdmission::setLimitBytes(int64_t limitBytes) {
  limitBytes_.store(limitBytes, std::memory_order_relaxed);
  drain();
}

void FrameAdmission::drain() {
  std::vector<std::pair<std::shared_ptr<ServerCnx>, int64_t>> admitted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!queue_.empty()) {
      Waiter& w = queue_.front();
      auto cnx = w.cnx.lock();
      if (cnx && !tryCharge(w.bytes)) break;  // in order: the head waits for room
      if (cnx) admitted.emplace_back(std::move(cnx), w.bytes);
      queue_.pop_front();
      waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  for (auto& [cnx, bytes] : admitted) {
    ServerCnx* c = cnx.get();
    c->loop().execute([cnx = std::move(cnx), bytes = bytes] { cnx->frameAdmitted(bytes); });
  }
}

void PublishBufferThrottle::addAdmitted(int64_t bytes) {
  int64_t now = pending_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t limit = limitBytes();
  if (limit > 0 && now > limit && !paused_.load(std::memory_order_relaxed)) pauseAll();
}

void PublishBufferThrottle::add(int64_t bytes) {
  unflushed_ += bytes;
  int64_t now = pending_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t limit = limitBytes();
  if (limit > 0 && now > limit && !paused_.load(std::memory_order_relaxed)) pauseAll();
}

void PublishBufferThrottle::release(int64_t bytes) {
  int64_t now = pending_.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  admission_.release(bytes);
  if (now <= limitBytes() / 2 && paused_.load(std::memory_order_relaxed) &&
      !resumeQueued_.exchange(true)) {
    loop_.execute([this] { resumeAll(); });
  }
}

void PublishBufferThrottle::setLimitBytes(int64_t limitBytes) {
  limitBytes_.store(limitBytes, std::memory_order_relaxed);
  const int64_t now = pending_.load(std::memory_order_relaxed);
  if (limitBytes > 0 && now > limitBytes && !paused_.load(std::memory_order_relaxed)) {
    pauseAll();
  } else {
    resumeAll();  // checks that the pending bytes allow it
  }
}

void PublishBufferThrottle::pauseAll() {
  paused_.store(true);
  pausedTotal_.fetch_add(1, std::memory_order_relaxed);
  pausedAt_ = std::chrono::steady_clock::now();
  for (auto& w : connections_) {
    if (auto c = w.lock()) c->setThrottled(true);
  }
}

void PublishBufferThrottle::resumeAll() {
  resumeQueued_.store(false);
  const int64_t limit = limitBytes();
  if (!paused_.load() || (limit > 0 && pending_.load() > limit / 2)) return;
  paused_.store(false);
  pausedNanos_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - pausedAt_)
                             .count(),
                         std::memory_order_relaxed);
  for (auto& w : connections_) {
    if (auto c = w.lock()) c->setThrottled(false);
  }
}

PublishThrottleStats PublishBufferThrottle::stats() const {
  PublishThrottleStats s;
  s.pendingBytes = pending_.load(std::memory_order_relaxed);
  s.pausedTotal = pausedTotal_.load(std::memory_order_relaxed);
  s.pausedSeconds = static_cast<double>(pausedNanos_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

}  // namespace magnetar::broker
