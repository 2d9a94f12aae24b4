// fuzz_mqtt_codec: bytes an MQTT client sends -> the MQTT codec (src/mqtt/codec.h) that every
// MQTT connection runs on its input.
//
// Input: [flags][stream]. flags bits 0-3: chunk size - 1 for the chunked pass (1..16 bytes);
// bit 4: a maximum packet size of 256 bytes instead of 1 MiB (packet-too-large paths); bit 5:
// the stream is read as MQTT 5 from its first byte (a CONNECT 5.0 is prepended).
// Invariants beyond "no crash":
// - PacketReader fed the stream whole and fed it in chunks gives the same packets, the same
//   error and the same bytes left over; the error is sticky;
// - every decoded packet, encoded again in the reader's version, decodes to an equal packet;
// - an error maps to one of the reason codes the broker sends for it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "mqtt/codec.h"

using namespace magnetar;
using namespace magnetar::mqtt;

namespace {

struct Split {
  std::vector<std::string> packets;  // re-encoded, to compare
  Status error;
  size_t leftover = 0;
};

void take(PacketReader& r, Split& s) {
  while (true) {
    auto p = r.next();
    if (!p.isOk()) {
      s.error = p.status();
      auto again = r.next();
      fuzz::check(!again.isOk() && again.status().message() == s.error.message(),
                  "PacketReader error is not sticky");
      return;
    }
    if (!p->has_value()) return;
    const Packet& packet = **p;
    std::string bytes;
    encodePacket(packet, r.version(), &bytes);
    auto h = parseFixedHeader(bytes, SIZE_MAX);
    fuzz::check(h.isOk() && h->has_value(), "re-encoded packet has no valid header");
    const FixedHeader fh = **h;
    fuzz::check(fh.packetSize() == bytes.size(), "re-encoded packet size differs");
    auto back = decodePacket(fh, std::string_view(bytes).substr(fh.headerLength), r.version());
    fuzz::check(back.isOk(), "re-encoded packet does not decode: " +
                                 (back.isOk() ? std::string() : back.status().message()));
    fuzz::check(*back == packet, "re-encoded packet decodes to another packet");
    s.packets.push_back(std::move(bytes));
  }
}

Split run(std::string_view stream, size_t maxPacket, size_t chunk) {
  Split s;
  PacketReader r(maxPacket);
  for (size_t pos = 0; pos < stream.size() && s.error.isOk(); pos += chunk) {
    size_t n = std::min(chunk, stream.size() - pos);
    r.append(reinterpret_cast<const uint8_t*>(stream.data() + pos), n);
    take(r, s);
  }
  s.leftover = s.error.isOk() ? r.buffered() : 0;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string stream(reinterpret_cast<const char*>(data + 1), size - 1);
  if (flags & 0x20) {
    Connect c;
    c.version = ProtocolVersion::kV5;
    c.clientId = "fuzz";
    std::string head;
    encodePacket(c, ProtocolVersion::kV5, &head);
    stream = head + stream;
  }
  const size_t maxPacket = (flags & 0x10) ? 256 : (1u << 20);
  Split whole = run(stream, maxPacket, stream.size() ? stream.size() : 1);
  Split chunked = run(stream, maxPacket, (flags & 0x0F) + 1);
  fuzz::check(whole.packets == chunked.packets, "chunking changed the packets");
  fuzz::check(whole.error.message() == chunked.error.message(), "chunking changed the error");
  fuzz::check(whole.leftover == chunked.leftover, "chunking changed the leftover bytes");
  if (!whole.error.isOk()) {
    const uint8_t rc = reasonCodeOf(whole.error);
    fuzz::check(rc == reason::kMalformedPacket || rc == reason::kProtocolError ||
                    rc == reason::kPacketTooLarge || rc == reason::kUnsupportedProtocolVersion,
                "decode error without its reason code: " + whole.error.message());
  }
  return 0;
}
