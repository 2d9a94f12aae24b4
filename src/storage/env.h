// Env: the file layer under the journal (LevelDB's Env idea), so tests can inject faults (short
// writes, failed fsync, ENOSPC). Errors map errno ENOSPC/EDQUOT to kNoSpace, others to kIoError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace magnetar::storage {

// A file opened for positional writes. Thread: one writer at a time.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all n bytes at `offset`. On error some prefix may have been written.
  virtual Status writeAt(uint64_t offset, const void* data, size_t n) = 0;
  // fdatasync(2).
  virtual Status sync() = 0;
  // ftruncate(2) to `size` bytes.
  virtual Status truncate(uint64_t size) = 0;
};

// A file opened for positional reads. Thread: any (pread is thread-safe).
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into dst; returns the count (short only at end of file).
  virtual Result<size_t> readAt(uint64_t offset, void* dst, size_t n) const = 0;
};

// Size and free space of a file system (statvfs(2)).
struct DiskSpace {
  uint64_t totalBytes = 0;
  uint64_t availableBytes = 0;  // for an unprivileged user (f_bavail)
};

// Thread: any.
class Env {
 public:
  virtual ~Env() = default;
  // Opens (creating if missing, never truncating) a file for writing.
  virtual Result<std::unique_ptr<WritableFile>> openWritable(const std::string& path) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> openReadable(const std::string& path) = 0;
  virtual Result<uint64_t> fileSize(const std::string& path) = 0;
  // Creates the directory and its parents if missing.
  virtual Status createDirs(const std::string& path) = 0;
  // File names (not paths) in a directory.
  virtual Result<std::vector<std::string>> listDir(const std::string& path) = 0;
  virtual Status removeFile(const std::string& path) = 0;
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // fsync(2) of a directory, making created/removed names durable.
  virtual Status syncDir(const std::string& path) = 0;
  // The file system holding `path`. Default: statvfs(2).
  virtual Result<DiskSpace> diskSpace(const std::string& path);

  // The process-wide POSIX implementation.
  static Env* posix();
};

// Maps an errno from a failed call on `what` to a Status (kNoSpace for ENOSPC/EDQUOT).
Status errnoStatus(int err, const std::string& what);

}  // namespace magnetar::storage
