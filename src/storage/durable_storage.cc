#include "storage/durable_storage.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "base/logging.h"
#include "storage/managed_ledger_impl.h"
#include "storage/rocksdb_metadata_store.h"

namespace magnetar::storage {

DurableManagedLedgerFactory::DurableManagedLedgerFactory(const StorageOptions& options)
    : options_(options), env_(options.env ? options.env : Env::posix()) {}

Result<std::unique_ptr<DurableManagedLedgerFactory>> DurableManagedLedgerFactory::open(
    const StorageOptions& options) {
  std::unique_ptr<DurableManagedLedgerFactory> f(new DurableManagedLedgerFactory(options));
  if (options.metadataStore) {
    f->meta_ = options.metadataStore;
  } else {
    Status s = f->env_->createDirs(options.metadataDirectory);
    if (!s) return s;
    auto db = RocksDbMetadataStore::open(options.metadataDirectory, options.journalSyncData);
    if (!db) return db.status();
    f->ownedMeta_ = std::move(*db);
    f->meta_ = f->ownedMeta_.get();
  }
  Status s = f->recover();
  if (!s) return s;
  s = f->start();
  if (!s) return s;
  f->post([raw = f.get()] { raw->bgReclaim(); });
  if ((options.minorCompactionThreshold > 0 && options.minorCompactionInterval > 0) ||
      (options.majorCompactionThreshold > 0 && options.majorCompactionInterval > 0)) {
    f->gc_ = std::thread([raw = f.get()] { raw->gcLoop(); });
  }
  return f;
}

Status DurableManagedLedgerFactory::start() {
  cache_ = std::make_unique<EntryCacheManager>(options_.managedLedgerCacheSizeMB * (1ll << 20));
  JournalOptions jo;
  jo.directory = options_.journalDirectory;
  jo.syncData = options_.journalSyncData;
  jo.maxGroupWaitMs = options_.journalMaxGroupWaitMSec;
  jo.maxGroupBytes = options_.journalMaxGroupBytes;
  jo.segmentSizeBytes = options_.journalSegmentSizeBytes;
  jo.checkpointIntervalMs = options_.checkpointIntervalMs;
  jo.testDelayMicrosPerGroup = options_.testJournalDelayMicros;
  journal_ = std::make_unique<Journal>(env_, jo, firstSegment_, [this](JournalCheckpoint cp) {
    post([this, cp = std::move(cp)]() mutable { bgCheckpoint(std::move(cp)); });
  });
  readPool_ = std::make_unique<ReadPool>(
      env_, options_.numReadThreads, [this](uint64_t seg) { return journal_->segmentPath(seg); });
  knownSegments_.insert(firstSegment_);
  // Ticks at least every diskCheckInterval, so a fast writer cannot fill the disk between checks.
  bg_ = std::make_unique<TaskThread>("storage-bg",
                                     std::min(options_.tickIntervalMs, options_.diskCheckInterval),
                                     [this] { bgTick(); });
  Status s = journal_->start();
  if (!s) {
    bg_->stop();
    readPool_->stop();
    return s;
  }
  return Status::ok();
}

DurableManagedLedgerFactory::~DurableManagedLedgerFactory() { shutdown(); }

void DurableManagedLedgerFactory::shutdown() {
  {
    MutexLock lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(gcWaitMu_);
    gcStop_ = true;
  }
  gcCv_.notify_all();
  if (gc_.joinable()) gc_.join();
  if (journal_) journal_->stop();  // writes what is queued; the last checkpoint goes to bg
  if (bg_) bg_->stop();
  if (readPool_) readPool_->stop();
}

bool DurableManagedLedgerFactory::flushCursors(std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<ManagedLedgerImpl>> ledgers;
  {
    MutexLock lock(mu_);
    for (const auto& [_, ml] : open_) {
      if (ml) ledgers.push_back(ml);
    }
  }
  if (ledgers.empty()) return true;
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    size_t left;
  };
  auto w = std::make_shared<Wait>();
  w->left = ledgers.size();
  for (auto& ml : ledgers) {
    ml->executor()->execute([ml, w] {
      ml->flushDeferredCursors([w](const Status&) {
        std::lock_guard<std::mutex> lock(w->mu);
        if (--w->left == 0) w->cv.notify_all();
      });
    });
  }
  std::unique_lock<std::mutex> lock(w->mu);
  return w->cv.wait_for(lock, timeout, [&] { return w->left == 0; });
}

