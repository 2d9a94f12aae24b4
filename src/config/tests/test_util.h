// Test helpers for the config module: a temporary directory and file writing.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace magnetar::config::testing {

// A fresh directory under $TMPDIR, removed with everything in it when destroyed.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magnetar-config-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p ? std::filesystem::path(p) : std::filesystem::path();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

  // Writes `content` to path()/rel, creating parent directories; returns the full path.
  std::string write(const std::string& rel, const std::string& content) const {
    auto full = path_ / rel;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full) << content;
    return full.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace magnetar::config::testing
