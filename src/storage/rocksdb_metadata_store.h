// RocksDB-backed MetadataStore: the embedded default (Debian's librocksdb-dev).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/thread_annotations.h"
#include "storage/metadata_store.h"

namespace rocksdb {
class DB;
class Env;
}  // namespace rocksdb

namespace magnetar::storage {

// Thread: any (RocksDB is thread-safe).
class RocksDbMetadataStore : public MetadataStore {
 public:
  // Opens (creating if missing) the database in directory `path`. syncWrites: fsync RocksDB's WAL
  // on every write (set it with journalSyncData). env: RocksDB's file access (tests inject faults
  // with it; it must outlive the store); null: the default.
  static Result<std::unique_ptr<RocksDbMetadataStore>> open(const std::string& path,
                                                            bool syncWrites,
                                                            rocksdb::Env* env = nullptr);
  ~RocksDbMetadataStore() override;

  Result<std::string> get(const std::string& key) override;
  Status put(const std::string& key, const std::string& value) override;
  Status remove(const std::string& key) override;
  Status write(const std::vector<MetadataOp>& ops) override;
  Result<std::vector<std::pair<std::string, std::string>>> scan(const std::string& prefix) override;
  Result<std::vector<std::string>> getChildren(const std::string& path) override;
  // SyncWAL (the writes were not synced one by one).
  Status syncWrites() override;

 private:
  RocksDbMetadataStore(std::unique_ptr<rocksdb::DB> db, bool sync);
  // After a failed write RocksDB is in its background-error state: writes are refused here at
  // once (reads go on) and DB::Resume() is tried at most once a second, by the next write.
  Status checkWritable();
  void writeFailed(const Status& s);

  std::unique_ptr<rocksdb::DB> db_;
  bool sync_;
  Mutex mu_;
  Status error_ GUARDED_BY(mu_);  // the failed write's error while writes are refused
  std::chrono::steady_clock::time_point nextResume_ GUARDED_BY(mu_);
};

}  // namespace magnetar::storage
