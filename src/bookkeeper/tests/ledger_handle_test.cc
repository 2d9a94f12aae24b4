// BookKeeperClient and LedgerHandle on a LocalStore laid out as a BookKeeper cluster and fake
// bookies on loopback: completions in entry order, ensemble change when a bookie fails, a fenced
// ledger's adds, recovery, close and the metadata each writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>

#include "bookkeeper/tests/local_cluster_test.h"

namespace magnetar::bookkeeper {
namespace {

class LedgerHandleTest : public LocalClusterTest {
 protected:
  // As BookKeeper's ZKRegistrationManager on a bookie's state change: read-only registers
  // /ledgers/available/readonly/<id> and removes /ledgers/available/<id>; writable the reverse.
  void setReadOnly(FakeBookie& b, bool readOnly) {
    b.setMode(readOnly ? Mode::kReadOnly : Mode::kGood);
    std::string writable = "/ledgers/available/" + b.id();
    std::string ro = "/ledgers/available/readonly/" + b.id();
    put(readOnly ? ro : writable, "");
    remove(readOnly ? writable : ro);
  }
  // createLedger's result and, when kOk, the ledger's ensemble.
  std::pair<BkResult, std::vector<BookieId>> tryCreate(int e, int w, int a) {
    std::promise<std::pair<BkResult, std::vector<BookieId>>> p;
    bk_->createLedger(e, w, a, {}, [&](BkResult rc, std::shared_ptr<LedgerHandle> h) {
      std::vector<BookieId> ensemble;
      if (h) ensemble = h->metadata().ensembles.rbegin()->second;
      p.set_value({rc, std::move(ensemble)});
    });
    return p.get_future().get();
  }
  // Adds n entries "e<i>" at once; the results in completion order. Each callback must run
  // exactly once.
  std::vector<std::pair<BkResult, int64_t>> addAll(const std::shared_ptr<LedgerHandle>& h, int n) {
    auto p = std::make_shared<std::promise<std::vector<std::pair<BkResult, int64_t>>>>();
    auto got = std::make_shared<std::vector<std::pair<BkResult, int64_t>>>();
    h->loop().execute([p, h, got, n] {
      for (int i = 0; i < n; ++i) {
        h->addEntry(Buffer::copyOf("e" + std::to_string(i)), [p, got, n](BkResult rc, int64_t id) {
          got->push_back({rc, id});
          if (static_cast<int>(got->size()) == n) p->set_value(*got);
          if (static_cast<int>(got->size()) > n) ADD_FAILURE() << "callback of " << id << " twice";
        });
      }
    });
    return p->get_future().get();
  }
  // Every add completed with `rc`, numbered in entry order from firstId.
  static void expectAddsInOrder(const std::vector<std::pair<BkResult, int64_t>>& got, BkResult rc,
                                int64_t firstId = 0) {
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, rc) << i;
      EXPECT_EQ(got[i].second, firstId + static_cast<int64_t>(i)) << i;
    }
  }
  std::vector<LedgerEntry> readAll(int64_t id, bool recovery) {
    return readAll(openLedger(id, recovery));
  }
  std::vector<LedgerEntry> readAll(const std::shared_ptr<LedgerHandle>& h) {
    if (!h || h->lastAddConfirmed() < 0) return {};
    std::promise<std::vector<LedgerEntry>> p;
    h->loop().execute([&, h] {
      h->readEntries(0, h->lastAddConfirmed(), [&](BkResult rc, std::vector<LedgerEntry> e) {
        EXPECT_EQ(rc, BkResult::kOk) << bkResultName(rc);
        p.set_value(std::move(e));
      });
    });
    return p.get_future().get();
  }
};

TEST_F(LedgerHandleTest, CompletionsInEntryOrderWhileAnEarlierEntryIsSlow) {
  // Qa = 1: entry 1 is acknowledged by one bookie while entry 0 waits 300 ms on every bookie;
  // it must still complete after entry 0.
  FakeBookie b0(Mode::kSlowEntry0), b1(Mode::kSlowEntry0), b2(Mode::kSlowEntry0);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open();
  auto h = create(3, 2, 1);
  auto got = addAll(h, 20);
  ASSERT_EQ(got.size(), 20u);
  expectAddsInOrder(got, BkResult::kOk);
  ASSERT_EQ(close(h), BkResult::kOk);
  LedgerMetadata md = metadataOf(h->id());
  EXPECT_EQ(md.state, LedgerState::kClosed);
  EXPECT_EQ(md.lastEntryId, 19);
  int64_t length = 0;
  for (int i = 0; i < 20; ++i) length += static_cast<int64_t>(("e" + std::to_string(i)).size());
  EXPECT_EQ(md.length, length);
  auto entries = readAll(h->id(), false);
  ASSERT_EQ(entries.size(), 20u);
  EXPECT_EQ(entries[7].payload, "e7");
}

