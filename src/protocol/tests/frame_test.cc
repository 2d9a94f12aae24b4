// FrameDecoder and entry helpers: chunking, limits, malformed input, checksums.
#include "protocol/frame.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/crc32c.h"
#include "protocol/commands.h"
#include "protocol/tests/test_util.h"

namespace magnetar::protocol {
namespace {

using testing::decodeAll;
using testing::DecodedFrame;

void putBE32(std::string* s, uint32_t v) {
  s->push_back(static_cast<char>(v >> 24));
  s->push_back(static_cast<char>(v >> 16));
  s->push_back(static_cast<char>(v >> 8));
  s->push_back(static_cast<char>(v));
}

// [totalSize][cmdSize][cmd][entry] from raw parts (sizes computed honestly).
std::string rawFrame(const std::string& cmd, const std::string& entry = "") {
  std::string f;
  putBE32(&f, static_cast<uint32_t>(4 + cmd.size() + entry.size()));
  putBE32(&f, static_cast<uint32_t>(cmd.size()));
  return f + cmd + entry;
}

proto::MessageMetadata metadata(uint64_t seq) {
  proto::MessageMetadata md;
  md.set_producer_name("producer");
  md.set_sequence_id(seq);
  md.set_publish_time(1000 + seq);
  return md;
}

// A stream with simple and payload frames mixed.
std::string mixedStream() {
  std::string s;
  s += Commands::newPing().view();
  s += Commands::newSend(1, 0, 1, metadata(0), "first payload").view();
  s += Commands::newFlow(3, 500).view();
  s += Commands::newSend(1, 1, 1, metadata(1), std::string(3000, 'x')).view();
  s += Commands::newSuccess(4).view();
  return s;
}

void expectMixed(const std::vector<DecodedFrame>& f) {
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].cmd.type(), proto::BaseCommand::PING);
  EXPECT_TRUE(f[0].entry.empty());
  EXPECT_EQ(f[1].cmd.type(), proto::BaseCommand::SEND);
  EXPECT_EQ(f[1].cmd.send().sequence_id(), 0u);
  EXPECT_EQ(*payloadOf(f[1].entry), "first payload");
  EXPECT_EQ(f[2].cmd.flow().messagepermits(), 500u);
  EXPECT_EQ(f[3].cmd.send().sequence_id(), 1u);
  EXPECT_EQ(*payloadOf(f[3].entry), std::string(3000, 'x'));
  EXPECT_TRUE(verifyChecksum(f[3].entry).isOk());
  EXPECT_EQ(f[4].cmd.success().request_id(), 4u);
}

TEST(FrameDecoderTest, SeveralFramesInOneChunk) {
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(decodeAll(mixedStream(), &frames).isOk());
  expectMixed(frames);
}

TEST(FrameDecoderTest, EveryChunkSizeDecodesIdentically) {
  std::string stream = mixedStream();
  for (size_t chunk : {1u, 2u, 3u, 5u, 7u, 8u, 9u, 13u, 64u, 1000u, 4096u}) {
    std::vector<DecodedFrame> frames;
    Status s = decodeAll(stream, &frames, chunk);
    ASSERT_TRUE(s.isOk()) << "chunk " << chunk << ": " << s.toString();
    expectMixed(frames);
  }
}

TEST(FrameDecoderTest, SplitAtEveryByteBoundary) {
  std::string frame(Commands::newSend(7, 8, 2, metadata(8), "split me anywhere").view());
  frame += Commands::newPong().view();
  for (size_t cut = 0; cut <= frame.size(); ++cut) {
    FrameDecoder dec;
    std::vector<DecodedFrame> frames;
    auto h = [&](const proto::BaseCommand& cmd, Buffer entry) {
      frames.push_back({cmd, std::string(entry.view())});
    };
    auto* p = reinterpret_cast<const uint8_t*>(frame.data());
    ASSERT_TRUE(dec.feed(p, cut, h).isOk());
    ASSERT_TRUE(dec.feed(p + cut, frame.size() - cut, h).isOk());
    ASSERT_EQ(frames.size(), 2u) << "cut " << cut;
    EXPECT_EQ(frames[0].cmd.send().producer_id(), 7u);
    EXPECT_EQ(frames[0].cmd.send().num_messages(), 2);
    EXPECT_EQ(*payloadOf(frames[0].entry), "split me anywhere");
    EXPECT_TRUE(verifyChecksum(frames[0].entry).isOk());
    EXPECT_EQ(frames[1].cmd.type(), proto::BaseCommand::PONG);
    EXPECT_TRUE(dec.idle());
  }
}

