// BkManagedLedger: adds, rollover, the ManagedLedgerInfo znode, reads, cursors' scheduling,
// trimming, close and delete. (Open: bk_ml_open.cc; cursors: bk_cursor.cc.)
#include "storage/bk/bk_managed_ledger.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "base/logging.h"

namespace magnetar::storage::bk {

Status bkStatus(BkResult rc, const std::string& what) {
  std::string msg = what + ": " + std::string(bookkeeper::bkResultName(rc));
  switch (rc) {
    case BkResult::kLedgerFenced:
      return Status::fenced(msg);
    case BkResult::kNoSuchLedger:
      return Status::notFound(msg);
    case BkResult::kClientClosed:
      return Status::closed(msg);
    case BkResult::kTimeout:
      return Status::error(StatusCode::kTimeout, msg);
    default:
      return Status::ioError(msg);
  }
}

BkManagedLedger::BkManagedLedger(BkManagedLedgerFactory* factory, std::string name,
                                 net::Executor* executor, bool createIfMissing)
    : ManagedLedgerCore(std::move(name), executor, factory->options_, factory->cache_,
                        factory->cache_->newCache(), this),
      factory_(factory),
      opts_(factory->options_),
      bk_(factory->bk_),
      store_(factory->store_),
      pulsarName_(pulsarLedgerName(name_)),
      path_(managedLedgerPath(opts_.root, name_)),
      createIfMissing_(createIfMissing),
      gate_(factory->gate_),
      gated_(gate_->wrap(executor)) {
  setTaskExecutor(gated_);
}

BkManagedLedger::~BkManagedLedger() = default;

// ---- adds ----

Status BkManagedLedger::writeRefusal() const {
  if (closing_ || state_ == State::kClosed || stopped_) {
    return Status::closed("managed ledger " + name_ + " closed");
  }
  if (state_ == State::kFenced) {
    return Status::fenced("managed ledger " + name_ + " fenced: another broker owns it now");
  }
  if (state_ == State::kTerminated || terminating_) {
    return Status::notAllowed("managed ledger " + name_ + " is terminated");
  }
  return Status::ok();
}

Status BkManagedLedger::addRefusal() { return writeRefusal(); }

void BkManagedLedger::drainQueued() {
  while (!queued_.empty()) {
    if (state_ == State::kNeedLedger) {
      startRollover();
      return;
    }
    if (state_ != State::kOpen) return;
    if (needsRollover()) {
      startRollover();
      return;
    }
    auto& [data, cb] = queued_.front();
    Position pos{current_->id(), curAssigned_++};
    curAssignedBytes_ += static_cast<int64_t>(data.size());
    toSend_.push_back(data);
    inflight_.push_back(PendingAdd{pos, std::move(data), std::move(cb)});
    queued_.pop_front();
  }
  // One hand-over to the ledger's loop per executor pass, with every add of the pass.
  if (!toSend_.empty() && !sendScheduled_) {
    sendScheduled_ = true;
    gated_->execute([self = selfPtr()] { self->flushSends(); });
  }
}

void BkManagedLedger::flushSends() {
  sendScheduled_ = false;
  if (toSend_.empty() || !current_) return;
  std::vector<Buffer> data = std::move(toSend_);
  toSend_.clear();
  sendTo(current_, std::move(data));
}

void BkManagedLedger::sendTo(const HandlePtr& h, std::vector<Buffer> data) {
  std::shared_ptr<AddSink> sink = sink_;
  h->loop().execute([self = selfPtr(), h, sink, data = std::move(data)]() mutable {
    const int64_t ledgerId = h->id();
    net::EventLoop* loop = &h->loop();
    for (Buffer& d : data) {
      // Completions of one loop pass go back to the executor together.
      h->addEntry(std::move(d), [self, loop, sink, ledgerId](BkResult rc, int64_t entryId) {
        sink->done.emplace_back(entryId, rc);
        if (sink->scheduled) return;
        sink->scheduled = true;
        loop->execute([self, sink, ledgerId] {
          sink->scheduled = false;
          std::vector<std::pair<int64_t, BkResult>> batch = std::move(sink->done);
          sink->done.clear();
          self->gated_->execute([self, ledgerId, batch = std::move(batch)] {
            self->onAddsCompleted(ledgerId, batch);
          });
        });
      });
    }
  });
}

void BkManagedLedger::onAddsCompleted(int64_t ledgerId,
                                      const std::vector<std::pair<int64_t, BkResult>>& done) {
  MAGNETAR_DCHECK_ON(*executor_);
  bool failed = false;
  for (const auto& [entryId, result] : done) {
    // Adds already failed (fencing) or taken back for a resend are gone from inflight_; their
    // late results are ignored.
    if (inflight_.empty() || inflight_.front().pos.ledgerId != ledgerId) continue;
    BkResult rc = result;
    if (rc == BkResult::kOk && entryId != inflight_.front().pos.entryId) {
      MLOG_ERROR("{}: ledger {} confirmed entry {} where {} was expected", name_, ledgerId, entryId,
                 inflight_.front().pos.entryId);
      rc = BkResult::kDuplicateEntryId;
    }
    if (rc == BkResult::kOk) {
      brokenStreak_ = 0;
      PendingAdd a = std::move(inflight_.front());
      inflight_.pop_front();
      entryConfirmed(a.pos, a.data);
      a.cb(Status::ok(), a.pos);
      continue;
    }
    Status s = bkStatus(rc, "adding to ledger " + std::to_string(ledgerId) + " of " + name_);
    if (rc == BkResult::kLedgerFenced) {
      PendingAdd a = std::move(inflight_.front());
      inflight_.pop_front();
      a.cb(s, {});
      fence("ledger " + std::to_string(ledgerId) + " was fenced by a recovery");
      return;
    }
    failed = true;
    if (!resendable(rc)) {
      PendingAdd a = std::move(inflight_.front());
      inflight_.pop_front();
      a.cb(s, {});
      continue;
    }
    // The ledger is broken (BookKeeper fails every later add of the handle too): this add and
    // every one after it go back to the head of the queue, in order, for the next ledger
    // (Pulsar's ManagedLedgerImpl.ledgerClosed / createLedgerAfterClosed).
    MLOG_WARN("{}: {}; resending {} add(s) in a new ledger", name_, s.toString(), inflight_.size());
    requeueInflight();
    break;
  }
  // A failed add leaves the ledger unusable: close it at its last confirmed entry and go on in a
  // new one, where the taken-back adds are resent first.
  if (failed && state_ == State::kOpen && current_ && current_->id() == ledgerId) {
    ++brokenStreak_;
    startRollover();
  }
  if (closing_) failQueued(Status::closed("managed ledger " + name_ + " closed"));
  if (state_ == State::kRollover) closeOldLedgerIfDrained();
  maybeFinishClose();
}

bool BkManagedLedger::resendable(BkResult rc) {
  switch (rc) {
    case BkResult::kLedgerFenced:      // another owner: the topic closes
    case BkResult::kIllegalOp:         // the entry itself is refused (too large)
    case BkResult::kDuplicateEntryId:  // stored at another id: a resend would duplicate it
    case BkResult::kClientClosed:      // shutting down
      return false;
    default:
      return true;
  }
}

void BkManagedLedger::requeueInflight() {
  toSend_.clear();  // assigned to the broken ledger and not sent yet: in inflight_ too
  for (size_t i = inflight_.size(); i-- > 0;) {
    queued_.push_front({std::move(inflight_[i].data), std::move(inflight_[i].cb)});
  }
  inflight_.clear();
  ++resentLedgers_;
}

void BkManagedLedger::failAll(const Status& s) {
  toSend_.clear();
  auto in = std::move(inflight_);
  inflight_.clear();
  for (auto& a : in) a.cb(s, {});
  failQueued(s);
}

void BkManagedLedger::fence(const std::string& why, bool log) {
  if (state_ == State::kFenced) return;
  if (log) MLOG_WARN("{}: fenced ({}); adds fail from now on, the topic must close", name_, why);
  state_ = State::kFenced;
  failAll(Status::fenced("managed ledger " + name_ + " fenced: " + why));
  maybeFinishClose();
}

// ---- rollover ----

bool BkManagedLedger::needsRollover() const {
  return ledgerFull(curAssigned_, curAssignedBytes_, curCreatedMs_);
}

// Pulsar's order: the old ledger is closed once its adds completed, a new one is created, and the
// ledger list with both goes to the znode (CAS) before adds resume in the new one. Here the
// create runs while the old ledger drains.
void BkManagedLedger::startRollover() {
  if (state_ != State::kOpen && state_ != State::kNeedLedger) return;
  flushSends();  // adds assigned to the current ledger leave before it closes
  state_ = State::kRollover;
  rolloverError_ = Status::ok();
  rollingOld_ = current_;
  oldCloseStarted_ = false;
  if (current_) readers_[current_->id()] = current_;
  current_ = nullptr;
  rolloverSteps_ = rollingOld_ ? 2 : 1;
  std::chrono::milliseconds wait = rolloverBackoff(brokenStreak_);
  if (wait.count() == 0) {
    createNextLedger();
  } else {
    MLOG_WARN("{}: {} ledgers broke in a row; the next one in {} ms", name_, brokenStreak_,
              wait.count());
    // The executor has no timer: a bookkeeper-io loop's, then back through gated_.
    net::EventLoop& loop = bk_->loopFor(rollingOld_ ? rollingOld_->id() : 0);
    loop.execute([self = selfPtr(), &loop, wait] {
      auto timer = std::make_shared<boost::asio::steady_timer>(loop.context(), wait);
      timer->async_wait([self, timer](const boost::system::error_code&) {
        self->gated_->execute([self] { self->createNextLedger(); });
      });
    });
  }
  closeOldLedgerIfDrained();
}

std::chrono::milliseconds BkManagedLedger::rolloverBackoff(int streak) {
  if (streak <= 1) return std::chrono::milliseconds(0);
  int64_t ms = int64_t{100} << std::min(streak - 2, 6);  // 100, 200, ... 6400
  return std::chrono::milliseconds(std::min<int64_t>(ms, 5000));
}

void BkManagedLedger::createNextLedger() {
  MAGNETAR_DCHECK_ON(*executor_);
  if (state_ == State::kRollover && closing_) {  // closing meanwhile: no new ledger
    rolloverError_ = Status::closed("managed ledger " + name_ + " closed");
  }
  if (state_ != State::kRollover || closing_) {  // fenced meanwhile: maybeFinishRollover ends it
    --rolloverSteps_;
    return maybeFinishRollover();
  }
  auto self = selfPtr();
  bk_->createLedger(opts_.managedLedgerDefaultEnsembleSize, opts_.managedLedgerDefaultWriteQuorum,
                    opts_.managedLedgerDefaultAckQuorum, dataLedgerMetadata(pulsarName_),
                    [self](BkResult rc, const HandlePtr& h) {
                      self->gated_->execute([self, rc, h] { self->onNewLedger(rc, h); });
                    });
}

void BkManagedLedger::closeOldLedgerIfDrained() {
  if (!rollingOld_ || oldCloseStarted_ || !inflight_.empty()) return;
  oldCloseStarted_ = true;
  HandlePtr old = rollingOld_;
  auto self = selfPtr();
  old->loop().execute([self, old] {
    old->close([self](BkResult rc) {
      self->gated_->execute([self, rc] { self->onOldLedgerClosed(rc); });
    });
  });
}

void BkManagedLedger::onOldLedgerClosed(BkResult rc) {
  MAGNETAR_DCHECK_ON(*executor_);
  --rolloverSteps_;
  const int64_t id = rollingOld_->id();
  rollingOld_ = nullptr;
  if (rc == BkResult::kMetadataVersion || rc == BkResult::kLedgerFenced) {
    fence("ledger " + std::to_string(id) + " was recovered by another client");
  } else if (rc != BkResult::kOk) {
    // As Pulsar: the list records what was confirmed; the next reader recovers the ledger.
    MLOG_WARN("{}: closing ledger {}: {}", name_, id, bookkeeper::bkResultName(rc));
  }
  const LedgerInfo* li = ledgers_.find(id);
  if (li && li->entries > 0) {
    auto& info = info_[id];
    info.set_entries(li->entries);
    info.set_size(li->sizeBytes);
    info.set_timestamp(wallMs());
  } else if (state_ != State::kFenced) {
    info_.erase(id);
    ledgers_.removeLedger(id);
    forgetReader(id);
    emptyLedgers_.push_back(id);
  }
  maybeFinishRollover();
}

void BkManagedLedger::onNewLedger(BkResult rc, HandlePtr h) {
  MAGNETAR_DCHECK_ON(*executor_);
  --rolloverSteps_;
  if (rc == BkResult::kOk) {
    rollingNew_ = std::move(h);
  } else {
    rolloverError_ = bkStatus(rc, "creating a ledger for " + name_);
  }
  maybeFinishRollover();
}

void BkManagedLedger::maybeFinishRollover() {
  if (rolloverSteps_ > 0) return;
  HandlePtr h = std::move(rollingNew_);
  rollingNew_ = nullptr;
  if (state_ != State::kRollover) {  // fenced meanwhile
    if (h) deleteLedgers({h->id()});
    maybeFinishClose();
    return;
  }
  if (!rolloverError_.isOk()) {
    MLOG_WARN("{}: {}", name_, rolloverError_.toString());
    ++brokenStreak_;
    state_ = State::kNeedLedger;
    failQueued(rolloverError_);
    maybeFinishClose();
    return;
  }
  const int64_t created = wallMs();
  mledger::ManagedLedgerInfo::LedgerInfo li;
  li.set_ledgerid(h->id());
  li.set_timestamp(0);
  info_[h->id()] = li;
  writeInfo([self = selfPtr(), h, created](const Status& s) {
    if (!s.isOk()) {
      self->info_.erase(h->id());
      self->deleteLedgers({h->id()});
      if (self->state_ == State::kRollover) {
        self->state_ = State::kNeedLedger;
        self->failQueued(s);
      }
      self->maybeFinishClose();
      return;
    }
    self->activate(h, created);
  });
}

void BkManagedLedger::activate(HandlePtr h, int64_t createdMs) {
  current_ = std::move(h);
  sink_ = std::make_shared<AddSink>();
  curAssigned_ = 0;
  curAssignedBytes_ = 0;
  curCreatedMs_ = createdMs;
  ledgers_.addLedger(current_->id(), createdMs);
  deleteLedgers(emptyLedgers_);
  emptyLedgers_.clear();
  if (state_ == State::kInitializing) return;  // open() goes on with the cursors
  state_ = State::kOpen;
  trimConsumedLedgers();
  if (closing_) {
    maybeFinishClose();
    return;
  }
  drainQueued();
}

void BkManagedLedger::deleteLedgers(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    bk_->deleteLedger(id, [name = name_, id](BkResult rc) {
      if (rc != BkResult::kOk && rc != BkResult::kNoSuchLedger) {
        MLOG_WARN("{}: deleting ledger {}: {}", name, id, bookkeeper::bkResultName(rc));
      }
    });
  }
}

