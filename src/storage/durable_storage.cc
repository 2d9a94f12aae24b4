#include "storage/durable_storage.h"

#include <algorithm>
#include <chrono>

#include "base/logging.h"
#include "storage/managed_ledger_impl.h"
#include "storage/rocksdb_metadata_store.h"

namespace magnetar::storage {

namespace {
int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

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
  bg_ = std::make_unique<TaskThread>("storage-bg", options_.tickIntervalMs, [this] { bgTick(); });
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
  if (journal_) journal_->stop();  // writes what is queued; the last checkpoint goes to bg
  if (bg_) bg_->stop();
  if (readPool_) readPool_->stop();
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
        if (!ml->closing()) {
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
  std::vector<int64_t> dropped;
  for (auto it = state.ledgers.begin(); it != state.ledgers.end();) {
    StoredLedger& l = it->second;
    if (l.meta.closedAt < 0) l.meta.closedAt = l.index.entries();
    if (std::min(l.meta.closedAt, l.index.entries()) == 0) {
      dropped.push_back(it->first);
      it = state.ledgers.erase(it);
    } else {
      ++it;
    }
  }
  int64_t id = allocateLedgerId();
  int64_t created = nowMs();
  state.ledgers[id].meta = LedgerMeta{id, -1, created};
  std::vector<LedgerMeta> list;
  for (const auto& [_, l] : state.ledgers) list.push_back(l.meta);
  std::vector<MetadataOp> ops{MetadataOp::put(mlKey(name), encodeLedgerList(list))};
  for (int64_t d : dropped) ops.push_back(MetadataOp::delPrefix(indexLedgerPrefix(d)));
  Status s = bgWrite(std::move(ops), id);
  if (!s) {
    state.ledgers.erase(id);
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

Status DurableManagedLedgerFactory::bgWrite(std::vector<MetadataOp> ops, int64_t newLedgerId) {
  uint64_t next = persistedNextLedgerId_;
  if (newLedgerId >= 0 && static_cast<uint64_t>(newLedgerId) + 1 > next) {
    next = static_cast<uint64_t>(newLedgerId) + 1;
    ops.push_back(MetadataOp::put(kNextLedgerIdKey, encodeU64(next)));
  }
  Status s = meta_->write(ops);
  if (s) {
    persistedNextLedgerId_ = next;
    if (newLedgerId >= 0) liveLedgers_.insert(newLedgerId);
  }
  return s;
}

void DurableManagedLedgerFactory::bgCheckpoint(JournalCheckpoint cp) {
  if (!failedRuns_.empty()) {
    cp.runs.insert(cp.runs.begin(), failedRuns_.begin(), failedRuns_.end());
    failedRuns_.clear();
  }
  std::vector<MetadataOp> ops;
  for (const JournalRun& r : cp.runs) {
    if (!liveLedgers_.count(r.ledgerId)) continue;  // deleted since it was written
    ops.push_back(MetadataOp::put(indexKey(r.ledgerId, r.firstEntryId), encodeRun(r)));
    segmentLedgers_[r.segment].insert(r.ledgerId);
    ledgerSegments_[r.ledgerId].insert(r.segment);
  }
  ops.push_back(MetadataOp::put(kCheckpointKey, encodeCheckpoint(cp.segment, cp.offset)));
  Status s = meta_->write(ops);
  if (!s) {
    // Keep the runs: the next checkpoint writes them (recovery replays from the old position).
    MLOG_WARN("storage: checkpoint failed: {}", s.toString());
    failedRuns_ = std::move(cp.runs);
    return;
  }
  uint64_t last = knownSegments_.empty() ? firstSegment_ : *knownSegments_.rbegin();
  for (uint64_t seg = last; seg <= cp.segment; seg++) knownSegments_.insert(seg);
  checkpointSegment_ = cp.segment;
  bgReclaim();
}

void DurableManagedLedgerFactory::bgForgetLedgers(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    if (!liveLedgers_.erase(id)) continue;
    ledgersDeleted_.fetch_add(1, std::memory_order_relaxed);
    auto it = ledgerSegments_.find(id);
    if (it == ledgerSegments_.end()) continue;
    for (uint64_t seg : it->second) segmentLedgers_[seg].erase(id);
    ledgerSegments_.erase(it);
  }
}

// Deletes journal segments before the checkpoint whose ledgers are all gone.
void DurableManagedLedgerFactory::bgReclaim() {
  for (auto it = knownSegments_.begin(); it != knownSegments_.end() && *it < checkpointSegment_;) {
    auto refs = segmentLedgers_.find(*it);
    if (refs != segmentLedgers_.end() && !refs->second.empty()) {
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
    if (refs != segmentLedgers_.end()) segmentLedgers_.erase(refs);
    segmentsDeleted_.fetch_add(1, std::memory_order_relaxed);
    it = knownSegments_.erase(it);
  }
}

void DurableManagedLedgerFactory::bgTick() {
  std::vector<std::shared_ptr<ManagedLedgerImpl>> live;
  {
    MutexLock lock(mu_);
    for (auto& [_, ml] : open_) live.push_back(ml);
  }
  for (auto& ml : live) {
    ml->executor()->execute([ml] { ml->onTick(); });
  }
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
  s.ledgersDeleted = ledgersDeleted_.load();
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