void DurableManagedLedgerFactory::asyncOpen(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  {
    MutexLock lock(mu_);
    if (shutdown_) {
      executor->execute([cb = std::move(cb)] { cb(Status::closed("storage shut down")); });
      return;
    }
  }
  post([this, name, executor, cb = std::move(cb)]() mutable {
    bgOpen(name, executor, std::move(cb));
  });
}

void DurableManagedLedgerFactory::bgOpen(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  ManagedLedgerState state;
  {
    MutexLock lock(mu_);
    auto o = open_.find(name);
    if (o != open_.end()) {
      if (auto ml = o->second) {
        if (!ml->isClosing()) {
          executor->execute([cb = std::move(cb), ml] { cb(std::shared_ptr<ManagedLedger>(ml)); });
          return;
        }
        // Closing: wait until its state comes back (it is released through this thread).
        post([this, name, executor, cb = std::move(cb)]() mutable {
          bgOpen(name, executor, std::move(cb));
        });
        return;
      }
    }
    auto d = dormant_.find(name);
    if (d != dormant_.end()) {
      state = std::move(d->second);
      dormant_.erase(d);
    }
  }
  // Close the previous current ledger at what it holds, drop empty closed ledgers, add a new one.
  // A terminated ledger takes no more adds: it keeps its ledgers, empty ones too (its terminated
  // position may name one), and gets no new one (Pulsar's ManagedLedgerImpl.initializeBookKeeper
  // for a Terminated ledger; BkManagedLedger::open the same).
  const bool terminated = state.terminatedAt.has_value();
  std::vector<int64_t> dropped;
  const int64_t openedMs = wallClockMs();
  for (auto it = state.ledgers.begin(); it != state.ledgers.end();) {
    StoredLedger& l = it->second;
    if (l.meta.closedAt < 0) {
      l.meta.closedAt = l.index.entries();
      l.meta.closedMs = openedMs;
    }
    if (!terminated && std::min(l.meta.closedAt, l.index.entries()) == 0) {
      dropped.push_back(it->first);
      it = state.ledgers.erase(it);
    } else {
      ++it;
    }
  }
  const int64_t id = terminated ? -1 : allocateLedgerId();
  if (!terminated) state.ledgers[id].meta = LedgerMeta{id, -1, openedMs, 0};
  std::vector<LedgerMeta> list;
  for (const auto& [_, l] : state.ledgers) list.push_back(l.meta);
  std::vector<MetadataOp> ops{MetadataOp::put(mlKey(name), encodeLedgerList(list))};
  for (int64_t d : dropped) ops.push_back(MetadataOp::delPrefix(indexLedgerPrefix(d)));
  Status s = bgWrite(std::move(ops), id, name);
  if (!s) {
    if (!terminated) state.ledgers.erase(id);
    MutexLock lock(mu_);
    dormant_[name] = std::move(state);
    executor->execute([cb = std::move(cb), s] { cb(s); });
    return;
  }
  bgForgetLedgers(dropped);
  auto ml = std::make_shared<ManagedLedgerImpl>(this, name, executor, std::move(state));
  ml->init();
  {
    MutexLock lock(mu_);
    open_[name] = ml;
  }
  executor->execute([cb = std::move(cb), ml] { cb(std::shared_ptr<ManagedLedger>(ml)); });
}

std::vector<std::string> DurableManagedLedgerFactory::ledgerNames() const {
  MutexLock lock(mu_);
  std::set<std::string> names;
  for (const auto& [n, _] : dormant_) names.insert(n);
  for (const auto& [n, _] : open_) names.insert(n);
  return std::vector<std::string>(names.begin(), names.end());
}

void DurableManagedLedgerFactory::released(const std::string& name, ManagedLedgerImpl* ml,
                                           ManagedLedgerState state) {
  MutexLock lock(mu_);
  dormant_[name] = std::move(state);
  auto o = open_.find(name);
  if (o != open_.end() && o->second.get() == ml) open_.erase(o);
}