TEST_F(LedgerHandleTest, FailedBookieIsReplacedAndAddsContinue) {
  FakeBookie good0(Mode::kGood), good1(Mode::kGood), bad(Mode::kCloseMidFrame);
  for (auto* b : {&good0, &good1, &bad}) registerBookie(*b);
  open();
  auto h = create(3, 3, 3);  // every entry goes to the bad bookie too
  FakeBookie spare(Mode::kGood);
  registerBookie(spare);
  auto got = addAll(h, 10);
  ASSERT_EQ(got.size(), 10u);
  expectAddsInOrder(got, BkResult::kOk);
  ASSERT_EQ(close(h), BkResult::kOk);
  LedgerMetadata md = metadataOf(h->id());
  // The bookie failed at entry 0: its segment is replaced (a new one would start at LAC + 1 = 0).
  const auto& last = md.ensembles.rbegin()->second;
  EXPECT_EQ(std::count(last.begin(), last.end(), bad.id()), 0);
  EXPECT_EQ(std::count(last.begin(), last.end(), spare.id()), 1);
  auto entries = readAll(h->id(), false);
  ASSERT_EQ(entries.size(), 10u);
  EXPECT_EQ(entries[9].payload, "e9");
}

TEST_F(LedgerHandleTest, NoSpareBookieIsNotEnoughBookies) {
  FakeBookie good0(Mode::kGood), good1(Mode::kGood), bad(Mode::kCloseMidFrame);
  for (auto* b : {&good0, &good1, &bad}) registerBookie(*b);
  open();
  auto h = create(3, 3, 3);
  auto got = addAll(h, 3);
  for (const auto& [rc, id] : got) EXPECT_EQ(rc, BkResult::kNotEnoughBookies) << id;
}

