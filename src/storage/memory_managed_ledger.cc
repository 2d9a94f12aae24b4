// In-memory managed ledgers: the managed-ledger core (managed_ledger_core.h) over a backend that
// keeps entries, ledger list and cursor state in memory.
#include "storage/memory_managed_ledger.h"

#include <optional>
#include <utility>

#include "storage/cursor_state.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger_core.h"

namespace magnetar::storage {

// What a ledger keeps across close/reopen (the factory's, handed to the open instance). Used on
// the open instance's executor only.
struct MemoryLedgerData {
  LedgerSet ledgers;
  std::map<Position, Buffer> entries;
  std::map<std::string, CursorState> cursors;
  std::map<int64_t, int64_t> closedMs;  // ledger id -> when it was closed (wall ms)
  int64_t nextLedgerId = 1;
  std::optional<Position> terminatedAt;  // kept across reopens
};

namespace {

// The factory's options as the core's settings: rollover by entry count at once, cursor state
// stored at every change (nothing to limit), consumed ledgers dropped at once or kept.
ManagedLedgerConfig coreConfig(const MemoryLedgerOptions& o) {
  ManagedLedgerConfig c;
  c.managedLedgerMaxEntriesPerLedger = o.maxEntriesPerLedger;
  c.managedLedgerMinLedgerRolloverTimeMinutes = 0;
  c.managedLedgerMaxLedgerRolloverTimeMinutes = 0;
  c.managedLedgerDefaultMarkDeleteRateLimit = 0;
  c.managedLedgerCacheSizeMB = 0;  // every entry is in memory: no cache in front of it
  c.defaultRetentionTimeInMinutes = o.trimConsumedLedgers ? 0 : -1;
  c.defaultRetentionSizeInMB = o.trimConsumedLedgers ? 0 : -1;
  c.retentionCheckIntervalInSeconds = 0;
  return c;
}

}  // namespace

// The in-memory backend. Thread: the executor given at open (the core's rule).
class MemoryManagedLedger : private LedgerBackend, public ManagedLedgerCore {
 public:
  MemoryManagedLedger(std::string name, net::Executor* executor,
                      std::shared_ptr<MemoryLedgerData> d, MemoryManagedLedgerFactory* factory)
      : ManagedLedgerCore(std::move(name), executor, factory->config_, factory->cacheManager_,
                          factory->cacheManager_->newCache(), this),
        d_(std::move(d)),
        factory_(factory) {
    // As a restart: an empty current ledger goes and a new one starts (none once terminated).
    ledgers_ = d_->ledgers;
    if (ledgers_.current() && ledgers_.current()->entries == 0) {
      ledgers_.removeLedger(ledgers_.currentLedgerId());
    }
    terminatedAt_ = d_->terminatedAt;
    if (!terminatedAt_ || ledgers_.empty()) ledgers_.addLedger(d_->nextLedgerId++, wallClockMs());
    for (auto& [cname, state] : d_->cursors) {
      cursors_.emplace(cname, std::make_shared<CoreCursor>(cname, this, std::move(state)));
    }
    d_->cursors.clear();
  }

  // Let go without asyncClose (a factory shutdown): the state goes back to the data, as a close.
  ~MemoryManagedLedger() override {
    if (!closed_) saveState();
  }

