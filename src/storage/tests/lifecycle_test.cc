// Data lifecycle of the durable storage: retention set per ledger, truncate, journal segment
// compaction (space comes back from shared segments) and the low-disk watermark.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "storage/tests/durable_test_fixture.h"
#include "storage/tests/fault_env.h"

namespace magnetar::storage::testing {
namespace {

// Retention none by default (consumed ledgers go at once), many small segments.
StorageOptions lifecycleOptions(const std::string& dir) {
  StorageOptions o = durableTestOptions(dir);
  o.journalSegmentSizeBytes = 64 << 10;  // many small segments
  o.managedLedgerMaxEntriesPerLedger = 20;
  o.defaultRetentionTimeInMinutes = 0;
  o.defaultRetentionSizeInMB = 0;
  o.tickIntervalMs = 20;
  o.checkpointIntervalMs = 20;
  o.minorCompactionInterval = 0;  // the tests compact by hand
  o.majorCompactionInterval = 0;
  o.compactionRateByBytes = 1ll << 30;
  return o;
}

// As lifecycleOptions with the broker's default retention: keep everything.
StorageOptions keepAllOptions(const std::string& dir) {
  StorageOptions o = lifecycleOptions(dir);
  o.defaultRetentionTimeInMinutes = -1;
  o.defaultRetentionSizeInMB = -1;
  return o;
}

class LifecycleTest : public DurableFactoryTest {
 protected:
  // Options for a test of a full journal on env: one ledger takes every entry.
  StorageOptions fullJournalOptions(FaultEnv& env) {
    StorageOptions o = lifecycleOptions(dir_.path());
    o.managedLedgerMaxEntriesPerLedger = 100000;
    o.env = &env;
    return o;
  }
  // compactSegments blocks until the ledgers' executor (ex_, driven here) took the new index.
  Result<int> compact(DurableManagedLedgerFactory& f, double threshold) {
    std::atomic<bool> done{false};
    Result<int> out = Status::internal("not run");
    std::thread t([&] {
      out = f.compactSegments(threshold);
      done = true;
    });
    EXPECT_TRUE(runUntil(
        ex_, [&] { return done.load(); }, 30000));
    t.join();
    return out;
  }
};

TEST_F(LifecycleTest, SetRetentionReachesTheLedger) {
  withLedger(keepAllOptions(dir_.path()), "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    markDeleteTo(*c, addN(*ml, 50, std::string(100, 'r')));
    EXPECT_EQ(ml->numberOfEntries(), 50);  // infinite retention keeps consumed ledgers
    ml->setRetention(0, 0);                // the namespace's policy: none
    ex_.runPending();
    EXPECT_LT(ml->numberOfEntries(), 50);
    EXPECT_EQ(ml->ledgerStats().size(), 1u);  // only the current ledger is left
  });
}

// A retention size too big for bytes in 64 bits (2^43 MiB, which the admin API accepts) keeps
// everything: it once overflowed and dropped every consumed ledger (found by a breaker).
TEST_F(LifecycleTest, HugeRetentionSizeKeepsConsumedLedgers) {
  withLedger(keepAllOptions(dir_.path()), "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    markDeleteTo(*c, addN(*ml, 50, std::string(100, 'h')));
    ml->setRetention(600, int64_t{1} << 43);
    ex_.runPending();
    EXPECT_EQ(ml->numberOfEntries(), 50);
    EXPECT_GT(ml->ledgerStats().size(), 1u);
  });
}

