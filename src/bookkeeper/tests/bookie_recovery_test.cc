// BookieRecovery (`bookkeeper shell recover`) on a LocalStore laid out as a BookKeeper cluster
// with fake bookies on loopback: a lost bookie's entries are copied to a spare and the ensembles
// rewritten, so the ledger reads back after a second original replica is gone too; dry run and
// query change nothing; no spare is NotEnoughBookies; an open ledger is fenced and closed first.
#include "bookkeeper/bookie_recovery.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>

#include "bookkeeper/tests/local_cluster_test.h"

namespace magnetar::bookkeeper {
namespace {

class BookieRecoveryTest : public LocalClusterTest {
 protected:
  void SetUp() override {
    LocalClusterTest::SetUp();
    // Znodes a real cluster has next to the ledgers: the walk must skip them.
    put("/ledgers/INSTANCEID", "x");
    put("/ledgers/cookies/127.0.0.1:1", "x");
  }
  FakeBookie& addBookie() {
    bookies_.push_back(std::make_unique<FakeBookie>(Mode::kGood));
    registerBookie(*bookies_.back());
    return *bookies_.back();
  }
  // The bookie dies: it leaves /ledgers/available and stops listening.
  void kill(const BookieId& id) {
    remove("/ledgers/available/" + id);
    for (auto& b : bookies_) {
      if (b && b->id() == id) b.reset();
    }
  }
  FakeBookie* find(const BookieId& id) {
    for (auto& b : bookies_) {
      if (b && b->id() == id) return b.get();
    }
    return nullptr;
  }
  void open() { LocalClusterTest::open(std::chrono::milliseconds(2000)); }
  std::shared_ptr<LedgerHandle> writeLedger(int n, bool closeIt) {
    auto h = create(3, 2, 2);
    auto done = std::make_shared<std::promise<BkResult>>();
    h->loop().execute([h, n, done] {
      for (int i = 0; i < n; ++i) {
        h->addEntry(Buffer::copyOf("entry-" + std::to_string(i)),
                    [done, i, n](BkResult rc, int64_t) {
                      if (i == n - 1) done->set_value(rc);
                    });
      }
    });
    EXPECT_EQ(done->get_future().get(), BkResult::kOk);
    if (closeIt) {
      EXPECT_EQ(close(h), BkResult::kOk);
    }
    return h;
  }
  // Every entry of the ledger through a new reader handle (the fake bookies serve one
  // connection at a time, so through the same client).
  std::pair<BkResult, std::vector<LedgerEntry>> readAll(int64_t id) {
    auto h = openLedger(id, /*recovery=*/false);
    std::promise<std::pair<BkResult, std::vector<LedgerEntry>>> p;
    h->loop().execute([&, h] {
      h->readEntries(0, h->lastAddConfirmed(), [&](BkResult rc, std::vector<LedgerEntry> e) {
        p.set_value({rc, std::move(e)});
      });
    });
    return p.get_future().get();
  }

