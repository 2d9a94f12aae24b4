#include "storage/durable_storage.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "storage/metadata_codec.h"
#include "storage/tests/durable_test_fixture.h"
#include "storage/tests/fault_env.h"
#include "storage/tests/ledger_contract.h"

namespace magnetar::storage::testing {
namespace {

namespace fs = std::filesystem;

StorageOptions testOptions(const std::string& dir) {
  StorageOptions o = durableTestOptions(dir);
  o.managedLedgerMaxEntriesPerLedger = 10;
  o.tickIntervalMs = 50;
  o.checkpointIntervalMs = 50;
  return o;
}

std::unique_ptr<ManagedLedgerFactory> makeDurable(const std::string& dir) {
  auto f = DurableManagedLedgerFactory::open(testOptions(dir));
  EXPECT_TRUE(f.isOk()) << f.status().toString();
  return f ? std::unique_ptr<ManagedLedgerFactory>(std::move(*f)) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Durable, LedgerContractTest, ::testing::Values(FactoryMaker(makeDurable)));

class DurableStorageTest : public DurableFactoryTest {};

// The ledger and its cursors belong to the executor they were opened on (here the test thread,
// which drives ex_): a call from another thread aborts.
TEST_F(DurableStorageTest, LedgerCalledOffItsExecutorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto f = open(testOptions(dir_.path()));
  auto ml = openLedger(*f, ex_, "public/default/persistent/owned");
  ASSERT_TRUE(ml);
  auto c = ml->openCursor("sub", InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk());
  auto offThread = [](auto fn) { std::thread(fn).join(); };
  EXPECT_DEATH(offThread([&] { ml->asyncAddEntry(Buffer::copyOf("x"), [](Status, Position) {}); }),
               "managed_ledger_core\\.cc:[0-9]+: asyncAddEntry: DCHECK failed");
  EXPECT_DEATH(offThread([&] {
                 c.value()->asyncMarkDelete(Position{0, 0}, [](Status) {});
               }),
               "asyncMarkDelete: DCHECK failed");
  bool added = false;  // the owning thread may call it
  ml->asyncAddEntry(Buffer::copyOf("x"), [&](Status s, Position) { added = s.isOk(); });
  EXPECT_TRUE(runUntil(ex_, [&] { return added; }));
  ml.reset();
  close(f);
}

TEST_F(DurableStorageTest, RestartKeepsEntriesAndCursors) {
  StorageOptions o = testOptions(dir_.path());
  std::vector<Position> pos;
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "public/default/persistent/t1");
    auto c = ml->openCursor("sub", InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    for (int i = 0; i < 25; i++) {
      auto p = addOne(*ml, ex_, "payload-" + std::to_string(i));
      ASSERT_TRUE(p.isOk());
      pos.push_back(*p);
    }
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { (*c)->asyncMarkDelete(pos[4], cb); }));
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) {
      (*c)->asyncDelete({pos[7], pos[8]}, cb);
    }));
    ml.reset();
    close(f);  // no asyncClose: like a stop without unloading topics
  }
  auto f = open(o);
  auto names = f->ledgerNames();
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], "public/default/persistent/t1");
  auto ml = openLedger(*f, ex_, names[0]);
  auto all = readAll(*ml, ex_);
  ASSERT_EQ(all.size(), 25u);
  for (int i = 0; i < 25; i++) {
    EXPECT_EQ(all[i].position, pos[i]);
    EXPECT_EQ(all[i].data.view(), "payload-" + std::to_string(i));
  }
  EXPECT_GT(ml->lastConfirmedEntry().ledgerId, pos[24].ledgerId);  // a new ledger per start
  auto c = ml->openCursor("sub", InitialPosition::kLatest);
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ((*c)->markDeletedPosition(), pos[4]);
  EXPECT_TRUE((*c)->isAcknowledged(pos[7]));
  EXPECT_FALSE((*c)->isAcknowledged(pos[6]));
  EXPECT_EQ((*c)->numberOfEntriesInBacklog(), 18);
  auto p = addOne(*ml, ex_, "after");
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(ml->nextValidPosition(pos[24]), *p);
  ml.reset();
  close(f);
}

