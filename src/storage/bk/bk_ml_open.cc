// BkManagedLedger::open, as Pulsar's ManagedLedgerImpl.initialize / initializeBookKeeper /
// initializeCursors: read (or create) the ManagedLedgerInfo znode, recover the last ledger with
// fencing, drop empty ledgers, create a new ledger and write the list by CAS, then recover every
// cursor (ManagedCursorImpl.recover).
#include "base/logging.h"
#include "storage/bk/bk_managed_ledger.h"

namespace magnetar::storage::bk {

void BkManagedLedger::open(const StatusCallback& done) {
  MAGNETAR_DCHECK_ON(*executor_);
  auto self = selfPtr();
  auto fail = [self, done](const Status& s) {
    self->state_ = State::kClosed;
    done(s);
  };
  loadInfo([self, done, fail](const Status& s) {
    if (!s.isOk()) return fail(s);
    self->recoverLastLedger([self, done, fail](const Status& s2) {
      if (!s2.isOk()) return fail(s2);
      // Ledgers without entries leave the list (deleted once the new list is written).
      for (auto it = self->info_.begin(); it != self->info_.end();) {
        if (it->second.entries() == 0 && !self->base_.has_terminatedposition()) {
          self->emptyLedgers_.push_back(it->first);
          it = self->info_.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& [id, li] : self->info_) {
        self->ledgers_.addLedger(LedgerInfo{id, li.entries(), li.size(), li.timestamp()});
      }
      auto cursors = [self, done, fail](const Status& s3) {
        if (!s3.isOk()) return fail(s3);
        self->recoverCursors([self, done, fail](const Status& s4) {
          if (!s4.isOk()) return fail(s4);
          if (self->state_ == State::kInitializing) self->state_ = State::kOpen;
          MLOG_INFO("{}: opened, ledgers {}, current {}, {} entries, {} cursors", self->name_,
                    self->info_.size(), self->currentLedgerId(), self->ledgers_.totalEntries(),
                    self->cursors_.size());
          done(Status::ok());
        });
      };
      if (self->base_.has_terminatedposition()) {
        self->state_ = State::kTerminated;  // no new ledger: no more adds
        const auto& tp = self->base_.terminatedposition();
        self->terminatedAt_ = Position{tp.ledgerid(), tp.entryid()};
        return cursors(Status::ok());
      }
      self->createFirstLedger(cursors);
    });
  });
}

void BkManagedLedger::loadInfo(const StatusCallback& done) {
  auto self = selfPtr();
  store_->get(path_, gated_, [self, done](Result<std::optional<metadata::GetResult>> r) {
    if (!r.isOk()) return done(r.status());
    if (!*r) {
      // ManagedLedgerImpl.initialize with createIfMissing=false: ManagedLedgerNotFoundException.
      if (!self->createIfMissing_) {
        return done(Status::notFound("managed ledger " + self->name_ + " does not exist"));
      }
      // As MetaStoreImpl.getManagedLedgerInfo: the node is created empty ("must not exist").
      metadata::PutOptions o;
      o.expectedVersion = metadata::kNotExists;
      self->store_->put(self->path_, "", o, self->gated_, [self, done](Result<metadata::Stat> p) {
        if (p.isOk()) {
          self->version_ = p->version;
          return done(Status::ok());
        }
        if (p.status().code() == StatusCode::kBadVersion) {
          return self->loadInfo(done);  // created meanwhile: read it
        }
        done(p.status());
      });
      return;
    }
    auto info = parseManagedLedgerInfo((*r)->value);
    if (!info.isOk()) {
      return done(
          Status::error(info.status().code(), self->path_ + ": " + info.status().message()));
    }
    self->version_ = (*r)->stat.version;
    self->base_ = *info;
    const int64_t now = wallMs();
    for (const auto& li : info->ledgerinfo()) {
      auto copy = li;
      // MetaStoreImpl.updateMLInfoTimestamp: a missing or zero close time becomes now.
      if (!copy.has_timestamp() || copy.timestamp() == 0) copy.set_timestamp(now);
      self->info_[copy.ledgerid()] = copy;
    }
    done(Status::ok());
  });
}

// The last ledger may still be written by a previous owner: open it with recovery (fencing that
// writer) and take its real length (ManagedLedgerImpl.initialize).
void BkManagedLedger::recoverLastLedger(const StatusCallback& done) {
  if (info_.empty()) return done(Status::ok());
  const int64_t id = info_.rbegin()->first;
  auto self = selfPtr();
  bk_->openLedger(
      id,
      [self, id, done](BkResult rc, const HandlePtr& h) {
        const int64_t lac = h ? h->lastAddConfirmed() : -1;  // on the ledger's loop
        const int64_t length = h ? h->length() : 0;
        self->gated_->execute([self, id, done, rc, h, lac, length] {
          if (rc == BkResult::kNoSuchLedger) {
            MLOG_WARN("{}: ledger {} does not exist; dropped from the list", self->name_, id);
            self->info_.erase(id);
            return done(Status::ok());
          }
          if (rc != BkResult::kOk)
            return done(bkStatus(rc, "recovering ledger " + std::to_string(id)));
          auto& li = self->info_[id];
          li.set_entries(lac + 1);
          li.set_size(length);
          li.set_timestamp(wallMs());
          self->readers_[id] = h;
          done(Status::ok());
        });
      },
      /*recovery=*/true);
}

void BkManagedLedger::createFirstLedger(const StatusCallback& done) {
  auto self = selfPtr();
  bk_->createLedger(opts_.managedLedgerDefaultEnsembleSize, opts_.managedLedgerDefaultWriteQuorum,
                    opts_.managedLedgerDefaultAckQuorum, dataLedgerMetadata(pulsarName_),
                    [self, done](BkResult rc, const HandlePtr& h) {
                      self->gated_->execute([self, done, rc, h] {
                        if (rc != BkResult::kOk)
                          return done(bkStatus(rc, "creating a ledger for " + self->name_));
                        const int64_t created = wallMs();
                        mledger::ManagedLedgerInfo::LedgerInfo li;
                        li.set_ledgerid(h->id());
                        li.set_timestamp(0);
                        self->info_[h->id()] = li;
                        self->writeInfo([self, done, h, created](const Status& s) {
                          if (!s.isOk()) {
                            self->info_.erase(h->id());
                            self->deleteLedgers({h->id()});
                            return done(s);
                          }
                          self->activate(h, created);
                          done(Status::ok());
                        });
                      });
                    });
}

void BkManagedLedger::recoverCursors(const StatusCallback& done) {
  auto self = selfPtr();
  store_->getChildren(path_, gated_, [self, done](Result<std::vector<std::string>> r) {
    if (!r.isOk()) return done(r.status());
    if (r->empty()) return done(Status::ok());
    auto left = std::make_shared<size_t>(r->size());
    auto first = std::make_shared<Status>();
    for (const std::string& cursor : *r) {
      self->recoverCursor(cursor, [left, first, done](const Status& s) {
        if (!s.isOk() && first->isOk()) *first = s;
        if (--*left == 0) done(*first);
      });
    }
  });
}

// ManagedCursorImpl.recover: the position is in the znode (cursorsLedgerId -1) or in the last
// entry of the cursor ledger, opened with recovery. A ledger or entry that is gone rolls the
// cursor back to the znode's snapshot (getRollbackPosition).
void BkManagedLedger::recoverCursor(const std::string& cursor, const StatusCallback& done) {
  auto self = selfPtr();
  const std::string path = cursorPath(opts_.root, name_, cursor);
  store_->get(
      path, gated_, [self, cursor, path, done](Result<std::optional<metadata::GetResult>> r) {
        if (!r.isOk()) return done(r.status());
        if (!*r) return done(Status::ok());  // removed meanwhile
        auto info = parseManagedCursorInfo((*r)->value);
        if (!info.isOk()) {
          return done(Status::error(info.status().code(), path + ": " + info.status().message()));
        }
        const metadata::Version version = (*r)->stat.version;
        const int64_t lid = info->cursorsledgerid();
        if (lid == -1) {
          self->addRecoveredCursor(cursor, cursorMetaFrom(*info), *info, version);
          return done(Status::ok());
        }
        auto rollback = [self, cursor, info = *info, version, done, lid](BkResult rc) {
          MLOG_WARN("{}: cursor {}: ledger {}: {}; back to the position in its znode", self->name_,
                    cursor, lid, bookkeeper::bkResultName(rc));
          self->addRecoveredCursor(cursor, cursorMetaFrom(info), info, version);
          done(Status::ok());
        };
        self->bk_->openLedger(
            lid,
            [self, cursor, info = *info, version, done, lid, rollback](BkResult rc,
                                                                       const HandlePtr& h) {
              const bool notRecoverable =
                  rc == BkResult::kNoSuchLedger || rc == BkResult::kNoSuchEntry;
              if (rc != BkResult::kOk || h->lastAddConfirmed() < 0) {
                self->gated_->execute([self, rc, done, lid, rollback, notRecoverable] {
                  if (rc == BkResult::kOk || notRecoverable) return rollback(rc);
                  done(bkStatus(rc, "recovering cursor ledger " + std::to_string(lid)));
                });
                return;
              }
              const int64_t lac = h->lastAddConfirmed();
              h->readEntries(
                  lac, lac,
                  [self, h, cursor, info, version, done, lid, rollback](
                      BkResult rc2, std::vector<bookkeeper::LedgerEntry> es) {
                    self->gated_->execute([self, cursor, info, version, done, lid, rollback, rc2,
                                           es = std::move(es)] {
                      if (rc2 == BkResult::kNoSuchEntry || rc2 == BkResult::kNoSuchLedger) {
                        return rollback(rc2);
                      }
                      if (rc2 != BkResult::kOk || es.empty()) {
                        return done(bkStatus(rc2, "reading cursor ledger " + std::to_string(lid)));
                      }
                      auto pi = parsePositionInfo(es.back().payload);
                      if (!pi.isOk()) {
                        return done(Status::corruption(self->name_ + ": cursor " + cursor +
                                                       ": ledger " + std::to_string(lid) + ": " +
                                                       pi.status().message()));
                      }
                      self->addRecoveredCursor(cursor, cursorMetaFrom(*pi), info, version);
                      done(Status::ok());
                    });
                  });
            },
            /*recovery=*/true);
      });
}

void BkManagedLedger::addRecoveredCursor(const std::string& cursor, const CursorMeta& meta,
                                         const mledger::ManagedCursorInfo& info,
                                         metadata::Version version) {
  CursorState s = restoreCursor(meta, ledgers_, ledgers_.lastConfirmed());
  auto c = std::make_shared<BkManagedCursor>(cursor, this, std::move(s));
  c->znodeVersion_ = version;
  c->staleLedgerId_ = info.cursorsledgerid() >= 0 ? info.cursorsledgerid() : -1;
  c->persisted_ = c->state_.markDelete();
  if (info.has_lastactive()) c->lastActiveMs_ = info.lastactive();
  for (const auto& p : info.cursorproperties()) c->cursorProperties_[p.name()] = p.value();
  MLOG_INFO("{}: cursor {} recovered at {}:{} ({} acked ranges)", name_, cursor,
            c->state_.markDelete().ledgerId, c->state_.markDelete().entryId,
            c->state_.rangeCount());
  cursors_[cursor] = std::move(c);
}

}  // namespace magnetar::storage::bk
