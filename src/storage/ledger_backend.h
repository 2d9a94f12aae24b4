// LedgerBackend: the narrow interface the managed-ledger core (managed_ledger_core.h) calls to
// reach its ledgers' storage, as Pulsar's ManagedLedgerImpl calls BookKeeper's LedgerHandle.
// Implemented by the embedded journal (ManagedLedgerImpl), BookKeeper (bk::BkManagedLedger) and
// the in-memory ledger of broker tests (memory_managed_ledger.cc); the core holds it by pointer.
//
// Issue 46 moves the core's remaining inheritance hooks (CoreHooks in managed_ledger_core.h:
// adds, rollover, close, ledger-list writes, trimming) here step by step.
//
// Thread: every call and every callback on the ledger's executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "storage/managed_ledger.h"

namespace magnetar::storage {

class CoreCursor;

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

  // Starts writing these cursors' state (at least one; each dirty_, canWrite() and due by the
  // mark-delete rate limit; the journal: one metadata write for all, BookKeeper: each cursor to
  // its cursor ledger or znode). The backend clears dirty_, sets lastWriteMs_ (steady ms), takes
  // waiting_, runs those callbacks on the executor once stored (kIoError; BookKeeper: kFenced,
  // the store's errors) and then moves persisted_ and lets the core trim
  // (ManagedLedgerCore::trimConsumedLedgers). Hot path of acks: one call per flush pass, not per
  // ack.
  virtual void storeCursors(const std::vector<CoreCursor*>& due) = 0;
  // deleteCursor removed `c` from the core: deletes its stored state (the journal's cursor key;
  // BookKeeper's znode and cursor ledgers, after a write in flight). Errors are logged.
  virtual void removeCursor(std::shared_ptr<CoreCursor> c) = 0;
  // Stores `at` as the terminated position (Pulsar's ManagedLedgerInfo.terminatedPosition; the
  // journal's /ml-terminated key); done on the executor once, with the store's status (kIoError;
  // BookKeeper: kFenced on a lost CAS, the store's errors).
  virtual void storeTerminated(Position at, StatusCallback done) = 0;
};

}  // namespace magnetar::storage