TEST(FrameDecoderTest, TruncatedFrameYieldsNothingUntilComplete) {
  std::string frame(Commands::newSend(1, 2, 1, metadata(2), "abcdef").view());
  FrameDecoder dec;
  int count = 0;
  auto h = [&](const proto::BaseCommand&, Buffer) { ++count; };
  auto* p = reinterpret_cast<const uint8_t*>(frame.data());
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    ASSERT_TRUE(dec.feed(p + i, 1, h).isOk());
    EXPECT_EQ(count, 0) << "after byte " << i;
    EXPECT_FALSE(dec.idle());
    EXPECT_EQ(dec.bufferedBytes(), i + 1);
  }
  ASSERT_TRUE(dec.feed(p + frame.size() - 1, 1, h).isOk());
  EXPECT_EQ(count, 1);
  EXPECT_TRUE(dec.idle());
  EXPECT_EQ(dec.framesDecoded(), 1u);
}

TEST(FrameDecoderTest, EntryIsAnIndependentBuffer) {
  std::string frame(Commands::newSend(1, 2, 1, metadata(2), "keep me").view());
  Buffer kept;
  FrameDecoder dec;
  ASSERT_TRUE(dec.feed(reinterpret_cast<const uint8_t*>(frame.data()), frame.size(),
                       [&](const proto::BaseCommand&, Buffer e) { kept = std::move(e); })
                  .isOk());
  std::fill(frame.begin(), frame.end(), '\0');  // the read buffer gets reused
  EXPECT_EQ(kept.useCount(), 1);
  EXPECT_EQ(*payloadOf(kept), "keep me");
  EXPECT_TRUE(verifyChecksum(kept).isOk());
}

TEST(FrameDecoderTest, OversizeFrameRejected) {
  std::string frame(Commands::newSend(1, 2, 1, metadata(2), std::string(1000, 'p')).view());
  std::vector<DecodedFrame> frames;
  // Exactly at the limit (limit counts the size field, as Pulsar's frame decoder does) is fine.
  EXPECT_TRUE(decodeAll(frame, &frames, 0, frame.size()).isOk());
  Status s = decodeAll(frame, &frames, 0, frame.size() - 1);
  EXPECT_EQ(s.code(), StatusCode::kTooLarge) << s.toString();

  // The size is checked as soon as 4 bytes are in, before any body arrives.
  std::string header;
  putBE32(&header, 100 * 1024 * 1024);
  FrameDecoder dec(kDefaultMaxFrameSize);
  Status s2 = dec.feed(reinterpret_cast<const uint8_t*>(header.data()), 4,
                       [](const proto::BaseCommand&, Buffer) {});
  EXPECT_EQ(s2.code(), StatusCode::kTooLarge);
  EXPECT_NE(s2.message().find("exceeds"), std::string::npos);
}

