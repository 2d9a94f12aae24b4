#include "broker/topic/pending_acks.h"

#include <algorithm>

namespace magnetar::broker {

namespace {
// Marked items are compacted away once there are this many and they outnumber pending ones, so
// a consumer that holds its oldest entry while acking the rest keeps O(pending) slots.
constexpr size_t kCompactAfter = 1024;
}  // namespace

std::deque<PendingAcks::Item>::iterator PendingAcks::lowerBound(storage::Position p) {
  // Consumers mostly ack in the order they received: look at the first few items before a
  // binary search over the deque (4.6 % of a busy ml-worker at max rate).
  auto it = items_.begin();
  for (int i = 0; i < 4 && it != items_.end(); ++i, ++it) {
    if (!(it->position < p)) return it;
  }
  return std::lower_bound(it, items_.end(), p,
                          [](const Item& x, storage::Position q) { return x.position < q; });
}

void PendingAcks::add(storage::Position p, const PendingAck& a) {
  if (items_.empty() || items_.back().position < p) {
    items_.push_back(Item{p, a, true});
    ++live_;
    return;
  }
  auto it = lowerBound(p);
  if (it != items_.end() && it->position == p) {
    if (it->live) return;
    *it = Item{p, a, true};
    --dead_;
    ++live_;
    return;
  }
  items_.insert(it, Item{p, a, true});
  ++live_;
}

PendingAck* PendingAcks::find(storage::Position p) {
  auto it = lowerBound(p);
  if (it == items_.end() || it->position != p || !it->live) return nullptr;
  return &it->ack;
}

bool PendingAcks::take(storage::Position p, PendingAck* out) {
  auto it = lowerBound(p);
  if (it == items_.end() || it->position != p || !it->live) return false;
  *out = it->ack;
  it->live = false;
  --live_;
  ++dead_;
  dropMarked();
  return true;
}

void PendingAcks::clear() {
  items_.clear();
  live_ = 0;
  dead_ = 0;
}

void PendingAcks::dropMarked() {
  while (!items_.empty() && !items_.front().live) {
    items_.pop_front();
    --dead_;
  }
  if (dead_ >= kCompactAfter && dead_ > live_) {
    std::erase_if(items_, [](const Item& it) { return !it.live; });
    dead_ = 0;
  }
}

}  // namespace magnetar::broker