  std::vector<std::unique_ptr<FakeBookie>> bookies_;
  std::vector<std::string> out_;
  BookieRecovery::Output printer() {
    return [this](const std::string& l) { out_.push_back(l); };
  }
};

// Entries of a 20-entry E=3 Qw=2 ledger stored at ensemble index i: those with e % 3 == i or
// (e + 1) % 3 == i.
int storedAt(int index, int n) {
  int c = 0;
  for (int e = 0; e < n; ++e) c += (e % 3 == index || (e + 1) % 3 == index) ? 1 : 0;
  return c;
}

TEST_F(BookieRecoveryTest, LostBookieIsReplacedAndTheLedgerSurvivesASecondLoss) {
  for (int i = 0; i < 4; ++i) addBookie();
  open();
  auto h = writeLedger(20, true);
  int64_t id = h->id();
  h.reset();
  LedgerMetadata before = metadataOf(id);
  ASSERT_EQ(before.ensembles.size(), 1u);
  std::vector<BookieId> ensemble = before.ensembles.at(0);
  BookieId spare;
  for (auto& b : bookies_) {
    if (std::find(ensemble.begin(), ensemble.end(), b->id()) == ensemble.end()) spare = b->id();
  }
  ASSERT_FALSE(spare.empty());
  BookieId lost = ensemble[0];
  kill(lost);

  BookieRecovery recovery(*bk_, printer());
  ASSERT_EQ(recovery.recoverBookies({lost}, {}), BkResult::kOk);
  EXPECT_EQ(recovery.ledgersRecovered(), 1);
  EXPECT_EQ(recovery.fragmentsReplaced(), 1);
  EXPECT_EQ(recovery.entriesCopied(), storedAt(0, 20));
  // The spare got exactly the lost bookie's entries, as recovery adds.
  EXPECT_EQ(find(spare)->requests(), storedAt(0, 20));
  LedgerMetadata after = metadataOf(id);
  std::vector<BookieId> expected = ensemble;
  expected[0] = spare;
  EXPECT_EQ(after.ensembles.at(0), expected);
  EXPECT_EQ(after.state, LedgerState::kClosed);
  EXPECT_EQ(after.lastEntryId, 19);
  EXPECT_NE(std::find(out_.begin(), out_.end(), "Recovered ledger " + std::to_string(id) + "."),
            out_.end());

  // Entries 0, 3, 6, ... were on {lost, ensemble[1]}: with ensemble[1] gone too, only the spare
  // has them.
  kill(ensemble[1]);
  auto [rc, entries] = readAll(id);
  ASSERT_EQ(rc, BkResult::kOk) << bkResultName(rc);
  ASSERT_EQ(entries.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(entries[static_cast<size_t>(i)].payload, "entry-" + std::to_string(i));
  }
  // A second run finds nothing left to do.
  BookieRecovery again(*bk_, printer());
  EXPECT_EQ(again.recoverBookies({lost}, {}), BkResult::kOk);
  EXPECT_EQ(again.fragmentsReplaced(), 0);
}

TEST_F(BookieRecoveryTest, DryRunAndQueryChangeNothing) {
  for (int i = 0; i < 4; ++i) addBookie();
  open();
  int64_t a = writeLedger(6, true)->id();
  int64_t b = writeLedger(6, true)->id();
  LedgerMetadata mdA = metadataOf(a);
  BookieId lost = mdA.ensembles.at(0)[1];
  kill(lost);
  BookieRecovery recovery(*bk_, printer());
  std::map<int64_t, LedgerMetadata> holding;
  ASSERT_EQ(recovery.ledgersContaining({lost}, &holding), BkResult::kOk);
  EXPECT_EQ(holding.count(a), 1u);
  LedgerMetadata mdB = metadataOf(b);
  auto& ensB = mdB.ensembles.at(0);
  EXPECT_EQ(holding.count(b), std::count(ensB.begin(), ensB.end(), lost) > 0 ? 1u : 0u);

  std::map<BookieId, int> requestsBefore;
  for (auto& bk : bookies_) {
    if (bk) requestsBefore[bk->id()] = bk->requests();
  }
  RecoverOptions dry;
  dry.dryRun = true;
  ASSERT_EQ(recovery.recoverBookies({lost}, dry), BkResult::kOk);
  EXPECT_EQ(recovery.entriesCopied(), 0);
  EXPECT_EQ(metadataOf(a), mdA);
  EXPECT_EQ(metadataOf(b), mdB);
  std::string oldLine = "    old ensemble : " + formatEnsemble(mdA.ensembles.at(0), {lost});
  EXPECT_NE(std::find(out_.begin(), out_.end(), oldLine), out_.end());
  EXPECT_NE(oldLine.find(lost + "*"), std::string::npos);
  for (auto& bk : bookies_) {
    if (bk) {
      EXPECT_EQ(bk->requests(), requestsBefore[bk->id()]) << "dry run wrote to " << bk->id();
    }
  }
}

TEST_F(BookieRecoveryTest, NoSpareBookieIsNotEnoughBookiesAndMetadataStays) {
  for (int i = 0; i < 3; ++i) addBookie();
  open();
  int64_t id = writeLedger(5, true)->id();
  LedgerMetadata md = metadataOf(id);
  kill(md.ensembles.at(0)[2]);
  BookieRecovery recovery(*bk_, printer());
  EXPECT_EQ(recovery.recoverLedger(id, {md.ensembles.at(0)[2]}, {}), BkResult::kNotEnoughBookies);
  EXPECT_EQ(metadataOf(id), md);
  RecoverOptions skip;
  skip.skipUnrecoverableLedgers = true;
  EXPECT_EQ(recovery.recoverLedger(id, {md.ensembles.at(0)[2]}, skip), BkResult::kOk);
  EXPECT_EQ(recovery.recoverLedger(id + 1000, {md.ensembles.at(0)[2]}, {}),
            BkResult::kNoSuchLedger);
}

TEST_F(BookieRecoveryTest, OpenLedgerIsFencedClosedThenRecovered) {
  for (int i = 0; i < 4; ++i) addBookie();
  open();
  auto writer = writeLedger(9, false);
  int64_t id = writer->id();
  LedgerMetadata md = metadataOf(id);
  ASSERT_EQ(md.state, LedgerState::kOpen);
  BookieId lost = md.ensembles.at(0)[1];
  kill(lost);
  BookieRecovery recovery(*bk_, printer());
  RecoverOptions skipOpen;
  skipOpen.skipOpenLedgers = true;
  ASSERT_EQ(recovery.recoverLedger(id, {lost}, skipOpen), BkResult::kOk);
  EXPECT_EQ(metadataOf(id), md);
  ASSERT_EQ(recovery.recoverLedger(id, {lost}, {}), BkResult::kOk);
  LedgerMetadata after = metadataOf(id);
  EXPECT_EQ(after.state, LedgerState::kClosed);
  EXPECT_EQ(after.lastEntryId, 8);
  for (const auto& [first, ensemble] : after.ensembles) {
    EXPECT_EQ(std::count(ensemble.begin(), ensemble.end(), lost), 0) << "segment " << first;
  }
  kill(md.ensembles.at(0)[0]);
  auto [rc, entries] = readAll(id);
  ASSERT_EQ(rc, BkResult::kOk) << bkResultName(rc);
  ASSERT_EQ(entries.size(), 9u);
  EXPECT_EQ(entries[8].payload, "entry-8");
}

}  // namespace
}  // namespace magnetar::bookkeeper
