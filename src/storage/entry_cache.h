// Entry cache for tailing reads (managedLedgerCacheSizeMB for all topics together). Each ledger's
// cache holds a contiguous suffix of its log, as the same Buffers the producers sent (no copy).
// Consumed entries leave from the front; when the total is over the limit, the manager trims every
// cache from the front in proportion to its size, down to 90% of the limit.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base/thread_annotations.h"
#include "storage/managed_ledger.h"

namespace magnetar::storage {

class EntryCacheManager;

// Thread: the owning ledger's executor; the manager may evict from any thread (hence the mutex).
class EntryCache {
 public:
  explicit EntryCache(EntryCacheManager* manager) : mgr_(manager) {}
  ~EntryCache();
  // Adds the entry after the last one. REQUIRES: p follows the cached entries in log order.
  void insert(Position p, const Buffer& data);
  // If `from` is not before the first cached entry, appends the cached entries from there
  // (up to maxEntries / about maxBytes, at least one) to out and returns true.
  bool read(Position from, int maxEntries, size_t maxBytes, std::vector<Entry>* out) const;
  // Looks up each of `sorted` (ascending, no repeats) under one lock: a cached one is appended to
  // *found (in order); one before the first cached entry to *uncached (read it from storage);
  // one inside the cached range but not cached is not in the log and goes to neither.
  void readPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                     std::vector<Position>* uncached) const;
  // Drops entries <= p.
  void evictUpTo(Position p);
  // Drops the oldest entries until at least `bytes` are freed.
  void evictBytes(int64_t bytes);
  void clear();
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  size_t count() const;

 private:
  EntryCacheManager* mgr_;
  mutable Mutex mu_;
  std::deque<Entry> entries_ GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_{0};
};

// Thread: any.
class EntryCacheManager {
 public:
  explicit EntryCacheManager(int64_t maxBytes) : maxBytes_(maxBytes) {}
  std::shared_ptr<EntryCache> newCache();
  // A new limit (managedLedgerCacheSizeMB changed at run time; 0 disables the cache): the
  // caches are trimmed at once when they hold more.
  void setMaxBytes(int64_t maxBytes);
  bool enabled() const { return maxBytes() > 0; }
  int64_t size() const { return size_.load(std::memory_order_relaxed); }
  int64_t maxBytes() const { return maxBytes_.load(std::memory_order_relaxed); }
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }

 private:
  friend class EntryCache;
  void added(int64_t bytes);
  void removed(int64_t bytes) { size_.fetch_sub(bytes, std::memory_order_relaxed); }
  void evict();

  std::atomic<int64_t> maxBytes_;
  std::atomic<int64_t> size_{0};
  std::atomic<uint64_t> evictions_{0};
  Mutex mu_;
  std::vector<std::weak_ptr<EntryCache>> caches_ GUARDED_BY(mu_);
};

}  // namespace magnetar::storage
