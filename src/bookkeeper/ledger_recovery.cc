// Opening a ledger with recovery (BookKeeper's LedgerRecoveryOp): mark the metadata IN_RECOVERY,
// fence the ledger on the last ensemble (READ of entry -1 with the fencing flag and the master
// key: a fenced bookie refuses the old writer's adds with EFENCED), take the highest LAC the
// bookies report, read forward from it and re-add every entry found with the recovery flag, then
// close the ledger with the last entry recovered and its length. Reads and re-adds are pipelined
// (a window of ClientConfig::recoveryReadBatchSize entries past the LAC): reads complete in any
// order, re-adds are issued in entry order as the entries before them are known.
#include <algorithm>
#include <map>
#include <optional>

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
                         // Segments before the last one are confirmed (an ensemble change
                         // starts one at LAC + 1): recovery starts at the last one at the
                         // earliest, as LedgerRecoveryOp.
                         int64_t lastSegment = m.ensembles.rbegin()->first;
                         st->lac = std::max(st->lac, lastSegment - 1);
                         self->lastAddConfirmed_ = self->lastAddPushed_ = st->lac;
                         if (st->lac < 0) {
                           self->length_ = self->confirmedLength_ = 0;
                           return self->recoverFrom(0, std::move(st->cb));
                         }
                         // The length up to the LAC is in the LAC entry itself.
                         self->readOne(st->lac, [self, st](BkResult rc2, const LedgerEntry& le) {
                           if (rc2 != BkResult::kOk) return st->cb(rc2);
                           self->length_ = self->confirmedLength_ = le.length;
                           self->recoverFrom(st->lac + 1, std::move(st->cb));
                         });
                       });
  }
}

struct LedgerHandle::RecoveryRun {
  int64_t nextRead = 0;  // the next entry to ask for
  int64_t nextAdd = 0;   // the next entry to re-add: re-adds go in entry order
  // Entries read and not re-added yet, because an earlier read is still out (nullopt: missing).
  std::map<int64_t, std::optional<LedgerEntry>> ready;
  bool readDone = false;  // an entry is missing: the ledger ends before it
  bool finished = false;
  BkResult error = BkResult::kOk;
  DoneCallback cb;
};

void LedgerHandle::recoverFrom(int64_t entryId, DoneCallback cb) {
  auto r = std::make_shared<RecoveryRun>();
  r->nextRead = r->nextAdd = entryId;
  r->cb = std::move(cb);
  writer_ = true;  // recovery adds: a failed bookie is replaced (ensemble change)
  pumpRecovery(r);
}

void LedgerHandle::pumpRecovery(const std::shared_ptr<RecoveryRun>& r) {
  if (r->finished) return;
  if (r->error != BkResult::kOk) return finishRecovery(r, r->error);
  int64_t window = std::max(1, client_.config().recoveryReadBatchSize);
  auto self = shared_from_this();
  while (!r->readDone && r->nextRead <= lastAddConfirmed_ + window) {
    int64_t e = r->nextRead++;
    readFrom(e, /*recovery=*/true, 0, 0, BkResult::kOk,
             [self, r, e](BkResult rc, LedgerEntry entry) {
               if (r->finished || r->readDone) return;  // past the end, or given up
               if (rc == BkResult::kOk) {
                 r->ready.emplace(e, std::move(entry));
               } else if (rc == BkResult::kNoSuchEntry) {
                 r->ready.emplace(e, std::nullopt);
               } else {
                 MLOG_WARN("bookkeeper: ledger {}: recovery read of entry {} failed: {}",
                           self->ledgerId_, e, bkResultName(rc));
                 if (r->error == BkResult::kOk) r->error = rc;
               }
               self->applyRecoveryReads(r);
               self->pumpRecovery(r);
             });
    if (r->finished) return;
  }
  if (r->readDone && pending_.empty()) {
    // Every entry found is re-added and acknowledged: close at the last one.
    r->finished = true;
    MLOG_INFO("bookkeeper: ledger {} recovered: last entry {}", ledgerId_, lastAddConfirmed_);
    writeClosed([self, r](BkResult rc) {
      self->writer_ = false;
      self->closed_ = rc == BkResult::kOk;
      r->cb(rc);
    });
  }
}

void LedgerHandle::applyRecoveryReads(const std::shared_ptr<RecoveryRun>& r) {
  auto self = shared_from_this();
  while (!r->readDone && r->error == BkResult::kOk) {
    auto it = r->ready.find(r->nextAdd);
    if (it == r->ready.end()) return;
    if (!it->second) {
      // Missing on enough of its write set that it cannot have reached Qa: the end. Entries found
      // after it (a gap) were never acknowledged either.
      r->readDone = true;
      if (std::any_of(r->ready.begin(), r->ready.end(),
                      [](const auto& kv) { return kv.second.has_value(); })) {
        MLOG_WARN(
            "bookkeeper: ledger {}: entry {} is missing but later entries were found; the "
            "ledger ends before it",
            ledgerId_, r->nextAdd);
      }
      r->ready.clear();
      return;
    }
    LedgerEntry entry = std::move(*it->second);
    r->ready.erase(it);
    int64_t id = r->nextAdd++;
    // Re-added with the recovery flag (accepted by fenced bookies), as LedgerRecoveryOp does.
    pushAdd(id, entry.length, Buffer::copyOf(entry.payload), kFlagRecoveryAdd | kFlagHighPriority,
            [self, r](BkResult rc, int64_t) {
              if (rc != BkResult::kOk && r->error == BkResult::kOk) r->error = rc;
              self->pumpRecovery(r);
            });
  }
}

void LedgerHandle::finishRecovery(const std::shared_ptr<RecoveryRun>& r, BkResult rc) {
  if (r->finished) return;
  r->finished = true;
  writer_ = false;
  MLOG_WARN("bookkeeper: ledger {}: recovery failed: {}", ledgerId_, bkResultName(rc));
  r->cb(rc);
}

}  // namespace magnetar::bookkeeper
