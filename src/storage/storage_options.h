// StorageOptions: every knob of the durable managed-ledger storage, as a plain struct. The app
// fills it from the config registry (src/app/option_bindings.cc); the key of each field is noted,
// and its default is that key's default in settings.def (setting_defaults.h, generated from it).
#pragma once

#include <cstdint>
#include <string>

#include "setting_defaults.h"
#include "storage/managed_ledger_config.h"

namespace magnetar::storage {

class Env;
class MetadataStore;

// The managed-ledger settings (rollover, cursors, cache, retention, tick) are
// ManagedLedgerConfig's.
struct StorageOptions : ManagedLedgerConfig {
  // Directory of the journal segments (journalDirectory); may sit on tmpfs.
  std::string journalDirectory{setting_defaults::journalDirectory};
  // true: fdatasync before completing adds; false: written to the OS only (journalSyncData;
  // conf/standalone.conf sets false, as Pulsar standalone).
  bool journalSyncData = setting_defaults::journalSyncData;
  // Extra time the journal thread waits to grow a group before writing it
  // (journalMaxGroupWaitMSec). 0: write as soon as the previous write completes.
  int journalMaxGroupWaitMSec = setting_defaults::journalMaxGroupWaitMSec;
  // A group is written early once this many bytes are queued, and holds about this much at most
  // (journalBufferedWritesThreshold).
  int64_t journalMaxGroupBytes = setting_defaults::journalBufferedWritesThreshold;
  // A new journal segment file starts once the current one reaches this size (journalMaxSizeMB).
  int64_t journalSegmentSizeBytes = setting_defaults::journalMaxSizeMB << 20;
  // Index checkpoint interval: the index and checkpoint position are saved to the metadata store
  // at most this often (and at shutdown); recovery replays the journal after the checkpoint.
  int checkpointIntervalMs = 5000;

  // Segment compaction (BookKeeper's entry-log GC names): a segment whose live fraction is below
  // the threshold is copied forward every interval; thresholds 0 or intervals 0 disable it.
  double minorCompactionThreshold = setting_defaults::minorCompactionThreshold;
  int64_t minorCompactionInterval = setting_defaults::minorCompactionInterval;  // seconds
  double majorCompactionThreshold = setting_defaults::majorCompactionThreshold;
  int64_t majorCompactionInterval = setting_defaults::majorCompactionInterval;  // seconds
  // Bytes per second compaction copies at most (compactionRateByBytes).
  int64_t compactionRateByBytes = setting_defaults::compactionRateByBytes;

  // Low-disk watermark (BookKeeper's names): publishes are refused once the journal's or the
  // metadata's file system is fuller than diskUsageThreshold (a fraction) until it is below
  // diskUsageLwmThreshold; checked every diskCheckInterval ms. Threshold >= 1 disables it.
  double diskUsageThreshold = setting_defaults::diskUsageThreshold;
  double diskUsageLwmThreshold = setting_defaults::diskUsageLwmThreshold;
  int diskCheckInterval = setting_defaults::diskCheckInterval;

  // Threads named storage-read-N for reads that miss the cache (numReadWorkerThreads).
  int numReadThreads = setting_defaults::numReadWorkerThreads;
  // A disk read fetches up to this many bytes of journal at once (catch-up batches).
  int64_t readBatchBytes = 4 << 20;

  // Metadata store (RocksDB) directory, used when `metadataStore` is null (the directory of
  // metadataStoreUrl=rocksdb:<directory>; the app fills it).
  std::string metadataDirectory;

  // Test hook, never for production: the journal sleeps this many microseconds in every group
  // commit, to simulate slow storage (set from MAGNETAR_TEST_STORAGE_DELAY_MICROS). 0: off.
  int64_t testJournalDelayMicros = 0;

  // Injection points for tests; null means POSIX files / RocksDB at metadataDirectory.
  Env* env = nullptr;
  MetadataStore* metadataStore = nullptr;
};

}  // namespace magnetar::storage