// ---- the ManagedLedgerInfo znode ----

mledger::ManagedLedgerInfo BkManagedLedger::infoMessage() const {
  mledger::ManagedLedgerInfo m = base_;
  m.clear_ledgerinfo();
  for (const auto& [_, li] : info_) *m.add_ledgerinfo() = li;
  return m;
}

void BkManagedLedger::writeInfo(StatusCallback cb) {
  infoWriters_.push_back(std::move(cb));
  if (!infoWriting_) startInfoWrite();
}

void BkManagedLedger::startInfoWrite() {
  infoWriting_ = true;
  std::vector<StatusCallback> cbs = std::move(infoWriters_);
  infoWriters_.clear();
  metadata::PutOptions o;
  o.expectedVersion = version_;
  store_->put(path_, infoMessage().SerializeAsString(), o, gated_,
              [self = selfPtr(), cbs = std::move(cbs)](Result<metadata::Stat> r) {
                self->infoWriting_ = false;
                Status s = r.status();
                if (r.isOk()) {
                  self->version_ = r->version;
                } else if (s.code() == StatusCode::kBadVersion) {
                  s = Status::fenced(self->path_ + " was written by another owner");
                  self->fence("its znode was written by another owner");
                } else {
                  MLOG_WARN("{}: writing {}: {}", self->name_, self->path_, s.toString());
                }
                for (const auto& cb : cbs) cb(s);
                if (!self->infoWriters_.empty() && !self->infoWriting_) self->startInfoWrite();
                self->maybeFinishClose();
              });
}