  // Everything is in memory: with cachedReads every read is answered at once, as from a cache
  // holding all; without, none is (each read goes through the executor as a cache miss).
  bool readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                         std::vector<Entry>* out) override {
    MAGNETAR_DCHECK_ON(*executor_);
    if (!factory_->options_.cachedReads || isClosed()) return false;
    readStored(from, maxEntries, maxBytes, out);
    return true;
  }
  void readCachedPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                           std::vector<Position>* uncached) override {
    MAGNETAR_DCHECK_ON(*executor_);
    if (!factory_->options_.cachedReads || isClosed()) {
      uncached->insert(uncached->end(), sorted.begin(), sorted.end());
      return;
    }
    for (const Position& p : sorted) {
      if (auto it = d_->entries.find(p); it != d_->entries.end()) {
        found->push_back(Entry{p, it->second});
      }
    }
  }

  // Factory shutdown: adds are refused from now on. Thread: any.
  void markStopped() { stopped_ = true; }

 private:
  // Appends the stored entries from `from` on (up to maxEntries, about maxBytes, at least one).
  void readStored(Position from, int maxEntries, size_t maxBytes, std::vector<Entry>* out) const {
    size_t bytes = 0;
    for (const Entry& e : *out) bytes += e.data.size();
    for (auto it = d_->entries.lower_bound(from);
         it != d_->entries.end() && static_cast<int>(out->size()) < maxEntries; ++it) {
      if (!out->empty() && bytes + it->second.size() > maxBytes) break;
      bytes += it->second.size();
      out->push_back(Entry{it->first, it->second});
    }
  }

  void saveState() {
    d_->ledgers = ledgers_;
    d_->terminatedAt = terminatedAt_;
    for (auto& [cname, c] : cursors_) d_->cursors.emplace(cname, std::move(c->state_));
  }

  // ---- LedgerBackend ----

  void read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
            ReadEntriesCallback cb) override {
    std::vector<Entry> got;
    readStored(Position{ledgerId, first}, static_cast<int>(last - first + 1), maxBytes, &got);
    executor_->execute(
        [cb = std::move(cb), got = std::move(got)]() mutable { cb(Status::ok(), std::move(got)); });
  }

  // Stored at once: the writes complete in a later pass of the executor.
  void storeCursors(const std::vector<CoreCursor*>& due) override {
    const int64_t now = steadyClockMs();
    std::vector<StatusCallback> cbs;
    std::vector<std::pair<std::string, Position>> written;
    for (CoreCursor* c : due) {
      c->dirty_ = false;
      c->lastWriteMs_ = now;
      written.emplace_back(c->name(), c->state_.markDelete());
      for (auto& cb : c->waiting_) cbs.push_back(std::move(cb));
      c->waiting_.clear();
    }
    postTask([this, written = std::move(written), cbs = std::move(cbs)] {
      for (const auto& [cname, mark] : written) {
        if (auto it = cursors_.find(cname); it != cursors_.end()) it->second->persisted_ = mark;
      }
      trimConsumedLedgers();
      for (const auto& cb : cbs) {
        if (cb) cb(Status::ok());
      }
    });
  }
  void removeCursor(std::shared_ptr<CoreCursor>) override {}
  void storeTerminated(Position, StatusCallback done) override {
    postTask([done = std::move(done)] { done(Status::ok()); });
  }

  // ---- CoreHooks ----

  std::shared_ptr<CoreCursor> makeCursor(const std::string& name, CursorState state) override {
    return std::make_shared<CoreCursor>(name, this, std::move(state));
  }

  void trimConsumedLedgers(bool truncate = false) override {
    if (closed_ || closing_) return;
    for (int64_t id : consumedLedgersToDrop(truncate)) {
      d_->entries.erase(d_->entries.lower_bound(Position{id, 0}),
                        d_->entries.lower_bound(Position{id + 1, -1}));
      d_->closedMs.erase(id);
      ledgers_.removeLedger(id);
    }
  }
  int64_t ledgerClosedMs(int64_t id) const override {
    auto it = d_->closedMs.find(id);
    return it == d_->closedMs.end() ? 0 : it->second;
  }
  bool isClosed() const override { return closed_; }

  Status addRefusal() override {
    if (closing_ || closed_ || stopped_) return Status::closed("ledger closed");
    if (terminating_ || terminatedAt_) return Status::notAllowed("managed ledger is terminated");
    return Status::ok();
  }

  // The queued adds complete in a later pass of the executor, in order; each becomes visible
  // (gets its position) right before its callback, as a journal completion would. The factory's
  // failAdds makes that many fail with kIoError instead.
  void drainQueued() override {
    if (queued_.empty()) return;
    // In a shared holder: a task must be copyable and the add callbacks are move-only.
    auto batch = std::make_shared<decltype(queued_)>(std::move(queued_));
    queued_.clear();
    ++inflight_;
    postTask([this, batch] {
      for (auto& [data, cb] : *batch) {
        if (auto& fail = *factory_->options_.failAdds; fail.load() > 0) {
          fail.fetch_sub(1);
          cb(Status::ioError("injected add failure"), {});
          continue;
        }
        const LedgerInfo* cur = ledgers_.current();
        if (ledgerFull(cur->entries, cur->sizeBytes, cur->createdMs)) rollover();
        const Position p{ledgers_.currentLedgerId(), ledgers_.current()->entries};
        d_->entries.emplace(p, data);
        entryConfirmed(p, data);
        cb(Status::ok(), p);
      }
      --inflight_;
      maybeFinishClose();
    });
  }
  void rollover() {
    const int64_t now = wallClockMs();
    d_->closedMs[ledgers_.currentLedgerId()] = now;
    ledgers_.addLedger(d_->nextLedgerId++, now);
    trimConsumedLedgers();
  }

  void maybeFinishClose() override {
    maybeFinishTerminate();
    if (!closing_ || closed_ || inflight_ > 0) return;
    closed_ = true;
    std::vector<StatusCallback> cbs = std::move(closeCbs_);
    closeCbs_.clear();
    for (auto& [_, c] : cursors_) {
      for (auto& cb : c->waiting_) cbs.push_back(std::move(cb));
      c->waiting_.clear();
    }
    if (deleting_) {
      factory_->forget(name_, this);
    } else {
      saveState();
      factory_->closed(name_, this);
    }
    postTask([cbs = std::move(cbs)] {
      for (const auto& cb : cbs) {
        if (cb) cb(Status::ok());
      }
    });
  }
  Status terminateRefusal() const override {
    if (closing_ || closed_) return Status::closed("ledger closed");
    return Status::ok();
  }
  bool addsPending() const override { return inflight_ > 0 || !queued_.empty(); }

  std::shared_ptr<MemoryLedgerData> d_;
  MemoryManagedLedgerFactory* factory_;
  bool closed_ = false;
  int inflight_ = 0;                  // batches of adds posted and not completed
  std::atomic<bool> stopped_{false};  // factory shutdown (any thread)
};

