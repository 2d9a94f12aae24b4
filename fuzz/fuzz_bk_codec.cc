// fuzz_bk_codec: bytes from a bookie (or to one) -> the BookKeeper v2 codec (src/bookkeeper/
// protocol.h) that BookieClient runs on every reply.
//
// Input: [flags][stream]. flags bits 0-3: chunk size - 1 for the chunked pass (1..16 bytes);
// bit 4: a frame maximum of 64 KiB instead of kMaxFrameSize (frame-too-large paths).
// Invariants beyond "no crash":
// - FrameReader fed the stream whole and fed it in chunks (compacting as BookieClient does) gives
//   the same frames, the same error and the same bytes left over; the error is sticky (more bytes
//   give no frame);
// - a decoded response re-encoded with encodeResponse decodes to the same op, rc, ids and body;
//   an ADD response has no body;
// - a READ body (or an ADD request's entry) that verifyEntry accepts has the ids asked for, its
//   payload is the bytes after the 36-byte header, and packEntry(header, payload) gives back the
//   exact bytes (the digest covers everything); any single flipped payload byte is rejected.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bookkeeper/protocol.h"
#include "fuzz_util.h"

using namespace magnetar;
using namespace magnetar::bookkeeper;

namespace {

struct Split {
  std::vector<std::string> frames;
  bool error = false;
  size_t leftover = 0;
};

Split splitWhole(std::string_view stream, size_t maxFrame) {
  Split s;
  FrameReader r(maxFrame);
  r.append(reinterpret_cast<const uint8_t*>(stream.data()), stream.size());
  while (auto f = r.next()) s.frames.emplace_back(*f);
  s.error = !r.error().isOk();
  if (s.error) {
    r.append(reinterpret_cast<const uint8_t*>("\0\0\0\x01x"), 5);
    fuzz::check(!r.next().has_value(), "FrameReader error is not sticky");
    fuzz::check(!r.error().isOk(), "FrameReader error cleared");
  }
  s.leftover = r.buffered();
  return s;
}

Split splitChunked(std::string_view stream, size_t maxFrame, size_t chunk) {
  Split s;
  FrameReader r(maxFrame);
  for (size_t pos = 0; pos < stream.size() && !s.error; pos += chunk) {
    size_t n = std::min(chunk, stream.size() - pos);
    r.append(reinterpret_cast<const uint8_t*>(stream.data() + pos), n);
    while (auto f = r.next()) s.frames.emplace_back(*f);
    s.error = !r.error().isOk();
    if (!s.error) r.compact();
  }
  s.leftover = r.buffered();
  return s;
}

void checkEntry(std::string_view entry, int64_t ledgerId, int64_t entryId) {
  auto v = verifyEntry(entry, ledgerId, entryId);
  if (!v.isOk()) return;
  fuzz::check(entry.size() >= kEntryHeaderLength, "verified entry shorter than its header");
  fuzz::check(v->header.ledgerId == ledgerId, "verified entry of another ledger");
  fuzz::check(entryId < 0 || v->header.entryId == entryId, "verified entry with another id");
  fuzz::check(v->payload == entry.substr(kEntryHeaderLength), "payload is not the entry's tail");
  fuzz::check(packEntry(v->header, v->payload) == entry, "packEntry does not give the bytes back");
  uint32_t stored = 0;
  for (size_t i = kEntryMetadataLength; i < kEntryHeaderLength; ++i) {
    stored = (stored << 8) | static_cast<uint8_t>(entry[i]);
  }
  fuzz::check(entryDigest(v->header, v->payload) == stored, "accepted with another digest");
  if (!v->payload.empty()) {
    std::string flipped(entry);
    flipped[kEntryHeaderLength +
            (entryId < 0 ? 0 : static_cast<size_t>(entryId)) % v->payload.size()] ^= 0x01;
    fuzz::check(!verifyEntry(flipped, ledgerId, entryId).isOk(), "a flipped payload bit passes");
  }
}

void checkResponse(std::string_view frame) {
  auto r = decodeResponse(frame);
  if (!r.isOk()) return;
  fuzz::check(r->op == OpCode::kAddEntry || r->op == OpCode::kReadEntry, "unexpected opcode");
  fuzz::check(r->op != OpCode::kAddEntry || r->body.empty(), "ADD response with a body");
  std::string again = encodeResponse(r->op, r->rc, r->ledgerId, r->entryId, r->body);
  fuzz::check(again.size() >= 4, "encodeResponse without a length");
  auto r2 = decodeResponse(std::string_view(again).substr(4));
  fuzz::check(r2.isOk(), "re-encoded response does not decode");
  fuzz::check(r2->op == r->op && r2->rc == r->rc && r2->ledgerId == r->ledgerId &&
                  r2->entryId == r->entryId && r2->body == r->body,
              "re-encoded response differs");
  if (r->op == OpCode::kReadEntry && r->rc == 0) checkEntry(r->body, r->ledgerId, r->entryId);
  (void)bkResultFromBookieRc(r->rc);
}

void checkRequest(std::string_view frame) {
  auto q = decodeRequest(frame);
  if (!q.isOk()) return;
  if (q->op == OpCode::kAddEntry) checkEntry(q->entry, q->ledgerId, q->entryId);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  if (size == 0) return 0;
  uint8_t flags = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t maxFrame = (flags & 0x10) != 0 ? 64 * 1024 : kMaxFrameSize;
  size_t chunk = (flags & 0x0f) + 1u;

  Split whole = splitWhole(stream, maxFrame);
  Split chunked = splitChunked(stream, maxFrame, chunk);
  fuzz::check(whole.frames == chunked.frames, "chunking changed the frames");
  fuzz::check(whole.error == chunked.error, "chunking changed the error");
  if (!whole.error) fuzz::check(whole.leftover == chunked.leftover, "chunking changed the rest");
  size_t framed = 0;
  for (const auto& f : whole.frames) {
    fuzz::check(!f.empty() && f.size() <= maxFrame, "frame size outside (0, max]");
    framed += 4 + f.size();
    checkResponse(f);
    checkRequest(f);
  }
  if (!whole.error) fuzz::check(framed + whole.leftover == stream.size(), "bytes lost");
  return 0;
}