TEST(FrameDecoderTest, TotalSizeBelowFourRejected) {
  std::string f;
  putBE32(&f, 3);
  putBE32(&f, 0);
  std::vector<DecodedFrame> frames;
  Status s = decodeAll(f, &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_TRUE(frames.empty());
}

TEST(FrameDecoderTest, CommandSizeBeyondFrameRejected) {
  std::string f;
  putBE32(&f, 10);
  putBE32(&f, 7);  // only 6 bytes remain after cmdSize
  f += "abcdef";
  std::vector<DecodedFrame> frames;
  Status s = decodeAll(f, &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("command size"), std::string::npos) << s.toString();
}

TEST(FrameDecoderTest, GarbageCommandRejected) {
  std::vector<DecodedFrame> frames;
  Status s = decodeAll(rawFrame("\xff\xff\xff\xff\xff"), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.toString();
  EXPECT_TRUE(frames.empty());

  // Valid protobuf but missing the required fields of the command.
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::FLOW);
  cmd.mutable_flow()->set_consumer_id(1);  // messagePermits missing
  frames.clear();
  s = decodeAll(rawFrame(cmd.SerializePartialAsString()), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("messagePermits"), std::string::npos) << s.toString();

  // A type value no Pulsar version defines.
  frames.clear();
  s = decodeAll(rawFrame(std::string("\x08\x2d", 2)), &frames);  // type = 45
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.toString();
}

// The per-message commands check only their own sub-message's required fields (nested ones
// too); every other type still gets the whole command's check.
TEST(FrameDecoderTest, MissingRequiredFieldsRejectedForEachCheckedType) {
  auto rejects = [](const proto::BaseCommand& cmd, const std::string& entry,
                    const std::string& field) {
    std::vector<DecodedFrame> frames;
    Status s = decodeAll(rawFrame(cmd.SerializePartialAsString(), entry), &frames);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << cmd.ShortDebugString();
    EXPECT_NE(s.message().find(field), std::string::npos) << s.toString();
    EXPECT_TRUE(frames.empty());
  };
  const std::string entry(Commands::newEntry(metadata(0), "x").view());
  proto::BaseCommand send;
  send.set_type(proto::BaseCommand::SEND);
  send.mutable_send()->set_producer_id(1);  // sequence_id missing
  rejects(send, entry, "sequence_id");

  proto::BaseCommand receipt;
  receipt.set_type(proto::BaseCommand::SEND_RECEIPT);
  receipt.mutable_send_receipt()->set_sequence_id(1);  // producer_id missing
  rejects(receipt, "", "producer_id");

  proto::BaseCommand message;  // the nested MessageIdData lacks entryId
  message.set_type(proto::BaseCommand::MESSAGE);
  message.mutable_message()->set_consumer_id(1);
  message.mutable_message()->mutable_message_id()->set_ledgerid(3);
  rejects(message, entry, "entryId");

  proto::BaseCommand ack;  // ack_type missing
  ack.set_type(proto::BaseCommand::ACK);
  ack.mutable_ack()->set_consumer_id(1);
  rejects(ack, "", "ack_type");

  proto::BaseCommand subscribe;  // a type checked whole: subscription missing
  subscribe.set_type(proto::BaseCommand::SUBSCRIBE);
  subscribe.mutable_subscribe()->set_topic("t");
  subscribe.mutable_subscribe()->set_consumer_id(1);
  subscribe.mutable_subscribe()->set_request_id(1);
  subscribe.mutable_subscribe()->set_subtype(proto::CommandSubscribe::Shared);
  rejects(subscribe, "", "subscription");
}

TEST(FrameDecoderTest, KnownTypesWeDoNotServeStillDecode) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::NEW_TXN);
  cmd.mutable_newtxn()->set_request_id(5);
  std::vector<DecodedFrame> frames;
  ASSERT_TRUE(decodeAll(Commands::serialize(cmd).view(), &frames).isOk());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].cmd.type(), proto::BaseCommand::NEW_TXN);
  EXPECT_EQ(frames[0].cmd.newtxn().request_id(), 5u);
}

