#include "storage/memory_managed_ledger.h"

#include <atomic>
#include <optional>
#include <utility>

#include "storage/cursor_state.h"
#include "storage/ledger_set.h"
#include "storage/managed_ledger_core.h"

namespace magnetar::storage {

class MemoryCursor;

// Everything a ledger keeps across close/reopen. Used on the ledger's executor only.
struct MemoryLedgerData {
  MemoryLedgerOptions options;
  LedgerSet ledgers;
  std::map<Position, Buffer> entries;
  std::map<std::string, std::unique_ptr<MemoryCursor>> cursors;
  int64_t nextLedgerId = 1;
  net::Executor* executor = nullptr;
  bool terminating = false;              // asyncTerminate called: adds refused
  std::optional<Position> terminatedAt;  // its position, kept across reopens

  void post(StatusCallback cb, Status s) {
    if (cb) executor->execute([cb = std::move(cb), s = std::move(s)] { cb(s); });
  }
  void trim();
};

class MemoryCursor : public ManagedCursor {
 public:
  MemoryCursor(std::string name, MemoryLedgerData* d, Position markDelete)
      : name_(std::move(name)), d_(d), state_(markDelete) {}

  const std::string& name() const override { return name_; }
  Position markDeletedPosition() const override { return state_.markDelete(); }

  void asyncMarkDelete(Position pos, StatusCallback cb) override {
    if (pos > d_->ledgers.lastConfirmed()) {
      d_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
      return;
    }
    if (state_.markDeleteUpTo(pos, d_->ledgers)) d_->trim();
    d_->post(std::move(cb), Status::ok());
  }

  void asyncMarkDelete(Position pos, CursorProperties properties, StatusCallback cb) override {
    if (pos > d_->ledgers.lastConfirmed()) {
      d_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
      return;
    }
    state_.setProperties(std::move(properties));
    if (state_.markDeleteUpTo(pos, d_->ledgers)) d_->trim();
    d_->post(std::move(cb), Status::ok());
  }

  void asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet, StatusCallback cb) override {
    if (pos > d_->ledgers.lastConfirmed()) {
      d_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
      return;
    }
    Position before = state_.markDelete();
    state_.markDeleteWithAckSet(pos, ackSet, d_->ledgers);
    if (state_.markDelete() != before) d_->trim();
    d_->post(std::move(cb), Status::ok());
  }

  const CursorProperties& properties() const override { return state_.properties(); }

  void asyncDelete(const std::vector<Position>& positions, StatusCallback cb) override {
    Position before = state_.markDelete();
    for (const Position& p : positions) state_.ack(p, d_->ledgers);
    if (state_.markDelete() != before) d_->trim();
    d_->post(std::move(cb), Status::ok());
  }

  void asyncDeleteBatchIndexes(const std::vector<std::pair<Position, AckSet>>& acks,
                               StatusCallback cb) override {
    Position before = state_.markDelete();
    for (const auto& [p, set] : acks) state_.ackBatchIndexes(p, set, d_->ledgers);
    if (state_.markDelete() != before) d_->trim();
    d_->post(std::move(cb), Status::ok());
  }

  const AckSet* batchDeletedIndexes(Position pos) const override { return state_.batchAckSet(pos); }

  bool isAcknowledged(Position pos) const override { return state_.isAcked(pos); }
  int64_t numberOfEntriesInBacklog() const override { return state_.backlog(d_->ledgers); }

  void asyncResetCursor(Position pos, StatusCallback cb) override {
    Position next = d_->ledgers.ceil(pos);
    state_.reset(Position{next.ledgerId, next.entryId - 1});
    d_->post(std::move(cb), Status::ok());
  }

  const CursorState& state() const { return state_; }

 private:
  std::string name_;
  MemoryLedgerData* d_;
  CursorState state_;
};