// Retention time counts from a ledger's close, as Pulsar's ledger-info timestamp: a ledger
// created long ago but closed just now stays; one closed long ago goes.
TEST_F(LifecycleTest, RetentionTimeCountsFromTheLedgersClose) {
  StorageOptions o = keepAllOptions(dir_.path());
  MemoryMetadataStore store;
  o.metadataStore = &store;
  withLedger(o, "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    markDeleteTo(*c, addN(*ml, 45, std::string(100, 'c')));
    EXPECT_EQ(ml->ledgerStats().size(), 3u);  // 20 + 20 + 5 entries, all consumed
  });
  // Both closed ledgers were created 10 minutes ago; the first was closed 5 minutes ago, the
  // second just now.
  auto list = decodeLedgerList(*store.get(mlKey("t")));
  ASSERT_TRUE(list.has_value());
  ASSERT_GE(list->size(), 3u);
  const int64_t now = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  for (int i = 0; i < 2; i++) {
    EXPECT_GE((*list)[i].closedAt, 0);
    EXPECT_GE((*list)[i].closedMs, (*list)[i].createdMs);
    (*list)[i].createdMs = now - 10 * 60000;
  }
  (*list)[0].closedMs = now - 5 * 60000;
  (*list)[1].closedMs = now;
  const int64_t oldClosed = (*list)[0].ledgerId;
  const int64_t newClosed = (*list)[1].ledgerId;
  ASSERT_TRUE(store.write({MetadataOp::put(mlKey("t"), encodeLedgerList(*list))}).isOk());
  withLedger(o, "t", [&](auto&, const auto& ml) {
    ml->setRetention(1, -1);  // one minute
    ex_.runPending();
    std::vector<int64_t> ids;
    for (const auto& l : ml->ledgerStats()) ids.push_back(l.ledgerId);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), oldClosed), 0);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), newClosed), 1);
  });
}

TEST_F(LifecycleTest, NoSubscriptionRetentionAloneDecides) {
  StorageOptions o = keepAllOptions(dir_.path());
  o.defaultRetentionSizeInMB = 1;
  withLedger(o, "t", [&](auto&, const auto& ml) {
    for (int i = 0; i < 200; i++) ASSERT_TRUE(addOne(*ml, ex_, std::string(20000, 'n')).isOk());
    ex_.runPending();
    // No cursor: every closed ledger counts as consumed; 1 MiB of it may stay.
    EXPECT_LE(ml->totalSizeBytes(), (1 << 20) + 20 * 20000);
    EXPECT_GT(ml->totalSizeBytes(), (1 << 20) - 20 * 20000);
  });
}

TEST_F(LifecycleTest, TruncateMovesCursorsAndDeletesLedgers) {
  withLedger(keepAllOptions(dir_.path()), "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < 45; i++) ASSERT_TRUE(addOne(*ml, ex_, "x" + std::to_string(i)).isOk());
    EXPECT_EQ(c->numberOfEntriesInBacklog(), 45);
    int64_t before = ml->totalSizeBytes();
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { ml->asyncTruncate(cb); }));
    ex_.runPending();
    EXPECT_EQ(c->numberOfEntriesInBacklog(), 0);
    EXPECT_EQ(c->markDeletedPosition(), ml->lastConfirmedEntry());
    EXPECT_EQ(ml->ledgerStats().size(), 1u);  // the current ledger stays (as Pulsar)
    EXPECT_LT(ml->totalSizeBytes(), before);
  });
}

