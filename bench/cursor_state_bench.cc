// CursorState benchmarks (Google Benchmark): the ack bookkeeping of one subscription on the
// topic's ml-worker thread. The Key_Shared case models the max-rate perf scenario: 20 consumers,
// keys hashed to consumers, each acking its own interleaved subsequence in order, ~100k entries in
// flight; every step dispatches one entry (isAcked) and acks one (ack). Ledgers roll over every
// 50000 entries (managedLedgerMaxEntriesPerLedger). Reported as ns per step (ack + isAcked).
// On the 2-core dev VM (median of 5): Key_Shared/20 270 ns with the std::map of ranges, 44 ns
// with the per-ledger bitsets; in order 66 ns and 19 ns.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "quiet_benchmark_main.h"
#include "storage/cursor_state.h"
#include "storage/ledger_set.h"

using namespace magnetar;
using namespace magnetar::storage;

namespace {

constexpr int64_t kEntriesPerLedger = 50000;
constexpr int64_t kInFlight = 100000;
constexpr int64_t kSteps = 2000000;
constexpr int64_t kWarmup = 300000;  // steps replayed untimed after each reset

Position positionOf(int64_t g) {
  return Position{1 + g / kEntriesPerLedger, g % kEntriesPerLedger};
}

// A ledger set holding every entry the trace touches.
LedgerSet makeLedgers(int64_t entries) {
  LedgerSet ledgers;
  for (int64_t g = 0; g < entries; ++g) {
    if (g % kEntriesPerLedger == 0) ledgers.addLedger(1 + g / kEntriesPerLedger, 0);
    ledgers.addEntry(1);
  }
  return ledgers;
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: the key hash
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The order in which entries are acked: entry g goes to consumer mix(g) % consumers; a consumer
// is picked in proportion to what it holds (they drain at the same mean rate) and acks its oldest.
std::vector<int64_t> keySharedTrace(int consumers) {
  std::vector<std::deque<int64_t>> held(static_cast<size_t>(consumers));
  std::mt19937_64 rng(42);
  int64_t next = 0;
  auto dispatch = [&] {
    held[mix(static_cast<uint64_t>(next)) % static_cast<uint64_t>(consumers)].push_back(next);
    ++next;
  };
  for (int64_t i = 0; i < kInFlight; ++i) dispatch();
  std::vector<int64_t> acks;
  acks.reserve(kSteps);
  for (int64_t s = 0; s < kSteps; ++s) {
    int64_t r = static_cast<int64_t>(rng() % static_cast<uint64_t>(kInFlight));
    size_t c = 0;
    while (r >= static_cast<int64_t>(held[c].size())) r -= static_cast<int64_t>(held[c++].size());
    acks.push_back(held[c].front());
    held[c].pop_front();
    dispatch();
  }
  return acks;
}

// Step s acks trace[s] and checks the entry dispatched at that step (kInFlight + s).
void replay(CursorState& c, const LedgerSet& ledgers, const std::vector<int64_t>& trace,
            int64_t from, int64_t to) {
  for (int64_t s = from; s < to; ++s) {
    benchmark::DoNotOptimize(c.isAcked(positionOf(kInFlight + s)));
    c.ack(positionOf(trace[static_cast<size_t>(s)]), ledgers);
  }
}

void BM_CursorAckKeyShared(benchmark::State& state) {
  const auto trace = keySharedTrace(static_cast<int>(state.range(0)));
  const LedgerSet ledgers = makeLedgers(kInFlight + kSteps);
  CursorState c{Position{1, -1}};
  replay(c, ledgers, trace, 0, kWarmup);
  int64_t s = kWarmup;
  for (auto _ : state) {
    if (s == kSteps) {
      state.PauseTiming();
      c.reset(Position{1, -1});
      replay(c, ledgers, trace, 0, kWarmup);
      s = kWarmup;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(c.isAcked(positionOf(kInFlight + s)));
    c.ack(positionOf(trace[static_cast<size_t>(s)]), ledgers);
    ++s;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["lag"] =
      static_cast<double>(kInFlight + s - 1 - (c.markDelete().ledgerId - 1) * kEntriesPerLedger -
                          c.markDelete().entryId);
}
BENCHMARK(BM_CursorAckKeyShared)->ArgName("consumers")->Arg(20)->Arg(1);

// Acks in dispatch order (Shared/Exclusive with one consumer): every ack moves mark-delete.
void BM_CursorAckInOrder(benchmark::State& state) {
  const LedgerSet ledgers = makeLedgers(kSteps);
  CursorState c{Position{1, -1}};
  int64_t g = 0;
  for (auto _ : state) {
    if (g == kSteps) {
      state.PauseTiming();
      c.reset(Position{1, -1});
      g = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(c.isAcked(positionOf(g)));
    c.ack(positionOf(g), ledgers);
    ++g;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CursorAckInOrder);

}  // namespace

MAGNETAR_QUIET_BENCHMARK_MAIN()
