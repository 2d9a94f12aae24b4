// StorageOptions: every knob of the durable managed-ledger storage, as a plain struct. The app
// fills it from the config registry; names and defaults follow Pulsar's broker.conf /
// standalone.conf keys where Pulsar has one (noted per field).
#pragma once

#include <cstdint>
#include <string>

namespace magnetar::storage {

class Env;
class MetadataStore;

struct StorageOptions {
  // Directory of the journal segments (journalDirectory); may sit on tmpfs.
  std::string journalDirectory = "data/journal";
  // true: fdatasync before completing adds; false: written to the OS only (journalSyncData;
  // Pulsar standalone's default is false).
  bool journalSyncData = false;
  // Extra time the journal thread waits to grow a group before writing it
  // (journalMaxGroupWaitMSec). 0: write as soon as the previous write completes.
  int journalMaxGroupWaitMSec = 1;
  // A group is written early once this many bytes are queued, and holds about this much at most.
  int64_t journalMaxGroupBytes = 4 << 20;
  // A new journal segment file starts once the current one reaches this size (journalMaxSizeMB).
  int64_t journalSegmentSizeBytes = 256ll << 20;
  // Index checkpoint interval: the index and checkpoint position are saved to the metadata store
  // at most this often (and at shutdown); recovery replays the journal after the checkpoint.
  int checkpointIntervalMs = 5000;

  // Rollover (managedLedgerMaxEntriesPerLedger, managedLedgerMaxSizePerLedgerMbytes,
  // managedLedgerMinLedgerRolloverTimeMinutes, managedLedgerMaxLedgerRolloverTimeMinutes).
  int64_t managedLedgerMaxEntriesPerLedger = 50000;
  int64_t managedLedgerMaxSizePerLedgerMbytes = 2048;
  int managedLedgerMinLedgerRolloverTimeMinutes = 10;
  int managedLedgerMaxLedgerRolloverTimeMinutes = 240;
  // Individually acked ranges saved per cursor (managedLedgerMaxUnackedRangesToPersist); acks in
  // ranges beyond are lost at restart (the entries are redelivered).
  int managedLedgerMaxUnackedRangesToPersist = 10000;
  // Partly acked batch entries whose ack sets are saved per cursor
  // (managedLedgerMaxBatchDeletedIndexToPersist); later ones come back whole after a restart.
  int managedLedgerMaxBatchDeletedIndexToPersist = 10000;
  // Entry cache for tailing reads, all topics together (managedLedgerCacheSizeMB).
  int64_t managedLedgerCacheSizeMB = 256;
  // Retention of consumed data: -1 infinite, 0 none (defaultRetentionTimeInMinutes,
  // defaultRetentionSizeInMB).
  int defaultRetentionTimeInMinutes = 0;
  int64_t defaultRetentionSizeInMB = 0;

  // Threads named storage-read-N for reads that miss the cache.
  int numReadThreads = 2;
  // A disk read fetches up to this many bytes of journal at once (catch-up batches).
  int64_t readBatchBytes = 4 << 20;
  // Period of housekeeping: time-based rollover, retention, cache eviction.
  int tickIntervalMs = 1000;

  // Metadata store (RocksDB) directory, used when `metadataStore` is null.
  std::string metadataDirectory = "data/metadata";

  // Test hook, never for production: the journal sleeps this many microseconds in every group
  // commit, to simulate slow storage (set from MAGNETAR_TEST_STORAGE_DELAY_MICROS). 0: off.
  int64_t testJournalDelayMicros = 0;

  // Injection points for tests; null means POSIX files / RocksDB at metadataDirectory.
  Env* env = nullptr;
  MetadataStore* metadataStore = nullptr;
};

}  // namespace magnetar::storage
