// Opening a ledger with recovery (BookKeeper's LedgerRecoveryOp): mark the metadata IN_RECOVERY,
// fence the ledger on the last ensemble (READ of entry -1 with the fencing flag and the master
// key: a fenced bookie refuses the old writer's adds with EFENCED), take the highest LAC the
// bookies report, read forward from it and re-add every entry found with the recovery flag, then
// close the ledger with the last entry recovered and its length.
#include <algorithm>

#include "base/dcheck.h"
#include "base/logging.h"
#include "bookkeeper/client.h"

namespace magnetar::bookkeeper {

namespace {
constexpr int kMaxMetadataRetries = 5;
}

void LedgerHandle::recover(DoneCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  const auto& md = md_.metadata;
  if (md.state == LedgerState::kClosed) return cb(BkResult::kOk);
  if (md.state == LedgerState::kInRecovery) return fence(std::move(cb));
  LedgerMetadata updated = md;
  updated.state = LedgerState::kInRecovery;
  auto self = shared_from_this();
  client_.ledgerManager().writeLedgerMetadata(
      ledgerId_, updated, md_.version, &loop_,
      [self, cb = std::move(cb)](BkResult rc, VersionedMetadata written) mutable {
        if (rc == BkResult::kMetadataVersion && ++self->metadataRetries_ < kMaxMetadataRetries) {
          return self->client_.ledgerManager().readLedgerMetadata(
              self->ledgerId_, &self->loop_,
              [self, cb = std::move(cb)](BkResult rc2, VersionedMetadata cur) mutable {
                if (rc2 != BkResult::kOk) return cb(rc2);
                self->md_ = std::move(cur);
                self->recover(std::move(cb));
              });
        }
        if (rc != BkResult::kOk) return cb(rc);
        self->md_ = std::move(written);
        self->fence(std::move(cb));
      });
}

void LedgerHandle::fence(DoneCallback cb) {
  struct State {
    size_t remaining = 0;
    uint64_t responded = 0;  // ensemble indexes that answered (an entry or "none")
    int64_t lac = kLastAddConfirmed;
    DoneCallback cb;
  };
  const auto& md = md_.metadata;
  const auto& ensemble = md.ensembles.rbegin()->second;
  auto st = std::make_shared<State>();
  st->remaining = ensemble.size();
  st->cb = std::move(cb);
  auto self = shared_from_this();
  for (size_t i = 0; i < ensemble.size(); ++i) {
    bookies_.readEntry(ensemble[i], ledgerId_, kLastAddConfirmed, kFlagDoFencing, &key_,
                       [self, st, i](BkResult rc, const std::string& e) {
                         if (rc == BkResult::kOk) {
                           auto v = verifyEntry(e, self->ledgerId_, -1);
                           if (v.isOk()) {
                             st->responded |= uint64_t{1} << i;
                             st->lac = std::max(st->lac, v->header.lastAddConfirmed);
                           }
                         } else if (rc == BkResult::kNoSuchEntry || rc == BkResult::kNoSuchLedger) {
                           st->responded |= uint64_t{1} << i;
                         }
                         if (--st->remaining > 0) return;
                         // Ack-quorum coverage: every write set has Qw - Qa + 1 bookies that
                         // answered, so no entry can have reached Qa acks on bookies we did not
                         // hear from.
                         const auto& m = self->md_.metadata;
                         for (int first = 0; first < m.ensembleSize; ++first) {
                           int answered = 0;
                           for (int k = 0; k < m.writeQuorumSize; ++k) {
                             if (st->responded & (uint64_t{1} << ((first + k) % m.ensembleSize)))
                               ++answered;
                           }
                           if (answered < m.writeQuorumSize - m.ackQuorumSize + 1) {
                             MLOG_WARN(
                                 "bookkeeper: ledger {}: too few bookies answered the fencing read",
                                 self->ledgerId_);
                             return st->cb(BkResult::kBookieHandleNotAvailable);
                           }
                         }
                         self->lastAddConfirmed_ = self->lastAddPushed_ = st->lac;
                         if (st->lac < 0) {
                           self->length_ = self->confirmedLength_ = 0;
                           return self->recoverFrom(0, std::move(st->cb));
                         }
                         // The length up to the LAC is in the LAC entry itself.
                         self->readOne(st->lac, 0, [self, st](BkResult rc2, const LedgerEntry& le) {
                           if (rc2 != BkResult::kOk) return st->cb(rc2);
                           self->length_ = self->confirmedLength_ = le.length;
                           self->recoverFrom(st->lac + 1, std::move(st->cb));
                         });
                       });
  }
}

void LedgerHandle::recoverFrom(int64_t entryId, DoneCallback cb) {
  struct State {
    size_t remaining = 0;
    int missing = 0;
    bool found = false;
    LedgerEntry entry;
    DoneCallback cb;
  };
  const auto& md = md_.metadata;
  const auto& ensemble = md.ensembleFor(entryId);
  auto st = std::make_shared<State>();
  st->remaining = static_cast<size_t>(md.writeQuorumSize);
  st->cb = std::move(cb);
  auto self = shared_from_this();
  for (int k = 0; k < md.writeQuorumSize; ++k) {
    const BookieId& b = ensemble[static_cast<size_t>((entryId + k) % md.ensembleSize)];
    bookies_.readEntry(
        b, ledgerId_, entryId, kFlagNone, nullptr,
        [self, st, entryId](BkResult rc, const std::string& e) {
          if (rc == BkResult::kOk && !st->found) {
            auto v = verifyEntry(e, self->ledgerId_, entryId);
            if (v.isOk()) {
              st->found = true;
              st->entry = LedgerEntry{entryId, v->header.length, std::string(v->payload)};
            }
          } else if (rc == BkResult::kNoSuchEntry || rc == BkResult::kNoSuchLedger) {
            ++st->missing;
          }
          if (--st->remaining > 0) return;
          self->onRecoveryRead(entryId, st->found, st->entry, st->missing, std::move(st->cb));
        });
  }
}

void LedgerHandle::onRecoveryRead(int64_t entryId, bool found, const LedgerEntry& entry,
                                  int missing, DoneCallback cb) {
  const auto& md = md_.metadata;
  if (!found) {
    // Absent from enough of its write set that it cannot have reached Qa: the end.
    if (missing >= md.writeQuorumSize - md.ackQuorumSize + 1) {
      MLOG_INFO("bookkeeper: ledger {} recovered: last entry {}", ledgerId_, lastAddConfirmed_);
      writer_ = true;  // to write the close
      return writeClosed([self = shared_from_this(), cb = std::move(cb)](BkResult rc) {
        self->writer_ = false;
        self->closed_ = rc == BkResult::kOk;
        cb(rc);
      });
    }
    return cb(BkResult::kBookieError);
  }
  // Re-add it with the recovery flag (accepted by fenced bookies), then the next one.
  writer_ = true;
  auto self = shared_from_this();
  pushAdd(entryId, entry.length, Buffer::copyOf(entry.payload), kFlagRecoveryAdd,
          [self, cb = std::move(cb)](BkResult rc, int64_t id) mutable {
            self->writer_ = false;
            if (rc != BkResult::kOk) return cb(rc);
            self->recoverFrom(id + 1, std::move(cb));
          });
}

}  // namespace magnetar::bookkeeper
