// A gtest fixture for tests of the durable storage: a temporary directory, a ManualExecutor the
// test thread drives, and the options every such test starts from.
#pragma once

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
  TempDir dir_;
  ManualExecutor ex_;
};

}  // namespace magnetar::storage::testing
