// Protocol codec costs on the broker's hot paths: decoding SEND frames, checking their checksum,
// and building MESSAGE headers and SEND_RECEIPTs.
#include <benchmark/benchmark.h>

#include <string>

#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::protocol {
namespace {

// `count` SEND frames with payloadSize-byte payloads, back to back.
std::string sendStream(int count, size_t payloadSize) {
  proto::MessageMetadata md;
  md.set_producer_name("bench-producer");
  md.set_publish_time(1700000000000ULL);
  proto::CommandSend send;
  send.set_producer_id(1);
  std::string payload(payloadSize, 'x'), out;
  for (int i = 0; i < count; ++i) {
    send.set_sequence_id(i);
    md.set_sequence_id(i);
    Commands::appendSend(send, md, payload, &out);
  }
  return out;
}

// Frames decoded per second, fed in 64 KiB chunks as a socket read would deliver them.
void BM_DecodeSend(benchmark::State& state) {
  const int kFrames = 1000;
  std::string stream = sendStream(kFrames, static_cast<size_t>(state.range(0)));
  FrameDecoder decoder;
  uint64_t entryBytes = 0;
  auto handler = [&](const proto::BaseCommand&, Buffer entry) { entryBytes += entry.size(); };
  for (auto _ : state) {
    for (size_t off = 0; off < stream.size(); off += 65536) {
      size_t len = std::min<size_t>(65536, stream.size() - off);
      auto s = decoder.feed(reinterpret_cast<const uint8_t*>(stream.data()) + off, len, handler);
      if (!s.isOk()) state.SkipWithError(s.toString().c_str());
    }
  }
  benchmark::DoNotOptimize(entryBytes);
  state.SetItemsProcessed(state.iterations() * kFrames);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(stream.size()));
}
BENCHMARK(BM_DecodeSend)->Arg(100)->Arg(1024)->Arg(16384);

void BM_VerifyChecksum(benchmark::State& state) {
  proto::MessageMetadata md;
  md.set_producer_name("bench-producer");
  md.set_sequence_id(1);
  md.set_publish_time(1);
  Buffer entry =
      Commands::newEntry(md, std::string(static_cast<size_t>(state.range(0)), 'x'));
  for (auto _ : state) benchmark::DoNotOptimize(verifyChecksum(entry).isOk());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(entry.size()));
}
BENCHMARK(BM_VerifyChecksum)->Arg(100)->Arg(1024)->Arg(65536);

void BM_WriteMessageHeader(benchmark::State& state) {
  uint8_t buf[kMaxMessageHeaderSize];
  uint64_t entryId = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Commands::writeMessageHeader(buf, 7, 123, entryId++, 0, 200));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WriteMessageHeader);

void BM_WriteSendReceipt(benchmark::State& state) {
  uint8_t buf[kMaxSendReceiptSize];
  uint64_t seq = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Commands::writeSendReceipt(buf, 3, seq, 123, seq, seq));
    ++seq;
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WriteSendReceipt);

}  // namespace
}  // namespace magnetar::protocol
