// ManagedLedgerConfig: the managed-ledger settings the core (managed_ledger_core.h) applies the
// same way on every backend, with Pulsar's key names; each default is the key's default in
// src/config/settings.def (setting_defaults.h). The backends' option structs extend it
// (StorageOptions: the embedded journal, bk::BkStorageOptions: BookKeeper).
#pragma once

#include <cstdint>

#include "setting_defaults.h"

namespace magnetar::storage {

struct ManagedLedgerConfig {
  // Rollover: a ledger is closed and a new one started after this many entries or MiB, once it is
  // at least the minimum age old; or, with entries, once it reaches the maximum age
  // (managedLedgerMaxEntriesPerLedger, managedLedgerMaxSizePerLedgerMbytes,
  // managedLedgerMinLedgerRolloverTimeMinutes, managedLedgerMaxLedgerRolloverTimeMinutes).
  int64_t managedLedgerMaxEntriesPerLedger = setting_defaults::managedLedgerMaxEntriesPerLedger;
  int64_t managedLedgerMaxSizePerLedgerMbytes =
      setting_defaults::managedLedgerMaxSizePerLedgerMbytes;
  int managedLedgerMinLedgerRolloverTimeMinutes =
      setting_defaults::managedLedgerMinLedgerRolloverTimeMinutes;
  int managedLedgerMaxLedgerRolloverTimeMinutes =
      setting_defaults::managedLedgerMaxLedgerRolloverTimeMinutes;
  // Individually acked ranges saved per cursor (managedLedgerMaxUnackedRangesToPersist); acks in
  // ranges beyond are lost at restart (the entries are redelivered).
  int managedLedgerMaxUnackedRangesToPersist =
      setting_defaults::managedLedgerMaxUnackedRangesToPersist;
  // Partly acked batch entries whose ack sets are saved per cursor
  // (managedLedgerMaxBatchDeletedIndexToPersist); later ones come back whole after a restart.
  int managedLedgerMaxBatchDeletedIndexToPersist =
      setting_defaults::managedLedgerMaxBatchDeletedIndexToPersist;
  // Cursor writes per second per cursor when no caller waits for one
  // (managedLedgerDefaultMarkDeleteRateLimit, Pulsar's per-cursor markDeleteLimiter in
  // ManagedCursorImpl; 0: no limit). A change with a waiter (an ack asking for its receipt, a
  // reset, a truncate) and a new cursor's first state are written at once; the others go with
  // the cursor's next allowed write, at the latest on the housekeeping tick after the interval,
  // and at close. After a kill -9 the acks of that last interval may be delivered again, as with
  // Pulsar's limiter.
  double managedLedgerDefaultMarkDeleteRateLimit =
      setting_defaults::managedLedgerDefaultMarkDeleteRateLimit;
  // Entry cache for tailing reads, all ledgers of a factory together (managedLedgerCacheSizeMB).
  int64_t managedLedgerCacheSizeMB = setting_defaults::managedLedgerCacheSizeMB;
  // Retention of consumed ledgers: minutes and MiB, -1 unlimited, 0 none
  // (defaultRetentionTimeInMinutes, defaultRetentionSizeInMB), until a ledger's setRetention.
  int defaultRetentionTimeInMinutes = setting_defaults::defaultRetentionTimeInMinutes;
  int64_t defaultRetentionSizeInMB = setting_defaults::defaultRetentionSizeInMB;
  // Retention checked at most this often when nothing else triggers a trim
  // (retentionCheckIntervalInSeconds; 0: only at rollover and cursor moves).
  int retentionCheckIntervalInSeconds = setting_defaults::retentionCheckIntervalInSeconds;
  // Period of housekeeping (time-based rollover, held-back cursor writes, retention, cache
  // eviction), ms.
  int tickIntervalMs = 1000;
};

}  // namespace magnetar::storage