TEST_F(LedgerHandleTest, BookiesThatFailedAnAddAreNotTakenAgainSoTheChangesEnd) {
  // Every bookie drops the connection on an add (as real bookies do with a frame over their
  // limit): each ensemble change takes a bookie that has not failed yet, then NotEnoughBookies.
  FakeBookie b0(Mode::kCloseMidFrame), b1(Mode::kCloseMidFrame), b2(Mode::kCloseMidFrame),
      b3(Mode::kCloseMidFrame);
  for (auto* b : {&b0, &b1, &b2, &b3}) registerBookie(*b);
  open();
  auto h = create(3, 2, 2);
  auto done = std::async(std::launch::async, [&] { return addAll(h, 1); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the ensemble kept changing";
  auto got = done.get();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, BkResult::kNotEnoughBookies);
}

TEST_F(LedgerHandleTest, AReadOnlyBookieIsReplacedAndTakenAgainOnceWritable) {
  // A bookie of the ensemble turns read-only (EREADONLY to adds, re-registered under
  // /ledgers/available/readonly): its adds go to a writable spare by an ensemble change, as
  // BookKeeper's PendingAddOp (WriteOnReadOnlyBookie is not a permanent failure); new ledgers take
  // writable bookies only, none when too few remain; writable again, it is taken again.
  FakeBookie a(Mode::kGood), b(Mode::kGood), c(Mode::kGood);
  registerBookie(a);
  registerBookie(b);
  open();
  auto h = create(2, 2, 2);  // {a, b}: the only two
  ASSERT_EQ(addAll(h, 3).back().first, BkResult::kOk);
  registerBookie(c);
  setReadOnly(a, true);
  auto got = addAll(h, 10);
  ASSERT_EQ(got.size(), 10u);
  expectAddsInOrder(got, BkResult::kOk, 3);
  ASSERT_EQ(close(h), BkResult::kOk);
  LedgerMetadata md = metadataOf(h->id());
  ASSERT_EQ(md.ensembles.size(), 2u);
  EXPECT_EQ(md.ensembles.rbegin()->first, 3);  // the new segment starts at LAC + 1
  std::vector<BookieId> want = {b.id(), c.id()};
  std::vector<BookieId> last = md.ensembles.rbegin()->second;
  std::sort(last.begin(), last.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(last, want);
  EXPECT_EQ(readAll(h->id(), false).size(), 13u);  // the first 3 read from a, read-only

  // New ledgers: b and c, never a, while it is read-only.
  for (int i = 0; i < 5; ++i) {
    auto [rc, ensemble] = tryCreate(2, 2, 2);
    ASSERT_EQ(rc, BkResult::kOk);
    EXPECT_EQ(std::count(ensemble.begin(), ensemble.end(), a.id()), 0);
  }
  setReadOnly(c, true);  // one writable bookie left
  EXPECT_EQ(tryCreate(2, 2, 2).first, BkResult::kNotEnoughBookies);
  setReadOnly(a, false);  // a and b writable: a is taken again
  auto [rc, ensemble] = tryCreate(2, 2, 2);
  ASSERT_EQ(rc, BkResult::kOk);
  EXPECT_EQ(std::count(ensemble.begin(), ensemble.end(), a.id()), 1);
}

TEST_F(LedgerHandleTest, AnEntryOverTheFrameLimitIsIllegalOpAndTheHandleGoesOn) {
  FakeBookie b0(Mode::kGood), b1(Mode::kGood), b2(Mode::kGood);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open();
  auto h = create(3, 2, 2);
  std::promise<std::pair<BkResult, int64_t>> big;
  h->loop().execute([&, h] {
    h->addEntry(Buffer::copyOf(std::string(kMaxEntryPayload + 1, 'x')),
                [&](BkResult rc, int64_t id) {
                  big.set_value({rc, id});
                });
  });
  auto [rc, id] = big.get_future().get();
  EXPECT_EQ(rc, BkResult::kIllegalOp);
  EXPECT_EQ(id, -1);
  // The largest payload still goes, and the handle numbers it 0.
  std::promise<std::pair<BkResult, int64_t>> max;
  h->loop().execute([&, h] {
    h->addEntry(Buffer::copyOf(std::string(kMaxEntryPayload, 'y')), [&](BkResult rc2, int64_t id2) {
      max.set_value({rc2, id2});
    });
  });
  auto [rc2, id2] = max.get_future().get();
  EXPECT_EQ(rc2, BkResult::kOk);
  EXPECT_EQ(id2, 0);
  ASSERT_EQ(close(h), BkResult::kOk);
  auto entries = readAll(h->id(), false);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].payload.size(), kMaxEntryPayload);
}

TEST_F(LedgerHandleTest, FencedBookiesFailEveryAddWithLedgerFenced) {
  FakeBookie f0(Mode::kFenced), f1(Mode::kFenced), f2(Mode::kFenced);
  for (auto* b : {&f0, &f1, &f2}) registerBookie(*b);
  open();
  auto h = create(3, 2, 2);
  auto got = addAll(h, 5);
  ASSERT_EQ(got.size(), 5u);
  expectAddsInOrder(got, BkResult::kLedgerFenced);  // still in entry order
  // Later adds fail the same way.
  auto again = addAll(h, 1);
  EXPECT_EQ(again[0].first, BkResult::kLedgerFenced);
}

TEST_F(LedgerHandleTest, RecoveryClosesAnAbandonedLedgerWithItsEntries) {
  FakeBookie b0(Mode::kGood), b1(Mode::kGood), b2(Mode::kGood);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open();
  auto h = create(3, 2, 2);
  auto got = addAll(h, 12);
  ASSERT_EQ(got.back().first, BkResult::kOk);
  // The writer stops without closing: the metadata stays OPEN.
  EXPECT_EQ(metadataOf(h->id()).state, LedgerState::kOpen);
  auto entries = readAll(h->id(), /*recovery=*/true);
  ASSERT_EQ(entries.size(), 12u);
  EXPECT_EQ(entries[11].payload, "e11");
  LedgerMetadata md = metadataOf(h->id());
  EXPECT_EQ(md.state, LedgerState::kClosed);
  EXPECT_EQ(md.lastEntryId, 11);
}

