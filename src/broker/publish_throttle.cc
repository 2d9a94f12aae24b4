#include "broker/publish_throttle.h"

#include <algorithm>

#include "broker/server_cnx.h"

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

void PublishBufferThrottle::add(int64_t bytes) {
  int64_t now = pending_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t limit = limitBytes();
  if (limit > 0 && now > limit && !paused_.load(std::memory_order_relaxed)) pauseAll();
}

void PublishBufferThrottle::release(int64_t bytes) {
  int64_t now = pending_.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
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
