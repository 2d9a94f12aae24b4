#include "storage/managed_ledger_impl.h"

#include <algorithm>
#include <chrono>

#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar::storage {

namespace {
// Hands a group's outcome to the ledger's executor as one task.
class JournalSink : public JournalClient {
 public:
  JournalSink(std::weak_ptr<ManagedLedgerImpl> ml, net::Executor* ex)
      : ml_(std::move(ml)), ex_(ex) {}
  void onJournalWritten(Status s, std::vector<JournalRun> runs, size_t n, bool retryable) override {
    if (auto ml = ml_.lock()) {
      ex_->execute([ml = std::move(ml), s = std::move(s), runs = std::move(runs), n,
                    retryable]() mutable { ml->onJournalWritten(s, runs, n, retryable); });
    }
  }

 private:
  std::weak_ptr<ManagedLedgerImpl> ml_;
  net::Executor* ex_;
};
}  // namespace

ManagedLedgerImpl::ManagedLedgerImpl(DurableManagedLedgerFactory* factory, std::string name,
                                     net::Executor* executor, ManagedLedgerState state)
    : ManagedLedgerCore(std::move(name), executor, factory->options_, nullptr,
                        factory->cache_->newCache(), this),
      factory_(factory),
      readKey_(std::hash<std::string>()(name_)) {
  for (auto& ledger : state.ledgers) {
    const int64_t id = ledger.first;
    StoredLedger& l = ledger.second;
    int64_t entries = l.index.entries();
    if (l.meta.closedAt >= 0 && l.meta.closedAt < entries) {
      l.index.truncate(l.meta.closedAt);
      entries = l.meta.closedAt;
    }
    ledgers_.addLedger(LedgerInfo{id, entries, l.index.dataBytes(), l.meta.createdMs});
    meta_[id] = l.meta;
    index_[id] = std::move(l.index);
  }
  curLedger_ = ledgers_.currentLedgerId();
  terminatedAt_ = state.terminatedAt;
  // Previous runs may have persisted a cursor ahead of what survived (journalSyncData=false).
  Position lac = ledgers_.lastConfirmed();
  for (auto& [cname, cm] : state.cursors) {
    CursorState cs;
    cs.restore(std::min(cm.markDelete, lac), cm.ranges, ledgers_);
    cs.restoreBatchDeleted(cm.batchDeleted, ledgers_);
    cs.setProperties(cm.properties);
    cursors_.emplace(cname, std::make_shared<CoreCursor>(cname, this, std::move(cs)));
  }
}

ManagedLedgerImpl::~ManagedLedgerImpl() = default;

void ManagedLedgerImpl::init() {
  sink_ = std::make_shared<JournalSink>(std::weak_ptr<ManagedLedgerImpl>(selfPtr()), executor_);
}

// ---- adds ----

Status ManagedLedgerImpl::addRefusal() {
  if (closing_ || state_ == State::kClosed || factory_->stopped_) {
    return Status::closed("managed ledger closed");
  }
  if (terminating_ || terminatedAt_) {
    return Status::notAllowed("managed ledger " + name_ + " is terminated");
  }
  Status refused = factory_->writeRefusal();
  if (!refused) factory_->writesRefused_.fetch_add(1, std::memory_order_relaxed);
  return refused;
}

Status ManagedLedgerImpl::writeRefusal() const { return factory_->writeRefusal(); }

void ManagedLedgerImpl::drainQueued() {
  while (!queued_.empty()) {
    if (state_ == State::kCreatingLedger || state_ == State::kClosed) return;
    if (state_ == State::kNeedLedger || needsRollover()) {
      startRollover();
      return;
    }
    auto& [data, cb] = queued_.front();
    Position pos{curLedger_, curAssigned_++};
    curAssignedBytes_ += static_cast<int64_t>(data.size());
    factory_->journal_->append(sink_, pos.ledgerId, pos.entryId, data);
    inflight_.push_back(PendingAdd{pos, std::move(data), std::move(cb), epoch_});
    queued_.pop_front();
  }
}

bool ManagedLedgerImpl::needsRollover() const {
  auto it = meta_.find(curLedger_);
  return ledgerFull(curAssigned_, curAssignedBytes_, it == meta_.end() ? 0 : it->second.createdMs);
}

std::vector<LedgerMeta> ManagedLedgerImpl::ledgerList() const {
  std::vector<LedgerMeta> out;
  for (const auto& [_, m] : meta_) out.push_back(m);
  return out;
}

