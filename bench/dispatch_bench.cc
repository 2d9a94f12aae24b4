// Dispatch cost per message: a Subscription's Dispatcher over an in-memory managed ledger, its
// consumers connected through broker::ConsumerSink (no sockets). One iteration publishes a batch
// of keyed entries (not timed), then times: the dispatcher reads them, picks a consumer per entry
// (Key_Shared: sticky-key hash + selector + draining check; Shared: round-robin; Exclusive: the
// active consumer), encodes each MESSAGE header into per-consumer frame batches and hands them to
// the sinks; every consumer then acks what it got and sends FLOW for as many permits.
//
//   cmake -S . -B build -G Ninja -DMAGNETAR_BUILD_BENCH=ON
//   cmake --build build --target dispatch_bench && build/bench/dispatch_bench
//
// Counters: per_msg = time per message (dispatch + ack + flow); dispatch_ns and ack_ns split it
// into the read+dispatch pass and the ack+FLOW pass (thread CPU time, so other processes on a
// shared box do not inflate them).
#include <benchmark/benchmark.h>
#include <time.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/topic/subscription.h"
#include "protocol/commands.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar {
namespace {

using broker::Consumer;
using broker::SubType;
using proto::CommandSubscribe;

constexpr int kBatch = 1000;       // entries published, dispatched and acked per iteration
constexpr int kKeys = 10000;       // distinct message keys (device ids)
constexpr int kPayloadBytes = 64;  // the IoT telemetry scenario's default payload

int64_t threadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Runs tasks when drained, on the calling thread: the benchmark thread is the topic's executor.
class QueueExecutor : public net::Executor {
 public:
  void execute(net::Task t) override { tasks_.push_back(std::move(t)); }
  bool inExecutorThread() const override { return true; }
  void drain() {
    while (!tasks_.empty()) {
      net::Task t = std::move(tasks_.front());
      tasks_.pop_front();
      t();
    }
  }

 private:
  std::deque<net::Task> tasks_;
};

// Takes a consumer's frames the way a connection's send() would (moves the batch), counts bytes.
class CountingSink : public broker::ConsumerSink {
 public:
  void send(net::FrameBatch&& frames) override {
    net::FrameBatch taken = std::move(frames);
    bytes += taken.totalBytes();
    ++batches;
  }
  void sendFrame(const Buffer& frame) override { bytes += frame.size(); }
  uint64_t bytes = 0;
  uint64_t batches = 0;
};

// Entries as a producer sends them (magic, crc32c, metadata with partition_key, payload).
std::vector<Buffer> makeEntries(int count) {
  std::vector<Buffer> out;
  out.reserve(static_cast<size_t>(count));
  std::string payload(kPayloadBytes, 'p');
  for (int i = 0; i < count; ++i) {
    proto::MessageMetadata md;
    md.set_producer_name("gateway-1");
    md.set_sequence_id(static_cast<uint64_t>(i));
    md.set_publish_time(1700000000000);
    // Keys in a scrambled order so consecutive entries land on different consumers.
    md.set_partition_key("device-" + std::to_string((i * 7919) % kKeys));
    out.push_back(protocol::Commands::newEntry(md, payload));
  }
  return out;
}

// Subscription "sub" on a new in-memory ledger bench/default/persistent/<name>, its tasks run on
// the benchmark thread by ex. sub is null (the benchmark skipped with the reason) when the ledger
// or its cursor cannot open. options must outlive it.
struct BenchSubscription {
  BenchSubscription(benchmark::State& state, const std::string& name,
                    const broker::BrokerOptions& options) {
    factory.asyncOpen("bench/default/persistent/" + name, &ex,
                      [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
                        if (r.isOk()) ml = r.value();
                      });
    ex.drain();
    if (!ml) {
      state.SkipWithError("cannot open the in-memory ledger");
      return;
    }
    auto cursor = ml->openCursor("sub", storage::InitialPosition::kEarliest);
    if (!cursor.isOk()) {
      state.SkipWithError("cannot open the cursor");
      return;
    }
    sub = std::make_unique<broker::Subscription>("sub", *ml, *cursor.value(), options,
                                                 "persistent://bench/default/" + name, -1);
  }
  QueueExecutor ex;
  storage::MemoryManagedLedgerFactory factory;
  std::shared_ptr<storage::ManagedLedger> ml;
  std::unique_ptr<broker::Subscription> sub;  // last: goes first
};

void runDispatch(benchmark::State& state, SubType type) {
  const int numConsumers = static_cast<int>(state.range(0));
  broker::BrokerOptions options;
  BenchSubscription topic(state, "dispatch", options);
  if (!topic.sub) return;
  QueueExecutor& ex = topic.ex;
  storage::ManagedLedger* ml = topic.ml.get();
  broker::Subscription& sub = *topic.sub;
  std::vector<std::unique_ptr<CountingSink>> sinks;
  std::vector<std::shared_ptr<Consumer>> consumers;
  const int count = type == CommandSubscribe::Exclusive ? 1 : numConsumers;
  for (int i = 0; i < count; ++i) {
    sinks.push_back(std::make_unique<CountingSink>());
    auto c = std::make_shared<Consumer>(static_cast<uint64_t>(i), "consumer-" + std::to_string(i),
                                        sinks.back().get(), type, 0);
    if (!sub.addConsumer(c).isOk()) {
      state.SkipWithError("addConsumer failed");
      return;
    }
    consumers.push_back(std::move(c));
  }
  // Receiver queues of 1000 (the clients' default), refilled by FLOW after each ack round.
  for (auto& c : consumers) sub.dispatcher()->flow(c.get(), 2 * kBatch);

  const std::vector<Buffer> entries = makeEntries(kKeys);
  size_t next = 0;
  uint64_t dispatched = 0;
  int64_t dispatchNs = 0, ackNs = 0;
  std::vector<storage::Position> acks;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < kBatch; ++i) {
      ml->asyncAddEntry(entries[next], [](Status, storage::Position) {});
      next = (next + 1) % entries.size();
    }
    ex.drain();
    uint64_t before = sub.dispatcher()->stats().msgOutCounter;
    state.ResumeTiming();