// ---- reads ----

void BkManagedLedger::read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
                           ReadEntriesCallback cb) {
  const LedgerInfo* info = ledgers_.find(ledgerId);
  if (!info) {
    executor_->execute([cb = std::move(cb)] { cb(Status::ok(), {}); });
    return;
  }
  // As many entries as the byte limit allows at the ledger's mean entry size (one more, cut
  // after the read).
  const int64_t mean = std::max<int64_t>(1, info->sizeBytes / std::max<int64_t>(1, info->entries));
  last = std::min(last, first + static_cast<int64_t>(maxBytes) / mean);
  auto self = selfPtr();
  withReadHandle(ledgerId, [self, ledgerId, first, last, maxBytes, cb = std::move(cb)](
                               const Status& s, const HandlePtr& h) mutable {
    if (!s.isOk()) {
      cb(s, {});
      return;
    }
    h->loop().execute([self, h, ledgerId, first, last, maxBytes, cb = std::move(cb)]() mutable {
      h->readEntries(
          first, last,
          [self, ledgerId, maxBytes, cb = std::move(cb)](
              BkResult rc, std::vector<bookkeeper::LedgerEntry> got) mutable {
            self->gated_->execute([ledgerId, rc, got = std::move(got), maxBytes,
                                   cb = std::move(cb)]() mutable {
              if (rc != BkResult::kOk) {
                cb(bkStatus(rc, "reading ledger " + std::to_string(ledgerId)), {});
                return;
              }
              std::vector<Entry> entries;
              entries.reserve(got.size());
              size_t bytes = 0;
              for (auto& e : got) {
                if (!entries.empty() && bytes + e.payload.size() > maxBytes) break;
                bytes += e.payload.size();
                entries.push_back(Entry{Position{ledgerId, e.entryId}, Buffer::copyOf(e.payload)});
              }
              cb(Status::ok(), std::move(entries));
            });
          });
    });
  });
}