void DurableManagedLedgerFactory::deleted(const std::string& name, ManagedLedgerImpl* ml) {
  MutexLock lock(mu_);
  dormant_.erase(name);
  auto o = open_.find(name);
  if (o != open_.end() && o->second.get() == ml) open_.erase(o);
}

Status DurableManagedLedgerFactory::bgWrite(std::vector<MetadataOp> ops, int64_t newLedgerId,
                                            const std::string& owner) {
  uint64_t next = persistedNextLedgerId_;
  if (newLedgerId >= 0 && static_cast<uint64_t>(newLedgerId) + 1 > next) {
    next = static_cast<uint64_t>(newLedgerId) + 1;
    ops.push_back(MetadataOp::put(kNextLedgerIdKey, encodeU64(next)));
  }
  Status s = meta_->write(ops);
  if (s) {
    persistedNextLedgerId_ = next;
    if (newLedgerId >= 0) {
      liveLedgers_.insert(newLedgerId);
      ledgerOwner_[newLedgerId] = owner;
    }
  } else {
    metadataWriteErrors_.fetch_add(1, std::memory_order_relaxed);
  }
  return s;
}

void DurableManagedLedgerFactory::bgAddRun(const JournalRun& r) {
  if (segmentRuns_[r.segment].insert_or_assign(r.offset, r).second) {
    liveRuns_.fetch_add(1, std::memory_order_relaxed);
  }
  ledgerSegments_[r.ledgerId].insert(r.segment);
}

void DurableManagedLedgerFactory::bgCheckpoint(JournalCheckpoint cp) {
  if (!failedRuns_.empty()) {
    cp.runs.insert(cp.runs.begin(), failedRuns_.begin(), failedRuns_.end());
    failedRuns_.clear();
  }
  std::vector<MetadataOp> ops = failedOps_;
  for (const JournalRun& r : cp.runs) {
    if (!liveLedgers_.count(r.ledgerId)) continue;  // deleted since it was written
    ops.push_back(MetadataOp::put(indexKey(r.ledgerId, r.firstEntryId), encodeRun(r)));
    bgAddRun(r);
  }
  ops.push_back(MetadataOp::put(kCheckpointKey, encodeCheckpoint(cp.segment, cp.offset)));
  Status s = meta_->write(ops);
  if (!s) {
    // Keep the runs: the next checkpoint writes them (recovery replays from the old position).
    metadataWriteErrors_.fetch_add(1, std::memory_order_relaxed);
    MLOG_WARN("storage: checkpoint failed: {}", s.toString());
    failedRuns_ = std::move(cp.runs);
    return;
  }
  failedOps_.clear();
  uint64_t last = knownSegments_.empty() ? firstSegment_ : *knownSegments_.rbegin();
  for (uint64_t seg = last; seg <= cp.segment; seg++) knownSegments_.insert(seg);
  checkpointSegment_ = cp.segment;
  bgReclaim();
}

void DurableManagedLedgerFactory::bgForgetLedgers(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    if (!liveLedgers_.erase(id)) continue;
    ledgerOwner_.erase(id);
    ledgersDeleted_.fetch_add(1, std::memory_order_relaxed);
    auto it = ledgerSegments_.find(id);
    if (it == ledgerSegments_.end()) continue;
    for (uint64_t seg : it->second) {
      auto& runs = segmentRuns_[seg];
      const auto gone =
          std::erase_if(runs, [id](const auto& kv) { return kv.second.ledgerId == id; });
      liveRuns_.fetch_sub(static_cast<int64_t>(gone), std::memory_order_relaxed);
    }
    ledgerSegments_.erase(it);
  }
}

