// A gtest fixture for tests of the durable storage: a temporary directory, a ManualExecutor the
// test thread drives, and the options every such test starts from.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "storage/durable_storage.h"
#include "storage/tests/ledger_test_util.h"

namespace magnetar::storage::testing {

// Options for a test's storage under dir: synced journal with no group wait, rollover by entry
// count only, 2 read threads, a disk check every 20 ms. Callers add what their tests need.
inline StorageOptions durableTestOptions(const std::string& dir) {
  StorageOptions o;
  o.journalDirectory = dir + "/journal";
  o.metadataDirectory = dir + "/metadata";
  o.journalSyncData = true;
  o.journalMaxGroupWaitMSec = 0;
  o.managedLedgerMinLedgerRolloverTimeMinutes = 0;
  o.numReadThreads = 2;
  o.diskCheckInterval = 20;
  return o;
}

class DurableFactoryTest : public ::testing::Test {
 protected:
  // The factory opened with o; nullptr (and a failed expectation) when it does not open.
  std::unique_ptr<DurableManagedLedgerFactory> open(const StorageOptions& o) {
    auto f = DurableManagedLedgerFactory::open(o);
    EXPECT_TRUE(f.isOk()) << f.status().toString();
    return f ? std::move(*f) : nullptr;
  }
  // Shuts f down, runs what the shutdown left on ex_, and frees it.
  void close(std::unique_ptr<DurableManagedLedgerFactory>& f) {
    f->shutdown();
    ex_.runPending();
    f.reset();
  }
  // Runs fn with ledger `name` of a factory opened with o, then lets both go without closing the
  // ledger (a broker stopping without unloading its topics). Not run when either does not open.
  void withLedger(const StorageOptions& o, const std::string& name,
                  const std::function<void(DurableManagedLedgerFactory& f,
                                           const std::shared_ptr<ManagedLedger>& ml)>& fn) {
    auto f = open(o);
    if (!f) return;
    auto ml = openLedger(*f, ex_, name);
    if (ml) fn(*f, ml);
    ml.reset();
    close(f);
  }
  // Cursor "s" of ml from the earliest entry; null (a failed expectation) when it does not open.
  ManagedCursor* openCursorS(ManagedLedger& ml) {
    auto c = ml.openCursor("s", InitialPosition::kEarliest);
    EXPECT_TRUE(c.isOk()) << c.status().toString();
    return c.isOk() ? *c : nullptr;
  }
  // Appends n entries `payload`, each waited for; the last one's position.
  Position addN(ManagedLedger& ml, int n, const std::string& payload) {
    Position last;
    for (int i = 0; i < n; i++) {
      auto p = addOne(ml, ex_, payload);
      EXPECT_TRUE(p.isOk()) << p.status().toString();
      if (p) last = *p;
    }
    return last;
  }
  // Moves c's mark-delete position to pos and waits until it is stored.
  void markDeleteTo(ManagedCursor& c, Position pos) {
    EXPECT_TRUE(waitStatus(ex_, [&](StatusCallback cb) { c.asyncMarkDelete(pos, cb); }));
  }
  TempDir dir_;
  ManualExecutor ex_;
};

}  // namespace magnetar::storage::testing