void ManagedLedgerImpl::startRollover() {
  state_ = State::kCreatingLedger;
  const LedgerInfo* confirmed = ledgers_.find(curLedger_);
  meta_[curLedger_].closedAt =
      fencedLedger_ == curLedger_ ? (confirmed ? confirmed->entries : 0) : curAssigned_;
  int64_t created = wallClockMs();
  meta_[curLedger_].closedMs = created;
  int64_t id = factory_->allocateLedgerId();
  auto list = ledgerList();
  list.push_back(LedgerMeta{id, -1, created, 0});
  std::vector<MetadataOp> ops{MetadataOp::put(mlKey(name_), encodeLedgerList(list))};
  factory_->post([f = factory_, ops = std::move(ops), id, created, self = selfPtr()] {
    Status s = f->bgWrite(ops, id, self->name_);
    self->executor_->execute([self, s, id, created] { self->onLedgerCreated(s, id, created); });
  });
}

void ManagedLedgerImpl::onLedgerCreated(const Status& s, int64_t ledgerId, int64_t createdMs) {
  if (!s) {
    MLOG_WARN("{}: creating ledger {} failed: {}", name_, ledgerId, s.toString());
    state_ = State::kNeedLedger;
    failQueued(s);
    maybeFinishClose();
    return;
  }
  meta_[ledgerId] = LedgerMeta{ledgerId, -1, createdMs, 0};
  index_[ledgerId];
  curLedger_ = ledgerId;
  curAssigned_ = 0;
  curAssignedBytes_ = 0;
  state_ = State::kOpen;
  activateLedger();
  trimConsumedLedgers();
  if (closing_) {
    maybeFinishClose();
    return;
  }
  drainQueued();
}

// Ledgers join the LedgerSet (and become lastConfirmedEntry's ledger) only once every add of the
// older ledgers has completed, so lastConfirmedEntry never moves backwards.
void ManagedLedgerImpl::activateUpTo(int64_t ledgerId) {
  for (auto it = meta_.upper_bound(ledgers_.currentLedgerId());
       it != meta_.end() && it->first <= ledgerId; ++it) {
    ledgers_.addLedger(it->first, it->second.createdMs);
  }
}

void ManagedLedgerImpl::activateLedger() {
  activateUpTo(inflight_.empty() ? curLedger_ : inflight_.front().pos.ledgerId);
}

void ManagedLedgerImpl::fence(int64_t ledgerId, const Status& s) {
  MLOG_WARN("{}: write to ledger {} failed, closing it: {}", name_, ledgerId, s.toString());
  fencedLedger_ = ledgerId;
  fenceStatus_ = s;
  if (ledgerId == curLedger_ && state_ == State::kOpen) {
    state_ = State::kNeedLedger;
    // Record the close count right away so a restart ignores anything after it.
    if (!closing_) startRollover();
  }
}

void ManagedLedgerImpl::onJournalWritten(const Status& s, const std::vector<JournalRun>& runs,
                                         size_t n, bool retryable) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (s) {
    for (const JournalRun& r : runs) {
      if (r.ledgerId != fencedLedger_) index_[r.ledgerId].add(r);
    }
  }
  for (size_t i = 0; i < n && !inflight_.empty(); i++) {
    PendingAdd a = std::move(inflight_.front());
    inflight_.pop_front();
    if (s && a.pos.ledgerId != fencedLedger_) {
      activateUpTo(a.pos.ledgerId);
      entryConfirmed(a.pos, a.data);
      a.cb(Status::ok(), a.pos);
    } else if (s) {
      a.cb(fenceStatus_, {});
    } else {
      if (!retryable) {
        if (fencedLedger_ != a.pos.ledgerId) fence(a.pos.ledgerId, s);
      } else if (a.epoch == epoch_ && a.pos.ledgerId == curLedger_ && fencedLedger_ != curLedger_) {
        // Nothing of it is in the journal: the next add retries this entry id in this ledger
        // (the journal refuses the later in-flight ones); no new ledger per failed write.
        epoch_++;
        curAssigned_ = a.pos.entryId;
        const LedgerInfo* confirmed = ledgers_.find(curLedger_);
        curAssignedBytes_ = confirmed ? confirmed->sizeBytes : 0;
      }
      a.cb(s, {});
    }
  }
  activateLedger();
  maybeFinishClose();
}

// ---- reads ----

void ManagedLedgerImpl::read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
                             ReadEntriesCallback cb) {
  auto idx = index_.find(ledgerId);
  if (idx == index_.end()) {
    executor_->execute([cb = std::move(cb)] { cb(Status::ok(), {}); });
    return;
  }
  const int count = static_cast<int>(last - first + 1);
  auto runs = idx->second.runsFrom(first, count, static_cast<int64_t>(maxBytes));
  if (runs.empty()) MLOG_WARN("{}: no index run for {}:{}", name_, ledgerId, first);
  factory_->readPool_->read(readKey_, std::move(runs), first, last, count, maxBytes,
                            [self = selfPtr(), ledgerId, cb = std::move(cb)](
                                Status s, std::vector<std::pair<int64_t, Buffer>> got) mutable {
                              self->executor_->execute([s = std::move(s), got = std::move(got),
                                                        ledgerId, cb = std::move(cb)]() mutable {
                                if (!s) {
                                  cb(s, {});
                                  return;
                                }
                                std::vector<Entry> entries;
                                entries.reserve(got.size());
                                for (auto& [id, buf] : got)
                                  entries.push_back(Entry{Position{ledgerId, id}, std::move(buf)});
                                cb(Status::ok(), std::move(entries));
                              });
                            });
}

