// Helpers of the tests that count cursor writes under managedLedgerDefaultMarkDeleteRateLimit:
// a metadata store counting one cursor's writes, the storage options that write through it, and
// entries added in a row.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "storage/durable_storage.h"
#include "storage/metadata_codec.h"
#include "storage/tests/durable_test_fixture.h"

namespace magnetar::broker {

// An in-memory metadata store that counts the writes of cursor `cursor` of ledger `ledger`.
class CursorWriteCounter : public storage::MemoryMetadataStore {
 public:
  CursorWriteCounter(const std::string& ledger, const std::string& cursor)
      : key_(storage::cursorKey(ledger, cursor)) {}
  Status write(const std::vector<storage::MetadataOp>& ops) override {
    Status s = MemoryMetadataStore::write(ops);
    for (const auto& op : ops) {
      if (op.key == key_) writes++;
    }
    return s;
  }
  std::atomic<int> writes{0};

 private:
  const std::string key_;
};

// Durable storage under `dir` on `store`: one cursor write a second when nobody waits for it
// (managedLedgerDefaultMarkDeleteRateLimit 1), and no housekeeping-tick writes during a test.
inline storage::StorageOptions rateLimitedOptions(const std::string& dir,
                                                  storage::MetadataStore* store) {
  storage::StorageOptions o = storage::testing::durableTestOptions(dir);
  o.managedLedgerDefaultMarkDeleteRateLimit = 1.0;
  o.tickIntervalMs = 60000;
  o.metadataStore = store;
  return o;
}

// Adds entries "<prefix>0" .. "<prefix>(n-1)"; their positions in order (fewer after a failed
// add, with a failed expectation).
inline std::vector<storage::Position> addEntries(storage::ManagedLedger& ml,
                                                 storage::testing::ManualExecutor& ex,
                                                 const std::string& prefix, int n) {
  std::vector<storage::Position> pos;
  for (int i = 0; i < n; i++) {
    auto p = storage::testing::addOne(ml, ex, prefix + std::to_string(i));
    EXPECT_TRUE(p.isOk()) << p.status().toString();
    if (!p.isOk()) break;
    pos.push_back(*p);
  }
  return pos;
}

}  // namespace magnetar::broker
