// The ManagedLedger/ManagedCursor contract, run against every implementation (memory, durable).
// An implementation's test file instantiates it with a maker of factories configured for 10
// entries per ledger.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "storage/managed_ledger.h"
#include "storage/tests/test_executor.h"

namespace magnetar::storage::testing {

// Makes a factory whose ledgers roll over every 10 entries and trim consumed ledgers at once.
// `dir` is a fresh directory the factory may use.
using FactoryMaker = std::function<std::unique_ptr<ManagedLedgerFactory>(const std::string& dir)>;

class LedgerContractTest : public ::testing::TestWithParam<FactoryMaker> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs executor tasks until pred() holds; fails the test after 10 s.
  void runUntil(const std::function<bool()>& pred);
  std::shared_ptr<ManagedLedger> open(const std::string& name);
  // Appends n entries "m<i>" (i from `base`) and waits for all callbacks; returns the positions.
  std::vector<Position> add(ManagedLedger& ml, int n, int base = 0);
  std::vector<Entry> read(ManagedLedger& ml, Position from, int maxEntries, size_t maxBytes);
  Status wait(const std::function<void(StatusCallback)>& op);
  // A ledger opened with cursor "s" (from the earliest entry), then n entries added (add()).
  struct Topic {
    std::shared_ptr<ManagedLedger> ml;
    ManagedCursor* cursor = nullptr;  // null (a failed expectation) when it did not open
    std::vector<Position> pos;
  };
  Topic openWithCursor(const std::string& name, int n);

  std::string dir_;
  ManualExecutor ex_;
  std::unique_ptr<ManagedLedgerFactory> factory_;
};

}  // namespace magnetar::storage::testing
