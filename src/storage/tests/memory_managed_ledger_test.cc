#include "storage/memory_managed_ledger.h"

#include "storage/tests/ledger_contract.h"

namespace magnetar::storage::testing {
namespace {

std::unique_ptr<ManagedLedgerFactory> makeMemory(const std::string&) {
  MemoryLedgerOptions o;
  o.maxEntriesPerLedger = 10;
  return std::make_unique<MemoryManagedLedgerFactory>(o);
}

INSTANTIATE_TEST_SUITE_P(Memory, LedgerContractTest, ::testing::Values(FactoryMaker(makeMemory)));

TEST(MemoryManagedLedgerTest, CursorCallbacksArePosted) {
  ManualExecutor ex;
  MemoryManagedLedgerFactory f;
  std::shared_ptr<ManagedLedger> ml;
  f.asyncOpen("a", &ex, [&](Result<std::shared_ptr<ManagedLedger>> r) { ml = *r; });
  EXPECT_EQ(ml, nullptr);
  ex.runPending();
  ASSERT_NE(ml, nullptr);
  Position p;
  ml->asyncAddEntry(Buffer::copyOf("a"), [&](Status, Position q) { p = q; });
  ex.runPending();
  auto c = ml->openCursor("c", InitialPosition::kEarliest);
  bool acked = false;
  (*c)->asyncDelete({p}, [&](Status s) { acked = s.isOk(); });
  EXPECT_FALSE(acked);
  EXPECT_TRUE((*c)->isAcknowledged(p));  // state changes at once; only the callback waits
  ex.runPending();
  EXPECT_TRUE(acked);
}

}  // namespace
}  // namespace magnetar::storage::testing
