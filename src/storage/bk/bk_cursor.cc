// BkManagedCursor: the cursor's state (shared CursorState) and its persistence in Pulsar's form:
// the ManagedCursorInfo znode plus a cursor ledger of PositionInfo entries (ManagedCursorImpl's
// persistPositionToLedger, createNewMetadataLedger / switchToNewLedger, persistPositionMetaStore,
// persistPositionWhenClosing).
#include "base/logging.h"
#include "storage/bk/bk_managed_ledger.h"

namespace magnetar::storage::bk {

BkManagedCursor::BkManagedCursor(std::string name, BkManagedLedger* ml, CursorState state)
    : CoreCursor(std::move(name), ml, std::move(state)), ml_(ml), lastActiveMs_(wallMs()) {}

// ---- persistence ----

std::string BkManagedCursor::positionInfoBytes() const {
  return makePositionInfo(state_, ml_->ledgers_, ml_->limits()).SerializeAsString();
}

void BkManagedCursor::persist() {
  MAGNETAR_DCHECK(!writing_);
  writing_ = true;
  lastWriteMs_ = steadyMs();
  dirty_ = false;
  std::vector<StatusCallback> cbs = std::move(waiting_);
  waiting_.clear();
  if (ml_->state_ == BkManagedLedger::State::kFenced) {
    return persisted(Status::fenced("managed ledger " + ml_->name_ + " fenced"),
                     state_.markDelete(), cbs);
  }
  lastActiveMs_ = wallMs();
  if (znodeVersion_ == metadata::kNotExists) {
    return writeZnode(std::move(cbs), nullptr);  // a new cursor: its znode first
  }
  const auto& o = ml_->opts_;
  const bool rollover =
      !ledger_ || ledgerEntries_ >= o.managedLedgerCursorMaxEntriesPerLedger ||
      wallMs() - ledgerCreatedMs_ >= int64_t{o.managedLedgerCursorRolloverTimeInSeconds} * 1000;
  if (rollover) {
    switchLedger(std::move(cbs));
  } else {
    appendToLedger(std::move(cbs));
  }
}

std::pair<int64_t, int64_t> BkManagedCursor::cursorLedger() const {
  MAGNETAR_DCHECK_ON(*executor());
  if (!ledger_) return {-1, -1};
  return {ledger_->id(), ledgerEntries_ - 1};
}

void BkManagedCursor::appendState(std::function<void(const HandlePtr&, BkResult)> then) {
  Buffer entry = Buffer::copyOf(positionInfoBytes());
  HandlePtr h = ledger_;
  h->loop().execute([h, entry, then = std::move(then)]() mutable {
    h->addEntry(std::move(entry),
                [h, then = std::move(then)](BkResult rc, int64_t) { then(h, rc); });
  });
}

std::vector<int64_t> BkManagedCursor::takeLedgers() {
  std::vector<int64_t> ids;
  if (ledger_) ids.push_back(ledger_->id());
  if (staleLedgerId_ >= 0) ids.push_back(staleLedgerId_);
  ledger_ = nullptr;
  staleLedgerId_ = -1;
  return ids;
}

void BkManagedCursor::appendToLedger(std::vector<StatusCallback> cbs) {
  const Position mark = state_.markDelete();
  auto self = shared_from_this();
  auto ml = ml_->selfPtr();
  appendState([self, ml, mark, cbs = std::move(cbs)](const HandlePtr& h, BkResult rc) {
    ml->gated_->execute([self, ml, h, rc, mark, cbs] {
      if (rc == BkResult::kOk) {
        self->ledgerEntries_++;
        return self->persisted(Status::ok(), mark, cbs);
      }
      if (rc == BkResult::kLedgerFenced) {
        self->ml_->fence("cursor ledger " + std::to_string(h->id()) + " of " + self->name_ +
                         " was fenced");
        return self->persisted(bkStatus(rc, "cursor " + self->name_), mark, cbs);
      }
      // Pulsar's persistPositionToMetaStore: the whole state into the znode, no ledger.
      MLOG_WARN("{}: cursor {}: appending to ledger {}: {}; saving to the znode", self->ml_->name_,
                self->name_, h->id(), bookkeeper::bkResultName(rc));
      if (self->ledger_ == h) self->ledger_ = nullptr;
      self->writeZnode(cbs, h);
    });
  });
}

void BkManagedCursor::switchLedger(std::vector<StatusCallback> cbs) {
  const Position mark = state_.markDelete();
  Buffer entry = Buffer::copyOf(positionInfoBytes());
  auto self = shared_from_this();
  auto ml = ml_->selfPtr();
  const auto& o = ml_->opts_;
  ml_->bk_->createLedger(
      o.managedLedgerDefaultEnsembleSize, o.managedLedgerDefaultWriteQuorum,
      o.managedLedgerDefaultAckQuorum, cursorLedgerMetadata(ml_->pulsarName_, name_),
      [self, ml, entry, mark, cbs = std::move(cbs)](BkResult rc, const HandlePtr& h) mutable {
        if (rc != BkResult::kOk) {
          ml->gated_->execute([self, ml, rc, cbs] {
            MLOG_WARN("{}: cursor {}: creating a cursor ledger: {}; saving to the znode",
                      self->ml_->name_, self->name_, bookkeeper::bkResultName(rc));
            self->writeZnode(cbs, nullptr);
          });
          return;
        }
        // On the new ledger's loop: its first entry, then the znode points at it.
        h->addEntry(std::move(entry), [self, ml, h, mark, cbs](BkResult rc2, int64_t) {
          ml->gated_->execute([self, ml, h, rc2, mark, cbs] {
            if (rc2 != BkResult::kOk) {
              MLOG_WARN("{}: cursor {}: first append to ledger {}: {}; saving to the znode",
                        self->ml_->name_, self->name_, h->id(), bookkeeper::bkResultName(rc2));
              return self->writeZnode(cbs, h);
            }
            self->putZnode(mark, cbs, h, nullptr);
          });
        });
      });
}

void BkManagedCursor::writeZnode(std::vector<StatusCallback> cbs, const HandlePtr& dropLedger) {
  putZnode(state_.markDelete(), std::move(cbs), nullptr, dropLedger);
}

// persistPositionMetaStore: the znode by CAS on its version (creating it for a new cursor).
void BkManagedCursor::putZnode(Position mark, std::vector<StatusCallback> cbs,
                               const HandlePtr& next, const HandlePtr& dropLedger) {
  auto info = makeCursorInfo(next ? next->id() : -1, state_, ml_->ledgers_, ml_->limits(),
                             lastActiveMs_, /*withState=*/!next, cursorProperties_);
  metadata::PutOptions po;
  po.expectedVersion = znodeVersion_;
  auto self = shared_from_this();
  auto ml = ml_->selfPtr();  // keeps the gate (and gated_) alive until the answer
  ml_->store_->put(
      cursorPath(ml_->opts_.root, ml_->name_, name_), info.SerializeAsString(), po, ml_->gated_,
      [self, ml, mark, cbs = std::move(cbs), next, dropLedger](Result<metadata::Stat> r) {
        if (!r.isOk()) {
          Status s = r.status();
          if (next) self->ml_->deleteLedgers({next->id()});
          if (s.code() == StatusCode::kBadVersion) {
            s = Status::fenced("cursor " + self->name_ + " was written by another owner");
            self->ml_->fence("the znode of cursor " + self->name_ + " changed");
          }
          return self->persisted(s, mark, cbs);
        }
        self->znodeVersion_ = r->version;
        // The znode no longer points at the cursor ledgers before: they go.
        std::vector<int64_t> drop = self->takeLedgers();
        if (dropLedger) drop.push_back(dropLedger->id());
        self->ledger_ = next;
        if (next) {
          self->ledgerEntries_ = 1;
          self->ledgerCreatedMs_ = wallMs();
        }
        self->ml_->deleteLedgers(drop);
        self->persisted(Status::ok(), mark, cbs);
      });
}

void BkManagedCursor::persisted(const Status& s, Position mark,
                                const std::vector<StatusCallback>& cbs) {
  writing_ = false;
  if (s.isOk()) persisted_ = mark;
  for (const auto& cb : cbs) {
    if (cb) cb(s);
  }
  if (s.isOk() && !deleted_) ml_->cursorPersisted();
  if (!idle_.empty()) {
    auto idle = std::move(idle_);
    idle_.clear();
    for (auto& f : idle) f();
    return;
  }
  if (!deleted_ && !closing_ && dirty_ && ml_->state_ != BkManagedLedger::State::kClosed &&
      writeDue(steadyMs())) {
    persist();
  }
}

void BkManagedCursor::close(const StatusCallback& done) {
  if (writing_) {
    idle_.push_back([self = shared_from_this(), done] { self->close(done); });
    return;
  }
  const auto& o = ml_->opts_;
  const bool ledgerState = o.managedLedgerMaxUnackedRangesToPersist > 0 &&
                           (static_cast<int>(state_.rangeCount()) >
                                o.managedLedgerMaxUnackedRangesToPersistInMetadataStore ||
                            !state_.batchDeleted().empty());
  if (ledgerState && !ledger_ && !closeMadeLedger_ && znodeVersion_ != metadata::kNotExists &&
      ml_->state_ != BkManagedLedger::State::kFenced) {
    // No cursor ledger yet (the mark-delete rate limit held every write since the znode's):
    // one is made first, as a regular write would, and closed below with the last state.
    closeMadeLedger_ = true;
    idle_.push_back([self = shared_from_this(), done] { self->close(done); });
    persist();
    return;
  }
  closing_ = true;
  writing_ = true;
  dirty_ = false;
  std::vector<StatusCallback> cbs = std::move(waiting_);
  waiting_.clear();
  cbs.push_back(done);
  lastActiveMs_ = wallMs();
  // Pulsar (4.2.4 ManagedCursorImpl.recover) restores batch-index acks only from a cursor
  // ledger's PositionInfo, never from the znode, although it writes them there: partly
  // acknowledged batches also send the last state to the ledger, so that a Pulsar broker taking
  // the topic over does not deliver their acknowledged messages again.
  const bool toLedger = ledger_ && ledgerState;
  if (!toLedger) {
    writeZnode(std::move(cbs), nullptr);
    return;
  }
  // Too many ranges for the znode: the last PositionInfo into the ledger, which is then closed.
  const Position mark = state_.markDelete();
  auto self = shared_from_this();
  auto ml = ml_->selfPtr();
  appendState([self, ml, mark, cbs = std::move(cbs)](const HandlePtr& h, BkResult rc) {
    h->close([self, ml, rc, mark, cbs](BkResult rc2) {
      ml->gated_->execute([self, ml, rc, rc2, mark, cbs] {
        Status s = rc != BkResult::kOk    ? bkStatus(rc, "cursor " + self->name_)
                   : rc2 != BkResult::kOk ? bkStatus(rc2, "closing cursor ledger")
                                          : Status::ok();
        self->persisted(s, mark, cbs);
      });
    });
  });
}

void BkManagedCursor::removeAll(const StatusCallback& done) {
  deleted_ = true;
  if (writing_) {
    idle_.push_back([self = shared_from_this(), done] { self->removeAll(done); });
    return;
  }
  ml_->deleteLedgers(takeLedgers());
  if (znodeVersion_ == metadata::kNotExists) {
    executor()->execute([done] { done(Status::ok()); });
    return;
  }
  ml_->store_->remove(cursorPath(ml_->opts_.root, ml_->name_, name_), std::nullopt, ml_->gated_,
                      [ml = ml_->selfPtr(), done](const Status& s) {
                        done(s.code() == StatusCode::kNotFound ? Status::ok() : s);
                      });
}

}  // namespace magnetar::storage::bk