TEST_F(LedgerHandleTest, MissingLedgerAndBadQuorums) {
  FakeBookie b0(Mode::kGood);
  registerBookie(b0);
  open();
  std::promise<BkResult> p1;
  bk_->openLedger(12345, [&](BkResult rc, std::shared_ptr<LedgerHandle>) { p1.set_value(rc); });
  EXPECT_EQ(p1.get_future().get(), BkResult::kNoSuchLedger);
  std::promise<BkResult> p2;
  bk_->createLedger(3, 2, 2, {},
                    [&](BkResult rc, std::shared_ptr<LedgerHandle>) { p2.set_value(rc); });
  EXPECT_EQ(p2.get_future().get(), BkResult::kNotEnoughBookies);
  std::promise<BkResult> p3;
  bk_->createLedger(1, 2, 1, {},
                    [&](BkResult rc, std::shared_ptr<LedgerHandle>) { p3.set_value(rc); });
  EXPECT_EQ(p3.get_future().get(), BkResult::kIllegalOp);
}

TEST_F(LedgerHandleTest, TooManyRequestsDoesNotChangeTheEnsemble) {
  // Bookies that queue 4 requests and refuse more (ETOOMANYREQUESTS): the refused adds are sent
  // again to the same bookies; no ensemble change (there is no spare: it would fail).
  FakeBookie b0(Mode::kQueued, 0, 4), b1(Mode::kQueued, 0, 4), b2(Mode::kQueued, 0, 4);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open(std::chrono::milliseconds(30000), std::chrono::milliseconds(30000));
  auto h = create(3, 2, 2);
  auto got = addAll(h, 200);
  ASSERT_EQ(got.size(), 200u);
  expectAddsInOrder(got, BkResult::kOk);
  EXPECT_GT(b0.rejected() + b1.rejected() + b2.rejected(), 0);
  ASSERT_EQ(close(h), BkResult::kOk);
  LedgerMetadata md = metadataOf(h->id());
  EXPECT_EQ(md.ensembles.size(), 1u);
  EXPECT_EQ(md.lastEntryId, 199);
}

TEST_F(LedgerHandleTest, ReadsSkipAStalledBookieAfterOneTimeout) {
  FakeBookie b0(Mode::kGood), b1(Mode::kGood), b2(Mode::kGood);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open(std::chrono::milliseconds(500));
  auto h = create(3, 2, 2);
  ASSERT_EQ(addAll(h, 30).back().first, BkResult::kOk);
  ASSERT_EQ(close(h), BkResult::kOk);
  const std::vector<BookieId> ensemble = metadataOf(h->id()).ensembles.at(0);
  FakeBookie* first = nullptr;  // ensemble index 0: the first replica of entries 0, 3, 6, ...
  for (auto* b : {&b0, &b1, &b2}) {
    if (b->id() == ensemble[0]) first = b;
  }
  ASSERT_NE(first, nullptr);
  first->setMode(Mode::kSilent);  // stalled: connected, never answers
  auto reader = openLedger(h->id(), false);
  int before = first->reads();
  auto entries = readAll(reader);
  ASSERT_EQ(entries.size(), 30u);
  EXPECT_EQ(entries[27].payload, "e27");
  // Ten entries asked it first, timed out and were read from their second replica.
  EXPECT_EQ(first->reads() - before, 10);
  // It is now known to fail: the next reads go to the other replica of each write set at once.
  before = first->reads();
  entries = readAll(reader);
  ASSERT_EQ(entries.size(), 30u);
  EXPECT_EQ(first->reads() - before, 0);
}

TEST_F(LedgerHandleTest, RecoveryReadsAndReAddsArePipelined) {
  // Bookies answering in 20 ms batches: one entry at a time would keep one request per bookie
  // in flight; the recovery window keeps many.
  FakeBookie b0(Mode::kQueued), b1(Mode::kQueued), b2(Mode::kQueued);
  for (auto* b : {&b0, &b1, &b2}) registerBookie(*b);
  open();
  auto h = create(3, 2, 2);
  ASSERT_EQ(addAll(h, 100).back().first, BkResult::kOk);
  for (auto* b : {&b0, &b1, &b2}) b->resetMaxHeld();
  auto reader = openLedger(h->id(), /*recovery=*/true);
  ASSERT_TRUE(reader);
  size_t held = std::max({b0.maxHeld(), b1.maxHeld(), b2.maxHeld()});
  EXPECT_GE(held, 10u);
  LedgerMetadata md = metadataOf(h->id());
  EXPECT_EQ(md.state, LedgerState::kClosed);
  EXPECT_EQ(md.lastEntryId, 99);
  auto entries = readAll(reader);
  ASSERT_EQ(entries.size(), 100u);
  EXPECT_EQ(entries[99].payload, "e99");
}

}  // namespace
}  // namespace magnetar::bookkeeper
