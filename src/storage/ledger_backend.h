// LedgerBackend: the narrow interface the managed-ledger core (managed_ledger_core.h) calls to
// reach its ledgers' storage, as Pulsar's ManagedLedgerImpl calls BookKeeper's LedgerHandle.
// Implemented by the embedded journal (ManagedLedgerImpl), BookKeeper (bk::BkManagedLedger) and
// the in-memory ledger of broker tests (memory_managed_ledger.cc); the core holds it by pointer.
//
// Issue 46 moves the core's remaining inheritance hooks (CoreHooks in managed_ledger_core.h:
// adds, rollover, close, cursor and ledger-list writes, trimming) here step by step.
//
// Thread: every call and every callback on the ledger's executor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "storage/managed_ledger.h"

namespace magnetar::storage {

class LedgerBackend {
 public:
  virtual ~LedgerBackend() = default;

  // Reads entries [first, last] of ledger `ledgerId` (one the core's ledger list holds; `last`
  // at most its last confirmed entry), in order, stopping after about `maxBytes` bytes of
  // payload (>= 1; the first entry always). May return fewer, but at least one unless the
  // ledger went meanwhile. cb on the executor, once; errors: kIoError and kCorruption (journal),
  // kNotFound, kTimeout and the bookies' other errors (BookKeeper). Hot path: one call per
  // ledger a read touches; no allocation per entry beyond the entries' buffers.
  virtual void read(int64_t ledgerId, int64_t first, int64_t last, size_t maxBytes,
                    ReadEntriesCallback cb) = 0;
};

}  // namespace magnetar::storage
