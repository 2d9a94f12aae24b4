#include "broker/topic/entry_metadata.h"

#include "protocol/frame.h"

namespace magnetar::broker {

namespace {

bool readVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

}  // namespace

Status peekMetadata(std::string_view md, EntryMetadataPeek* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(md.data());
  const auto* end = p + md.size();
  bool hasLeast = false;
  bool hasMost = false;
  while (p < end) {
    uint64_t tag;
    if (!readVarint(p, end, &tag)) return Status::corruption("bad metadata tag");
    uint32_t field = static_cast<uint32_t>(tag >> 3);
    uint32_t wt = static_cast<uint32_t>(tag & 7);
    uint64_t v = 0;
    std::string_view bytes;
    switch (wt) {
      case 0:
        if (!readVarint(p, end, &v)) return Status::corruption("bad metadata varint");
        break;
      case 1:
        if (end - p < 8) return Status::corruption("truncated metadata");
        p += 8;
        break;
      case 5:
        if (end - p < 4) return Status::corruption("truncated metadata");
        p += 4;
        break;
      case 2: {
        uint64_t len;
        if (!readVarint(p, end, &len) || len > static_cast<uint64_t>(end - p)) {
          return Status::corruption("bad metadata length");
        }
        bytes = std::string_view(reinterpret_cast<const char*>(p), len);
        p += len;
        break;
      }
      default:
        return Status::corruption("bad metadata wire type");
    }
    switch (field) {
      case 1: out->producerName = bytes; break;
      case 2: out->sequenceId = v; break;
      case 3: out->publishTime = v; break;
      case 6:
        out->partitionKey = bytes;
        out->hasPartitionKey = true;
        break;
      case 11: out->numMessagesInBatch = static_cast<int32_t>(v); break;
      case 17: out->partitionKeyB64 = v != 0; break;
      case 18:
        out->orderingKey = bytes;
        out->hasOrderingKey = true;
        break;
      case 19:
        out->deliverAtTime = static_cast<int64_t>(v);
        out->hasDeliverAtTime = true;
        break;
      case 20:
        out->markerType = static_cast<int32_t>(v);
        out->hasMarkerType = true;
        break;
      case 22:
        out->txnidLeastBits = v;
        hasLeast = true;
        break;
      case 23:
        out->txnidMostBits = v;
        hasMost = true;
        break;
      case 24:
        out->highestSequenceId = v;
        out->hasHighestSequenceId = true;
        break;
      default: break;
    }
  }
  out->hasTxnid = hasLeast && hasMost;
  return Status::ok();
}

Status peekEntryMetadata(std::string_view entry, EntryMetadataPeek* out) {
  auto layout = protocol::parseEntryLayout(entry);
  if (!layout.isOk()) return layout.status();
  return peekMetadata(entry.substr(layout->metadataOffset, layout->metadataSize), out);
}

}  // namespace magnetar::broker
