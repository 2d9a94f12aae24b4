// BookieRecovery: re-replication of a lost bookie's data, as BookKeeper 4.17's
// BookKeeperAdmin.recoverBookieData and LedgerFragmentReplicator do it (`bookkeeper shell
// recover`).
//
// For each ledger whose ensembles contain one of the lost bookies:
//  - a ledger that is not CLOSED and has a lost bookie in its last ensemble is first opened with
//    recovery (its writer fenced, the ledger closed), as BookKeeperAdmin does ("fence required");
//  - each segment (fragment) whose ensemble holds a lost bookie gets, per lost bookie, a
//    replacement picked at random from /ledgers/available outside that ensemble and the lost set;
//  - every entry of the segment (up to the last segment's LAC) whose write set includes the lost
//    bookie's index is read from a surviving replica (CRC32C checked) and added to the
//    replacement with the ledger's master key and the recovery flag (entry LAC = the handle's);
//  - then the segment's ensemble is rewritten in the metadata by CAS on the znode version
//    (re-read and re-applied when the version moved, as MetadataUpdateLoop).
//
// Thread: the methods block until done and must not run on a bookkeeper-io loop (asserted via the
// client's loops); the work itself runs on the ledger's loop. One BookieRecovery at a time per
// thread; the output callback is called on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bookkeeper/client.h"

namespace magnetar::bookkeeper {

struct RecoverOptions {
  bool dryRun = false;                    // -dr: print the plan (old/new ensembles), change nothing
  bool skipOpenLedgers = false;           // -sk: leave ledgers in state OPEN alone
  bool skipUnrecoverableLedgers = false;  // -sku: a ledger that fails is logged and skipped
  int entriesPerBatch = 64;               // entries read and copied at a time per fragment
};

class BookieRecovery {
 public:
  // `out` receives the lines BookKeeper's shell logs (without a log prefix).
  using Output = std::function<void(const std::string& line)>;

  BookieRecovery(BookKeeperClient& client, Output out) : client_(client), out_(std::move(out)) {}

  // getLedgersContainBookies: every ledger whose ensembles name one of `bookies`, with its
  // metadata, by id. kMetadataError when ZooKeeper fails.
  BkResult ledgersContaining(const std::set<BookieId>& bookies,
                             std::map<int64_t, LedgerMetadata>* out);

  // recoverBookieData(bookies, dryrun, skipOpenLedgers, skipUnrecoverableLedgers): every ledger,
  // in id order. Returns the first failure (the remaining ledgers are still processed), kOk when
  // all were recovered or skipped.
  BkResult recoverBookies(const std::set<BookieId>& bookies, const RecoverOptions& options);

  // recoverBookieData(ledgerId, ...): one ledger. kNoSuchLedger when it does not exist,
  // kNotEnoughBookies when no replacement outside a segment's ensemble is available, a read or
  // add failure (e.g. kNoSuchEntry when no surviving replica has an entry), kMetadataVersion
  // when the CAS kept losing.
  BkResult recoverLedger(int64_t ledgerId, const std::set<BookieId>& bookies,
                         const RecoverOptions& options);

  // Figures of the work done so far (tests, the CLI's summary).
  int64_t entriesCopied() const { return entriesCopied_; }
  int64_t fragmentsReplaced() const { return fragmentsReplaced_; }
  int64_t ledgersRecovered() const { return ledgersRecovered_; }

 private:
  // Entries [first, last] of a ledger written to `ensemble`, which holds a lost bookie.
  struct Fragment {
    int64_t first;
    int64_t last;
    std::vector<BookieId> ensemble;
  };
  BkResult recoverLedgerOnce(int64_t ledgerId, const std::set<BookieId>& bookies,
                             const RecoverOptions& options, bool* retry);
  // The fragments of a ledger not to be fenced first, read through an opened handle: each
  // copied to replacement bookies and the ensemble updated (printed only on a dry run).
  BkResult recoverFragments(int64_t ledgerId, const std::set<BookieId>& bookies,
                            const RecoverOptions& options, bool fenceRequired);
  // One fragment onto replacements drawn from `available` (kNotEnoughBookies when too few).
  BkResult recoverFragment(const std::shared_ptr<LedgerHandle>& h, int64_t ledgerId,
                           const Fragment& f, const std::vector<BookieId>& available,
                           const std::set<BookieId>& bookies, const RecoverOptions& options,
                           std::mt19937_64& rng);
  BkResult copyFragment(const std::shared_ptr<LedgerHandle>& h, int64_t first, int64_t last,
                        const std::map<int, BookieId>& replacements, int batch);
  BkResult updateEnsemble(int64_t ledgerId, int64_t firstEntry,
                          const std::map<BookieId, BookieId>& oldToNew);
  // Prints "BK error <what>: <ledgerId> : <rc name>", as BookKeeperAdmin logs a failed step.
  void reportError(std::string_view what, int64_t ledgerId, BkResult rc);
  // Opens the ledger (recovery: fenced, as openLedger); on failure reports it as `what`.
  std::pair<BkResult, std::shared_ptr<LedgerHandle>> openOrReport(int64_t ledgerId, bool recovery,
                                                                  std::string_view what);
  void assertNotOnLoop();

  BookKeeperClient& client_;
  Output out_;
  int64_t entriesCopied_ = 0;
  int64_t fragmentsReplaced_ = 0;
  int64_t ledgersRecovered_ = 0;
};

// BookKeeperAdmin.formatEnsemble: "[h:p*, h:p , ...]", '*' after the bookies in `marked`.
std::string formatEnsemble(const std::vector<BookieId>& ensemble, const std::set<BookieId>& marked);

}  // namespace magnetar::bookkeeper