// Deletes journal segments before the checkpoint that hold no live run.
void DurableManagedLedgerFactory::bgReclaim() {
  for (auto it = knownSegments_.begin(); it != knownSegments_.end() && *it < checkpointSegment_;) {
    auto refs = segmentRuns_.find(*it);
    if ((refs != segmentRuns_.end() && !refs->second.empty()) || compacting_.count(*it)) {
      ++it;
      continue;
    }
    std::string path = journal_->segmentPath(*it);
    Status s = env_->removeFile(path);
    if (!s && env_->fileSize(path).isOk()) {
      MLOG_WARN("storage: removing segment {} failed: {}", *it, s.toString());
      ++it;
      continue;
    }
    readPool_->forgetSegment(*it);
    if (refs != segmentRuns_.end()) segmentRuns_.erase(refs);
    segmentsDeleted_.fetch_add(1, std::memory_order_relaxed);
    it = knownSegments_.erase(it);
  }
}

void DurableManagedLedgerFactory::bgTick() {
  bgCheckDisk();
  auto now = std::chrono::steady_clock::now();
  if (now < nextLedgerTick_) return;
  nextLedgerTick_ = now + std::chrono::milliseconds(options_.tickIntervalMs);
  std::vector<std::shared_ptr<ManagedLedgerImpl>> live;
  {
    MutexLock lock(mu_);
    for (auto& [_, ml] : open_) live.push_back(ml);
  }
  for (auto& ml : live) {
    ml->executor()->execute([ml] { ml->onTick(); });
  }
}

// The low-disk watermark: the fuller of the journal's and the metadata's file systems.
void DurableManagedLedgerFactory::bgCheckDisk() {
  auto now = std::chrono::steady_clock::now();
  if (now < nextDiskCheck_) return;
  nextDiskCheck_ = now + std::chrono::milliseconds(options_.diskCheckInterval);
  double usage = 0;
  for (const std::string* dir : {&options_.journalDirectory, &options_.metadataDirectory}) {
    if (dir->empty()) continue;
    auto d = env_->diskSpace(*dir);
    if (!d || d->totalBytes == 0) continue;
    usage = std::max(
        usage, 1.0 - static_cast<double>(d->availableBytes) / static_cast<double>(d->totalBytes));
  }
  diskUsagePpm_.store(static_cast<int64_t>(usage * 1e6), std::memory_order_relaxed);
  if (journal_->noSpace()) journalHasRoomAgain();
  if (options_.diskUsageThreshold >= 1) return;
  bool above = aboveWatermark_.load();
  if (!above && usage >= options_.diskUsageThreshold) {
    MLOG_WARN(
        "storage: disk usage {:.1f}% is above diskUsageThreshold {:.1f}%: publishes are "
        "refused until it is below diskUsageLwmThreshold {:.1f}%",
        usage * 100, options_.diskUsageThreshold * 100, options_.diskUsageLwmThreshold * 100);
    aboveWatermark_ = true;
  } else if (above &&
             usage < std::min(options_.diskUsageLwmThreshold, options_.diskUsageThreshold)) {
    MLOG_INFO("storage: disk usage {:.1f}% is below diskUsageLwmThreshold: publishes accepted",
              usage * 100);
    aboveWatermark_ = false;
  }
}

bool DurableManagedLedgerFactory::journalHasRoomAgain() const {
  // Room for a few groups: the next add tries again.
  auto d = env_->diskSpace(options_.journalDirectory);
  if (!d || static_cast<int64_t>(d->availableBytes) <
                std::max<int64_t>(4 << 20, 2 * options_.journalMaxGroupBytes)) {
    return false;
  }
  if (journal_->noSpace()) {
    journal_->clearNoSpace();
    MLOG_INFO("storage: journal disk has room again: publishes accepted");
  }
  return true;
}

Status DurableManagedLedgerFactory::writeRefusal() const {
  if (aboveWatermark_.load(std::memory_order_relaxed)) {
    return Status::noSpace(
        "disk usage " + std::to_string(diskUsagePpm_.load(std::memory_order_relaxed) / 10000) +
        "% is above diskUsageThreshold: publishing refused until space is freed");
  }
  if (journal_ && journal_->noSpace()) {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t last = lastNoSpaceCheck_.load(std::memory_order_relaxed);
    const int64_t every =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(kNoSpaceRecheck).count();
    // One caller per interval looks (the others keep refusing); the bg disk check looks too.
    if (now - last < every ||
        !lastNoSpaceCheck_.compare_exchange_strong(last, now, std::memory_order_relaxed) ||
        !journalHasRoomAgain()) {
      return Status::noSpace("journal disk full: publishing refused until space is freed");
    }
  }
  return Status::ok();
}