// The terminated position is stored (/ml-terminated/<name>): a restart keeps the ledger
// terminated; deleting the ledger removes it, so a ledger made again under the name is not.
TEST_F(DurableStorageTest, TerminationSurvivesARestartAndGoesWithTheLedger) {
  StorageOptions o = testOptions(dir_.path());
  Position last;
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "public/default/persistent/term");
    auto p = addOne(*ml, ex_, "only");
    ASSERT_TRUE(p.isOk());
    last = *p;
    bool done = false;
    ml->asyncTerminate([&](Status s, Position at) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      EXPECT_EQ(at, last);
      done = true;
    });
    EXPECT_TRUE(runUntil(ex_, [&] { return done; }));
    ml.reset();
    close(f);  // no asyncClose: a stop without unloading topics
  }
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "public/default/persistent/term");
    EXPECT_TRUE(ml->isTerminated());
    auto refused = addOne(*ml, ex_, "after restart");
    EXPECT_EQ(refused.status().code(), StatusCode::kNotAllowed);
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { ml->asyncDelete(cb); }));
    ml.reset();
    close(f);
  }
  auto f = open(o);
  auto ml = openLedger(*f, ex_, "public/default/persistent/term");
  EXPECT_FALSE(ml->isTerminated());
  EXPECT_TRUE(addOne(*ml, ex_, "new life").isOk());
  ml.reset();
  close(f);
}

// Bug F3: a terminated ledger gets no new (empty) ledger at each start, as Pulsar opens a
// terminated managed ledger: its ledgers, last confirmed entry, termination and entries stay the
// same across restarts (clean ones and stops without asyncClose), an empty one's too.
TEST_F(DurableStorageTest, TerminatedLedgerKeepsItsLedgersAcrossRestarts) {
  StorageOptions o = testOptions(dir_.path());
  auto ledgerIds = [](ManagedLedger& ml) {
    std::vector<int64_t> ids;
    for (const auto& l : ml.ledgerStats()) ids.push_back(l.ledgerId);
    return ids;
  };
  for (int entries : {3, 0}) {
    SCOPED_TRACE("entries " + std::to_string(entries));
    const std::string name = "public/default/persistent/term-" + std::to_string(entries);
    Position terminatedAt;
    std::vector<int64_t> ids;
    {
      auto f = open(o);
      auto ml = openLedger(*f, ex_, name);
      for (int i = 0; i < entries; i++) ASSERT_TRUE(addOne(*ml, ex_, "e" + std::to_string(i)));
      bool done = false;
      ml->asyncTerminate([&](Status s, Position at) {
        EXPECT_TRUE(s.isOk()) << s.toString();
        terminatedAt = at;
        done = true;
      });
      ASSERT_TRUE(runUntil(ex_, [&] { return done; }));
      ids = ledgerIds(*ml);
      ml.reset();
      close(f);
    }
    EXPECT_EQ(terminatedAt.entryId, entries - 1);
    for (int restart = 0; restart < 4; restart++) {
      SCOPED_TRACE("restart " + std::to_string(restart));
      auto f = open(o);
      auto ml = openLedger(*f, ex_, name);
      ASSERT_TRUE(ml);
      EXPECT_TRUE(ml->isTerminated());
      EXPECT_EQ(ledgerIds(*ml), ids);
      EXPECT_EQ(ml->lastConfirmedEntry(), terminatedAt);
      EXPECT_EQ(ml->numberOfEntries(), entries);
      auto all = readAll(*ml, ex_);
      ASSERT_EQ(all.size(), static_cast<size_t>(entries));
      for (int i = 0; i < entries; i++) EXPECT_EQ(all[i].data.view(), "e" + std::to_string(i));
      EXPECT_EQ(addOne(*ml, ex_, "refused").status().code(), StatusCode::kNotAllowed);
      if (restart % 2 == 0) {  // else a stop without unloading
        EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { ml->asyncClose(cb); }));
      }
      ml.reset();
      close(f);
    }
  }
}