void BkManagedLedger::withReadHandle(int64_t ledgerId, std::function<void(Status, HandlePtr)> fn) {
  if (current_ && current_->id() == ledgerId) return fn(Status::ok(), current_);
  if (auto it = readers_.find(ledgerId); it != readers_.end()) return fn(Status::ok(), it->second);
  auto& waiters = openingReaders_[ledgerId];
  waiters.push_back(std::move(fn));
  if (waiters.size() > 1) return;
  auto self = selfPtr();
  bk_->openLedger(
      ledgerId,
      [self, ledgerId](BkResult rc, const HandlePtr& h) {
        self->gated_->execute([self, ledgerId, rc, h] {
          auto w = std::move(self->openingReaders_[ledgerId]);
          self->openingReaders_.erase(ledgerId);
          Status s = rc == BkResult::kOk
                         ? Status::ok()
                         : bkStatus(rc, "opening ledger " + std::to_string(ledgerId));
          if (s.isOk() && self->state_ != State::kClosed && self->ledgers_.find(ledgerId)) {
            self->readers_[ledgerId] = h;
          }
          for (auto& f : w) f(s, h);
        });
      },
      /*recovery=*/false);
}

void BkManagedLedger::forgetReader(int64_t ledgerId) { readers_.erase(ledgerId); }