bool DurableManagedLedgerFactory::onBg(const std::function<void()>& fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  post([fn, done] {
    fn();
    done->set_value();
  });
  while (f.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(gcWaitMu_);
    if (gcStop_) return false;
  }
  return true;
}

void DurableManagedLedgerFactory::gcLoop() {
  setThreadName("storage-gc");
  using Clock = std::chrono::steady_clock;
  auto nextMinor = Clock::now() + std::chrono::seconds(options_.minorCompactionInterval);
  auto nextMajor = Clock::now() + std::chrono::seconds(options_.majorCompactionInterval);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(gcWaitMu_);
      gcCv_.wait_for(lock, std::chrono::seconds(1), [this] { return gcStop_; });
      if (gcStop_) return;
    }
    auto now = Clock::now();
    double threshold = 0;
    if (options_.majorCompactionInterval > 0 && now >= nextMajor) {
      threshold = options_.majorCompactionThreshold;
      nextMajor = now + std::chrono::seconds(options_.majorCompactionInterval);
      nextMinor = now + std::chrono::seconds(options_.minorCompactionInterval);
    } else if (options_.minorCompactionInterval > 0 && now >= nextMinor) {
      threshold = options_.minorCompactionThreshold;
      nextMinor = now + std::chrono::seconds(options_.minorCompactionInterval);
    }
    if (threshold <= 0) continue;
    auto n = compactSegments(threshold);
    if (!n) MLOG_WARN("storage: journal compaction failed: {}", n.status().toString());
  }
}

Result<int> DurableManagedLedgerFactory::compactSegments(double threshold) {
  MutexLock one(gcMu_);
  std::vector<std::pair<uint64_t, std::vector<JournalRun>>> todo;
  bool ok = onBg([&] {
    if (!failedRuns_.empty()) return;  // the index is behind the journal: wait
    for (uint64_t seg : knownSegments_) {
      if (seg >= checkpointSegment_ || seg >= journal_->currentSegment()) break;
      auto size = env_->fileSize(journal_->segmentPath(seg));
      if (!size || *size <= kSegmentHeaderSize) continue;
      auto it = segmentRuns_.find(seg);
      if (it == segmentRuns_.end() || it->second.empty()) continue;  // bgReclaim deletes it
      uint64_t live = 0;
      for (const auto& [_, r] : it->second) live += r.length;
      if (static_cast<double>(live) >= threshold * static_cast<double>(*size)) continue;
      std::vector<JournalRun> runs;
      for (const auto& [_, r] : it->second) runs.push_back(r);
      todo.emplace_back(seg, std::move(runs));
      compacting_.insert(seg);
    }
  });
  if (!ok) return Status::closed("storage shut down");
  int done = 0;
  Status result;
  for (auto& [seg, runs] : todo) {
    Status s = result ? compactSegment(seg, std::move(runs)) : result;
    if (s) {
      done++;
    } else if (result) {
      result = s;
    }
  }
  if (!todo.empty()) {
    // Reads that were given the old locations just before the switch finish first.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    onBg([&] {
      for (auto& [seg, _] : todo) compacting_.erase(seg);
      bgReclaim();
    });
  }
  if (!result) return result;
  return done;
}

