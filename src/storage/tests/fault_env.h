// FaultEnv: wraps the POSIX Env and injects the failures storage must survive: write errors
// (ENOSPC or EIO), short writes (half the bytes land, then an error), failed fdatasync, and a
// per-sync delay (a slow disk, to make group commit visible).
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "storage/env.h"

namespace magnetar::storage::testing {

class FaultEnv : public Env {
 public:
  std::atomic<int> writeErrno{0};        // non-zero: writes fail with this errno
  std::atomic<bool> shortWrites{false};  // with writeErrno: half of each write lands first
  std::atomic<int> syncErrno{0};         // non-zero: fdatasync fails with this errno
  std::atomic<int> syncDelayUs{0};
  std::atomic<int> syncs{0};
  std::atomic<int> writes{0};
  std::atomic<int64_t> availableBytes{-1};  // >= 0: diskSpace() reports this free of 1 GiB

  // A full disk: writes fail with ENOSPC and nothing is free.
  void fillDisk() {
    writeErrno = ENOSPC;
    availableBytes = 0;
  }
  // Room again: writes succeed, half of the disk is free.
  void freeDisk() {
    writeErrno = 0;
    availableBytes = 1ll << 29;
  }

  Result<std::unique_ptr<WritableFile>> openWritable(const std::string& path) override {
    if (int e = writeErrno.load()) return errnoStatus(e, "open " + path);
    auto f = base()->openWritable(path);
    if (!f) return f.status();
    return std::unique_ptr<WritableFile>(new File(this, std::move(*f)));
  }
  Result<std::unique_ptr<RandomAccessFile>> openReadable(const std::string& path) override {
    return base()->openReadable(path);
  }
  Result<uint64_t> fileSize(const std::string& path) override { return base()->fileSize(path); }
  Status createDirs(const std::string& path) override { return base()->createDirs(path); }
  Result<std::vector<std::string>> listDir(const std::string& path) override {
    return base()->listDir(path);
  }
  Status removeFile(const std::string& path) override { return base()->removeFile(path); }
  Status rename(const std::string& a, const std::string& b) override {
    return base()->rename(a, b);
  }
  Result<DiskSpace> diskSpace(const std::string& path) override {
    if (int64_t a = availableBytes.load(); a >= 0) {
      return DiskSpace{1ull << 30, static_cast<uint64_t>(a)};
    }
    return Env::diskSpace(path);
  }
  Status syncDir(const std::string& path) override {
    if (int e = syncErrno.load()) return errnoStatus(e, "fsync dir " + path);
    return base()->syncDir(path);
  }

 private:
  static Env* base() { return Env::posix(); }

  class File : public WritableFile {
   public:
    File(FaultEnv* env, std::unique_ptr<WritableFile> f) : env_(env), f_(std::move(f)) {}
    Status writeAt(uint64_t offset, const void* data, size_t n) override {
      env_->writes++;
      if (int e = env_->writeErrno.load()) {
        if (env_->shortWrites.load() && n > 1) (void)f_->writeAt(offset, data, n / 2);
        return errnoStatus(e, "write (injected)");
      }
      return f_->writeAt(offset, data, n);
    }
    Status sync() override {
      env_->syncs++;
      if (int d = env_->syncDelayUs.load())
        std::this_thread::sleep_for(std::chrono::microseconds(d));
      if (int e = env_->syncErrno.load()) return errnoStatus(e, "fdatasync (injected)");
      return f_->sync();
    }
    Status truncate(uint64_t size) override { return f_->truncate(size); }

   private:
    FaultEnv* env_;
    std::unique_ptr<WritableFile> f_;
  };
};

}  // namespace magnetar::storage::testing