TEST(FrameDecoderTest, PayloadWithBadMagicRejected) {
  std::string entry(Commands::newEntry(metadata(1), "p").view());
  entry[0] = 0x0f;
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SEND);
  cmd.mutable_send()->set_producer_id(1);
  cmd.mutable_send()->set_sequence_id(1);
  std::vector<DecodedFrame> frames;
  Status s = decodeAll(rawFrame(cmd.SerializeAsString(), entry), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.toString();
  EXPECT_TRUE(frames.empty());

  // Too short to hold magic + checksum + metadata size.
  frames.clear();
  s = decodeAll(rawFrame(cmd.SerializeAsString(), std::string("\x0e\x01\x00", 3)), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);

  // Metadata size pointing past the end.
  std::string bad(Commands::newEntry(metadata(1), "p").view());
  bad[6] = 0x7f;
  frames.clear();
  s = decodeAll(rawFrame(cmd.SerializeAsString(), bad), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);

  // SEND with no payload at all.
  frames.clear();
  s = decodeAll(rawFrame(cmd.SerializeAsString()), &frames);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
}

TEST(FrameDecoderTest, ErrorIsSticky) {
  FrameDecoder dec;
  auto h = [](const proto::BaseCommand&, Buffer) {};
  std::string bad = rawFrame("\xff\xff");
  EXPECT_FALSE(dec.feed(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), h).isOk());
  std::string good(Commands::newPing().view());
  Status s = dec.feed(reinterpret_cast<const uint8_t*>(good.data()), good.size(), h);
  EXPECT_FALSE(s.isOk());
  EXPECT_FALSE(dec.error().isOk());
}

TEST(FrameDecoderTest, HandlerStatusStopsDecoding) {
  std::string stream = mixedStream();
  FrameDecoder dec;
  int seen = 0;
  Status s = dec.feed(reinterpret_cast<const uint8_t*>(stream.data()), stream.size(),
                      [&](const proto::BaseCommand&, Buffer) -> Status {
                        return ++seen == 2 ? Status::notAllowed("stop") : Status::ok();
                      });
  EXPECT_EQ(s.code(), StatusCode::kNotAllowed);
  EXPECT_EQ(seen, 2);
}

TEST(FrameDecoderTest, FrameHandlerInterface) {
  struct Counter : FrameHandler {
    int sends = 0;
    size_t entryBytes = 0;
    Status onFrame(const proto::BaseCommand& cmd, Buffer entry) override {
      if (cmd.type() == proto::BaseCommand::SEND) ++sends;
      entryBytes += entry.size();
      return Status::ok();
    }
  } counter;
  std::string stream = mixedStream();
  FrameDecoder dec;
  ASSERT_TRUE(dec.feed(reinterpret_cast<const uint8_t*>(stream.data()), stream.size(), counter)
                  .isOk());
  EXPECT_EQ(counter.sends, 2);
  EXPECT_GT(counter.entryBytes, 3000u);
}

// Records onPartialFrameStart() and onFrame() calls in order.
struct AdmissionRecorder : FrameHandler {
  std::vector<std::string> events;
  Status onFrame(const proto::BaseCommand& cmd, Buffer entry) override {
    events.push_back("frame " + proto::BaseCommand::Type_Name(cmd.type()));
    return Status::ok();
  }
  bool onPartialFrameStart(size_t frameBytes) override {
    events.push_back("partial " + std::to_string(frameBytes));
    return !deferNext;
  }
  bool deferNext = false;
};

TEST(FrameDecoderTest, WholeFramesInOneChunkAreNotAnnounced) {
  std::string stream = mixedStream();
  AdmissionRecorder r;
  FrameDecoder dec;
  ASSERT_TRUE(dec.feed(reinterpret_cast<const uint8_t*>(stream.data()), stream.size(), r).isOk());
  ASSERT_EQ(r.events.size(), 5u);
  for (const auto& e : r.events) EXPECT_EQ(e.rfind("frame ", 0), 0u) << e;
}