MemoryManagedLedgerFactory::MemoryManagedLedgerFactory(MemoryLedgerOptions options)
    : options_(std::move(options)),
      config_(coreConfig(options_)),
      cacheManager_(std::make_shared<EntryCacheManager>(0)) {}

MemoryManagedLedgerFactory::~MemoryManagedLedgerFactory() = default;

void MemoryManagedLedgerFactory::asyncOpen(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  std::shared_ptr<MemoryManagedLedger> ml;
  {
    MutexLock lock(mu_);
    auto o = open_.find(name);
    if (o != open_.end()) ml = o->second.lock();
    if (ml && ml->isClosing()) {
      // Closing: asked again once its state is back (the close completes on its executor).
      executor->execute([this, name, executor, cb = std::move(cb)]() mutable {
        asyncOpen(name, executor, std::move(cb));
      });
      return;
    }
    if (!ml) {
      auto& d = data_[name];
      if (!d) d = std::make_shared<MemoryLedgerData>();
      ml = std::make_shared<MemoryManagedLedger>(name, executor, d, this);
      open_[name] = ml;
    }
  }
  executor->execute(
      [cb = std::move(cb), ml = std::move(ml)] { cb(std::shared_ptr<ManagedLedger>(ml)); });
}

std::vector<std::string> MemoryManagedLedgerFactory::ledgerNames() const {
  MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, _] : data_) out.push_back(name);
  return out;
}

void MemoryManagedLedgerFactory::shutdown() {
  MutexLock lock(mu_);
  for (auto& [_, w] : open_) {
    if (auto ml = w.lock()) ml->markStopped();
  }
  open_.clear();
}

void MemoryManagedLedgerFactory::forget(const std::string& name, const MemoryManagedLedger* ml) {
  MutexLock lock(mu_);
  data_.erase(name);
  auto o = open_.find(name);
  if (o != open_.end() && o->second.lock().get() == ml) open_.erase(o);
}

void MemoryManagedLedgerFactory::closed(const std::string& name, const MemoryManagedLedger* ml) {
  MutexLock lock(mu_);
  auto o = open_.find(name);
  if (o != open_.end() && o->second.lock().get() == ml) open_.erase(o);
}

}  // namespace magnetar::storage