// Copies a segment's live records to the journal's end in batches, each durable (fdatasync)
// before the index names the copies (one synced metadata write) and the ledgers switch to them;
// the segment is deleted by bgReclaim once no live run is left in it. A crash at any point
// leaves every live entry in the old segment, the new one, or both.
Status DurableManagedLedgerFactory::compactSegment(uint64_t segment, std::vector<JournalRun> runs) {
  auto file = env_->openReadable(journal_->segmentPath(segment));
  if (!file) return file.status();
  std::sort(runs.begin(), runs.end(),
            [](const JournalRun& a, const JournalRun& b) { return a.offset < b.offset; });
  const auto start = std::chrono::steady_clock::now();
  uint64_t copied = 0;
  size_t i = 0;
  while (i < runs.size()) {
    if (gcStopping()) return Status::closed("storage shut down");
    std::vector<JournalRun> batch;
    RelocatedRecords recs;
    size_t bytes = 0;
    if (Status s = readCompactionBatch(**file, segment, runs, &i, &batch, &recs, &bytes); !s) {
      return s;
    }
    auto written = std::make_shared<std::promise<std::pair<Status, std::vector<Relocation>>>>();
    auto fut = written->get_future();
    recs.done = [written, batch](const Status& st, uint64_t seg,
                                 const std::vector<uint64_t>& offsets) {
      std::vector<Relocation> moved;
      if (st) {
        moved.reserve(batch.size());
        for (size_t k = 0; k < batch.size(); k++) moved.push_back({batch[k], seg, offsets[k]});
      }
      written->set_value({st, std::move(moved)});
    };
    journal_->appendRelocated(std::move(recs));
    auto [st, moved] = fut.get();
    if (!st) return st;
    if (Status s = applyRelocations(std::move(moved)); !s) return s;
    copied += bytes;
    compactedBytes_.fetch_add(bytes, std::memory_order_relaxed);
    // Rate limit: no faster than compactionRateByBytes on average.
    auto due =
        start + std::chrono::microseconds(static_cast<int64_t>(
                    static_cast<double>(copied) * 1e6 /
                    static_cast<double>(std::max<int64_t>(1, options_.compactionRateByBytes))));
    std::this_thread::sleep_until(due);
  }
  segmentsCompacted_.fetch_add(1, std::memory_order_relaxed);
  MLOG_INFO("storage: compacted journal segment {}: {} live bytes copied", segment, copied);
  return Status::ok();
}

bool DurableManagedLedgerFactory::gcStopping() {
  std::lock_guard<std::mutex> lock(gcWaitMu_);
  return gcStop_;
}

Status DurableManagedLedgerFactory::readCompactionBatch(RandomAccessFile& file, uint64_t segment,
                                                        const std::vector<JournalRun>& runs,
                                                        size_t* next,
                                                        std::vector<JournalRun>* batch,
                                                        RelocatedRecords* recs, size_t* bytes) {
  size_t& i = *next;
  while (i < runs.size() && (batch->empty() || *bytes < (1u << 20))) {
    const JournalRun& r = runs[i++];
    std::string rec(r.length, '\0');
    auto got = file.readAt(r.offset, rec.data(), rec.size());
    if (!got) return got.status();
    JournalRun check;
    if (*got != rec.size() ||
        validRecordLength(reinterpret_cast<const uint8_t*>(rec.data()), rec.size()) != rec.size() ||
        !decodeRunHeader(reinterpret_cast<const uint8_t*>(rec.data()), &check) ||
        check.ledgerId != r.ledgerId || check.firstEntryId != r.firstEntryId) {
      return Status::corruption("journal segment " + std::to_string(segment) + ": bad record at " +
                                std::to_string(r.offset));
    }
    *bytes += rec.size();
    recs->records.push_back(std::move(rec));
    batch->push_back(r);
  }
  return Status::ok();
}

