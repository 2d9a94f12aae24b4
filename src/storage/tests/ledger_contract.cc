#include "storage/tests/ledger_contract.h"

#include <filesystem>
#include <map>
#include <random>

namespace magnetar::storage::testing {

namespace fs = std::filesystem;

void LedgerContractTest::SetUp() {
  std::random_device rd;
  dir_ = (fs::temp_directory_path() / ("magnetar-ml-" + std::to_string(rd()))).string();
  fs::create_directories(dir_);
  factory_ = GetParam()(dir_);
}

void LedgerContractTest::TearDown() {
  if (factory_) factory_->shutdown();
  ex_.runPending();
  factory_.reset();
  ex_.runPending();
  fs::remove_all(dir_);
}

void LedgerContractTest::runUntil(const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (ex_.runPending() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
  }
}

std::shared_ptr<ManagedLedger> LedgerContractTest::open(const std::string& name) {
  std::shared_ptr<ManagedLedger> ml;
  bool done = false;
  factory_->asyncOpen(name, &ex_, [&](Result<std::shared_ptr<ManagedLedger>> r) {
    EXPECT_TRUE(ex_.running());
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (r) ml = *r;
    done = true;
  });
  runUntil([&] { return done; });
  return ml;
}

std::vector<Position> LedgerContractTest::add(ManagedLedger& ml, int n, int base) {
  std::vector<Position> out;
  for (int i = 0; i < n; i++) {
    ml.asyncAddEntry(Buffer::copyOf("m" + std::to_string(base + i)), [&](Status s, Position p) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      out.push_back(p);
    });
  }
  runUntil([&] { return static_cast<int>(out.size()) == n; });
  return out;
}

std::vector<Entry> LedgerContractTest::read(ManagedLedger& ml, Position from, int maxEntries,
                                            size_t maxBytes) {
  std::vector<Entry> out;
  bool done = false;
  ml.asyncReadEntries(from, maxEntries, maxBytes, [&](Status s, std::vector<Entry> e) {
    EXPECT_TRUE(s.isOk()) << s.toString();
    out = std::move(e);
    done = true;
  });
  runUntil([&] { return done; });
  return out;
}

Status LedgerContractTest::wait(const std::function<void(StatusCallback)>& op) {
  Status result = Status::internal("not completed");
  bool done = false;
  op([&](Status s) {
    result = s;
    done = true;
  });
  runUntil([&] { return done; });
  return result;
}

LedgerContractTest::Topic LedgerContractTest::openWithCursor(const std::string& name, int n) {
  Topic t;
  t.ml = open(name);
  if (!t.ml) return t;
  auto c = t.ml->openCursor("s", InitialPosition::kEarliest);
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  if (c.isOk()) t.cursor = *c;
  t.pos = add(*t.ml, n);
  return t;
}

TEST_P(LedgerContractTest, AddCompletesLaterInOrderOnExecutor) {
  auto ml = open("t/add");
  ASSERT_TRUE(ml->openCursor("keep", InitialPosition::kEarliest).isOk());  // no trim
  std::vector<Position> got;
  for (int i = 0; i < 25; i++) {
    ml->asyncAddEntry(Buffer::copyOf("x"), [&](Status s, Position p) {
      EXPECT_TRUE(s.isOk());
      EXPECT_TRUE(ex_.running());
      EXPECT_EQ(ml->lastConfirmedEntry(), p);  // LAC moves before the callback
      got.push_back(p);
    });
  }
  EXPECT_TRUE(got.empty());  // never inline in the caller's stack
  runUntil([&] { return got.size() == 25; });
  for (size_t i = 1; i < got.size(); i++) {
    EXPECT_LT(got[i - 1], got[i]);
    EXPECT_EQ(ml->nextValidPosition(got[i - 1]), got[i]);
  }
  // 10 entries per ledger: three ledgers used.
  EXPECT_EQ(got[9].entryId, 9);
  EXPECT_EQ(got[10].entryId, 0);
  EXPECT_GT(got[10].ledgerId, got[9].ledgerId);
  EXPECT_EQ(ml->numberOfEntries(), 25);
  EXPECT_EQ(ml->totalSizeBytes(), 25);
  EXPECT_EQ(ml->numberOfEntriesBetween(got[3], got[24]), 21);
  auto stats = ml->ledgerStats();
  ASSERT_GE(stats.size(), 3u);
  EXPECT_EQ(stats.back().ledgerId, got[24].ledgerId);
  EXPECT_EQ(stats.back().entries, 5);
  EXPECT_EQ(stats.back().sizeBytes, 5);
  EXPECT_EQ(stats[stats.size() - 2].entries, 10);
}

