#include "storage/journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "storage/tests/fault_env.h"
#include "storage/tests/ledger_test_util.h"

namespace magnetar::storage::testing {
namespace {

TEST(JournalFormatTest, RecordRoundTripAndCorruptionDetected) {
  std::vector<Buffer> entries{Buffer::copyOf("alpha"), Buffer::copyOf(""),
                              Buffer::copyOf("gamma!")};
  std::string rec;
  size_t len = appendEntriesRecord(&rec, 42, 7, entries.size(),
                                   [&](size_t i) -> const Buffer& { return entries[i]; });
  ASSERT_EQ(len, rec.size());
  EXPECT_EQ(len, kRecordFrameSize + kEntriesHeaderSize + 3 * 4 + 11);
  auto* p = reinterpret_cast<const uint8_t*>(rec.data());
  ASSERT_EQ(validRecordLength(p, rec.size()), len);
  JournalRun run;
  ASSERT_TRUE(decodeRunHeader(p, &run));
  EXPECT_EQ(run.ledgerId, 42);
  EXPECT_EQ(run.firstEntryId, 7);
  EXPECT_EQ(run.count, 3);
  EXPECT_EQ(run.dataBytes, 11);
  std::vector<std::pair<int64_t, Buffer>> out;
  decodeEntries(p, 8, 9, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].first, 8);
  EXPECT_EQ(out[0].second.size(), 0u);
  EXPECT_EQ(out[1].second.view(), "gamma!");
  // Any cut or flipped byte makes the record invalid.
  for (size_t i = 0; i < rec.size(); i++) {
    EXPECT_EQ(validRecordLength(p, i), 0u) << "cut at " << i;
    std::string bad = rec;
    bad[i] ^= 0x40;
    EXPECT_EQ(validRecordLength(reinterpret_cast<const uint8_t*>(bad.data()), bad.size()), 0u)
        << "flip at " << i;
  }
}

TEST(JournalFormatTest, SegmentNames) {
  uint64_t s = 0;
  EXPECT_EQ(segmentFileName(12), "journal-00000000000000000012.log");
  EXPECT_TRUE(parseSegmentFileName(segmentFileName(12), &s));
  EXPECT_EQ(s, 12u);
  EXPECT_FALSE(parseSegmentFileName("journal-x.log", &s));
  EXPECT_FALSE(parseSegmentFileName("LOCK", &s));
}

// Counts group outcomes per client.
class CountingClient : public JournalClient {
 public:
  void onJournalWritten(Status s, std::vector<JournalRun> runs, size_t n, bool) override {
    std::lock_guard lock(mu);
    calls++;
    entries += n;
    if (!s) failed += n;
    for (auto& r : runs) this->runs.push_back(r);
  }
  std::mutex mu;
  int calls = 0;
  size_t entries = 0, failed = 0;
  std::vector<JournalRun> runs;
};

TEST(JournalTest, ConcurrentAppendsAreGroupedOneCallbackPerClientPerGroup) {
  TempDir dir;
  FaultEnv env;
  env.syncDelayUs = 2000;
  JournalOptions o;
  o.directory = dir.path();
  o.syncData = true;
  std::mutex cpMu;
  std::vector<JournalRun> checkpointed;
  Journal j(&env, o, 1, [&](JournalCheckpoint cp) {
    std::lock_guard lock(cpMu);
    for (auto& r : cp.runs) checkpointed.push_back(r);
  });
  ASSERT_TRUE(j.start().isOk());
  constexpr int kThreads = 4, kPerThread = 300;
  std::vector<std::shared_ptr<CountingClient>> clients;
  for (int t = 0; t < kThreads; t++) clients.push_back(std::make_shared<CountingClient>());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) {
        j.append(clients[t], 100 + t, i,
                 Buffer::copyOf(std::to_string(t) + ":" + std::to_string(i)));
        if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(runUntil(*std::make_unique<ManualExecutor>(), [&] {
    for (auto& c : clients) {
      std::lock_guard lock(c->mu);
      if (c->entries < kPerThread) return false;
    }
    return true;
  }));
  j.stop();
  uint64_t groups = j.groupsWritten();
  EXPECT_EQ(j.entriesWritten(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_LT(groups, 200u);
  for (auto& c : clients) {
    EXPECT_EQ(c->failed, 0u);
    EXPECT_LE(c->calls, static_cast<int>(groups));  // at most one callback per group
    EXPECT_LT(c->calls, kPerThread);
    // The runs of one ledger are contiguous and in order.
    int64_t next = 0;
    for (auto& r : c->runs) {
      EXPECT_EQ(r.firstEntryId, next);
      next += r.count;
    }
    EXPECT_EQ(next, kPerThread);
  }
  // The final checkpoint covers every run, and a scan of the file finds them all.
  EXPECT_EQ(checkpointed.size(), [&] {
    size_t n = 0;
    for (auto& c : clients) n += c->runs.size();
    return n;
  }());
  std::map<int64_t, int64_t> perLedger;
  auto end = scanSegment(&env, j.segmentPath(1), 1, 0,
                         [&](const JournalRun& r) { perLedger[r.ledgerId] += r.count; });
  ASSERT_TRUE(end.isOk());
  EXPECT_EQ(*end, std::filesystem::file_size(j.segmentPath(1)));
  for (int t = 0; t < kThreads; t++) EXPECT_EQ(perLedger[100 + t], kPerThread);
}

TEST(JournalTest, FailedWriteIsReportedAndCutAway) {
  TempDir dir;
  FaultEnv env;
  JournalOptions o;
  o.directory = dir.path();
  o.syncData = true;
  Journal j(&env, o, 1, [](JournalCheckpoint) {});
  ASSERT_TRUE(j.start().isOk());
  auto c = std::make_shared<CountingClient>();
  ManualExecutor ex;
  j.append(c, 1, 0, Buffer::copyOf("good"));
  ASSERT_TRUE(runUntil(ex, [&] {
    std::lock_guard l(c->mu);
    return c->entries == 1;
  }));
  uint64_t goodSize = std::filesystem::file_size(j.segmentPath(1));
  env.shortWrites = true;
  env.writeErrno = ENOSPC;
  j.append(c, 1, 1, Buffer::copyOf(std::string(1000, 'b')));
  ASSERT_TRUE(runUntil(ex, [&] {
    std::lock_guard l(c->mu);
    return c->entries == 2;
  }));
  EXPECT_EQ(c->failed, 1u);
  EXPECT_EQ(std::filesystem::file_size(j.segmentPath(1)), goodSize);  // partial write removed
  env.writeErrno = 0;
  j.append(c, 1, 1, Buffer::copyOf("again"));
  ASSERT_TRUE(runUntil(ex, [&] {
    std::lock_guard l(c->mu);
    return c->entries == 3;
  }));
  EXPECT_EQ(c->failed, 1u);
  j.stop();
  int64_t count = 0;
  ASSERT_TRUE(scanSegment(&env, j.segmentPath(1), 1, 0, [&](const JournalRun& r) {
                count += r.count;
              }).isOk());
  EXPECT_EQ(count, 2);
}

TEST(JournalTest, GroupsAreCappedNearMaxGroupBytes) {
  TempDir dir;
  FaultEnv env;
  env.syncDelayUs = 20000;  // the first group's fsync holds the rest in the queue
  JournalOptions o;
  o.directory = dir.path();
  o.syncData = true;
  o.maxGroupBytes = 1000;
  Journal j(&env, o, 1, [](JournalCheckpoint) {});
  ASSERT_TRUE(j.start().isOk());
  auto c = std::make_shared<CountingClient>();
  ManualExecutor ex;
  for (int i = 0; i < 100; i++) j.append(c, 1, i, Buffer::copyOf(std::string(100, 'c')));
  ASSERT_TRUE(runUntil(ex, [&] {
    std::lock_guard l(c->mu);
    return c->entries == 100;
  }));
  j.stop();
  // 10 000 bytes in groups of about 1000: at least 9 groups, each run at most ~11 entries.
  EXPECT_GE(j.groupsWritten(), 9u);
  for (auto& r : c->runs) EXPECT_LE(r.count, 11);
}

TEST(JournalTest, RollsSegments) {
  TempDir dir;
  JournalOptions o;
  o.directory = dir.path();
  o.segmentSizeBytes = 1024;
  Journal j(Env::posix(), o, 5, [](JournalCheckpoint) {});
  ASSERT_TRUE(j.start().isOk());
  auto c = std::make_shared<CountingClient>();
  ManualExecutor ex;
  for (int i = 0; i < 20; i++) {
    j.append(c, 1, i, Buffer::copyOf(std::string(300, 'z')));
    ASSERT_TRUE(runUntil(ex, [&] {
      std::lock_guard l(c->mu);
      return c->entries == size_t(i + 1);
    }));
  }
  j.stop();
  EXPECT_GT(j.currentSegment(), 8u);
  for (auto& r : c->runs) EXPECT_LE(r.offset + r.length, 1024u + 400u);
}

}  // namespace
}  // namespace magnetar::storage::testing