Status DurableManagedLedgerFactory::applyRelocations(std::vector<Relocation> moved) {
  // Index first (synced), then the ledgers in memory; retried while a ledger closes meanwhile.
  std::vector<Relocation> pending = std::move(moved);
  for (int attempt = 0; !pending.empty(); attempt++) {
    if (attempt > 100) return Status::busy("ledgers kept closing during compaction");
    std::vector<std::pair<std::shared_ptr<ManagedLedgerImpl>, std::vector<Relocation>>> open;
    Status ms;
    if (!onBg([&] { open = bgApplyRelocations(pending, &ms); })) {
      return Status::closed("storage shut down");
    }
    if (!ms) return ms;
    pending.clear();
    for (auto& [ml, rel] : open) {
      auto applied = std::make_shared<std::promise<bool>>();
      auto af = applied->get_future();
      ml->executor()->execute(
          [ml = ml, rel = rel, applied] { applied->set_value(ml->relocateRuns(rel)); });
      while (af.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
        if (gcStopping()) return Status::closed("storage shut down");
      }
      if (!af.get()) pending.insert(pending.end(), rel.begin(), rel.end());
    }
    if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::ok();
}

std::vector<std::pair<std::shared_ptr<ManagedLedgerImpl>,
                      std::vector<DurableManagedLedgerFactory::Relocation>>>
DurableManagedLedgerFactory::bgApplyRelocations(const std::vector<Relocation>& moved,
                                                Status* status) {
  std::vector<MetadataOp> ops;
  std::vector<Relocation> live;
  for (const Relocation& m : moved) {
    if (!liveLedgers_.count(m.from.ledgerId)) continue;  // deleted meanwhile
    JournalRun to = m.from;
    to.segment = m.segment;
    to.offset = m.offset;
    ops.push_back(MetadataOp::put(indexKey(to.ledgerId, to.firstEntryId), encodeRun(to)));
    live.push_back(m);
  }
  if (!ops.empty()) {
    *status = meta_->write(ops);
    if (*status) *status = meta_->syncWrites();
    if (!*status) {
      metadataWriteErrors_.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
  }
  std::map<std::string, std::vector<Relocation>> byOwner;
  for (const Relocation& m : live) {
    auto& old = segmentRuns_[m.from.segment];
    auto it = old.find(m.from.offset);
    if (it != old.end() && it->second.ledgerId == m.from.ledgerId) {
      old.erase(it);
      liveRuns_.fetch_sub(1, std::memory_order_relaxed);
    }
    JournalRun to = m.from;
    to.segment = m.segment;
    to.offset = m.offset;
    bgAddRun(to);
    auto o = ledgerOwner_.find(m.from.ledgerId);
    if (o != ledgerOwner_.end()) byOwner[o->second].push_back(m);
  }
  std::vector<std::pair<std::shared_ptr<ManagedLedgerImpl>, std::vector<Relocation>>> open;
  MutexLock lock(mu_);
  for (auto& [name, rel] : byOwner) {
    auto o = open_.find(name);
    if (o != open_.end()) {
      open.emplace_back(o->second, std::move(rel));
      continue;
    }
    auto d = dormant_.find(name);
    if (d == dormant_.end()) continue;
    for (const Relocation& m : rel) {
      auto l = d->second.ledgers.find(m.from.ledgerId);
      if (l != d->second.ledgers.end()) l->second.index.relocate(m.from, m.segment, m.offset);
    }
  }
  return open;
}

void DurableManagedLedgerFactory::setCacheSizeMB(int64_t mb) {
  if (cache_) cache_->setMaxBytes(mb * (1ll << 20));
}

StorageStats DurableManagedLedgerFactory::stats() const {
  StorageStats s;
  if (journal_) {
    s.journalGroups = journal_->groupsWritten();
    s.journalEntries = journal_->entriesWritten();
    s.journalBytes = journal_->bytesWritten();
  }
  if (readPool_) s.diskReads = readPool_->diskReads();
  if (cache_) {
    s.cacheBytes = cache_->size();
    s.cacheEvictions = cache_->evictions();
  }
  s.segmentsDeleted = segmentsDeleted_.load();
  s.indexRuns = liveRuns_.load(std::memory_order_relaxed);
  s.ledgersDeleted = ledgersDeleted_.load();
  s.segmentsCompacted = segmentsCompacted_.load();
  s.compactedBytes = compactedBytes_.load();
  s.metadataWriteErrors = metadataWriteErrors_.load();
  s.publishesRefused = writesRefused_.load();
  if (journal_) s.journalWriteErrors = journal_->writeErrors();
  s.writable = writeRefusal().isOk();
  s.diskUsage = static_cast<double>(diskUsagePpm_.load()) / 1e6;
  return s;
}

std::vector<uint64_t> DurableManagedLedgerFactory::segments() const {
  std::vector<uint64_t> out;
  auto names = env_->listDir(options_.journalDirectory);
  if (!names) return out;
  for (const auto& n : *names) {
    uint64_t seg;
    if (parseSegmentFileName(n, &seg)) out.push_back(seg);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace magnetar::storage