// ---- cursors ----

std::shared_ptr<CoreCursor> ManagedLedgerImpl::makeCursor(const std::string& name,
                                                          CursorState state) {
  return std::make_shared<CoreCursor>(name, this, std::move(state));
}

void ManagedLedgerImpl::removeCursor(std::shared_ptr<CoreCursor> c) {
  factory_->post([f = factory_, key = cursorKey(name_, c->name())] {
    Status s = f->bgWrite({MetadataOp::del(key)});
    if (!s) MLOG_WARN("deleting cursor {} failed: {}", key, s.toString());
  });
}

void ManagedLedgerImpl::flushDeferredCursors(StatusCallback done) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (state_ == State::kClosed || closing_) {
    done(Status::ok());
    return;
  }
  CoreCursor* dirty = nullptr;
  for (auto& [_, c] : cursors_) {
    if (c->dirty_) {
      dirty = c.get();
      break;
    }
  }
  if (!dirty) {
    done(Status::ok());
    return;
  }
  dirty->waiting_.push_back(std::move(done));  // run after the write (storeCursors)
  flushCursors(/*all=*/true);
}

// One metadata write for every cursor due (Pulsar writes each cursor on its own; the keys are
// ours, docs/storage-format.md).
void ManagedLedgerImpl::storeCursors(const std::vector<CoreCursor*>& due) {
  const int64_t now = steadyClockMs();
  std::vector<MetadataOp> ops;
  std::vector<StatusCallback> cbs;
  std::vector<std::pair<std::string, Position>> written;
  for (CoreCursor* c : due) {
    c->dirty_ = false;
    c->lastWriteMs_ = now;
    CursorMeta m = c->snapshot();
    written.emplace_back(c->name(), m.markDelete);
    ops.push_back(MetadataOp::put(cursorKey(name_, c->name()), encodeCursor(m)));
    for (auto& cb : c->waiting_) cbs.push_back(std::move(cb));
    c->waiting_.clear();
  }
  factory_->post([f = factory_, self = selfPtr(), ops = std::move(ops),
                  written = std::move(written), cbs = std::move(cbs)]() mutable {
    Status s = f->bgWrite(std::move(ops));
    self->executor_->execute([self, s, written = std::move(written), cbs = std::move(cbs)] {
      if (s) {
        self->cursorsPersisted(written);
      } else {
        // Logged here: rate-limited writes (no callback) have nobody else to report to.
        MLOG_WARN("{}: cursor write failed: {}", self->name_, s.toString());
      }
      for (const auto& cb : cbs) {
        if (cb) cb(s);
      }
    });
  });
}

void ManagedLedgerImpl::cursorsPersisted(
    const std::vector<std::pair<std::string, Position>>& written) {
  bool moved = false;
  for (const auto& [cname, mark] : written) {
    auto it = cursors_.find(cname);
    if (it == cursors_.end() || it->second->persisted_ == mark) continue;
    it->second->persisted_ = mark;
    moved = true;
  }
  if (moved) trimConsumedLedgers();
}

// ---- housekeeping ----

int64_t ManagedLedgerImpl::ledgerClosedMs(int64_t id) const {
  auto m = meta_.find(id);
  return m != meta_.end() && m->second.closedMs > 0 ? m->second.closedMs : 0;
}

void ManagedLedgerImpl::trimConsumedLedgers(bool truncate) {
  if (state_ == State::kClosed || closing_) return;
  std::vector<int64_t> drop = consumedLedgersToDrop(truncate);
  if (drop.empty()) return;
  std::vector<MetadataOp> ops;
  for (int64_t id : drop) {
    ledgers_.removeLedger(id);
    index_.erase(id);
    meta_.erase(id);
    ops.push_back(MetadataOp::delPrefix(indexLedgerPrefix(id)));
  }
  ops.insert(ops.begin(), MetadataOp::put(mlKey(name_), encodeLedgerList(ledgerList())));
  factory_->post([f = factory_, ops = std::move(ops), drop] {
    Status s = f->bgWrite(ops);
    if (!s) {
      MLOG_WARN("deleting ledgers failed: {}", s.toString());
      return;
    }
    f->bgForgetLedgers(drop);
    f->bgReclaim();
  });
}