// One topic fully consumed beside one that keeps a little of every segment: compaction copies
// the live records forward, the segments go, and every live entry survives a restart.
TEST_F(LifecycleTest, CompactionReclaimsSharedSegments) {
  StorageOptions o = lifecycleOptions(dir_.path());
  std::vector<std::string> keptWant;
  uint64_t segsBefore = 0;
  {
    auto f = open(o);
    auto big = openLedger(*f, ex_, "big");
    auto kept = openLedger(*f, ex_, "kept");
    auto bc = big->openCursor("s", InitialPosition::kEarliest);
    ASSERT_TRUE(kept->openCursor("s", InitialPosition::kEarliest).isOk());
    Position last;
    for (int i = 0; i < 400; i++) {
      last = *addOne(*big, ex_, std::string(2000, 'b'));
      if (i % 20 == 0) {
        keptWant.push_back("kept" + std::to_string(i));
        ASSERT_TRUE(addOne(*kept, ex_, keptWant.back()).isOk());
      }
    }
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { (*bc)->asyncMarkDelete(last, cb); }));
    ASSERT_TRUE(runUntil(ex_, [&] { return big->ledgerStats().size() == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a checkpoint passes
    ex_.runPending();
    segsBefore = f->segments().size();
    EXPECT_GT(segsBefore, 8u);  // kept's entries pin every segment
    auto n = compact(*f, 0.5);
    ASSERT_TRUE(n.isOk()) << n.status().toString();
    EXPECT_GT(*n, 5);
    ASSERT_TRUE(runUntil(ex_, [&] { return f->segments().size() <= 3; }));
    EXPECT_GT(f->stats().compactedBytes, 0u);
    auto all = readAll(*kept, ex_);
    ASSERT_EQ(all.size(), keptWant.size());
    for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(all[i].data.view(), keptWant[i]);
    big.reset();
    kept.reset();
    close(f);
  }
  auto f = open(o);
  auto kept = openLedger(*f, ex_, "kept");
  auto all = readAll(*kept, ex_);
  ASSERT_EQ(all.size(), keptWant.size());
  for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(all[i].data.view(), keptWant[i]);
  kept.reset();
  close(f);
}

// A closed (dormant) ledger's index moves too; a deleted topic's segments go.
TEST_F(LifecycleTest, CompactionMovesDormantLedgersAndDeleteFreesSpace) {
  StorageOptions o = lifecycleOptions(dir_.path());
  auto f = open(o);
  auto a = openLedger(*f, ex_, "a");
  auto b = openLedger(*f, ex_, "b");
  ASSERT_TRUE(b->openCursor("s", InitialPosition::kEarliest).isOk());
  for (int i = 0; i < 300; i++) {
    ASSERT_TRUE(addOne(*a, ex_, std::string(2000, 'a')).isOk());
    if (i % 30 == 0) {
      ASSERT_TRUE(addOne(*b, ex_, "b" + std::to_string(i)).isOk());
    }
  }
  EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { b->asyncClose(cb); }));
  b.reset();
  EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { a->asyncDelete(cb); }));
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ex_.runPending();
  auto n = compact(*f, 0.5);
  ASSERT_TRUE(n.isOk()) << n.status().toString();
  ASSERT_TRUE(runUntil(ex_, [&] { return f->segments().size() <= 3; }));
  auto b2 = openLedger(*f, ex_, "b");
  auto all = readAll(*b2, ex_);
  ASSERT_EQ(all.size(), 10u);
  EXPECT_EQ(all[9].data.view(), "b270");
  b2.reset();
  close(f);
}

TEST_F(LifecycleTest, WatermarkRefusesPublishesServesReads) {
  StorageOptions o = lifecycleOptions(dir_.path());
  FaultEnv env;
  o.env = &env;
  o.diskUsageThreshold = 0.95;
  o.diskUsageLwmThreshold = 0.90;
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    ASSERT_TRUE(addOne(*ml, ex_, "before").isOk());
    env.availableBytes = (1ll << 30) / 50;  // 98% used
    ASSERT_TRUE(runUntil(ex_, [&] { return !f.writeRefusal().isOk(); }));
    auto r = addOne(*ml, ex_, "refused");
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kNoSpace);
    EXPECT_EQ(readAll(*ml, ex_).size(), 1u);
    EXPECT_GE(f.stats().publishesRefused, 1u);
    EXPECT_FALSE(f.stats().writable);
    env.availableBytes = (1ll << 30) / 14;  // 93%: between the marks, still refused
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(f.writeRefusal().isOk());
    env.availableBytes = (1ll << 30) / 2;
    ASSERT_TRUE(runUntil(ex_, [&] { return f.writeRefusal().isOk(); }));
    EXPECT_TRUE(addOne(*ml, ex_, "after").isOk());
  });
}