// ---- cursors ----

CursorPersistLimits BkManagedLedger::limits() const {
  return CursorPersistLimits{opts_.managedLedgerMaxUnackedRangesToPersist,
                             opts_.managedLedgerMaxBatchDeletedIndexToPersist};
}

std::shared_ptr<CoreCursor> BkManagedLedger::makeCursor(const std::string& name,
                                                        CursorState state) {
  // Its first write makes its znode (Pulsar's ManagedCursorImpl.initialize).
  return std::make_shared<BkManagedCursor>(name, this, std::move(state));
}

Status BkManagedLedger::cursorChangeRefusal() const {
  // The cursors' znodes and ledgers are the new owner's now.
  if (state_ == State::kFenced) return Status::fenced("managed ledger " + name_ + " fenced");
  return Status::ok();
}

void BkManagedLedger::removeCursor(std::shared_ptr<CoreCursor> c) {
  bkCursor(c)->removeAll([name = name_, cursor = c->name()](const Status& s) {
    if (!s.isOk()) MLOG_WARN("{}: deleting cursor {}: {}", name, cursor, s.toString());
  });
}

void BkManagedLedger::storeCursors(const std::vector<CoreCursor*>& due) {
  for (CoreCursor* c : due) static_cast<BkManagedCursor*>(c)->persist();
}