// A cursor write still queued on the executor when the ledger is deleted must not write the
// cursor back: the topic made again under the same name starts with no subscription.
TEST_F(DurableStorageTest, DeleteWithACursorWriteQueuedLeavesNoCursorBehind) {
  StorageOptions o = testOptions(dir_.path());
  const std::string name = "public/default/persistent/gone";
  auto f = open(o);
  auto ml = openLedger(*f, ex_, name);
  ASSERT_TRUE(addOne(*ml, ex_, "x").isOk());
  // A new cursor queues its write on ex_; the delete below runs before that task.
  ASSERT_TRUE(ml->openCursor("sub", InitialPosition::kEarliest).isOk());
  bool done = false;
  Status st = Status::internal("not run");
  ml->asyncDelete([&](Status s) {
    st = s;
    done = true;
  });
  ASSERT_TRUE(runUntil(ex_, [&] { return done; }));
  EXPECT_TRUE(st.isOk()) << st.toString();
  ml.reset();
  ex_.runPending();
  // The topic made again under the name has no subscription (opened on the store's own thread).
  auto again = openLedger(*f, ex_, name);
  EXPECT_TRUE(again->cursors().empty()) << again->cursors().size() << " cursor(s) came back";
  again.reset();
  // Nor is a cursor key left in the store. Closed first: the background thread is stopped
  // before this thread reads RocksDB, which TSan cannot see synchronize.
  close(f);
  f = open(o);
  auto left = f->metadataStore()->scan(cursorPrefix(name));
  ASSERT_TRUE(left.isOk());
  EXPECT_TRUE(left->empty()) << left->size() << " cursor key(s) left, first "
                             << left->front().first;
  close(f);
}

// Copies the journal directory and the metadata store as they are now: what a kill -9 leaves.
struct Snapshot {
  std::string journalDir;
  std::vector<std::pair<std::string, std::string>> meta;
};

Snapshot takeSnapshot(const StorageOptions& o, MetadataStore& store, const std::string& to) {
  Snapshot s;
  s.journalDir = to;
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(o.journalDirectory)) {
    fs::copy_file(e.path(), fs::path(to) / e.path().filename(),
                  fs::copy_options::overwrite_existing);
  }
  s.meta = *store.scan("");
  return s;
}

void restoreSnapshot(const Snapshot& s, const std::string& journalDir, MemoryMetadataStore* store) {
  fs::remove_all(journalDir);
  fs::create_directories(journalDir);
  for (const auto& e : fs::directory_iterator(s.journalDir)) {
    fs::copy_file(e.path(), fs::path(journalDir) / e.path().filename());
  }
  for (const auto& [k, v] : s.meta) ASSERT_TRUE(store->put(k, v).isOk());
}

TEST_F(DurableStorageTest, TornTailIsCutAtEveryByte) {
  StorageOptions o = testOptions(dir_.path());
  // Keep consumed ledgers: without a cursor a tick between open and read may trim them.
  o.defaultRetentionTimeInMinutes = -1;
  o.defaultRetentionSizeInMB = -1;
  o.checkpointIntervalMs = 3600 * 1000;  // the tail stays in the journal only
  o.managedLedgerMaxEntriesPerLedger = 1000;
  MemoryMetadataStore store;
  o.metadataStore = &store;
  const int n = 6;
  std::string lastSegment;
  uint64_t lastRecordStart = 0;
  Snapshot snap;
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "t");
    for (int i = 0; i < n; i++) {
      auto segs = f->segments();
      lastSegment = o.journalDirectory + "/" + segmentFileName(segs.back());
      lastRecordStart = fs::file_size(lastSegment);
      ASSERT_TRUE(addOne(*ml, ex_, "entry-" + std::to_string(i) + std::string(40, 'x')).isOk());
    }
    snap = takeSnapshot(o, store, dir_.path() + "/snap");
    ml.reset();
    close(f);
  }
  uint64_t end = fs::file_size(snap.journalDir + "/" + fs::path(lastSegment).filename().string());
  ASSERT_GT(end, lastRecordStart + 8);
  for (uint64_t cut = lastRecordStart; cut <= end + 1; cut++) {
    SCOPED_TRACE("cut/corrupt at " + std::to_string(cut));
    MemoryMetadataStore s2;
    StorageOptions o2 = o;
    o2.metadataStore = &s2;
    o2.journalDirectory = dir_.path() + "/j2";
    restoreSnapshot(snap, o2.journalDirectory, &s2);
    std::string seg = o2.journalDirectory + "/" + fs::path(lastSegment).filename().string();
    bool corrupt = cut > end;  // past the end: flip a byte in the middle instead of cutting
    if (corrupt) {
      FILE* fp = std::fopen(seg.c_str(), "r+b");
      std::fseek(fp, static_cast<long>(lastRecordStart + (end - lastRecordStart) / 2), SEEK_SET);
      std::fputc('#', fp);
      std::fclose(fp);
    } else {
      fs::resize_file(seg, cut);
    }
    auto f = open(o2);
    auto ml = openLedger(*f, ex_, "t");
    auto all = readAll(*ml, ex_);
    size_t expect = (cut == end) ? n : n - 1;
    ASSERT_EQ(all.size(), expect);
    for (size_t i = 0; i < all.size(); i++) {
      EXPECT_EQ(all[i].data.view(), "entry-" + std::to_string(i) + std::string(40, 'x'));
    }
    // Appends continue after the cut.
    EXPECT_TRUE(addOne(*ml, ex_, "next").isOk());
    ml.reset();
    close(f);
  }
}

