#include "storage/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace magnetar::storage {

Status errnoStatus(int err, const std::string& what) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status::noSpace(msg);
  return Status::ioError(msg);
}

Result<DiskSpace> Env::diskSpace(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return errnoStatus(errno, "statvfs " + path);
  return DiskSpace{static_cast<uint64_t>(st.f_blocks) * st.f_frsize,
                   static_cast<uint64_t>(st.f_bavail) * st.f_frsize};
}

namespace {

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override { ::close(fd_); }

  Status writeAt(uint64_t offset, const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return errnoStatus(errno, "write " + path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      offset += static_cast<uint64_t>(w);
    }
    return Status::ok();
  }

  Status sync() override {
    if (::fdatasync(fd_) != 0) return errnoStatus(errno, "fdatasync " + path_);
    return Status::ok();
  }

  Status truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return errnoStatus(errno, "ftruncate " + path_);
    }
    return Status::ok();
  }

 private:
  int fd_;
  std::string path_;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Result<size_t> readAt(uint64_t offset, void* dst, size_t n) const override {
    char* p = static_cast<char*>(dst);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return errnoStatus(errno, "read " + path_);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  int fd_;
  std::string path_;
};

class PosixEnv : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> openWritable(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errnoStatus(errno, "open " + path);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(fd, path));
  }

  Result<std::unique_ptr<RandomAccessFile>> openReadable(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errnoStatus(errno, "open " + path);
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(fd, path));
  }

  Result<uint64_t> fileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return errnoStatus(errno, "stat " + path);
    return static_cast<uint64_t>(st.st_size);
  }

  Status createDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return errnoStatus(ec.value(), "mkdir " + path);
    return Status::ok();
  }

  Result<std::vector<std::string>> listDir(const std::string& path) override {
    DIR* d = ::opendir(path.c_str());
    if (!d) return errnoStatus(errno, "opendir " + path);
    std::vector<std::string> out;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(std::move(n));
    }
    ::closedir(d);
    return out;
  }

  Status removeFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return errnoStatus(errno, "unlink " + path);
    return Status::ok();
  }

  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return errnoStatus(errno, "rename " + from);
    return Status::ok();
  }

  Status syncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errnoStatus(errno, "open dir " + path);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return errnoStatus(err, "fsync dir " + path);
    return Status::ok();
  }
};

}  // namespace

Env* Env::posix() {
  static PosixEnv env;
  return &env;
}

}  // namespace magnetar::storage
