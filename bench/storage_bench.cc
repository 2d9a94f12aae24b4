// Storage benchmarks (Google Benchmark): journal append throughput at 128 B and 8 KB entries with
// fsync on and off, the same through a ManagedLedger (including the executor hand-over), and
// sequential catch-up reads from disk (entry cache off). Reported as items/s (entries) and bytes/s.
// Files go to $MAGNETAR_BENCH_DIR (default: a temp directory), so point it at the disk to measure.
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "base/logging.h"
#include "quiet_benchmark_main.h"
#include "storage/durable_storage.h"
#include "storage/journal.h"
#include "storage/tests/test_executor.h"

using namespace magnetar;
using namespace magnetar::storage;
namespace fs = std::filesystem;

namespace {

std::string benchDir(const std::string& name) {
  const char* base = std::getenv("MAGNETAR_BENCH_DIR");
  std::random_device rd;
  fs::path p = fs::path(base ? base : fs::temp_directory_path().string()) /
               ("magnetar-bench-" + name + "-" + std::to_string(rd()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

// Counts completed appends; wait() blocks until `target` have completed.
class Waiter : public JournalClient {
 public:
  void onJournalWritten(Status s, std::vector<JournalRun>, size_t n, bool) override {
    std::lock_guard lock(mu_);
    done_ += static_cast<int64_t>(n);
    if (!s) failed_ = true;
    cv_.notify_all();
  }
  void wait(int64_t target) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ >= target; });
  }
  bool failed() const { return failed_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t done_ = 0;
  bool failed_ = false;
};

// Payload sizes 128 B and 8 KiB, without and with fsync; real time in ms.
void sizeAndFsyncArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"size", "fsync"})
      ->Args({128, 0})
      ->Args({8192, 0})
      ->Args({128, 1})
      ->Args({8192, 1})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

// Journal alone: 8 topics (clients, one ledger each) appending, everything queued during one
// write(+fdatasync) goes into the next group.
void BM_JournalAppend(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const bool sync = state.range(1) != 0;
  std::string dir = benchDir("journal");
  JournalOptions o;
  o.directory = dir;
  o.syncData = sync;
  o.checkpointIntervalMs = 1 << 30;
  Journal j(Env::posix(), o, 1, [](JournalCheckpoint) {});
  if (!j.start()) {
    state.SkipWithError("journal start failed");
    return;
  }
  std::vector<std::shared_ptr<Waiter>> w;
  for (int l = 0; l < 8; l++) w.push_back(std::make_shared<Waiter>());
  Buffer payload = Buffer::copyOf(std::string(size, 'p'));
  const int64_t batch = sync ? 2000 : 20000;
  int64_t total = 0;
  std::vector<int64_t> next(8, 0);
  for (auto _ : state) {
    for (int64_t i = 0; i < batch; i++) {
      int l = static_cast<int>(i % 8);
      j.append(w[l], l + 1, next[l]++, payload);
    }
    total += batch;
    for (int l = 0; l < 8; l++) w[l]->wait(next[l]);
  }
  j.stop();
  for (auto& c : w) {
    if (c->failed()) state.SkipWithError("append failed");
  }
  state.SetItemsProcessed(total);
  state.SetBytesProcessed(total * static_cast<int64_t>(size));
  state.counters["groups"] = static_cast<double>(j.groupsWritten());
  fs::remove_all(dir);
}
BENCHMARK(BM_JournalAppend)->Apply(sizeAndFsyncArgs);

// A thread running posted tasks stands in for an ml-worker.
using Worker = storage::testing::ThreadExecutor;

StorageOptions benchOptions(const std::string& dir, bool sync) {
  StorageOptions o;
  o.journalDirectory = dir + "/journal";
  o.metadataDirectory = dir + "/metadata";
  o.journalSyncData = sync;
  o.journalMaxGroupWaitMSec = 0;
  o.defaultRetentionTimeInMinutes = -1;
  o.defaultRetentionSizeInMB = -1;
  return o;
}

