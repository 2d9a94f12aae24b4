#include "storage/rocksdb_metadata_store.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "base/logging.h"

namespace magnetar::storage {

namespace {
Status toStatus(const rocksdb::Status& s) {
  if (s.ok()) return Status::ok();
  if (s.IsNotFound()) return Status::notFound(s.ToString());
  if (s.IsNoSpace()) return Status::noSpace(s.ToString());
  if (s.IsCorruption()) return Status::corruption(s.ToString());
  return Status::ioError(s.ToString());
}

// RocksDB's own log lines, warnings and up, go to the broker's log instead of a LOG file in the
// data directory: RocksDB 7.8's file logger asserts (aborting builds that keep assertions, as
// Debian's) on the first line after one of its writes failed on a full disk.
class RocksDbLogger : public rocksdb::Logger {
 public:
  RocksDbLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel()) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    if (level >= rocksdb::InfoLogLevel::ERROR_LEVEL) {
      MLOG_ERROR("rocksdb: {}", buf);
    } else {
      MLOG_WARN("rocksdb: {}", buf);
    }
  }
};

bool startsWith(const rocksdb::Slice& s, const std::string& prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}
}  // namespace

Result<std::unique_ptr<RocksDbMetadataStore>> RocksDbMetadataStore::open(const std::string& path,
                                                                         bool syncWrites,
                                                                         rocksdb::Env* env) {
  rocksdb::Options options;
  if (env) options.env = env;
  options.create_if_missing = true;
  options.max_background_jobs = 1;
  options.info_log = std::make_shared<RocksDbLogger>();
  // Memtables count in the broker's fixed memory base (docs/memory-limits.md): at most 2 x 8 MiB
  // rather than RocksDB's 2 x 64 MiB default. Cursor and ledger records are small; a smaller
  // memtable only flushes more often.
  options.write_buffer_size = 8 * 1024 * 1024;
  options.max_write_buffer_number = 2;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) return toStatus(s);
  return std::unique_ptr<RocksDbMetadataStore>(
      new RocksDbMetadataStore(std::unique_ptr<rocksdb::DB>(raw), syncWrites));
}

RocksDbMetadataStore::RocksDbMetadataStore(std::unique_ptr<rocksdb::DB> db, bool sync)
    : db_(std::move(db)), sync_(sync) {}

RocksDbMetadataStore::~RocksDbMetadataStore() = default;

Result<std::string> RocksDbMetadataStore::get(const std::string& key) {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (!s.ok()) return toStatus(s);
  return value;
}

Status RocksDbMetadataStore::put(const std::string& key, const std::string& value) {
  return write({MetadataOp::put(key, value)});
}

Status RocksDbMetadataStore::remove(const std::string& key) {
  return write({MetadataOp::del(key)});
}

Status RocksDbMetadataStore::checkWritable() {
  MutexLock lock(mu_);
  if (error_.isOk()) return Status::ok();
  auto now = std::chrono::steady_clock::now();
  if (now < nextResume_) {
    return Status::error(error_.code(), "metadata store refuses writes after: " + error_.message());
  }
  rocksdb::Status r = db_->Resume();
  if (!r.ok()) {
    nextResume_ = now + std::chrono::seconds(1);
    return Status::error(error_.code(), "metadata store refuses writes after: " + error_.message());
  }
  MLOG_INFO("metadata store: writes resumed");
  error_ = Status::ok();
  return Status::ok();
}

void RocksDbMetadataStore::writeFailed(const Status& s) {
  MutexLock lock(mu_);
  if (error_.isOk()) MLOG_WARN("metadata store: write failed, refusing writes: {}", s.toString());
  error_ = s;
  nextResume_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

Status RocksDbMetadataStore::syncWrites() {
  if (Status s = checkWritable(); !s) return s;
  if (sync_) return Status::ok();
  Status s = toStatus(db_->SyncWAL());
  if (!s) writeFailed(s);
  return s;
}

Status RocksDbMetadataStore::write(const std::vector<MetadataOp>& ops) {
  if (Status s = checkWritable(); !s) return s;
  rocksdb::WriteBatch batch;
  for (const auto& op : ops) {
    switch (op.kind) {
      case MetadataOp::Kind::kPut:
        batch.Put(op.key, op.value);
        break;
      case MetadataOp::Kind::kDelete:
        batch.Delete(op.key);
        break;
      case MetadataOp::Kind::kDeletePrefix: {
        // Point deletes of the keys present: ordered with the batch's other ops, and cheap for
        // the small subtrees storage deletes (one ledger's index, one topic's cursors).
        std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
        for (it->Seek(op.key); it->Valid() && startsWith(it->key(), op.key); it->Next()) {
          batch.Delete(it->key());
        }
        break;
      }
    }
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync_;
  Status s = toStatus(db_->Write(wo, &batch));
  if (!s) writeFailed(s);
  return s;
}

Result<std::vector<std::pair<std::string, std::string>>> RocksDbMetadataStore::scan(
    const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && startsWith(it->key(), prefix); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  if (!it->status().ok()) return toStatus(it->status());
  return out;
}

Result<std::vector<std::string>> RocksDbMetadataStore::getChildren(const std::string& path) {
  std::string base = path.empty() || path.back() != '/' ? path + "/" : path;
  std::set<std::string> children;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  it->Seek(base);
  while (it->Valid() && startsWith(it->key(), base)) {
    std::string rest = it->key().ToString().substr(base.size());
    size_t slash = rest.find('/');
    std::string child = rest.substr(0, slash);
    if (!child.empty()) children.insert(child);
    if (slash == std::string::npos) {
      it->Next();
    } else {
      it->Seek(base + child + "0");  // '0' follows '/': skips the child's subtree
    }
  }
  if (!it->status().ok()) return toStatus(it->status());
  return std::vector<std::string>(children.begin(), children.end());
}

}  // namespace magnetar::storage
