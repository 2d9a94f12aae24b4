#include "storage/journal.h"

#include <chrono>
#include <thread>
#include <unordered_map>

#include "base/logging.h"

namespace magnetar::storage {

// A client's share of one group, in submission order.
// A stretch of a client's appends with one outcome: refused (status set), or written.
struct Journal::Chunk {
  Status status;
  bool retryable = true;
  size_t n = 0;
};
struct Journal::ClientGroup {
  std::shared_ptr<JournalClient> client;
  std::vector<Request> reqs;  // the written ones
  std::vector<JournalRun> runs;
  std::vector<Chunk> chunks;  // all, in submission order
};

Journal::Journal(Env* env, JournalOptions options, uint64_t firstSegment,
                 std::function<void(JournalCheckpoint)> onCheckpoint)
    : env_(env),
      options_(std::move(options)),
      onCheckpoint_(std::move(onCheckpoint)),
      segment_(firstSegment) {}

Journal::~Journal() { stop(); }

std::string Journal::segmentPath(uint64_t segment) const {
  return options_.directory + "/" + segmentFileName(segment);
}

Status Journal::start() {
  Status s = env_->createDirs(options_.directory);
  if (!s) return s;
  s = rollSegment();
  if (!s) {
    // A full disk must not stop the start (reads are served): the first group tries again.
    MLOG_WARN("journal: starting segment {} failed: {}", segment_.load(), s.toString());
    noSpace_.store(s.code() == StatusCode::kNoSpace, std::memory_order_relaxed);
    offset_ = kSegmentHeaderSize;
  }
  checkpointSegment_ = segment_.load();
  checkpointOffset_ = offset_;
  lastCheckpoint_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void Journal::append(const std::shared_ptr<JournalClient>& client, int64_t ledgerId,
                     int64_t entryId, Buffer data) {
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (queue_.empty()) firstArrival_ = std::chrono::steady_clock::now();
    int64_t before = queuedBytes_;
    queuedBytes_ += static_cast<int64_t>(data.size());
    queue_.push_back(Request{client, ledgerId, entryId, std::move(data)});
    // Wake only a sleeping journal thread, or one waiting to grow a group that is now full.
    wake = (waiting_ && queue_.size() == 1) ||
           (before < options_.maxGroupBytes && queuedBytes_ >= options_.maxGroupBytes);
  }
  if (wake) cv_.notify_one();
}

void Journal::appendRelocated(RelocatedRecords r) {
  {
    MutexLock lock(mu_);
    if (!stop_) {
      relocated_.push_back(std::move(r));
      cv_.notify_one();
      return;
    }
  }
  r.done(Status::closed("journal stopped"), 0, {});
}

void Journal::stop() {
  {
    MutexLock lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Journal::run() {
  setThreadName("journal");
  std::vector<Request> batch;
  std::vector<RelocatedRecords> relocated;
  for (;;) {
    {
      UniqueLock lock(mu_);
      auto due = lastCheckpoint_ + std::chrono::milliseconds(options_.checkpointIntervalMs);
      waiting_ = true;
      cv_.wait_until(lock.native(), due, [&]() REQUIRES(mu_) {
        return stop_ || !queue_.empty() || !relocated_.empty();
      });
      if (!queue_.empty() && options_.maxGroupWaitMs > 0 && !stop_) {
        auto until = firstArrival_ + std::chrono::milliseconds(options_.maxGroupWaitMs);
        cv_.wait_until(lock.native(), until, [&]() REQUIRES(mu_) {
          return stop_ || queuedBytes_ >= options_.maxGroupBytes;
        });
      }
      waiting_ = false;
      takeGroup(batch);
      relocated.swap(relocated_);
      if (batch.empty() && relocated.empty() && stop_) break;
    }
    if (!batch.empty() || !relocated.empty()) writeGroup(batch, relocated);
    batch.clear();
    relocated.clear();
    maybeCheckpoint(false);
  }
  maybeCheckpoint(true);
}

// Moves the next group out of the queue: everything, or about maxGroupBytes when more is queued
// (bounds the write buffer and the latency of the oldest entries).
void Journal::takeGroup(std::vector<Request>& batch) {
  if (queuedBytes_ <= options_.maxGroupBytes) {
    batch.swap(queue_);
    queuedBytes_ = 0;
    return;
  }
  int64_t taken = 0;
  size_t k = 0;
  while (k < queue_.size() && taken < options_.maxGroupBytes) {
    taken += static_cast<int64_t>(queue_[k++].data.size());
  }
  batch.assign(std::make_move_iterator(queue_.begin()),
               std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(k)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(k));
  queuedBytes_ -= taken;
}

void Journal::writeGroup(std::vector<Request>& batch, std::vector<RelocatedRecords>& relocated) {
  std::vector<ClientGroup> groups = groupByClient(batch);
  buf_.clear();
  const size_t written = encodeRuns(groups);
  // Records copied by compaction go after the entries, as they are.
  std::vector<std::vector<uint64_t>> relocatedAt(relocated.size());
  for (size_t k = 0; k < relocated.size(); k++) {
    for (const std::string& rec : relocated[k].records) {
      relocatedAt[k].push_back(buf_.size());
      buf_.append(rec);
    }
  }
  Status st = writeBuffer(!relocated.empty());
  bool clean = true;
  if (st) {
    for (ClientGroup& g : groups) {
      for (JournalRun& r : g.runs) {
        r.segment = segment_.load();
        r.offset += offset_;
        pendingRuns_.push_back(r);
      }
    }
    for (auto& at : relocatedAt) {
      for (uint64_t& o : at) o += offset_;
    }
    offset_ += buf_.size();
    groups_.fetch_add(1, std::memory_order_relaxed);
    entries_.fetch_add(written, std::memory_order_relaxed);
    bytes_.fetch_add(buf_.size(), std::memory_order_relaxed);
    if (!buf_.empty()) noSpace_.store(false, std::memory_order_relaxed);
  } else {
    clean = groupFailed(groups, st, written);
  }
  for (ClientGroup& g : groups) {
    for (Chunk& c : g.chunks) {
      if (!c.status) {
        g.client->onJournalWritten(c.status, {}, c.n, c.retryable);
      } else if (st) {
        g.client->onJournalWritten(Status::ok(), std::move(g.runs), c.n, true);
        g.runs.clear();
      } else {
        g.client->onJournalWritten(st, {}, c.n, clean);
      }
    }
  }
  for (size_t k = 0; k < relocated.size(); k++) {
    relocated[k].done(st, segment_.load(),
                      st ? std::move(relocatedAt[k]) : std::vector<uint64_t>{});
  }
}

std::vector<Journal::ClientGroup> Journal::groupByClient(std::vector<Request>& batch) {
  // Entries of a ledger whose write failed are refused until its retry (the first failed entry
  // id) comes: nothing after a gap is written.
  std::vector<ClientGroup> groups;
  std::unordered_map<JournalClient*, size_t> index;
  for (Request& r : batch) {
    auto [it, fresh] = index.try_emplace(r.client.get(), groups.size());
    if (fresh) groups.push_back(ClientGroup{r.client, {}, {}, {}});
    ClientGroup& g = groups[it->second];
    // Almost always empty: no lookup per entry on the healthy path.
    auto f = failedLedgers_.empty() ? failedLedgers_.end() : failedLedgers_.find(r.ledgerId);
    if (f != failedLedgers_.end()) {
      if (f->second.first >= 0 && r.entryId == f->second.first) {
        failedLedgers_.erase(f);
      } else {
        g.chunks.push_back(Chunk{f->second.second, f->second.first >= 0, 1});
        continue;
      }
    }
    if (g.chunks.empty() || !g.chunks.back().status) {
      g.chunks.push_back(Chunk{Status::ok(), true, 0});
    }
    g.chunks.back().n++;
    g.reqs.push_back(std::move(r));
  }
  return groups;
}

size_t Journal::encodeRuns(std::vector<ClientGroup>& groups) {
  size_t written = 0;
  for (ClientGroup& g : groups) {
    size_t i = 0;
    while (i < g.reqs.size()) {
      size_t j = i + 1;
      size_t bytes = g.reqs[i].data.size();
      while (j < g.reqs.size() && g.reqs[j].ledgerId == g.reqs[i].ledgerId &&
             g.reqs[j].entryId == g.reqs[j - 1].entryId + 1 &&
             bytes + g.reqs[j].data.size() <= options_.maxRecordBytes) {
        bytes += g.reqs[j].data.size();
        j++;
      }
      JournalRun run;
      run.ledgerId = g.reqs[i].ledgerId;
      run.firstEntryId = g.reqs[i].entryId;
      run.count = static_cast<int32_t>(j - i);
      run.offset = buf_.size();  // relative for now
      run.length = static_cast<uint32_t>(
          appendEntriesRecord(&buf_, run.ledgerId, run.firstEntryId, j - i,
                              [&g, i](size_t k) -> const Buffer& { return g.reqs[i + k].data; }));
      run.dataBytes = static_cast<int64_t>(bytes);
      g.runs.push_back(run);
      i = j;
    }
    written += g.reqs.size();
  }
  return written;
}

Status Journal::writeBuffer(bool relocating) {
  if (buf_.empty()) return Status::ok();
  Status st;
  if (segmentBroken_ || !haveFile_ ||
      (offset_ > kSegmentHeaderSize &&
       offset_ + buf_.size() > static_cast<uint64_t>(options_.segmentSizeBytes))) {
    st = rollSegment();
  }
  if (options_.testDelayMicrosPerGroup > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(options_.testDelayMicrosPerGroup));
  }
  if (st) st = file_->writeAt(offset_, buf_.data(), buf_.size());
  // Copies must be on disk before the index points at them and the old segment goes.
  if (st && (options_.syncData || relocating)) st = file_->sync();
  return st;
}

bool Journal::groupFailed(const std::vector<ClientGroup>& groups, const Status& st,
                          size_t written) {
  MLOG_WARN("journal: group of {} entries failed: {}", written, st.toString());
  writeErrors_.fetch_add(1, std::memory_order_relaxed);
  noSpace_.store(st.code() == StatusCode::kNoSpace, std::memory_order_relaxed);
  // Cut what may have reached the file; if that fails too, continue in a new segment, and the
  // failed ledgers take no more writes (their bytes may be found at recovery).
  bool clean = true;
  if (haveFile_ && !file_->truncate(offset_)) {
    segmentBroken_ = true;
    clean = false;
  }
  for (const ClientGroup& g : groups) {
    for (const JournalRun& r : g.runs) {
      failedLedgers_.try_emplace(r.ledgerId, clean ? r.firstEntryId : -1, st);
    }
  }
  return clean;
}

Status Journal::rollSegment() {
  uint64_t next = haveFile_ ? segment_.load() + 1 : segment_.load();
  if (haveFile_ && options_.syncData && !segmentBroken_) {
    Status s = file_->sync();
    if (!s) return s;
  }
  auto f = env_->openWritable(segmentPath(next));
  if (!f) return f.status();
  uint8_t hdr[kSegmentHeaderSize];
  encodeSegmentHeader(next, hdr);
  Status s = (*f)->truncate(0);
  if (s) s = (*f)->writeAt(0, hdr, sizeof(hdr));
  if (s && options_.syncData) s = (*f)->sync();
  if (s && options_.syncData) s = env_->syncDir(options_.directory);
  if (!s) return s;
  file_ = std::move(*f);
  segment_.store(next);
  offset_ = kSegmentHeaderSize;
  haveFile_ = true;
  segmentBroken_ = false;
  return Status::ok();
}

void Journal::maybeCheckpoint(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && now < lastCheckpoint_ + std::chrono::milliseconds(options_.checkpointIntervalMs)) {
    return;
  }
  lastCheckpoint_ = now;
  if (pendingRuns_.empty() && checkpointSegment_ == segment_.load() &&
      checkpointOffset_ == offset_) {
    return;
  }
  // The checkpoint claims everything before it is on disk: make it so even without journalSyncData.
  if (haveFile_ && !segmentBroken_ && !options_.syncData && !file_->sync()) return;
  JournalCheckpoint cp;
  cp.runs.swap(pendingRuns_);
  cp.segment = segment_.load();
  cp.offset = offset_;
  checkpointSegment_ = cp.segment;
  checkpointOffset_ = cp.offset;
  onCheckpoint_(std::move(cp));
}

}  // namespace magnetar::storage
