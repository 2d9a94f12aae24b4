#include "storage/read_pool.h"

#include "base/logging.h"

namespace magnetar::storage {

namespace {
// Records of one segment closer than this are fetched with one pread.
constexpr uint64_t kCoalesceGap = 256 << 10;
}  // namespace

ReadPool::ReadPool(Env* env, int threads, std::function<std::string(uint64_t)> segmentPath)
    : env_(env), segmentPath_(std::move(segmentPath)) {
  for (int i = 0; i < std::max(1, threads); i++) {
    auto w = std::make_unique<Worker>();
    Worker* raw = w.get();
    w->thread = std::thread([this, raw, i] { loop(raw, i); });
    workers_.push_back(std::move(w));
  }
}

ReadPool::~ReadPool() { stop(); }

void ReadPool::stop() {
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
      w->stop = true;
    }
    w->cv.notify_one();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void ReadPool::loop(Worker* w, int index) {
  setThreadName("storage-read-" + std::to_string(index));
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(w->mu);
      w->cv.wait(lock, [w] { return w->stop || !w->q.empty(); });
      if (w->q.empty()) return;
      task = std::move(w->q.front());
      w->q.pop_front();
    }
    task();
  }
}

void ReadPool::read(size_t key, std::vector<JournalRun> runs, int64_t fromEntry, int64_t toEntry,
                    int maxEntries, size_t maxBytes, ReadResultCallback cb) {
  Worker* w = workers_[key % workers_.size()].get();
  {
    std::lock_guard lock(w->mu);
    w->q.push_back([this, runs = std::move(runs), fromEntry, toEntry, maxEntries, maxBytes,
                    cb = std::move(cb)] {
      std::vector<std::pair<int64_t, Buffer>> out;
      Status s = doRead(runs, fromEntry, toEntry, maxEntries, maxBytes, &out);
      cb(s, std::move(out));
    });
  }
  w->cv.notify_one();
}

void ReadPool::forgetSegment(uint64_t segment) {
  MutexLock lock(filesMu_);
  files_.erase(segment);
}

Result<std::shared_ptr<RandomAccessFile>> ReadPool::file(uint64_t segment) {
  MutexLock lock(filesMu_);
  auto it = files_.find(segment);
  if (it != files_.end()) return it->second;
  auto f = env_->openReadable(segmentPath_(segment));
  if (!f) return f.status();
  std::shared_ptr<RandomAccessFile> sp(std::move(*f));
  files_[segment] = sp;
  return sp;
}

Status ReadPool::doRead(const std::vector<JournalRun>& runs, int64_t fromEntry, int64_t toEntry,
                        int maxEntries, size_t maxBytes,
                        std::vector<std::pair<int64_t, Buffer>>* out) {
  std::vector<uint8_t> buf;
  size_t bytes = 0;
  size_t i = 0;
  while (i < runs.size() && static_cast<int>(out->size()) < maxEntries &&
         (out->empty() || bytes < maxBytes)) {
    // Span runs[i..j) of one segment with small gaps: one pread.
    size_t j = i + 1;
    while (j < runs.size() && runs[j].segment == runs[i].segment &&
           runs[j].offset >= runs[j - 1].offset + runs[j - 1].length &&
           runs[j].offset - (runs[j - 1].offset + runs[j - 1].length) <= kCoalesceGap) {
      j++;
    }
    uint64_t start = runs[i].offset;
    uint64_t end = runs[j - 1].offset + runs[j - 1].length;
    auto f = file(runs[i].segment);
    if (!f) return f.status();
    buf.resize(end - start);
    auto n = (*f)->readAt(start, buf.data(), buf.size());
    if (!n) return n.status();
    diskReads_.fetch_add(1, std::memory_order_relaxed);
    for (size_t k = i; k < j; k++) {
      const JournalRun& r = runs[k];
      uint64_t rel = r.offset - start;
      // The run comes from the index on disk: the record must be the one it names (a close after
      // a failed write may have cut the run's count), else another ledger's or position's
      // entries would be returned (found by fuzz_journal).
      JournalRun found;
      if (rel + r.length > *n || validRecordLength(buf.data() + rel, *n - rel) != r.length ||
          !decodeRunHeader(buf.data() + rel, &found) || found.ledgerId != r.ledgerId ||
          found.firstEntryId != r.firstEntryId || found.count < r.count) {
        return Status::corruption("journal record of ledger " + std::to_string(r.ledgerId) +
                                  " at segment " + std::to_string(r.segment) + " offset " +
                                  std::to_string(r.offset) + " is damaged");
      }
      size_t before = out->size();
      int64_t last = std::min<int64_t>(toEntry, r.firstEntryId + r.count - 1);
      decodeEntries(buf.data() + rel, fromEntry, last, out);
      // Trim to the limits (at least one entry overall).
      for (size_t e = before; e < out->size(); e++) {
        size_t sz = (*out)[e].second.size();
        if (static_cast<int>(e) >= maxEntries || (e > 0 && bytes + sz > maxBytes)) {
          out->resize(e);
          return Status::ok();
        }
        bytes += sz;
      }
    }
    i = j;
  }
  return Status::ok();
}

}  // namespace magnetar::storage
