#include "client/receive_queue.h"

namespace magnetar::client {

void ReceiveQueue::push(Item item) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  if (waiters_.empty()) {
    items_.push_back(std::move(item));
    lock.unlock();
    cv_.notify_one();
    return;
  }
  auto waiter = std::move(waiters_.front());
  waiters_.pop_front();
  lock.unlock();
  waiter(std::move(item));  // outside the lock: it may push or pop again
}

void ReceiveQueue::popAsync(std::function<void(std::optional<Item>)> cb) {
  std::optional<Item> item;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_ && items_.empty()) {
      waiters_.push_back(std::move(cb));
      return;
    }
    if (!items_.empty()) {
      item = std::move(items_.front());
      items_.pop_front();
    }
  }
  cb(std::move(item));
}

std::optional<ReceiveQueue::Item> ReceiveQueue::pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return closed_ || !items_.empty(); };
  if (timeout.count() < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, timeout, ready)) {
    return std::nullopt;
  }
  if (items_.empty()) return std::nullopt;
  Item item = std::move(items_.front());
  items_.pop_front();
  return item;
}

size_t ReceiveQueue::removeFrom(const ConsumerImpl* from) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t before = items_.size();
  std::erase_if(items_, [from](const Item& i) { return i.from == from; });
  return before - items_.size();
}

void ReceiveQueue::close() {
  std::deque<std::function<void(std::optional<Item>)>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    items_.clear();
    waiters.swap(waiters_);
  }
  cv_.notify_all();
  for (auto& w : waiters) w(std::nullopt);
}

size_t ReceiveQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

}  // namespace magnetar::client
