// storage_crash_tool: the process tests/crash/crash_test.py kills with SIGKILL.
//
//   storage_crash_tool --dir D [--topics N] [--verify-only] [--seed S] [--compact]
//
// At start it reopens the durable storage in D (journalSyncData=true, RocksDB metadata) and checks
// every topic "crash/t<i>": its entries must be sequence numbers 0..M in order, each byte for byte
// the payload payloadFor(topic, seq) (so nothing torn, lost in the middle, duplicated or
// reordered). It prints "VERIFIED <topic> <M+1> <markDeleteLedger> <markDeleteEntry>" per topic.
// Then it appends seq M+1, M+2, ... to every topic (64 in flight per topic) and, from each add
// callback (the entry is fsync'd), prints "ACK <topic> <seq>"; every 50 acks it marks the cursor
// "sub" at the acked position and prints "CURSOR <topic> <ledger> <entry>" once that is persisted.
// The driver checks that every ACK/CURSOR printed before the kill survives. Exit 2: verification
// failed (the reason goes to stderr).
// --compact: a topic "crash/churn" (no retention, its cursor always at the end) gets large
// entries beside them, so most of each journal segment dies, and compaction runs every second
// (threshold 0.9): the kills land while live records are copied forward and segments deleted.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "base/logging.h"
#include "storage/durable_storage.h"
#include "storage/tests/test_executor.h"

using namespace magnetar;
using namespace magnetar::storage;