TEST_P(LedgerContractTest, ReadsHonourLimits) {
  auto ml = open("t/read");
  ASSERT_TRUE(ml->openCursor("keep", InitialPosition::kEarliest).isOk());
  auto pos = add(*ml, 15);
  auto all = read(*ml, pos[0], 100, 1 << 20);
  ASSERT_EQ(all.size(), 15u);
  for (int i = 0; i < 15; i++) {
    EXPECT_EQ(all[i].position, pos[i]);
    EXPECT_EQ(all[i].data.view(), "m" + std::to_string(i));
  }
  EXPECT_EQ(read(*ml, pos[0], 4, 1 << 20).size(), 4u);
  EXPECT_EQ(read(*ml, pos[0], 100, 6).size(), 3u);   // "m0".."m2" are 2 bytes each
  EXPECT_EQ(read(*ml, pos[12], 100, 1).size(), 1u);  // at least one entry
  EXPECT_TRUE(read(*ml, ml->nextValidPosition(pos[14]), 10, 1000).empty());
  // A position past a ledger's end continues at the next ledger.
  auto r = read(*ml, Position{pos[9].ledgerId, 50}, 1, 1000);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].position, pos[10]);
}

// Single positions from the entry cache (Key_Shared replays): each position of the log asked for
// is found, in order and with its data, or left for asyncReadEntries; one not in the log is never
// found.
TEST_P(LedgerContractTest, CachedPositionsAreFoundOrLeftForReads) {
  auto ml = open("t/positions");
  ASSERT_TRUE(ml->openCursor("keep", InitialPosition::kEarliest).isOk());
  auto pos = add(*ml, 25);
  const std::vector<int> idx{0, 3, 9, 10, 17, 24};
  const Position gone{pos[9].ledgerId, 50};  // past the end of the first ledger
  std::vector<Position> asked{pos[0], pos[3], pos[9], gone, pos[10], pos[17], pos[24]};
  std::vector<Entry> found;
  std::vector<Position> uncached;
  ml->readCachedPositions(asked, &found, &uncached);
  std::map<Position, std::string> got;
  for (size_t i = 0; i < found.size(); i++) {
    if (i > 0) {
      EXPECT_LT(found[i - 1].position, found[i].position);
    }
    EXPECT_NE(found[i].position, gone);
    got[found[i].position] = std::string(found[i].data.view());
  }
  for (const Position& p : uncached) {
    if (p == gone) continue;
    auto r = read(*ml, p, 1, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].position, p);
    EXPECT_TRUE(got.emplace(p, std::string(r[0].data.view())).second) << "found and uncached";
  }
  ASSERT_EQ(got.size(), idx.size());
  for (int i : idx) EXPECT_EQ(got[pos[i]], "m" + std::to_string(i));
}

TEST_P(LedgerContractTest, CursorBacklogAcksAndReset) {
  auto ml = open("t/cursor");
  auto early = ml->openCursor("early", InitialPosition::kEarliest);
  auto pos = add(*ml, 12);
  auto late = ml->openCursor("late", InitialPosition::kLatest);
  ASSERT_TRUE(early.isOk());
  ASSERT_TRUE(late.isOk());
  ManagedCursor* c = *early;
  EXPECT_EQ(c->numberOfEntriesInBacklog(), 12);
  EXPECT_EQ((*late)->numberOfEntriesInBacklog(), 0);
  EXPECT_EQ((*late)->markDeletedPosition(), pos[11]);
  EXPECT_EQ(c->name(), "early");

  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[1], pos[2], pos[9]}, cb); }));
  EXPECT_EQ(c->numberOfEntriesInBacklog(), 9);
  EXPECT_TRUE(c->isAcknowledged(pos[2]));
  EXPECT_FALSE(c->isAcknowledged(pos[0]));
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[0]}, cb); }));
  EXPECT_EQ(c->markDeletedPosition(), pos[2]);
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncMarkDelete(pos[8], cb); }));
  EXPECT_EQ(c->markDeletedPosition(), pos[9]);  // 9 was acked individually
  EXPECT_EQ(c->numberOfEntriesInBacklog(), 2);

  auto more = add(*ml, 3, 12);
  EXPECT_EQ(c->numberOfEntriesInBacklog(), 5);
  EXPECT_EQ((*late)->numberOfEntriesInBacklog(), 3);

  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncResetCursor(pos[10], cb); }));
  EXPECT_EQ(c->numberOfEntriesInBacklog(), 5);
  EXPECT_EQ(ml->nextValidPosition(c->markDeletedPosition()), pos[10]);
  EXPECT_EQ(ml->cursors().size(), 2u);
  // Reopening an existing cursor returns it with its state.
  auto again = ml->openCursor("early", InitialPosition::kLatest);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(*again, c);
  EXPECT_TRUE(ml->deleteCursor("late").isOk());
  EXPECT_FALSE(ml->deleteCursor("late").isOk());
  EXPECT_EQ(ml->cursors().size(), 1u);
}

TEST_P(LedgerContractTest, WithoutCursorsOnlyTheCurrentLedgerIsKept) {
  auto ml = open("t/nocursor");
  auto pos = add(*ml, 25);  // ledgers of 10, 10, 5
  runUntil([&] { return ml->numberOfEntries() == 5; });
  EXPECT_EQ(ml->firstPosition(), pos[20]);
}