std::shared_ptr<ManagedLedger> openLedger(ManagedLedgerFactory& f, Worker& w,
                                          const std::string& name) {
  std::promise<Result<std::shared_ptr<ManagedLedger>>> p;
  f.asyncOpen(name, &w, [&](Result<std::shared_ptr<ManagedLedger>> r) { p.set_value(r); });
  auto r = p.get_future().get();
  return r ? *r : nullptr;
}

// Adds n copies of payload from the worker (all in flight at once) and waits for every callback.
void addAll(ManagedLedger& ml, Worker& w, const Buffer& payload, int64_t n) {
  std::promise<void> done;
  std::atomic<int64_t> left{n};
  w.execute([&] {
    for (int64_t i = 0; i < n; i++) {
      ml.asyncAddEntry(payload, [&](Status, Position) {
        if (--left == 0) done.set_value();
      });
    }
  });
  done.get_future().wait();
}

// Full add path of one topic: ml-worker -> journal -> ml-worker (callbacks), 1000 in flight.
void BM_ManagedLedgerAdd(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const bool sync = state.range(1) != 0;
  std::string dir = benchDir("ml");
  auto f = DurableManagedLedgerFactory::open(benchOptions(dir, sync));
  if (!f) {
    state.SkipWithError(f.status().toString().c_str());
    return;
  }
  Worker w;
  auto ml = openLedger(**f, w, "bench/t");
  Buffer payload = Buffer::copyOf(std::string(size, 'p'));
  const int64_t batch = sync ? 2000 : 20000;
  int64_t total = 0;
  for (auto _ : state) {
    addAll(*ml, w, payload, batch);
    total += batch;
  }
  state.SetItemsProcessed(total);
  state.SetBytesProcessed(total * static_cast<int64_t>(size));
  state.counters["groups"] = static_cast<double>((*f)->stats().journalGroups);
  ml.reset();
  (*f)->shutdown();
  fs::remove_all(dir);
}
BENCHMARK(BM_ManagedLedgerAdd)->Apply(sizeAndFsyncArgs);

// Catch-up: reads a 64 MiB backlog from the journal files (cache off) 1000 entries per call.
void BM_SequentialRead(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  std::string dir = benchDir("read");
  StorageOptions o = benchOptions(dir, false);
  o.managedLedgerCacheSizeMB = 0;
  o.managedLedgerMaxEntriesPerLedger = 1 << 30;
  auto f = DurableManagedLedgerFactory::open(o);
  if (!f) {
    state.SkipWithError(f.status().toString().c_str());
    return;
  }
  Worker w;
  auto ml = openLedger(**f, w, "bench/read");
  const int64_t n = (64 << 20) / static_cast<int64_t>(size);
  addAll(*ml, w, Buffer::copyOf(std::string(size, 'r')), n);
  int64_t entries = 0, bytes = 0;
  for (auto _ : state) {
    Position from{-1, -1};
    for (;;) {
      std::promise<std::vector<Entry>> p;
      w.execute([&] {
        ml->asyncReadEntries(from, 1000, 8 << 20,
                             [&](Status, std::vector<Entry> e) { p.set_value(std::move(e)); });
      });
      auto got = p.get_future().get();
      if (got.empty()) break;
      entries += static_cast<int64_t>(got.size());
      for (auto& e : got) bytes += static_cast<int64_t>(e.data.size());
      from = Position{got.back().position.ledgerId, got.back().position.entryId + 1};
    }
  }
  state.SetItemsProcessed(entries);
  state.SetBytesProcessed(bytes);
  state.counters["diskReads"] = static_cast<double>((*f)->stats().diskReads);
  ml.reset();
  (*f)->shutdown();
  fs::remove_all(dir);
}
BENCHMARK(BM_SequentialRead)
    ->ArgNames({"size"})
    ->Arg(128)
    ->Arg(8192)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

MAGNETAR_QUIET_BENCHMARK_MAIN()
