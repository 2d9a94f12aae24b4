#include "client/receive_queue.h"

namespace magnetar::client {

void ReceiveQueue::push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    items_.push_back(std::move(item));
  }
  cv_.notify_one();
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    items_.clear();
  }
  cv_.notify_all();
}

size_t ReceiveQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_.size();
}

}  // namespace magnetar::client
