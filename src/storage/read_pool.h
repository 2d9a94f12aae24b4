// ReadPool: the storage-read-N threads. Reads that miss the entry cache fetch journal records from
// disk here, coalescing nearby records of one segment into large sequential preads, verifying each
// record's crc32c, and copying out the wanted entries.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "storage/env.h"
#include "storage/journal_format.h"

namespace magnetar::storage {

using ReadResultCallback = std::function<void(Status, std::vector<std::pair<int64_t, Buffer>>)>;

// Thread: read()/forgetSegment() from any thread; callbacks run on a storage-read thread.
class ReadPool {
 public:
  ReadPool(Env* env, int threads, std::function<std::string(uint64_t)> segmentPath);
  ~ReadPool();

  // Reads entries [fromEntry, toEntry] of one ledger, at most maxEntries and about maxBytes (at
  // least one), from `runs` (in order). `key` picks the thread, so reads of one ledger stay in
  // order. Errors: kIoError, kCorruption (crc mismatch).
  void read(size_t key, std::vector<JournalRun> runs, int64_t fromEntry, int64_t toEntry,
            int maxEntries, size_t maxBytes, ReadResultCallback cb);
  // Closes the cached descriptor of a deleted segment.
  void forgetSegment(uint64_t segment);
  void stop();
  uint64_t diskReads() const { return diskReads_.load(std::memory_order_relaxed); }

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> q;
    bool stop = false;
    std::thread thread;
  };
  void loop(Worker* w, int index);
  Result<std::shared_ptr<RandomAccessFile>> file(uint64_t segment);
  Status doRead(const std::vector<JournalRun>& runs, int64_t fromEntry, int64_t toEntry,
                int maxEntries, size_t maxBytes, std::vector<std::pair<int64_t, Buffer>>* out);

  Env* env_;
  std::function<std::string(uint64_t)> segmentPath_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Mutex filesMu_;
  std::map<uint64_t, std::shared_ptr<RandomAccessFile>> files_ GUARDED_BY(filesMu_);
  std::atomic<uint64_t> diskReads_{0};
};

}  // namespace magnetar::storage
