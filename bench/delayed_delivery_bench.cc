// Delayed-delivery tracker cost per message: DelayedDeliveryTracker::addMessage and
// getScheduledMessages (poll) over N entries, with random delays over an hour (sparse ids per
// bucket, the worst case for the run encoding) or one fixed delay (consecutive ids).
//
//   cmake -S . -B build -G Ninja -DMAGNETAR_BUILD_BENCH=ON
//   cmake --build build --target delayed_delivery_bench && build/bench/delayed_delivery_bench
//
// Counters: add_ns and poll_ns per message (thread CPU time), bytes_per_msg = tracker memory /
// messages held.
#include <benchmark/benchmark.h>
#include <time.h>

#include <random>
#include <vector>

#include "broker/topic/delayed_delivery_tracker.h"

namespace magnetar {
namespace {

using broker::DelayedDeliveryTracker;
// Thread CPU time, so other processes on a shared box do not inflate the figures.
double cpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// range(0): messages; range(1): 1 = random delays up to an hour, 0 = one fixed delay.
void BM_TrackerAddPoll(benchmark::State& state) {
  const int64_t n = state.range(0);
  const bool random = state.range(1) != 0;
  std::vector<int64_t> deliverAt(static_cast<size_t>(n));
  std::mt19937_64 rng(42);
  for (auto& d : deliverAt) {
    d = 10'000 + (random ? static_cast<int64_t>(rng() % 3'600'000) : 0);
  }
  double addNs = 0, pollNs = 0, bytesPerMsg = 0;
  std::vector<storage::Position> out;
  out.reserve(1000);
  for (auto _ : state) {
    DelayedDeliveryTracker t(1000, false);
    double t0 = cpuNs();
    for (int64_t i = 0; i < n; ++i) {
      // Entries of 50k per ledger, as a rolled-over ledger would hold.
      t.addMessage({3 + i / 50'000, i % 50'000}, deliverAt[static_cast<size_t>(i)], 0);
    }
    addNs += (cpuNs() - t0) / static_cast<double>(n);
    bytesPerMsg += static_cast<double>(t.memoryBytes()) / static_cast<double>(n);
    t0 = cpuNs();
    int64_t polled = 0;
    // The dispatcher polls up to a read batch (100) at a time, at each tick.
    for (int64_t now = 0; polled < n; now += 1000) {
      size_t got;
      do {
        out.clear();
        got = t.getScheduledMessages(now, 100, &out);
        polled += static_cast<int64_t>(got);
        benchmark::DoNotOptimize(out.data());
      } while (got == 100);
    }
    pollNs += (cpuNs() - t0) / static_cast<double>(n);
  }
  double iters = static_cast<double>(state.iterations());
  state.counters["add_ns"] = addNs / iters;
  state.counters["poll_ns"] = pollNs / iters;
  state.counters["bytes_per_msg"] = bytesPerMsg / iters;
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TrackerAddPoll)
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 0})
    ->Args({10'000'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace magnetar

BENCHMARK_MAIN();