void MemoryLedgerData::trim() {
  if (!options.trimConsumedLedgers) return;
  Position minMark = ledgers.lastConfirmed();
  for (const auto& [_, c] : cursors) minMark = std::min(minMark, c->markDeletedPosition());
  std::vector<int64_t> drop;
  for (const auto& [id, info] : ledgers.ledgers()) {
    if (id == ledgers.currentLedgerId()) break;
    if (Position{id, info.entries - 1} <= minMark) drop.push_back(id);
  }
  for (int64_t id : drop) {
    entries.erase(entries.lower_bound(Position{id, 0}), entries.lower_bound(Position{id + 1, -1}));
    ledgers.removeLedger(id);
  }
}

class MemoryManagedLedger : public ManagedLedger {
 public:
  MemoryManagedLedger(std::string name, std::shared_ptr<MemoryLedgerData> d,
                      MemoryManagedLedgerFactory* factory)
      : name_(std::move(name)), d_(std::move(d)), factory_(factory) {}

  const std::string& name() const override { return name_; }
  net::Executor* executor() const override { return d_->executor; }

  void asyncAddEntry(Buffer data, AddEntryCallback cb) override {
    if (closed_) {
      d_->executor->execute([cb = std::move(cb)] { cb(Status::closed("ledger closed"), {}); });
      return;
    }
    if (d_->terminating || d_->terminatedAt) {
      d_->executor->execute(
          [cb = std::move(cb)] { cb(Status::notAllowed("managed ledger is terminated"), {}); });
      return;
    }
    // The entry becomes visible (and gets its position) when the posted task runs, as a real
    // journal completion would: LAC moves right before the callback.
    d_->executor->execute([d = d_, data = std::move(data), cb = std::move(cb)]() mutable {
      if (auto& fail = *d->options.failAdds; fail.load() > 0) {
        fail.fetch_sub(1);
        cb(Status::ioError("injected add failure"), {});
        return;
      }
      const LedgerInfo* cur = d->ledgers.current();
      if (cur->entries >= d->options.maxEntriesPerLedger) {
        d->ledgers.addLedger(d->nextLedgerId++, wallClockMs());
        d->trim();
      }
      Position p = d->ledgers.addEntry(static_cast<int64_t>(data.size()));
      d->entries.emplace(p, std::move(data));
      cb(Status::ok(), p);
    });
  }