TEST_F(DurableStorageTest, IndexRebuiltFromCheckpointPlusJournalTail) {
  StorageOptions o = testOptions(dir_.path());
  // Keep consumed ledgers: without a cursor a tick between open and read may trim them.
  o.defaultRetentionTimeInMinutes = -1;
  o.defaultRetentionSizeInMB = -1;
  MemoryMetadataStore store;
  o.metadataStore = &store;
  // One checkpoint a second: the 15 appends after the first one go in well before the next one,
  // even under TSan (at 20 ms a slow run had them all checkpointed before the snapshot).
  o.checkpointIntervalMs = 1000;
  Snapshot snap;
  {
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "t");
    ASSERT_TRUE(ml->openCursor("s", InitialPosition::kEarliest).isOk());  // keeps the data
    for (int i = 0; i < 15; i++) ASSERT_TRUE(addOne(*ml, ex_, "a" + std::to_string(i)).isOk());
    // Wait until a checkpoint has indexed the first entries.
    ASSERT_TRUE(runUntil(ex_, [&] { return store.scan(kIndexPrefix)->size() >= 15; }));
    // Snapshot right after more appends: their index exists only in the journal.
    for (int i = 15; i < 30; i++) ASSERT_TRUE(addOne(*ml, ex_, "a" + std::to_string(i)).isOk());
    snap = takeSnapshot(o, store, dir_.path() + "/snap");
    ml.reset();
    close(f);
  }
  MemoryMetadataStore s2;
  StorageOptions o2 = o;
  o2.metadataStore = &s2;
  o2.journalDirectory = dir_.path() + "/j2";
  restoreSnapshot(snap, o2.journalDirectory, &s2);
  size_t indexedBefore = s2.scan(kIndexPrefix)->size();
  auto f = open(o2);
  EXPECT_GT(s2.scan(kIndexPrefix)->size(), indexedBefore);  // recovery indexed the tail
  auto ml = openLedger(*f, ex_, "t");
  auto all = readAll(*ml, ex_);
  ASSERT_EQ(all.size(), 30u);
  for (int i = 0; i < 30; i++) EXPECT_EQ(all[i].data.view(), "a" + std::to_string(i));
  ml.reset();
  close(f);
}

TEST_F(DurableStorageTest, GroupCommitHandsOneTaskPerLedgerPerGroup) {
  StorageOptions o = testOptions(dir_.path());
  FaultEnv env;
  env.syncDelayUs = 3000;  // slow fsync: appends pile up behind it
  o.env = &env;
  o.managedLedgerMaxEntriesPerLedger = 100000;
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    int done = 0;
    for (int i = 0; i < 500; i++) {
      ml->asyncAddEntry(Buffer::copyOf("m"), [&](Status s, Position) { done += s.isOk(); });
    }
    ASSERT_TRUE(runUntil(ex_, [&] { return done == 500; }));
    StorageStats st = f.stats();
    EXPECT_EQ(st.journalEntries, 500u);
    EXPECT_LT(st.journalGroups, 100u);  // grouped, not one write+fsync per entry
    EXPECT_GE(env.syncs.load(), static_cast<int>(st.journalGroups));
  });
}

TEST_F(DurableStorageTest, ConsumedDataIsReclaimed) {
  StorageOptions o = testOptions(dir_.path());
  o.journalSegmentSizeBytes = 4096;
  o.checkpointIntervalMs = 20;
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    Position last;
    for (int i = 0; i < 200; i++) {
      auto p = addOne(*ml, ex_, std::string(200, static_cast<char>('a' + i % 26)));
      ASSERT_TRUE(p.isOk());
      last = *p;
    }
    int64_t before = dirBytes(o.journalDirectory);
    size_t segsBefore = f.segments().size();
    EXPECT_GT(segsBefore, 5u);
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { (*c)->asyncMarkDelete(last, cb); }));
    // Keep producing a little so the journal rolls past the consumed segments.
    ASSERT_TRUE(runUntil(ex_, [&] {
      (void)addOne(*ml, ex_, "x");
      (void)waitStatus(
          ex_, [&](StatusCallback cb) { (*c)->asyncMarkDelete(ml->lastConfirmedEntry(), cb); });
      return dirBytes(o.journalDirectory) < before / 4;
    }));
    EXPECT_LT(f.segments().size(), segsBefore);
    EXPECT_GT(f.stats().segmentsDeleted, 0u);
    EXPECT_GT(f.stats().ledgersDeleted, 0u);
    EXPECT_LT(ml->numberOfEntries(), 20);
  });
}

