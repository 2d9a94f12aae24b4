#include "storage/entry_cache.h"

#include <algorithm>

namespace magnetar::storage {

EntryCache::~EntryCache() { clear(); }

void EntryCache::insert(Position p, const Buffer& data) {
  if (!mgr_->enabled()) return;
  {
    MutexLock lock(mu_);
    entries_.push_back(Entry{p, data});
  }
  bytes_.fetch_add(static_cast<int64_t>(data.size()), std::memory_order_relaxed);
  mgr_->added(static_cast<int64_t>(data.size()));
}

bool EntryCache::read(Position from, int maxEntries, size_t maxBytes,
                      std::vector<Entry>* out) const {
  MutexLock lock(mu_);
  if (entries_.empty() || from < entries_.front().position) return false;
  auto it = std::lower_bound(entries_.begin(), entries_.end(), from,
                             [](const Entry& e, Position p) { return e.position < p; });
  size_t bytes = 0;
  int n = 0;
  auto end = it;
  for (; end != entries_.end() && n < maxEntries; ++end, ++n) {
    if (n > 0 && bytes + end->data.size() > maxBytes) break;
    bytes += end->data.size();
  }
  out->reserve(out->size() + static_cast<size_t>(n));  // one allocation per read, not per doubling
  out->insert(out->end(), it, end);
  return true;
}

void EntryCache::readPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                               std::vector<Position>* uncached) const {
  MutexLock lock(mu_);
  auto it = entries_.begin();
  for (const Position& p : sorted) {
    if (entries_.empty() || p < entries_.front().position) {
      uncached->push_back(p);
      continue;
    }
    // Replayed positions are often a few entries apart: step first, search when far.
    int steps = 0;
    while (it != entries_.end() && it->position < p && steps < 8) {
      ++it;
      ++steps;
    }
    if (it != entries_.end() && it->position < p) {
      it = std::lower_bound(it, entries_.end(), p,
                            [](const Entry& e, Position q) { return e.position < q; });
    }
    if (it != entries_.end() && it->position == p) found->push_back(*it);
  }
}

void EntryCache::evictUpTo(Position p) {
  int64_t freed = 0;
  {
    MutexLock lock(mu_);
    while (!entries_.empty() && entries_.front().position <= p) {
      freed += static_cast<int64_t>(entries_.front().data.size());
      entries_.pop_front();
    }
  }
  bytes_.fetch_sub(freed, std::memory_order_relaxed);
  mgr_->removed(freed);
}

void EntryCache::evictBytes(int64_t bytes) {
  int64_t freed = 0;
  {
    MutexLock lock(mu_);
    while (!entries_.empty() && freed < bytes) {
      freed += static_cast<int64_t>(entries_.front().data.size());
      entries_.pop_front();
    }
  }
  bytes_.fetch_sub(freed, std::memory_order_relaxed);
  mgr_->removed(freed);
}

void EntryCache::clear() { evictBytes(INT64_MAX); }

size_t EntryCache::count() const {
  MutexLock lock(mu_);
  return entries_.size();
}

std::shared_ptr<EntryCache> EntryCacheManager::newCache() {
  auto c = std::make_shared<EntryCache>(this);
  MutexLock lock(mu_);
  caches_.push_back(c);
  return c;
}

void EntryCacheManager::setMaxBytes(int64_t maxBytes) {
  maxBytes_.store(maxBytes, std::memory_order_relaxed);
  if (size() > maxBytes) evict();
}

void EntryCacheManager::added(int64_t bytes) {
  if (size_.fetch_add(bytes, std::memory_order_relaxed) + bytes > maxBytes()) evict();
}

void EntryCacheManager::evict() {
  std::vector<std::shared_ptr<EntryCache>> live;
  {
    MutexLock lock(mu_);
    auto out = caches_.begin();
    for (auto& w : caches_) {
      if (auto c = w.lock()) {
        live.push_back(std::move(c));
        *out++ = w;
      }
    }
    caches_.erase(out, caches_.end());
  }
  const int64_t total = size();
  const int64_t limit = maxBytes();
  if (total <= limit) return;
  const int64_t target = std::max<int64_t>(limit, 0) * 9 / 10;
  evictions_.fetch_add(1, std::memory_order_relaxed);
  for (auto& c : live) {
    int64_t b = c->bytes();
    int64_t excess = b - static_cast<int64_t>(static_cast<double>(b) * target / total);
    if (excess > 0) c->evictBytes(excess);
  }
}

}  // namespace magnetar::storage
