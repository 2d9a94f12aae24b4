// LedgerHandle's write path: adds, their ordered completion, and ensemble change (a new segment
// by metadata CAS when a bookie fails, then the pending adds resent to its replacement).
#include <algorithm>
#include <bit>
#include <random>

#include "base/dcheck.h"
#include "base/logging.h"
#include "bookkeeper/client.h"

namespace magnetar::bookkeeper {

namespace {
// Ensemble indexes of entryId's write set (round-robin distribution schedule), as a bit mask.
uint64_t writeSetMask(int64_t entryId, int ensembleSize, int writeQuorum) {
  uint64_t m = 0;
  for (int i = 0; i < writeQuorum; ++i) m |= uint64_t{1} << ((entryId + i) % ensembleSize);
  return m;
}
}  // namespace

void LedgerHandle::addEntry(Buffer payload, AddCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (!writer_ || closed_) return cb(BkResult::kLedgerClosed, -1);
  if (payload.size() > kMaxEntryPayload) {
    MLOG_WARN(
        "bookkeeper: ledger {}: an entry of {} bytes is over the bookies' frame limit "
        "(nettyMaxFrameSizeBytes {}: at most {} bytes per entry)",
        ledgerId_, payload.size(), kMaxFrameSize, kMaxEntryPayload);
    return cb(BkResult::kIllegalOp, -1);
  }
  int64_t entryId = lastAddPushed_ + 1;
  int64_t length = length_ + static_cast<int64_t>(payload.size());
  pushAdd(entryId, length, std::move(payload), kFlagNone, std::move(cb));
}

void LedgerHandle::pushAdd(int64_t entryId, int64_t length, Buffer payload, uint16_t flags,
                           AddCallback cb) {
  lastAddPushed_ = entryId;
  length_ = length;
  PendingAdd add;
  add.entryId = entryId;
  add.payload = std::move(payload);
  add.header = EntryHeader{ledgerId_, entryId, lastAddConfirmed_, length};
  add.flags = flags;
  add.cb = std::move(cb);
  if (error_ != BkResult::kOk) {
    // The handle failed: this add fails too, after those before it (order of callbacks).
    add.done = true;
    add.result = error_;
    pending_.push_back(std::move(add));
    return completeAdds();
  }
  pending_.push_back(std::move(add));
  if (!changingEnsemble_) sendAdd(pending_.back(), ~uint64_t{0});
}

void LedgerHandle::sendAdd(PendingAdd& p, uint64_t indexes) {
  const auto& md = md_.metadata;
  const auto& ensemble = md.ensembleFor(p.entryId);
  p.sent = true;
  std::weak_ptr<LedgerHandle> weak = weak_from_this();
  int64_t entryId = p.entryId;
  for (int i = 0; i < md.writeQuorumSize; ++i) {
    auto idx = static_cast<size_t>((p.entryId + i) % md.ensembleSize);
    if ((indexes & (uint64_t{1} << idx)) == 0) continue;
    const BookieId& b = ensemble[idx];
    bookies_.addEntry(b, key_, p.header, p.payload, p.flags, [weak, entryId, b](BkResult rc) {
      if (auto self = weak.lock()) self->onAddReply(entryId, b, rc);
    });
  }
}

void LedgerHandle::onAddReply(int64_t entryId, const BookieId& bookie, BkResult rc) {
  MAGNETAR_DCHECK_ON(loop_);
  if (pending_.empty() || entryId < pending_.front().entryId) return;  // already completed
  auto pos = static_cast<size_t>(entryId - pending_.front().entryId);
  if (pos >= pending_.size()) return;
  PendingAdd& add = pending_[pos];
  if (add.done) return;
  const auto& md = md_.metadata;
  const auto& ensemble = md.ensembleFor(entryId);
  auto it = std::find(ensemble.begin(), ensemble.end(), bookie);
  if (it == ensemble.end()) return;  // a bookie replaced meanwhile: its reply no longer counts
  auto idx = static_cast<size_t>(it - ensemble.begin());
  if (rc == BkResult::kOk) {
    add.acked |= uint64_t{1} << idx;
    if (std::popcount(add.acked) >= md.ackQuorumSize) add.done = true;
    return completeAdds();
  }
  if (rc == BkResult::kLedgerFenced || rc == BkResult::kUnauthorizedAccess ||
      rc == BkResult::kClientClosed || !writer_) {
    // Fenced by a recovery (or the client closed): no ensemble change helps.
    MLOG_WARN("bookkeeper: ledger {} entry {}: {} from bookie {}", ledgerId_, entryId,
              bkResultName(rc), bookie);
    return failAllPending(rc);
  }
  // The bookie failed: replace it (BookKeeper's ensemble change) and resend to the new one. One
  // line per bookie, not one per add in flight to it.
  if (std::find(failedBookies_.begin(), failedBookies_.end(), bookie) == failedBookies_.end()) {
    MLOG_WARN("bookkeeper: ledger {} entry {}: {} from bookie {}; changing the ensemble", ledgerId_,
              entryId, bkResultName(rc), bookie);
    failedBookies_.push_back(bookie);
  }
  failedIndexes_ |= uint64_t{1} << idx;
  if (!changingEnsemble_) changeEnsemble();
}

void LedgerHandle::changeEnsemble() {
  changingEnsemble_ = true;
  uint64_t failed = failedIndexes_;
  auto self = shared_from_this();
  client_.ledgerManager().availableBookies(
      &loop_, [self, failed](BkResult rc, const std::vector<BookieId>& avail) {
        if (self->error_ != BkResult::kOk) {
          self->changingEnsemble_ = false;
          return;
        }
        if (rc != BkResult::kOk) return self->failAllPending(rc);
        const auto& md = self->md_.metadata;
        std::vector<BookieId> ensemble = md.ensembles.rbegin()->second;
        std::vector<BookieId> spare;
        const auto& failedHere = self->failedBookies_;
        for (auto& b : avail) {
          if (std::find(ensemble.begin(), ensemble.end(), b) == ensemble.end() &&
              std::find(failedHere.begin(), failedHere.end(), b) == failedHere.end()) {
            spare.push_back(b);
          }
        }
        thread_local std::mt19937_64 rng{std::random_device{}()};
        std::shuffle(spare.begin(), spare.end(), rng);
        // Bookies that failed recently last (BookKeeper's quarantine).
        std::stable_partition(spare.begin(), spare.end(), [&self](const BookieId& b) {
          return !self->bookies_.failedRecently(b);
        });
        size_t next = 0;
        for (size_t i = 0; i < ensemble.size(); ++i) {
          if ((failed & (uint64_t{1} << i)) == 0) continue;
          if (next >= spare.size()) {
            MLOG_WARN("bookkeeper: ledger {}: no bookie to replace {}", self->ledgerId_,
                      ensemble[i]);
            return self->failAllPending(BkResult::kNotEnoughBookies);
          }
          ensemble[i] = spare[next++];
        }
        LedgerMetadata updated = md;
        updated.ensembles[self->lastAddConfirmed_ + 1] = ensemble;
        self->client_.ledgerManager().writeLedgerMetadata(
            self->ledgerId_, updated, self->md_.version, &self->loop_,
            [self, failed](BkResult rc, VersionedMetadata written) {
              if (rc == BkResult::kMetadataVersion) {
                // Another writer of the znode: a recovery (state no longer OPEN) fences us.
                return self->client_.ledgerManager().readLedgerMetadata(
                    self->ledgerId_, &self->loop_, [self](BkResult rc2, VersionedMetadata cur) {
                      if (rc2 == BkResult::kOk && cur.metadata.state == LedgerState::kOpen &&
                          cur.metadata.ensembles == self->md_.metadata.ensembles) {
                        self->md_ = std::move(cur);
                        return self->changeEnsemble();
                      }
                      self->failAllPending(rc2 == BkResult::kOk ? BkResult::kLedgerFenced : rc2);
                    });
              }
              if (rc != BkResult::kOk) return self->failAllPending(rc);
              MLOG_INFO(
                  "bookkeeper: ledger {}: new ensemble from entry {}: {}", self->ledgerId_,
                  self->lastAddConfirmed_ + 1,
                  fmt::format("{}", fmt::join(written.metadata.ensembles.rbegin()->second, ", ")));
              self->md_ = std::move(written);
              self->failedIndexes_ &= ~failed;
              self->changingEnsemble_ = false;
              const auto& m = self->md_.metadata;
              for (auto& p : self->pending_) {
                if (p.done) continue;
                if (!p.sent) {
                  self->sendAdd(p, ~uint64_t{0});
                  continue;
                }
                uint64_t resend =
                    failed & writeSetMask(p.entryId, m.ensembleSize, m.writeQuorumSize);
                p.acked &= ~resend;
                if (resend != 0) self->sendAdd(p, resend);
              }
              if (self->failedIndexes_ != 0) self->changeEnsemble();
            });
      });
}

void LedgerHandle::completeAdds() {
  auto self = shared_from_this();  // a callback may drop the caller's last reference
  while (!pending_.empty() && pending_.front().done) {
    PendingAdd add = std::move(pending_.front());
    pending_.pop_front();
    if (add.result == BkResult::kOk) {
      lastAddConfirmed_ = add.entryId;
      confirmedLength_ = add.header.length;
    }
    add.cb(add.result, add.entryId);
  }
}

void LedgerHandle::failAllPending(BkResult rc) {
  for (auto& p : pending_) {
    p.done = true;
    p.result = rc;
  }
  if (error_ == BkResult::kOk) error_ = rc;
  changingEnsemble_ = false;
  completeAdds();
}

}  // namespace magnetar::bookkeeper
