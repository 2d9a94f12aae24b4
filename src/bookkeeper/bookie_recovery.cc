#include "bookkeeper/bookie_recovery.h"

#include <algorithm>
#include <future>
#include <memory>
#include <random>
#include <string_view>

#include "base/dcheck.h"
#include "bookkeeper/sync_wait.h"

namespace magnetar::bookkeeper {
namespace {

bool containsAny(const std::vector<BookieId>& ensemble, const std::set<BookieId>& bookies) {
  return std::any_of(ensemble.begin(), ensemble.end(),
                     [&](const BookieId& b) { return bookies.count(b) > 0; });
}

// RoundRobinDistributionSchedule: entry e is stored on ensemble indexes (e + i) % E, i < Qw.
bool inWriteSet(int64_t entryId, int index, int ensembleSize, int writeQuorum) {
  int64_t first = entryId % ensembleSize;
  int64_t d = (index - first + ensembleSize) % ensembleSize;
  return d < writeQuorum;
}

// Java's AbstractMap.toString of the old -> new bookie map.
std::string mapToString(const std::map<BookieId, BookieId>& m) {
  std::string s = "{";
  for (const auto& [k, v] : m) {
    if (s.size() > 1) s += ", ";
    s += k;
    s += '=';
    s += v;
  }
  return s + "}";
}

std::string resultText(BkResult rc) { return std::string(bkResultName(rc)); }

}  // namespace

std::string formatEnsemble(const std::vector<BookieId>& ensemble,
                           const std::set<BookieId>& marked) {
  std::string s = "[";
  for (size_t i = 0; i < ensemble.size(); ++i) {
    s += ensemble[i];
    s += marked.count(ensemble[i]) > 0 ? '*' : ' ';
    if (i + 1 != ensemble.size()) s += ", ";
  }
  return s + "]";
}

void BookieRecovery::assertNotOnLoop() {
  for (int i = 0; i < client_.config().numIoThreads; ++i) {
    MAGNETAR_DCHECK(!client_.loopFor(i).inExecutorThread());
  }
}

BkResult BookieRecovery::ledgersContaining(const std::set<BookieId>& bookies,
                                           std::map<int64_t, LedgerMetadata>* out) {
  assertNotOnLoop();
  auto [rc, ids] = await<std::vector<int64_t>>(
      [&](auto cb) { client_.ledgerManager().listLedgers(&client_.loopFor(0), cb); });
  if (rc != BkResult::kOk) return rc;
  for (int64_t id : ids) {
    auto [mrc, vm] = await<VersionedMetadata>([&](auto cb) { client_.readLedgerMetadata(id, cb); });
    if (mrc == BkResult::kNoSuchLedger) continue;  // deleted meanwhile
    if (mrc != BkResult::kOk) return mrc;
    for (const auto& [first, ensemble] : vm.metadata.ensembles) {
      if (containsAny(ensemble, bookies)) {
        (*out)[id] = vm.metadata;
        break;
      }
    }
  }
  return BkResult::kOk;
}

BkResult BookieRecovery::recoverBookies(const std::set<BookieId>& bookies,
                                        const RecoverOptions& options) {
  assertNotOnLoop();
  auto [rc, ids] = await<std::vector<int64_t>>(
      [&](auto cb) { client_.ledgerManager().listLedgers(&client_.loopFor(0), cb); });
  if (rc != BkResult::kOk) return rc;
  BkResult first = BkResult::kOk;
  for (int64_t id : ids) {
    BkResult r = recoverLedger(id, bookies, options);
    if (r == BkResult::kNoSuchLedger) continue;  // deleted meanwhile (asyncProcessLedgers)
    if (r != BkResult::kOk && first == BkResult::kOk) first = r;
  }
  return first;
}

BkResult BookieRecovery::recoverLedger(int64_t ledgerId, const std::set<BookieId>& bookies,
                                       const RecoverOptions& options) {
  assertNotOnLoop();
  BkResult rc = BkResult::kOk;
  bool retry = true;
  // A retry follows the fencing of an unclosed ledger; once closed it does not repeat.
  for (int attempt = 0; retry && attempt < 3; ++attempt) {
    retry = false;
    rc = recoverLedgerOnce(ledgerId, bookies, options, &retry);
  }
  if (rc != BkResult::kOk && options.skipUnrecoverableLedgers && rc != BkResult::kNoSuchLedger) {
    out_("Failed to recover ledger: " + std::to_string(ledgerId) + " : " + resultText(rc) +
         ", skip recover it.");
    return BkResult::kOk;
  }
  return rc;
}

BkResult BookieRecovery::recoverLedgerOnce(int64_t ledgerId, const std::set<BookieId>& bookies,
                                           const RecoverOptions& options, bool* retry) {
  auto [mrc, vm] =
      await<VersionedMetadata>([&](auto cb) { client_.readLedgerMetadata(ledgerId, cb); });
  if (mrc != BkResult::kOk) {
    if (mrc != BkResult::kNoSuchLedger) {
      reportError("opening ledger", ledgerId, mrc);
    }
    return mrc;
  }
  const LedgerMetadata& md = vm.metadata;
  if (md.ensembles.empty()) return BkResult::kOk;
  if (!containsAny(md.ensembles.rbegin()->second, bookies)) {
    bool any = false;
    for (const auto& [first, ensemble] : md.ensembles) any = any || containsAny(ensemble, bookies);
    if (!any) return BkResult::kOk;  // nothing of this ledger on the lost bookies
  }
  if (options.skipOpenLedgers && md.state == LedgerState::kOpen) {
    out_("Skip recovering open ledger " + std::to_string(ledgerId) + ".");
    return BkResult::kOk;
  }
  bool fenceRequired =
      md.state != LedgerState::kClosed && containsAny(md.ensembles.rbegin()->second, bookies);
  if (!options.dryRun && fenceRequired) {
    // The writer may still change the last ensemble: fence and close the ledger first.
    auto opened = openOrReport(ledgerId, /*recovery=*/true, "close ledger");
    if (opened.first != BkResult::kOk) return opened.first;
    std::shared_ptr<LedgerHandle> h = std::move(opened.second);
    awaitDone([&](auto cb) { h->loop().execute([h, cb] { h->close(cb); }); });
    *retry = true;
    return BkResult::kOk;
  }

  return recoverFragments(ledgerId, bookies, options, fenceRequired);
}

void BookieRecovery::reportError(std::string_view what, int64_t ledgerId, BkResult rc) {
  out_("BK error " + std::string(what) + ": " + std::to_string(ledgerId) + " : " + resultText(rc));
}

std::pair<BkResult, std::shared_ptr<LedgerHandle>> BookieRecovery::openOrReport(
    int64_t ledgerId, bool recovery, std::string_view what) {
  auto opened = await<std::shared_ptr<LedgerHandle>>(
      [&](auto cb) { client_.openLedger(ledgerId, cb, recovery); });
  if (opened.first != BkResult::kOk) reportError(what, ledgerId, opened.first);
  return opened;
}

BkResult BookieRecovery::recoverFragments(int64_t ledgerId, const std::set<BookieId>& bookies,
                                          const RecoverOptions& options, bool fenceRequired) {
  auto opened = openOrReport(ledgerId, /*recovery=*/false, "opening ledger");
  if (opened.first != BkResult::kOk) return opened.first;
  std::shared_ptr<LedgerHandle> h = std::move(opened.second);
  // Snapshot of the handle's view, taken on its loop.
  std::promise<std::pair<LedgerMetadata, int64_t>> snap;
  h->loop().execute([&snap, h] { snap.set_value({h->metadata(), h->lastAddConfirmed()}); });
  auto [hmd, lac] = snap.get_future().get();

  // Fragments [first, last] whose ensemble holds a lost bookie; the last one ends at the LAC.
  std::vector<Fragment> fragments;
  for (auto it = hmd.ensembles.begin(); it != hmd.ensembles.end(); ++it) {
    auto next = std::next(it);
    int64_t last = next == hmd.ensembles.end() ? lac : std::min(lac, next->first - 1);
    if (containsAny(it->second, bookies)) fragments.push_back({it->first, last, it->second});
  }
  auto closeHandle = [&] {
    awaitDone([&](auto cb) { h->loop().execute([h, cb] { h->close(cb); }); });
  };
  if (fragments.empty()) {
    closeHandle();
    return BkResult::kOk;
  }
  if (options.dryRun) {
    out_("Recovered ledger " + std::to_string(ledgerId) + " : " +
         (fenceRequired ? "[fence required]" : ""));
  }
  auto [arc, available] = await<std::vector<BookieId>>(
      [&](auto cb) { client_.ledgerManager().availableBookies(&h->loop(), cb); });
  if (arc != BkResult::kOk) {
    closeHandle();
    return arc;
  }
  std::mt19937_64 rng(std::random_device{}());
  BkResult result = BkResult::kOk;
  for (const auto& f : fragments) {
    BkResult r = recoverFragment(h, ledgerId, f, available, bookies, options, rng);
    if (r != BkResult::kOk && result == BkResult::kOk) result = r;
  }
  closeHandle();
  if (!options.dryRun) {
    if (result == BkResult::kOk) {
      ++ledgersRecovered_;
      out_("Recovered ledger " + std::to_string(ledgerId) + ".");
    } else if (!options.skipUnrecoverableLedgers) {
      out_("Failed to recover ledger " + std::to_string(ledgerId) + " : " + resultText(result));
    }
  }
  return result;
}

BkResult BookieRecovery::recoverFragment(const std::shared_ptr<LedgerHandle>& h, int64_t ledgerId,
                                         const Fragment& f, const std::vector<BookieId>& available,
                                         const std::set<BookieId>& bookies,
                                         const RecoverOptions& options, std::mt19937_64& rng) {
  std::string range = "[" + std::to_string(f.first) + " - " + std::to_string(f.last) + "]";
  // getReplacementBookies: per lost index a bookie outside the ensemble and the lost set.
  std::vector<BookieId> candidates;
  for (const auto& b : available) {
    if (bookies.count(b) == 0 &&
        std::find(f.ensemble.begin(), f.ensemble.end(), b) == f.ensemble.end()) {
      candidates.push_back(b);
    }
  }
  std::shuffle(candidates.begin(), candidates.end(), rng);
  std::map<int, BookieId> replacements;  // ensemble index -> new bookie
  std::map<BookieId, BookieId> oldToNew;
  bool enough = true;
  for (size_t i = 0; i < f.ensemble.size(); ++i) {
    if (bookies.count(f.ensemble[i]) == 0) continue;
    if (candidates.empty()) {
      enough = false;
      break;
    }
    replacements[static_cast<int>(i)] = candidates.back();
    oldToNew[f.ensemble[i]] = candidates.back();
    candidates.pop_back();
  }
  if (!enough) {
    if (!options.dryRun) return BkResult::kNotEnoughBookies;
    out_("  Fragment " + range + " : Not enough non-faulty bookies available");
    return BkResult::kOk;
  }
  std::vector<BookieId> newEnsemble = f.ensemble;
  for (const auto& [i, b] : replacements) newEnsemble[static_cast<size_t>(i)] = b;
  if (options.dryRun) {
    out_("  Fragment " + range + " : ");
    out_("    old ensemble : " + formatEnsemble(f.ensemble, bookies));
    out_("    new ensemble : " + formatEnsemble(newEnsemble, bookies));
    return BkResult::kOk;
  }
  BkResult r = copyFragment(h, f.first, f.last, replacements, options.entriesPerBatch);
  if (r == BkResult::kOk) r = updateEnsemble(ledgerId, f.first, oldToNew);
  if (r == BkResult::kOk) {
    ++fragmentsReplaced_;
    out_("Updated ZK to point ledger fragments from old bookies to new bookies: " +
         mapToString(oldToNew));
  }
  return r;
}

BkResult BookieRecovery::copyFragment(const std::shared_ptr<LedgerHandle>& h, int64_t first,
                                      int64_t last, const std::map<int, BookieId>& replacements,
                                      int batch) {
  for (int64_t from = first; from <= last; from += batch) {
    int64_t to = std::min(last, from + batch - 1);
    // Read the batch from surviving replicas, then add each entry to the replacement(s) of the
    // lost indexes in its write set, all in flight together.
    BkResult rc = awaitDone([&](const std::function<void(BkResult)>& done) {
      h->loop().execute([this, h, from, to, &replacements, done] {
        h->readEntries(
            from, to,
            [this, h, &replacements, done](BkResult rrc, const std::vector<LedgerEntry>& entries) {
              if (rrc != BkResult::kOk) return done(rrc);
              const LedgerMetadata& md = h->metadata();
              MasterKey key = masterKeyFor(md.password);
              BookieClient& bookies = client_.bookiesOn(h->loop());
              struct Pending {
                int left = 1;
                BkResult rc = BkResult::kOk;
              };
              auto p = std::make_shared<Pending>();
              auto finish = [p, done](BkResult r) {
                if (r != BkResult::kOk && p->rc == BkResult::kOk) p->rc = r;
                if (--p->left == 0) done(p->rc);
              };
              for (const auto& e : entries) {
                EntryHeader hdr;
                hdr.ledgerId = h->id();
                hdr.entryId = e.entryId;
                hdr.lastAddConfirmed = h->lastAddConfirmed();
                hdr.length = e.length;
                Buffer payload = Buffer::copyOf(e.payload);
                bool copied = false;
                for (const auto& [index, bookie] : replacements) {
                  if (!inWriteSet(e.entryId, index, md.ensembleSize, md.writeQuorumSize)) continue;
                  ++p->left;
                  copied = true;
                  bookies.addEntry(bookie, key, hdr, payload, kFlagRecoveryAdd, finish);
                }
                if (copied) ++entriesCopied_;
              }
              finish(BkResult::kOk);
            });
      });
    });
    if (rc != BkResult::kOk) return rc;
  }
  return BkResult::kOk;
}

BkResult BookieRecovery::updateEnsemble(int64_t ledgerId, int64_t firstEntry,
                                        const std::map<BookieId, BookieId>& oldToNew) {
  // MetadataUpdateLoop: re-read, stop when no old bookie is left in the segment, else CAS.
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto read =
        await<VersionedMetadata>([&](auto cb) { client_.readLedgerMetadata(ledgerId, cb); });
    if (read.first != BkResult::kOk) return read.first;
    VersionedMetadata vm = std::move(read.second);
    auto it = vm.metadata.ensembles.find(firstEntry);
    if (it == vm.metadata.ensembles.end()) return BkResult::kMetadataError;
    bool changed = false;
    for (auto& b : it->second) {
      auto n = oldToNew.find(b);
      if (n != oldToNew.end()) {
        b = n->second;
        changed = true;
      }
    }
    if (!changed) return BkResult::kOk;
    auto [wrc, written] = await<VersionedMetadata>([&](auto cb) {
      client_.ledgerManager().writeLedgerMetadata(ledgerId, vm.metadata, vm.version,
                                                  &client_.loopFor(ledgerId), cb);
    });
    if (wrc != BkResult::kMetadataVersion) return wrc;
  }
  return BkResult::kMetadataVersion;
}

}  // namespace magnetar::bookkeeper