// Appends under an injected fault fail with the right code, stored data stays readable, and
// appends work again once the fault is gone; a restart has exactly the acknowledged entries.
void faultRoundTrip(DurableStorageTest* t, ManualExecutor& ex, const std::string& dir,
                    const std::function<void(FaultEnv&)>& inject, StatusCode expected) {
  StorageOptions o = testOptions(dir);
  FaultEnv env;
  o.env = &env;
  MemoryMetadataStore store;
  o.metadataStore = &store;
  std::vector<std::string> acked;
  {
    auto f = DurableManagedLedgerFactory::open(o);
    ASSERT_TRUE(f.isOk());
    auto ml = openLedger(**f, ex, "t");
    ASSERT_TRUE(ml->openCursor("s", InitialPosition::kEarliest).isOk());
    for (int i = 0; i < 5; i++) {
      ASSERT_TRUE(addOne(*ml, ex, "ok" + std::to_string(i)).isOk());
      acked.push_back("ok" + std::to_string(i));
    }
    size_t ledgersBefore = ml->ledgerStats().size();
    int64_t currentBefore = ml->lastConfirmedEntry().ledgerId;
    inject(env);
    for (int i = 0; i < 3; i++) {
      auto r = addOne(*ml, ex, "fail" + std::to_string(i));
      ASSERT_FALSE(r.isOk());
      EXPECT_EQ(r.status().code(), expected) << r.status().toString();
    }
    // The failed bytes were cut: no new ledger per failed write.
    EXPECT_EQ(ml->ledgerStats().size(), ledgersBefore);
    auto stored = readAll(*ml, ex);
    ASSERT_EQ(stored.size(), 5u);
    env.writeErrno = 0;
    env.syncErrno = 0;
    env.shortWrites = false;
    // Writes resume without a restart (a full journal is retried once the disk check sees room).
    ASSERT_TRUE(runUntil(ex, [&] { return (*f)->writeRefusal().isOk(); }));
    auto p = addOne(*ml, ex, "again");
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    EXPECT_EQ(p->ledgerId, currentBefore);  // the same ledger, retried at the failed entry id
    EXPECT_EQ(p->entryId, 5);
    acked.push_back("again");
    ml.reset();
    (*f)->shutdown();
    ex.runPending();
  }
  auto f = DurableManagedLedgerFactory::open(o);
  ASSERT_TRUE(f.isOk());
  auto ml = openLedger(**f, ex, "t");
  auto all = readAll(*ml, ex);
  ASSERT_EQ(all.size(), acked.size());
  for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(all[i].data.view(), acked[i]);
  ml.reset();
  (*f)->shutdown();
  ex.runPending();
}

TEST_F(DurableStorageTest, NoSpaceFailsPublishesAndRecovers) {
  faultRoundTrip(
      this, ex_, dir_.path(), [](FaultEnv& e) { e.writeErrno = ENOSPC; }, StatusCode::kNoSpace);
}

TEST_F(DurableStorageTest, ShortWriteFailsPublishesAndRecovers) {
  faultRoundTrip(
      this, ex_, dir_.path(),
      [](FaultEnv& e) {
        e.shortWrites = true;
        e.writeErrno = EIO;
      },
      StatusCode::kIoError);
}

TEST_F(DurableStorageTest, FailedFsyncFailsPublishesAndRecovers) {
  faultRoundTrip(
      this, ex_, dir_.path(), [](FaultEnv& e) { e.syncErrno = EIO; }, StatusCode::kIoError);
}