  void asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                        ReadEntriesCallback cb) override {
    d_->executor->execute([d = d_, from, maxEntries, maxBytes, cb = std::move(cb)] {
      std::vector<Entry> out;
      size_t bytes = 0;
      for (auto it = d->entries.lower_bound(from);
           it != d->entries.end() && static_cast<int>(out.size()) < maxEntries; ++it) {
        if (!out.empty() && bytes + it->second.size() > maxBytes) break;
        bytes += it->second.size();
        out.push_back(Entry{it->first, it->second});
      }
      cb(Status::ok(), std::move(out));
    });
  }

  // Everything is in memory: every read is a cache hit.
  bool readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                         std::vector<Entry>* out) override {
    if (!d_->options.cachedReads) return false;
    size_t bytes = 0;
    for (auto it = d_->entries.lower_bound(from);
         it != d_->entries.end() && static_cast<int>(out->size()) < maxEntries; ++it) {
      if (!out->empty() && bytes + it->second.size() > maxBytes) break;
      bytes += it->second.size();
      out->push_back(Entry{it->first, it->second});
    }
    return true;
  }

  Position lastConfirmedEntry() const override { return d_->ledgers.lastConfirmed(); }
  Position nextValidPosition(Position p) const override { return d_->ledgers.next(p); }
  Position firstPosition() const override { return d_->ledgers.first(); }
  int64_t numberOfEntriesBetween(Position from, Position to) const override {
    return d_->ledgers.count(from, to);
  }
  int64_t numberOfEntries() const override { return d_->ledgers.totalEntries(); }
  int64_t totalSizeBytes() const override { return d_->ledgers.totalBytes(); }
  std::vector<LedgerStats> ledgerStats() const override { return d_->ledgers.stats(); }

  Result<ManagedCursor*> openCursor(const std::string& name, InitialPosition initial) override {
    if (closed_) return Status::closed("ledger closed");
    auto it = d_->cursors.find(name);
    if (it != d_->cursors.end()) return static_cast<ManagedCursor*>(it->second.get());
    Position mark = d_->ledgers.lastConfirmed();
    if (initial == InitialPosition::kEarliest) {
      Position first = d_->ledgers.first();
      mark = Position{first.ledgerId, first.entryId - 1};
    }
    auto c = std::make_unique<MemoryCursor>(name, d_.get(), mark);
    ManagedCursor* raw = c.get();
    d_->cursors.emplace(name, std::move(c));
    return raw;
  }

  Status deleteCursor(const std::string& name) override {
    if (d_->cursors.erase(name) == 0) return Status::notFound("no cursor " + name);
    d_->trim();
    return Status::ok();
  }

  std::vector<ManagedCursor*> cursors() const override {
    std::vector<ManagedCursor*> out;
    for (const auto& [_, c] : d_->cursors) out.push_back(c.get());
    return out;
  }

  // Runs after the adds already posted, so the position is the last of them.
  void asyncTerminate(std::function<void(Status, Position)> cb) override {
    if (closed_) {
      d_->executor->execute([cb = std::move(cb)] { cb(Status::closed("ledger closed"), {}); });
      return;
    }
    d_->terminating = true;
    d_->executor->execute([d = d_, cb = std::move(cb)] {
      if (!d->terminatedAt) d->terminatedAt = d->ledgers.lastConfirmed();
      cb(Status::ok(), *d->terminatedAt);
    });
  }
  bool isTerminated() const override { return d_->terminatedAt.has_value(); }

  void asyncClose(StatusCallback cb) override {
    closed_ = true;
    factory_->closed(name_);
    d_->post(std::move(cb), Status::ok());
  }

  void asyncDelete(StatusCallback cb) override {
    closed_ = true;
    factory_->forget(name_);
    d_->cursors.clear();
    d_->entries.clear();
    d_->post(std::move(cb), Status::ok());
  }

  // Called by the factory at open, on any thread, before the ledger is handed out.
  void startNewLedger(net::Executor* executor) {
    d_->executor = executor;
    if (d_->ledgers.current() && d_->ledgers.current()->entries == 0) {
      d_->ledgers.removeLedger(d_->ledgers.currentLedgerId());
    }
    d_->ledgers.addLedger(d_->nextLedgerId++, wallClockMs());
  }

  void markClosed() { closed_ = true; }

 private:
  std::string name_;
  std::shared_ptr<MemoryLedgerData> d_;
  MemoryManagedLedgerFactory* factory_;
  std::atomic<bool> closed_{false};  // set by shutdown() from any thread
};

MemoryManagedLedgerFactory::MemoryManagedLedgerFactory(MemoryLedgerOptions options)
    : options_(std::move(options)) {}

MemoryManagedLedgerFactory::~MemoryManagedLedgerFactory() = default;

void MemoryManagedLedgerFactory::asyncOpen(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  std::shared_ptr<ManagedLedger> ml;
  {
    MutexLock lock(mu_);
    auto o = open_.find(name);
    if (o != open_.end()) ml = o->second.lock();
    if (!ml) {
      auto& d = data_[name];
      if (!d) {
        d = std::make_shared<MemoryLedgerData>();
        d->options = options_;
      }
      auto m = std::make_shared<MemoryManagedLedger>(name, d, this);
      m->startNewLedger(executor);
      ml = m;
      open_[name] = ml;
    }
  }
  executor->execute([cb = std::move(cb), ml = std::move(ml)] { cb(ml); });
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
    if (auto ml = w.lock()) static_cast<MemoryManagedLedger*>(ml.get())->markClosed();
  }
  open_.clear();
}

void MemoryManagedLedgerFactory::forget(const std::string& name) {
  MutexLock lock(mu_);
  data_.erase(name);
  open_.erase(name);
}

void MemoryManagedLedgerFactory::closed(const std::string& name) {
  MutexLock lock(mu_);
  open_.erase(name);
}

}  // namespace magnetar::storage
