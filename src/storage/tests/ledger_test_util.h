// Helpers for storage tests that drive ledgers on a ManualExecutor.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/managed_ledger.h"
#include "storage/tests/test_executor.h"

namespace magnetar::storage::testing {

// Runs ex's tasks until pred() holds; false after timeoutMs.
inline bool runUntil(ManualExecutor& ex, const std::function<bool()>& pred, int timeoutMs = 10000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!pred()) {
    if (ex.runPending() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

inline std::shared_ptr<ManagedLedger> openLedger(ManagedLedgerFactory& f, ManualExecutor& ex,
                                                 const std::string& name) {
  std::shared_ptr<ManagedLedger> ml;
  bool done = false;
  f.asyncOpen(name, &ex, [&](Result<std::shared_ptr<ManagedLedger>> r) {
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (r) ml = *r;
    done = true;
  });
  EXPECT_TRUE(runUntil(ex, [&] { return done; }));
  return ml;
}

// Appends one entry and waits for its completion.
inline Result<Position> addOne(ManagedLedger& ml, ManualExecutor& ex, const std::string& data) {
  Status st = Status::internal("no callback");
  Position pos;
  bool done = false;
  ml.asyncAddEntry(Buffer::copyOf(data), [&](Status s, Position p) {
    st = s;
    pos = p;
    done = true;
  });
  EXPECT_TRUE(runUntil(ex, [&] { return done; }));
  if (!st) return st;
  return pos;
}

// Reads every entry from `from` to the end of the log.
inline std::vector<Entry> readAll(ManagedLedger& ml, ManualExecutor& ex, Position from = {-1, -1}) {
  std::vector<Entry> out;
  for (;;) {
    std::vector<Entry> got;
    bool done = false;
    ml.asyncReadEntries(from, 100, 1 << 20, [&](Status s, std::vector<Entry> e) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      got = std::move(e);
      done = true;
    });
    EXPECT_TRUE(runUntil(ex, [&] { return done; }));
    if (got.empty()) return out;
    from = ml.nextValidPosition(got.back().position);
    for (auto& e : got) out.push_back(std::move(e));
  }
}

inline Status waitStatus(ManualExecutor& ex, const std::function<void(StatusCallback)>& op) {
  Status result = Status::internal("no callback");
  bool done = false;
  op([&](Status s) {
    result = s;
    done = true;
  });
  EXPECT_TRUE(runUntil(ex, [&] { return done; }));
  return result;
}

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = (std::filesystem::temp_directory_path() /
             ("magnetar-storage-" + std::to_string(rd()) + std::to_string(rd())))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline int64_t dirBytes(const std::string& dir) {
  int64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  }
  return n;
}

}  // namespace magnetar::storage::testing