TEST_F(DurableStorageTest, CatchUpReadsGoToDiskInBatches) {
  StorageOptions o = testOptions(dir_.path());
  o.managedLedgerCacheSizeMB = 0;  // no cache: every read is a disk read
  o.managedLedgerMaxEntriesPerLedger = 1000;
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    ASSERT_TRUE(ml->openCursor("s", InitialPosition::kEarliest).isOk());
    std::vector<std::string> want;
    for (int round = 0; round < 20; round++) {
      int done = 0;
      for (int i = 0; i < 10; i++) {
        want.push_back("r" + std::to_string(round) + "-" + std::to_string(i));
        ml->asyncAddEntry(Buffer::copyOf(want.back()),
                          [&](Status s, Position) { done += s.isOk(); });
      }
      ASSERT_TRUE(runUntil(ex_, [&] { return done == 10; }));
    }
    uint64_t readsBefore = f.stats().diskReads;
    auto all = readAll(*ml, ex_);
    ASSERT_EQ(all.size(), want.size());
    for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(all[i].data.view(), want[i]);
    uint64_t reads = f.stats().diskReads - readsBefore;
    EXPECT_GT(reads, 0u);
    EXPECT_LE(reads, 10u);  // 200 entries in ~20+ records: coalesced preads, 100 entries per call
  });
}

TEST_F(DurableStorageTest, TailReadsComeFromTheCache) {
  StorageOptions o = testOptions(dir_.path());
  withLedger(o, "t", [&](auto& f, const auto& ml) {
    ASSERT_TRUE(ml->openCursor("s", InitialPosition::kLatest).isOk());
    auto first = addOne(*ml, ex_, "e0");
    for (int i = 1; i < 8; i++) ASSERT_TRUE(addOne(*ml, ex_, "e" + std::to_string(i)).isOk());
    auto all = readAll(*ml, ex_, *first);
    ASSERT_EQ(all.size(), 8u);
    EXPECT_EQ(all[7].data.view(), "e7");
    EXPECT_EQ(f.stats().diskReads, 0u);
    EXPECT_GT(f.stats().cacheBytes, 0);
  });
}

TEST_F(DurableStorageTest, RetentionKeepsConsumedLedgers) {
  StorageOptions o = testOptions(dir_.path());
  o.defaultRetentionSizeInMB = 1;  // 1 MiB of consumed data may stay
  o.defaultRetentionTimeInMinutes = -1;
  withLedger(o, "t", [&](auto&, const auto& ml) {
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    Position last;
    for (int i = 0; i < 30; i++) last = *addOne(*ml, ex_, std::string(100, 'r'));
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { (*c)->asyncMarkDelete(last, cb); }));
    ex_.runPending();
    EXPECT_EQ(ml->numberOfEntries(), 30);  // 3 KB < 1 MiB: kept
    EXPECT_EQ((*c)->numberOfEntriesInBacklog(), 0);
  });
}

TEST_F(DurableStorageTest, UnackedRangesPersistedUpToTheBound) {
  StorageOptions o = testOptions(dir_.path());
  o.managedLedgerMaxUnackedRangesToPersist = 2;
  std::vector<Position> pos;
  withLedger(o, "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < 9; i++) pos.push_back(addN(*ml, 1, "x"));
    // Ranges {1}, {3}, {5,6}, {8}: only the first two are saved.
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) {
      c->asyncDelete({pos[1], pos[3], pos[5], pos[6], pos[8]}, cb);
    }));
    EXPECT_EQ(c->numberOfEntriesInBacklog(), 4);
  });
  withLedger(o, "t", [&](auto&, const auto& ml) {
    ManagedCursor* c = openCursorS(*ml);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->isAcknowledged(pos[1]));
    EXPECT_TRUE(c->isAcknowledged(pos[3]));
    EXPECT_FALSE(c->isAcknowledged(pos[5]));  // beyond the bound: delivered again
    EXPECT_EQ(c->numberOfEntriesInBacklog(), 7);
  });
}

TEST_F(DurableStorageTest, BatchAckSetsAndPropertiesSurviveRestart) {
  StorageOptions o = testOptions(dir_.path());
  o.managedLedgerMaxBatchDeletedIndexToPersist = 2;
  std::vector<Position> pos;
  withLedger(o, "t", [&](auto&, const auto& ml) {
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    auto d = ml->openCursor("d", InitialPosition::kEarliest);
    for (int i = 0; i < 5; i++) pos.push_back(*addOne(*ml, ex_, "x"));
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) {
      (*c)->asyncDeleteBatchIndexes(
          {{pos[1], AckSet{0b110}}, {pos[2], AckSet{0b1}}, {pos[3], AckSet{0b1}}}, cb);
    }));
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) {
      (*d)->asyncMarkDelete(pos[2], CursorProperties{{"prod", 17}}, cb);
    }));
  });
  withLedger(o, "t", [&](auto&, const auto& ml) {
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    ASSERT_NE((*c)->batchDeletedIndexes(pos[1]), nullptr);
    EXPECT_EQ(*(*c)->batchDeletedIndexes(pos[1]), AckSet{0b110});
    EXPECT_NE((*c)->batchDeletedIndexes(pos[2]), nullptr);
    EXPECT_EQ((*c)->batchDeletedIndexes(pos[3]), nullptr);  // beyond the bound
    EXPECT_FALSE((*c)->isAcknowledged(pos[1]));
    auto d = ml->openCursor("d", InitialPosition::kEarliest);
    EXPECT_EQ((*d)->markDeletedPosition(), pos[2]);
    EXPECT_EQ((*d)->properties().at("prod"), 17);
  });
}