    int64_t t0 = threadCpuNs();
    sub.dispatcher()->onNewEntries();
    ex.drain();
    int64_t t1 = threadCpuNs();
    for (auto& c : consumers) {
      acks.clear();
      c->pendingAcks.forEach(
          [&](storage::Position pos, const broker::Consumer::PendingAck&) { acks.push_back(pos); });
      if (acks.empty()) continue;
      sub.acknowledge(c.get(), acks, nullptr);
      sub.dispatcher()->flow(c.get(), static_cast<uint32_t>(acks.size()));
    }
    ex.drain();
    int64_t t2 = threadCpuNs();
    dispatchNs += t1 - t0;
    ackNs += t2 - t1;

    uint64_t out = sub.dispatcher()->stats().msgOutCounter - before;
    dispatched += out;
    if (out != static_cast<uint64_t>(kBatch)) {
      state.SkipWithError("not every entry was dispatched in its iteration");
      break;
    }
  }
  uint64_t bytes = 0;
  for (auto& s : sinks) bytes += s->bytes;
  state.SetItemsProcessed(static_cast<int64_t>(dispatched));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["per_msg"] = benchmark::Counter(
      static_cast<double>(dispatched), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["consumers"] = static_cast<double>(count);
  if (dispatched > 0) {
    state.counters["dispatch_ns"] =
        static_cast<double>(dispatchNs) / static_cast<double>(dispatched);
    state.counters["ack_ns"] = static_cast<double>(ackNs) / static_cast<double>(dispatched);
  }
}

void BM_DispatchKeyShared(benchmark::State& state) {
  runDispatch(state, CommandSubscribe::Key_Shared);
}
void BM_DispatchShared(benchmark::State& state) { runDispatch(state, CommandSubscribe::Shared); }
void BM_DispatchExclusive(benchmark::State& state) {
  runDispatch(state, CommandSubscribe::Exclusive);
}