TEST(FrameDecoderTest, PartialFrameAnnouncedOnceWithItsFullSizeBeforeItsBody) {
  std::string big(Commands::newSend(1, 2, 1, metadata(2), std::string(100000, 'b')).view());
  std::string stream = big + std::string(Commands::newPing().view());
  for (size_t chunk : {1u, 7u, 8u, 9u, 4096u, 65536u}) {
    AdmissionRecorder r;
    FrameDecoder dec;
    auto* p = reinterpret_cast<const uint8_t*>(stream.data());
    size_t fed = 0;
    bool announcedBeforeBody = false;
    while (fed < stream.size()) {
      size_t n = std::min(chunk, stream.size() - fed);
      ASSERT_TRUE(dec.feed(p + fed, n, r).isOk());
      fed += n;
      // Once more than the header is buffered, the frame has been announced.
      if (fed > kFrameHeaderLen && fed < big.size()) {
        ASSERT_FALSE(r.events.empty()) << "chunk " << chunk;
        announcedBeforeBody = true;
        // What is missing, fed exactly, completes the frame.
        EXPECT_EQ(dec.remainingInFrame(), big.size() - fed) << "chunk " << chunk;
      }
    }
    EXPECT_TRUE(announcedBeforeBody);
    // In small chunks the PING may be a partial frame too (announced with its own size).
    const std::string pingPartial = "partial " + std::to_string(stream.size() - big.size());
    std::vector<std::string> want = {"partial " + std::to_string(big.size()), "frame SEND"};
    if (r.events.size() == 4) want.push_back(pingPartial);
    want.push_back("frame PING");
    EXPECT_EQ(r.events, want) << "chunk " << chunk;
    EXPECT_EQ(dec.remainingInFrame(), 0u);
  }
}

TEST(FrameDecoderTest, FeedingExactlyTheRemainderStopsAtTheFrameBoundary) {
  std::string first(Commands::newSend(1, 1, 1, metadata(1), std::string(5000, 'a')).view());
  std::string second(Commands::newSend(1, 2, 1, metadata(2), std::string(5000, 'b')).view());
  std::string stream = first + second;
  auto* p = reinterpret_cast<const uint8_t*>(stream.data());
  AdmissionRecorder r;
  FrameDecoder dec;
  ASSERT_TRUE(dec.feed(p, 100, r).isOk());
  EXPECT_EQ(dec.remainingInFrame(), first.size() - 100);
  ASSERT_TRUE(dec.feed(p + 100, dec.remainingInFrame(), r).isOk());
  EXPECT_TRUE(dec.idle());
  EXPECT_EQ(dec.remainingInFrame(), 0u);
  ASSERT_EQ(r.events.size(), 2u);  // the second frame's header was not read
  // A header split before its end announces nothing until it is complete.
  ASSERT_TRUE(dec.feed(p + first.size(), kFrameHeaderLen - 1, r).isOk());
  EXPECT_EQ(dec.remainingInFrame(), 0u);
  EXPECT_EQ(r.events.size(), 2u);
  ASSERT_TRUE(dec.feed(p + first.size() + kFrameHeaderLen - 1, 1, r).isOk());
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[2], "partial " + std::to_string(second.size()));
  EXPECT_EQ(dec.remainingInFrame(), second.size() - kFrameHeaderLen);
}

TEST(FrameDecoderTest, DeferredFrameStopsAtItsHeaderAndGoesOnWithTheNextFeed) {
  std::string small(Commands::newPing().view());
  std::string big(Commands::newSend(1, 2, 1, metadata(2), std::string(100000, 'b')).view());
  std::string stream = small + big + small;
  auto* p = reinterpret_cast<const uint8_t*>(stream.data());
  AdmissionRecorder r;
  r.deferNext = true;
  FrameDecoder dec;
  // A chunk with the PING, the SEND's header and 1000 bytes of its body.
  const size_t first = small.size() + kFrameHeaderLen + 1000;
  ASSERT_TRUE(dec.feed(p, first, r).isOk());
  EXPECT_EQ(dec.lastFeedConsumed(), small.size() + kFrameHeaderLen);  // nothing of the body
  EXPECT_EQ(dec.bufferedBytes(), kFrameHeaderLen);
  EXPECT_EQ(dec.remainingInFrame(), big.size() - kFrameHeaderLen);
  EXPECT_EQ(r.events,
            (std::vector<std::string>{"frame PING", "partial " + std::to_string(big.size())}));
  // The caller lets it go on: the rest of the chunk, then the rest of the stream. The frame is
  // not announced a second time.
  r.deferNext = false;
  size_t fed = dec.lastFeedConsumed();
  ASSERT_TRUE(dec.feed(p + fed, first - fed, r).isOk());
  EXPECT_EQ(dec.lastFeedConsumed(), first - fed);
  fed = first;
  ASSERT_TRUE(dec.feed(p + fed, stream.size() - fed, r).isOk());
  EXPECT_EQ(dec.lastFeedConsumed(), stream.size() - fed);
  EXPECT_EQ(r.events,
            (std::vector<std::string>{"frame PING", "partial " + std::to_string(big.size()),
                                      "frame SEND", "frame PING"}));
  EXPECT_TRUE(dec.idle());
}