void ManagedLedgerImpl::onTick() {
  MAGNETAR_DCHECK_ON(*executor_);
  if (state_ == State::kClosed || closing_) return;
  inflight_.trim();  // a burst's array, once idle for a tick
  // Held-back cursor state goes out in every open state (also while a new ledger is pending).
  flushCursors();
  if (state_ != State::kOpen) return;
  auto it = meta_.find(curLedger_);
  if (it != meta_.end() && ledgerTooOld(curAssigned_, it->second.createdMs)) startRollover();
  tickCacheAndRetention();
}

bool ManagedLedgerImpl::relocateRuns(
    const std::vector<DurableManagedLedgerFactory::Relocation>& moved) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (state_ == State::kClosed) return false;
  for (const auto& m : moved) {
    auto it = index_.find(m.from.ledgerId);
    if (it != index_.end()) it->second.relocate(m.from, m.segment, m.offset);
  }
  return true;
}

// ---- close / delete ----

Status ManagedLedgerImpl::terminateRefusal() const {
  if (closing_ || state_ == State::kClosed) return Status::closed("managed ledger closed");
  return Status::ok();
}

bool ManagedLedgerImpl::addsPending() const {
  return !inflight_.empty() || !queued_.empty() || state_ == State::kCreatingLedger;
}

void ManagedLedgerImpl::storeTerminated(Position at, StatusCallback done) {
  std::vector<MetadataOp> ops{MetadataOp::put(terminatedKey(name_), encodeTerminated(at))};
  factory_->post(
      [f = factory_, self = selfPtr(), ops = std::move(ops), done = std::move(done)]() mutable {
        Status s = f->bgWrite(std::move(ops));
        self->executor_->execute([s, done = std::move(done)] { done(s); });
      });
}

ManagedLedgerState ManagedLedgerImpl::exportState() {
  ManagedLedgerState st;
  st.terminatedAt = terminatedAt_;
  for (auto& [id, m] : meta_) {
    if (!ledgers_.find(id)) continue;  // created but never activated: empty
    StoredLedger& l = st.ledgers[id];
    l.meta = m;
    l.index = std::move(index_[id]);
  }
  for (auto& [cname, c] : cursors_) {
    st.cursors[cname] = c->snapshot();
  }
  return st;
}

void ManagedLedgerImpl::maybeFinishClose() {
  maybeFinishTerminate();
  if (!closing_ || state_ == State::kClosed || state_ == State::kCreatingLedger ||
      !inflight_.empty()) {
    return;
  }
  state_ = State::kClosed;
  cache_->clear();
  std::vector<StatusCallback> cbs = std::move(closeCbs_);
  for (auto& [_, c] : cursors_) {
    for (auto& wcb : c->waiting_) cbs.push_back(std::move(wcb));
    c->waiting_.clear();
  }
  std::vector<MetadataOp> ops;
  std::vector<int64_t> ids;
  for (const auto& [id, _] : meta_) ids.push_back(id);
  if (deleting_) {
    ops.push_back(MetadataOp::del(mlKey(name_)));
    ops.push_back(MetadataOp::del(terminatedKey(name_)));
    ops.push_back(MetadataOp::delPrefix(cursorPrefix(name_)));
    for (int64_t id : ids) ops.push_back(MetadataOp::delPrefix(indexLedgerPrefix(id)));
  } else {
    const LedgerInfo* cur = ledgers_.current();
    // (A terminated ledger reopened has its last ledger closed already: its close time stays.)
    if (cur && meta_.count(cur->ledgerId) && meta_[cur->ledgerId].closedAt < 0) {
      meta_[cur->ledgerId].closedAt = cur->entries;
      meta_[cur->ledgerId].closedMs = wallClockMs();
    }
    ops.push_back(MetadataOp::put(mlKey(name_), encodeLedgerList(ledgerList())));
    for (auto& [cname, c] : cursors_) {
      ops.push_back(MetadataOp::put(cursorKey(name_, cname), encodeCursor(c->snapshot())));
    }
  }
  ManagedLedgerState st = deleting_ ? ManagedLedgerState{} : exportState();
  factory_->post([f = factory_, self = selfPtr(), ops = std::move(ops), ids, st = std::move(st),
                  cbs = std::move(cbs), del = deleting_]() mutable {
    Status s = f->bgWrite(std::move(ops));
    if (del) {
      if (s) {
        f->bgForgetLedgers(ids);
        f->bgReclaim();
      }
      f->deleted(self->name_, self.get());
    } else {
      f->released(self->name_, self.get(), std::move(st));
    }
    self->executor_->execute([s, cbs = std::move(cbs)] {
      for (auto& cb : cbs) {
        if (cb) cb(s);
      }
    });
  });
}

}  // namespace magnetar::storage