void BkManagedLedger::cursorPersisted() { trimConsumedLedgers(); }

// ---- housekeeping ----

int64_t BkManagedLedger::ledgerClosedMs(int64_t id) const {
  auto in = info_.find(id);
  return in != info_.end() && in->second.timestamp() > 0 ? in->second.timestamp() : 0;
}

void BkManagedLedger::trimConsumedLedgers(bool truncate) {
  if (state_ != State::kOpen || closing_ || trimming_) return;
  std::vector<int64_t> drop = consumedLedgersToDrop(truncate);
  if (drop.empty()) return;
  std::vector<mledger::ManagedLedgerInfo::LedgerInfo> removed;
  for (int64_t id : drop) {
    if (auto in = info_.find(id); in != info_.end()) {
      removed.push_back(in->second);
      info_.erase(in);
    }
  }
  trimming_ = true;
  writeInfo([self = selfPtr(), drop, removed](const Status& s) {
    self->trimming_ = false;
    if (!s.isOk()) {
      if (self->state_ != State::kFenced) {
        for (const auto& li : removed) self->info_[li.ledgerid()] = li;
      }
      return;
    }
    for (int64_t id : drop) {
      self->ledgers_.removeLedger(id);
      self->forgetReader(id);
    }
    self->deleteLedgers(drop);
    self->factory_->ledgersDeleted_.fetch_add(drop.size(), std::memory_order_relaxed);
    self->trimConsumedLedgers();  // what became consumed meanwhile
  });
}

void BkManagedLedger::onTick() {
  MAGNETAR_DCHECK_ON(*executor_);
  if (closing_ || state_ == State::kClosed || state_ == State::kInitializing) return;
  inflight_.trim();  // a burst's array, once idle for a tick
  flushCursors();    // what the mark-delete rate limit held back
  if (state_ != State::kOpen) return;
  if (ledgerTooOld(curAssigned_, curCreatedMs_)) {
    startRollover();
    return;
  }
  tickCacheAndRetention();
}

// ---- close / delete ----