TEST_F(DurableStorageTest, RocksDbMetadataSurvivesRestart) {
  StorageOptions o = testOptions(dir_.path());
  {
    auto f = open(o);
    ASSERT_TRUE(f->metadataStore()->put("/admin/tenants/acme", "{}").isOk());
    close(f);
  }
  auto f = open(o);
  auto v = f->metadataStore()->get("/admin/tenants/acme");
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(*v, "{}");
  close(f);
}

// A store that checks after every write what a kill -9 right then would leave: ledger `gone` may
// be missing from the list of "t" only once cursor "c" is stored at `needed` or later.
class TrimOrderStore : public MemoryMetadataStore {
 public:
  Status write(const std::vector<MetadataOp>& ops) override {
    Status s = MemoryMetadataStore::write(ops);
    auto list = get(mlKey("t"));
    auto cursor = get(cursorKey("t", "c"));
    if (!list.isOk() || !cursor.isOk() || gone.load() < 0) return s;
    auto ledgers = decodeLedgerList(*list);
    auto c = decodeCursor(*cursor);
    if (!ledgers || !c) return s;
    bool present = false;
    for (const auto& m : *ledgers) present |= m.ledgerId == gone.load();
    if (!present) {
      trimmed = true;
      if (c->markDelete < Position{gone.load(), needed.load()}) violations++;
    }
    return s;
  }
  std::atomic<int64_t> gone{-1};
  std::atomic<int64_t> needed{0};
  std::atomic<bool> trimmed{false};
  std::atomic<int> violations{0};
};

// A consumed ledger is deleted only after the mark-delete past it is stored: a crash in between
// must not leave the cursor before data that is gone (a compaction's horizon and its properties
// move in that write).
TEST_F(DurableStorageTest, TrimWaitsForTheMarkDeleteWrite) {
  StorageOptions o = testOptions(dir_.path());
  TrimOrderStore store;
  o.metadataStore = &store;
  auto f = open(o);
  auto ml = openLedger(*f, ex_, "t");
  auto c = ml->openCursor("c", InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk());
  std::vector<Position> pos;
  for (int i = 0; i < 15; i++) {  // 10 entries per ledger: the first ledger is closed
    auto p = addOne(*ml, ex_, "e" + std::to_string(i));
    ASSERT_TRUE(p.isOk());
    pos.push_back(*p);
  }
  ASSERT_NE(pos[9].ledgerId, pos[10].ledgerId);
  store.gone = pos[9].ledgerId;
  store.needed = pos[9].entryId;
  EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) {
    (*c)->asyncMarkDelete(pos[9], CursorProperties{{"horizon", 9}}, cb);
  }));
  ASSERT_TRUE(runUntil(ex_, [&] { return store.trimmed.load(); }));
  EXPECT_EQ(store.violations.load(), 0);
  EXPECT_EQ(ml->firstPosition(), pos[10]);
  ml.reset();
  close(f);
}

// Counts the writes of cursor "c" of ledger "t" and keeps the last mark-delete written.
class CursorWriteStore : public MemoryMetadataStore {
 public:
  Status write(const std::vector<MetadataOp>& ops) override {
    Status s = MemoryMetadataStore::write(ops);
    for (const auto& op : ops) {
      if (op.key != cursorKey("t", "c")) continue;
      writes++;
      if (auto c = decodeCursor(*get(op.key))) {
        lastMark = c->markDelete.entryId;
        lastRanges = static_cast<int>(c->ranges.size());
      }
    }
    return s;
  }
  std::atomic<int> writes{0};
  std::atomic<int64_t> lastMark{-2};
  std::atomic<int> lastRanges{-1};
};