// A full journal: every pending add fails promptly, later adds are refused at once until the
// disk has room, nothing acknowledged is lost, and no ledger is created per failure.
TEST_F(LifecycleTest, FullJournalFailsPendingAddsAndResumes) {
  FaultEnv env;
  withLedger(fullJournalOptions(env), "t", [&](auto& f, const auto& ml) {
    ASSERT_TRUE(addOne(*ml, ex_, "ok").isOk());
    env.fillDisk();
    int failed = 0, ok = 0;
    for (int i = 0; i < 50; i++) {
      ml->asyncAddEntry(Buffer::copyOf("x"), [&](Status s, Position) { (s ? ok : failed)++; });
    }
    ASSERT_TRUE(runUntil(
        ex_, [&] { return failed + ok == 50; }, 5000));
    EXPECT_EQ(failed, 50);
    EXPECT_EQ(ml->ledgerStats().size(), 1u);
    EXPECT_GE(f.stats().journalWriteErrors, 1u);
    EXPECT_FALSE(f.writeRefusal().isOk());
    int writesBefore = env.writes.load();
    auto r = addOne(*ml, ex_, "refused");
    EXPECT_EQ(r.status().code(), StatusCode::kNoSpace);
    EXPECT_EQ(env.writes.load(), writesBefore);  // refused without touching the disk
    EXPECT_EQ(readAll(*ml, ex_).size(), 1u);
    env.freeDisk();
    ASSERT_TRUE(runUntil(ex_, [&] { return f.writeRefusal().isOk(); }));
    auto p = addOne(*ml, ex_, "resumed");
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_EQ(p->entryId, 1);
    auto all = readAll(*ml, ex_);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[1].data.view(), "resumed");
  });
}

// Space coming back is seen by the next add within kNoSpaceRecheck, not only by the periodic
// disk check (here never due), so writes resume within that of the disk having room again.
TEST_F(LifecycleTest, FullJournalResumesOnTheNextAddWithoutTheDiskCheck) {
  FaultEnv env;
  StorageOptions o = fullJournalOptions(env);
  o.diskCheckInterval = 600000;
  o.tickIntervalMs = 600000;
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    ASSERT_TRUE(addOne(*ml, ex_, "ok").isOk());
    env.fillDisk();
    EXPECT_EQ(addOne(*ml, ex_, "fails").status().code(), StatusCode::kNoSpace);
    EXPECT_EQ(addOne(*ml, ex_, "refused").status().code(), StatusCode::kNoSpace);
    env.freeDisk();
    std::this_thread::sleep_for(DurableManagedLedgerFactory::kNoSpaceRecheck +
                                std::chrono::milliseconds(20));
    EXPECT_TRUE(f.writeRefusal().isOk());
    auto p = addOne(*ml, ex_, "resumed");
    ASSERT_TRUE(p.isOk()) << p.status().toString();
  });
}

TEST_F(LifecycleTest, StartsOnAFullDiskAndServesReads) {
  StorageOptions o = lifecycleOptions(dir_.path());
  o.defaultRetentionTimeInMinutes = -1;  // no cursor: keep the closed ledgers
  o.defaultRetentionSizeInMB = -1;
  FaultEnv env;
  o.env = &env;
  MemoryMetadataStore store;
  o.metadataStore = &store;
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "t");
    for (int i = 0; i < 5; i++) ASSERT_TRUE(addOne(*ml, ex_, "m" + std::to_string(i)).isOk());
    ml.reset();
    close(f);
  }
  env.fillDisk();  // no new file, no byte written
  auto f = open(o);
  ASSERT_TRUE(f);
  auto ml = openLedger(*f, ex_, "t");
  auto all = readAll(*ml, ex_);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[4].data.view(), "m4");
  auto r = addOne(*ml, ex_, "refused");
  EXPECT_EQ(r.status().code(), StatusCode::kNoSpace);
  env.freeDisk();
  ASSERT_TRUE(runUntil(ex_, [&] { return f->writeRefusal().isOk(); }));
  EXPECT_TRUE(addOne(*ml, ex_, "resumed").isOk());
  EXPECT_EQ(readAll(*ml, ex_).size(), 6u);
  ml.reset();
  close(f);
}

}  // namespace
}  // namespace magnetar::storage::testing