TEST_P(LedgerContractTest, ConsumedLedgersAreTrimmed) {
  auto ml = open("t/trim");
  auto c = ml->openCursor("s", InitialPosition::kEarliest);
  ASSERT_TRUE(c.isOk());
  auto pos = add(*ml, 25);
  EXPECT_EQ(ml->firstPosition(), pos[0]);
  EXPECT_TRUE(wait([&](StatusCallback cb) { (*c)->asyncMarkDelete(pos[14], cb); }));
  runUntil([&] { return ml->numberOfEntries() == 15; });  // first ledger gone
  EXPECT_EQ(ml->firstPosition(), pos[10]);
  auto r = read(*ml, pos[0], 1, 100);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].position, pos[10]);
  EXPECT_EQ((*c)->numberOfEntriesInBacklog(), 10);
}

TEST_P(LedgerContractTest, ReopenKeepsDataAndCursorsInANewLedger) {
  std::vector<Position> pos;
  {
    auto ml = open("t/reopen");
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    pos = add(*ml, 5);
    EXPECT_TRUE(wait([&](StatusCallback cb) { (*c)->asyncDelete({pos[0], pos[3]}, cb); }));
    EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));
    bool failed = false;
    ml->asyncAddEntry(Buffer::copyOf("late"), [&](Status s, Position) {
      EXPECT_EQ(s.code(), StatusCode::kClosed);
      failed = true;
    });
    runUntil([&] { return failed; });
  }
  auto ml = open("t/reopen");
  EXPECT_EQ(ml->numberOfEntries(), 5);
  EXPECT_EQ(ml->lastConfirmedEntry().entryId, -1);
  EXPECT_GT(ml->lastConfirmedEntry().ledgerId, pos[4].ledgerId);
  auto c = ml->openCursor("s", InitialPosition::kLatest);
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ((*c)->markDeletedPosition(), pos[0]);
  EXPECT_TRUE((*c)->isAcknowledged(pos[3]));
  EXPECT_EQ((*c)->numberOfEntriesInBacklog(), 3);
  auto more = add(*ml, 1, 5);
  EXPECT_EQ(more[0].ledgerId, ml->lastConfirmedEntry().ledgerId);
  EXPECT_EQ(ml->nextValidPosition(pos[4]), more[0]);
  auto all = read(*ml, pos[0], 100, 1 << 20);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[5].data.view(), "m5");
  auto names = factory_->ledgerNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "t/reopen"), names.end());
}

// Pulsar's asyncTerminate: the adds taken before it complete and set the position; adds after
// it are refused; a reopen keeps the ledger terminated (the position is in its metadata).
TEST_P(LedgerContractTest, TerminateWaitsForAddsRefusesMoreAndOutlivesAReopen) {
  std::vector<Position> pos;
  {
    auto ml = open("t/terminate");
    pos = add(*ml, 3);
    EXPECT_FALSE(ml->isTerminated());
    int completed = 0;
    Position inFlight;
    ml->asyncAddEntry(Buffer::copyOf("in flight"), [&](Status s, Position p) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      inFlight = p;
      completed++;
    });
    Status st = Status::internal("not called");
    Position at;
    ml->asyncTerminate([&](Status s, Position p) {
      st = s;
      at = p;
      completed++;
    });
    ml->asyncAddEntry(Buffer::copyOf("too late"), [&](Status s, Position) {
      EXPECT_EQ(s.code(), StatusCode::kNotAllowed) << s.toString();
      completed++;
    });
    runUntil([&] { return completed == 3; });
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(at, inFlight);
    EXPECT_GT(inFlight, pos[2]);
    EXPECT_TRUE(ml->isTerminated());
    Position again;
    bool answered = false;
    ml->asyncTerminate([&](Status s, Position p) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      again = p;
      answered = true;
    });
    runUntil([&] { return answered; });
    EXPECT_EQ(again, at);
    EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));
  }
  auto ml = open("t/terminate");
  EXPECT_TRUE(ml->isTerminated());
  EXPECT_EQ(ml->numberOfEntries(), 4);
  bool refused = false;
  ml->asyncAddEntry(Buffer::copyOf("after reopen"), [&](Status s, Position) {
    EXPECT_EQ(s.code(), StatusCode::kNotAllowed) << s.toString();
    refused = true;
  });
  runUntil([&] { return refused; });
  auto all = read(*ml, pos[0], 100, 1 << 20);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[3].data.view(), "in flight");
}

TEST_P(LedgerContractTest, DeleteRemovesLedger) {
  auto ml = open("t/del");
  add(*ml, 3);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncDelete(cb); }));
  auto names = factory_->ledgerNames();
  EXPECT_EQ(std::find(names.begin(), names.end(), "t/del"), names.end());
  auto again = open("t/del");
  EXPECT_EQ(again->numberOfEntries(), 0);
}

}  // namespace magnetar::storage::testing