// managedLedgerDefaultMarkDeleteRateLimit: acks nobody waits for are written at most `rate` times
// a second; what was held back is written on a later tick; an ack that waits for its write (an ack
// receipt) is written in its own pass; 0 writes in every pass.
TEST_F(DurableStorageTest, MarkDeleteRateLimitHoldsBackUnwaitedCursorWrites) {
  for (double rate : {1.0, 0.0}) {
    SCOPED_TRACE(rate);
    TempDir dir;
    StorageOptions o = testOptions(dir.path());
    o.managedLedgerMaxEntriesPerLedger = 1000;
    o.managedLedgerDefaultMarkDeleteRateLimit = rate;
    CursorWriteStore store;
    o.metadataStore = &store;
    auto f = open(o);
    auto ml = openLedger(*f, ex_, "t");
    // Another cursor's write opens the interval; a new cursor is written at once all the same.
    ASSERT_TRUE(ml->openCursor("other", InitialPosition::kEarliest).isOk());
    ex_.runPending();
    auto c = ml->openCursor("c", InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    ex_.runPending();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(store.writes.load(), 1) << "the new cursor waited for the rate limit";
    std::vector<Position> pos;
    for (int i = 0; i < 60; i++) {
      auto p = addOne(*ml, ex_, "e" + std::to_string(i));
      ASSERT_TRUE(p.isOk());
      pos.push_back(*p);
    }
    ASSERT_TRUE(runUntil(ex_, [&] { return store.writes.load() >= 1; }));
    const int before = store.writes.load();
    // 20 acks of every other entry, each in a pass of its own, nobody waiting.
    for (int i = 1; i < 40; i += 2) {
      (*c)->asyncDelete({pos[i]}, nullptr);
      ex_.runPending();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ex_.runPending();
    const int unwaited = store.writes.load() - before;
    if (rate > 0) {
      EXPECT_LE(unwaited, 1) << "written " << unwaited << " times within the interval";
      // The held-back state goes out on a tick once the interval is over.
      ASSERT_TRUE(runUntil(ex_, [&] { return store.lastRanges.load() == 20; }));
    } else {
      ASSERT_TRUE(runUntil(ex_, [&] { return store.writes.load() - before == 20; }))
          << "written " << store.writes.load() - before << " times for 20 passes";
      EXPECT_EQ(store.lastRanges.load(), 20);
    }
    // A waited-for ack is written at once, whatever the interval.
    const int beforeWaited = store.writes.load();
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { (*c)->asyncDelete({pos[0]}, cb); }));
    EXPECT_EQ(store.writes.load(), beforeWaited + 1);
    EXPECT_EQ(store.lastMark.load(), pos[1].entryId);
    ml.reset();
    close(f);
  }
}

// The limit is per cursor, as Pulsar's ManagedCursorImpl.markDeleteLimiter: a cursor whose own
// interval has passed is written at once, whatever another cursor wrote just before (with the
// limit per topic, it waited for the topic's interval).
TEST_F(DurableStorageTest, MarkDeleteRateLimitIsPerCursor) {
  TempDir dir;
  StorageOptions o = testOptions(dir.path());
  o.managedLedgerMaxEntriesPerLedger = 1000;
  o.managedLedgerDefaultMarkDeleteRateLimit = 5.0;  // one unwaited write per 200 ms
  o.tickIntervalMs = 60000;                         // no tick writes during the test
  CursorWriteStore store;
  o.metadataStore = &store;
  auto f = open(o);
  auto ml = openLedger(*f, ex_, "t");
  auto c = ml->openCursor("c", InitialPosition::kEarliest);
  auto other = ml->openCursor("other", InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk() && other.isOk());
  ASSERT_TRUE(runUntil(ex_, [&] { return store.writes.load() == 1; }));
  std::vector<Position> pos;
  for (int i = 0; i < 2; i++) {
    auto p = addOne(*ml, ex_, "e" + std::to_string(i));
    ASSERT_TRUE(p.isOk());
    pos.push_back(*p);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both intervals are over
  (*other)->asyncDelete({pos[0]}, nullptr);
  ex_.runPending();
  (*c)->asyncDelete({pos[1]}, nullptr);
  ex_.runPending();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ex_.runPending();
  EXPECT_EQ(store.writes.load(), 2) << "c waited for the interval another cursor's write opened";
  EXPECT_EQ(store.lastRanges.load(), 1);
  ml.reset();
  close(f);
}

}  // namespace
}  // namespace magnetar::storage::testing