namespace {

std::string payloadFor(int topic, int64_t seq) {
  std::mt19937_64 rng(static_cast<uint64_t>(topic) * 1000003ull + static_cast<uint64_t>(seq));
  std::string p = "t" + std::to_string(topic) + "-s" + std::to_string(seq) + "|";
  size_t len = 8 + rng() % 3000;
  for (size_t i = 0; i < len; i++) p.push_back(static_cast<char>('a' + rng() % 26));
  return p;
}

void say(const std::string& line) {
  // One write(2) per line, so a SIGKILL never leaves half a line in the pipe.
  std::string l = line + "\n";
  (void)!::write(1, l.data(), l.size());
}

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "VERIFY FAILED: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

struct Topic {
  int index;
  std::shared_ptr<ManagedLedger> ml;
  ManagedCursor* cursor = nullptr;
  int64_t nextSeq = 0;
  int64_t acked = 0;
};

// Reads the whole topic on the executor thread and checks it; returns the next sequence number.
int64_t verify(Topic& t, testing::ThreadExecutor& ex) {
  Position from{-1, -1};
  int64_t seq = 0;
  for (;;) {
    std::promise<std::pair<Status, std::vector<Entry>>> done;
    ex.execute([&] {
      t.ml->asyncReadEntries(from, 500, 8 << 20, [&](Status s, std::vector<Entry> e) {
        done.set_value({s, std::move(e)});
      });
    });
    auto [s, entries] = done.get_future().get();
    if (!s) fail("read of topic " + std::to_string(t.index) + ": " + s.toString());
    if (entries.empty()) return seq;
    for (const Entry& e : entries) {
      std::string want = payloadFor(t.index, seq);
      if (e.data.view() != want) {
        fail("topic " + std::to_string(t.index) + " entry " + std::to_string(e.position.ledgerId) +
             ":" + std::to_string(e.position.entryId) + " is not seq " + std::to_string(seq) +
             " (got " + std::string(e.data.view().substr(0, 24)) + ")");
      }
      seq++;
    }
    Position last = entries.back().position;  // clang 14 cannot capture a structured binding
    from = ex.sync([&] { return t.ml->nextValidPosition(last); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int topics = 4;
  bool verifyOnly = false;
  bool compact = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--topics" && i + 1 < argc) {
      topics = std::stoi(argv[++i]);
    } else if (a == "--verify-only") {
      verifyOnly = true;
    } else if (a == "--compact") {
      compact = true;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: storage_crash_tool --dir D [--topics N] [--verify-only]\n");
    return 1;
  }
  initLogging("warn");
  StorageOptions o;
  o.journalDirectory = dir + "/journal";
  o.metadataDirectory = dir + "/metadata";
  o.journalSyncData = true;
  o.journalMaxGroupWaitMSec = 0;
  o.managedLedgerMaxEntriesPerLedger = 500;  // several ledgers per run
  o.managedLedgerMinLedgerRolloverTimeMinutes = 0;
  o.defaultRetentionTimeInMinutes = -1;  // keep everything: the verifier reads from seq 0
  o.defaultRetentionSizeInMB = -1;
  o.journalSegmentSizeBytes = 4 << 20;
  o.checkpointIntervalMs = 200;
  o.managedLedgerCacheSizeMB = 8;
  if (compact) {
    o.journalSegmentSizeBytes = 1 << 20;
    o.minorCompactionThreshold = 0.9;
    o.minorCompactionInterval = 1;
    o.majorCompactionInterval = 0;
    o.compactionRateByBytes = 64 << 20;
  }
  auto f = DurableManagedLedgerFactory::open(o);
  if (!f) fail("open storage: " + f.status().toString());
  testing::ThreadExecutor ex;

  std::vector<Topic> ts(static_cast<size_t>(topics));
  for (int i = 0; i < topics; i++) {
    Topic& t = ts[static_cast<size_t>(i)];
    t.index = i;
    std::promise<Result<std::shared_ptr<ManagedLedger>>> opened;
    (*f)->asyncOpen("crash/t" + std::to_string(i), &ex,
                    [&](Result<std::shared_ptr<ManagedLedger>> r) { opened.set_value(r); });
    auto r = opened.get_future().get();
    if (!r) fail("open ledger: " + r.status().toString());
    t.ml = *r;
    auto c = ex.sync([&] { return t.ml->openCursor("sub", InitialPosition::kEarliest); });
    if (!c) fail("open cursor: " + c.status().toString());
    t.cursor = *c;
    t.nextSeq = verify(t, ex);
    Position md = ex.sync([&] { return t.cursor->markDeletedPosition(); });
    Position lac = ex.sync([&] { return t.ml->lastConfirmedEntry(); });
    if (md > lac) fail("cursor beyond the last entry");
    say("VERIFIED " + std::to_string(i) + " " + std::to_string(t.nextSeq) + " " +
        std::to_string(md.ledgerId) + " " + std::to_string(md.entryId));
  }
  say("READY");
  if (verifyOnly) {
    for (auto& t : ts) t.ml.reset();
    (*f)->shutdown();
    return 0;
  }

  // The churn topic: written and consumed at once, trimmed as it goes (its own retention: none).
  std::shared_ptr<ManagedLedger> churn;
  ManagedCursor* churnCursor = nullptr;
  std::function<void()> churnNext;
  if (compact) {
    std::promise<Result<std::shared_ptr<ManagedLedger>>> opened;
    (*f)->asyncOpen("crash/churn", &ex,
                    [&](Result<std::shared_ptr<ManagedLedger>> r) { opened.set_value(r); });
    auto r = opened.get_future().get();
    if (!r) fail("open churn ledger: " + r.status().toString());
    churn = *r;
    churnCursor = *ex.sync([&] {
      churn->setRetention(0, 0);
      return churn->openCursor("sub", InitialPosition::kLatest);
    });
    churnNext = [&] {
      churn->asyncAddEntry(Buffer::copyOf(std::string(20000, 'c')), [&](Status s, Position p) {
        if (!s) fail("churn append failed: " + s.toString());
        churnCursor->asyncMarkDelete(p, [](Status) {});
        churnNext();
      });
    };
    ex.execute([&] {
      for (int k = 0; k < 8; k++) churnNext();
    });
  }

  // Append forever (until killed), 64 in flight per topic.
  std::function<void(Topic&)> addNext = [&](Topic& t) {
    int64_t seq = t.nextSeq++;
    t.ml->asyncAddEntry(Buffer::copyOf(payloadFor(t.index, seq)),
                        [&t, seq, &addNext](Status s, Position p) {
                          if (!s) fail("append failed: " + s.toString());
                          say("ACK " + std::to_string(t.index) + " " + std::to_string(seq));
                          if (++t.acked % 50 == 0) {
                            t.cursor->asyncMarkDelete(p, [&t, p](Status ms) {
                              if (!ms) fail("mark-delete failed: " + ms.toString());
                              say("CURSOR " + std::to_string(t.index) + " " +
                                  std::to_string(p.ledgerId) + " " + std::to_string(p.entryId));
                            });
                          }
                          addNext(t);
                        });
  };
  ex.execute([&] {
    for (auto& t : ts) {
      for (int k = 0; k < 64; k++) addNext(t);
    }
  });
  for (;;) ::pause();
}