TEST(FrameDecoderTest, OversizeFrameIsRefusedBeforeItIsAnnounced) {
  std::string frame(Commands::newSend(1, 2, 1, metadata(2), std::string(1000, 'p')).view());
  AdmissionRecorder r;
  FrameDecoder dec(500);
  Status s = dec.feed(reinterpret_cast<const uint8_t*>(frame.data()), 20, r);
  EXPECT_EQ(s.code(), StatusCode::kTooLarge);
  EXPECT_TRUE(r.events.empty());
}

TEST(FrameDecoderTest, LargeSplitCommandDoesNotKeepItsScratchBuffer) {
  proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::PRODUCER);
  cmd.mutable_producer()->set_topic(std::string(100000, 't'));
  cmd.mutable_producer()->set_producer_id(1);
  cmd.mutable_producer()->set_request_id(2);
  std::string frame = rawFrame(cmd.SerializeAsString());
  FrameDecoder dec;
  int frames = 0;
  auto h = [&](const proto::BaseCommand& c, Buffer) {
    EXPECT_EQ(c.producer().topic().size(), 100000u);
    ++frames;
  };
  auto* p = reinterpret_cast<const uint8_t*>(frame.data());
  ASSERT_TRUE(dec.feed(p, 50000, h).isOk());
  EXPECT_GE(dec.scratchCapacity(), 50000u - kFrameHeaderLen);  // holding the first part
  ASSERT_TRUE(dec.feed(p + 50000, frame.size() - 50000, h).isOk());
  EXPECT_EQ(frames, 1);
  EXPECT_LE(dec.scratchCapacity(), 4096u);
}

TEST(EntryTest, ChecksumDetectsEveryCorruptedByte) {
  std::string entry(Commands::newEntry(metadata(3), "checksummed payload").view());
  ASSERT_TRUE(verifyChecksum(entry).isOk());
  // Every byte from the stored checksum to the end is covered (checksum field included, since a
  // changed stored value no longer matches).
  for (size_t i = 2; i < entry.size(); ++i) {
    std::string bad = entry;
    bad[i] ^= 0x20;
    EXPECT_FALSE(verifyChecksum(bad).isOk()) << "byte " << i;
  }
}

TEST(EntryTest, LayoutOffsets) {
  proto::MessageMetadata md = metadata(9);
  std::string entry(Commands::newEntry(md, "xyz").view());
  auto l = parseEntryLayout(entry);
  ASSERT_TRUE(l.isOk());
  EXPECT_FALSE(l->hasBrokerEntryMetadata);
  EXPECT_EQ(l->magicOffset, 0u);
  EXPECT_EQ(l->checksummedOffset, 6u);
  EXPECT_EQ(l->metadataOffset, 10u);
  EXPECT_EQ(l->metadataSize, md.ByteSizeLong());
  EXPECT_EQ(l->payloadOffset, 10 + md.ByteSizeLong());
  EXPECT_EQ(l->payloadSize, 3u);
  EXPECT_EQ(l->checksum, crc32c(entry.data() + 6, entry.size() - 6));

  std::string garbageMd = entry;
  garbageMd[10] = 0x0f;  // field 1 with wire type 7: not valid protobuf
  proto::MessageMetadata out;
  EXPECT_EQ(parseMetadata(garbageMd, &out).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace magnetar::protocol