// Key_Shared with a slow consumer (issue 45): consumer A takes nothing, so the entries of its
// keys wait in the replay set (look-ahead limits off, so the set holds range(0) / 2 of them);
// each iteration publishes kBatch entries of B's keys, B takes them, acks and sends FLOW. The
// cost per message must not grow with the entries waiting for A.
void BM_KeySharedReplayWithSlowConsumer(benchmark::State& state) {
  const int waiting = static_cast<int>(state.range(0));
  broker::BrokerOptions options;
  options.dynamic.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(0);
  options.dynamic.keySharedLookAheadMsgInReplayThresholdPerSubscription.store(0);
  BenchSubscription topic(state, "replay", options);
  if (!topic.sub) return;
  QueueExecutor& ex = topic.ex;
  storage::ManagedLedger* ml = topic.ml.get();
  broker::Subscription& sub = *topic.sub;
  CountingSink sinkA, sinkB;
  auto a = std::make_shared<Consumer>(1, "a", &sinkA, CommandSubscribe::Key_Shared, 0);
  auto b = std::make_shared<Consumer>(2, "b", &sinkB, CommandSubscribe::Key_Shared, 0);
  if (!sub.addConsumer(a).isOk() || !sub.addConsumer(b).isOk()) {
    state.SkipWithError("addConsumer failed");
    return;
  }
  // Setup: `waiting` entries over all keys; B takes its keys' entries, A's wait for replay.
  const std::vector<Buffer> entries = makeEntries(kKeys);
  std::map<storage::Position, size_t> keyIndexAt;
  for (int i = 0; i < waiting; ++i) {
    size_t k = static_cast<size_t>(i) % entries.size();
    ml->asyncAddEntry(entries[k],
                      [&keyIndexAt, k](Status, storage::Position p) { keyIndexAt[p] = k; });
  }
  ex.drain();
  sub.dispatcher()->flow(b.get(), static_cast<uint32_t>(waiting));
  ex.drain();
  std::vector<storage::Position> acks;
  std::vector<size_t> keysOfB;
  b->pendingAcks.forEach([&](storage::Position pos, const broker::Consumer::PendingAck&) {
    acks.push_back(pos);
    if (keysOfB.size() < static_cast<size_t>(kKeys)) keysOfB.push_back(keyIndexAt[pos]);
  });
  sub.acknowledge(b.get(), acks, nullptr);
  ex.drain();
  if (keysOfB.empty() || sub.dispatcher()->replayBacklog() == 0) {
    state.SkipWithError("the setup left no keys for B or nothing waiting for A");
    return;
  }
  size_t next = 0;
  uint64_t dispatched = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < kBatch; ++i) {
      ml->asyncAddEntry(entries[keysOfB[next]], [](Status, storage::Position) {});
      next = (next + 1) % keysOfB.size();
    }
    ex.drain();
    uint64_t before = sub.dispatcher()->stats().msgOutCounter;
    state.ResumeTiming();
    sub.dispatcher()->onNewEntries();
    ex.drain();
    acks.clear();
    b->pendingAcks.forEach(
        [&](storage::Position pos, const broker::Consumer::PendingAck&) { acks.push_back(pos); });
    sub.acknowledge(b.get(), acks, nullptr);
    sub.dispatcher()->flow(b.get(), static_cast<uint32_t>(acks.size()));
    ex.drain();
    dispatched += sub.dispatcher()->stats().msgOutCounter - before;
  }
  state.SetItemsProcessed(static_cast<int64_t>(dispatched));
  state.counters["per_msg"] = benchmark::Counter(
      static_cast<double>(dispatched), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["replay_set"] = static_cast<double>(sub.dispatcher()->replayBacklog());
}

BENCHMARK(BM_DispatchKeyShared)->Arg(4)->Arg(20);
BENCHMARK(BM_KeySharedReplayWithSlowConsumer)->Arg(20000)->Arg(200000);
BENCHMARK(BM_DispatchShared)->Arg(4)->Arg(20);
BENCHMARK(BM_DispatchExclusive)->Arg(1);

}  // namespace
}  // namespace magnetar

BENCHMARK_MAIN();