void BkManagedLedger::asyncRelease(StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  // As a fenced ledger: adds fail, the close writes nothing (no BookKeeper close, no cursor
  // znode), the new owner recovers what was last written.
  fence("released: this broker no longer owns it", /*log=*/false);
  asyncClose(std::move(cb));
}

Status BkManagedLedger::terminateRefusal() const {
  if (state_ == State::kTerminated || terminating_) return Status::ok();
  return writeRefusal();
}

bool BkManagedLedger::addsPending() const {
  return !inflight_.empty() || !queued_.empty() || rolloverSteps_ > 0 ||
         state_ == State::kInitializing;
}

Status BkManagedLedger::terminateFinishRefusal() const {
  if (state_ == State::kFenced) return Status::fenced("managed ledger " + name_ + " fenced");
  if (state_ == State::kClosed) return Status::closed("managed ledger " + name_ + " closed");
  return Status::ok();
}

void BkManagedLedger::storeTerminated(Position at, StatusCallback done) {
  state_ = State::kTerminated;
  auto* tp = base_.mutable_terminatedposition();
  tp->set_ledgerid(at.ledgerId);
  tp->set_entryid(at.entryId);
  writeInfo(std::move(done));
}

void BkManagedLedger::maybeFinishClose() {
  maybeFinishTerminate();
  if (!closing_ || closeStarted_ || state_ == State::kClosed) return;
  if (!inflight_.empty() || rolloverSteps_ > 0 || infoWriting_ || trimming_ ||
      state_ == State::kInitializing) {
    return;  // called again when they finish
  }
  closeStarted_ = true;
  finishClose();
}

// The current ledger closed (BookKeeper CLOSED at its last entry), then each cursor's last state
// written (or, when deleting, the cursors, ledgers and znode removed). A fenced ledger writes
// nothing: the new owner has the ledger and the cursors.
void BkManagedLedger::finishClose() {
  auto self = selfPtr();
  auto left = std::make_shared<int>(1);
  auto first = std::make_shared<Status>();
  auto step = [self, left, first](const Status& s) {
    if (!s.isOk() && first->isOk()) *first = s;
    if (--*left > 0) return;
    auto done = [self](const Status& result) {
      self->state_ = State::kClosed;
      self->cache_->clear();
      self->readers_.clear();
      self->factory_->released(self->name_, self.get());
      auto cbs = std::move(self->closeCbs_);
      self->closeCbs_.clear();
      for (auto& cb : cbs) {
        if (cb) cb(result);
      }
    };
    if (!self->deleting_) return done(*first);
    std::vector<int64_t> ids;
    for (const auto& [id, _] : self->info_) ids.push_back(id);
    self->deleteLedgers(ids);
    self->factory_->ledgersDeleted_.fetch_add(ids.size(), std::memory_order_relaxed);
    self->store_->remove(self->path_, std::nullopt, self->gated_, [done, first](const Status& s) {
      Status r = *first;
      if (r.isOk() && !s.isOk() && s.code() != StatusCode::kNotFound) r = s;
      done(r);
    });
  };
  const bool fenced = state_ == State::kFenced;
  if (fenced && deleting_) {  // the data is the new owner's now
    deleting_ = false;
    *first = Status::fenced("managed ledger " + name_ + " fenced: not deleted");
  }
  if (current_ && !fenced && !deleting_) {
    ++*left;
    HandlePtr h = current_;
    h->loop().execute([self, h, step] {
      h->close([self, step](BkResult rc) {
        self->gated_->execute([step, rc] {
          step(rc == BkResult::kOk ? Status::ok() : bkStatus(rc, "closing the current ledger"));
        });
      });
    });
  }
  if (!fenced) {
    for (auto& [_, c] : cursors_) {
      ++*left;
      if (deleting_) {
        bkCursor(c)->removeAll(step);
      } else {
        bkCursor(c)->close(step);
      }
    }
  }
  step(Status::ok());
}

}  // namespace magnetar::storage::bk
