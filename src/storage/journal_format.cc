#include "storage/journal_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/crc32c.h"

namespace magnetar::storage {

namespace {
void put32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
void put64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
void set32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
}  // namespace

std::string segmentFileName(uint64_t segment) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "journal-%020llu.log", static_cast<unsigned long long>(segment));
  return buf;
}

bool parseSegmentFileName(const std::string& name, uint64_t* segment) {
  if (name.size() != 32 || name.compare(0, 8, "journal-") != 0 ||
      name.compare(28, 4, ".log") != 0) {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 8; i < 28; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *segment = v;
  return true;
}

void encodeSegmentHeader(uint64_t segment, uint8_t out[kSegmentHeaderSize]) {
  set32(out, kSegmentMagic);
  set32(out + 4, kSegmentVersion);
  for (int i = 0; i < 8; i++) out[8 + i] = static_cast<uint8_t>(segment >> (8 * i));
}

size_t appendEntriesRecord(std::string* out, int64_t ledgerId, int64_t firstEntryId, size_t n,
                           const std::function<const Buffer&(size_t)>& at) {
  size_t start = out->size();
  out->append(kRecordFrameSize, '\0');  // filled below
  out->push_back(static_cast<char>(RecordType::kEntries));
  out->append(3, '\0');
  put64(out, static_cast<uint64_t>(ledgerId));
  put64(out, static_cast<uint64_t>(firstEntryId));
  put32(out, static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; i++) {
    const Buffer& b = at(i);
    put32(out, static_cast<uint32_t>(b.size()));
    out->append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  auto* frame = reinterpret_cast<uint8_t*>(out->data() + start);
  uint32_t payloadLen = static_cast<uint32_t>(out->size() - start - kRecordFrameSize);
  set32(frame, payloadLen);
  uint32_t crc = crc32c(frame, 4);
  crc = crc32c(frame + kRecordFrameSize, payloadLen, crc);
  set32(frame + 4, crc);
  return out->size() - start;
}

size_t validRecordLength(const uint8_t* p, size_t avail) {
  if (avail < kRecordFrameSize) return 0;
  uint32_t len = get32(p);
  if (len < 1 || len > kMaxRecordPayload || avail - kRecordFrameSize < len) return 0;
  uint32_t crc = crc32c(p, 4);
  crc = crc32c(p + kRecordFrameSize, len, crc);
  if (crc != get32(p + 4)) return 0;
  return kRecordFrameSize + len;
}

bool decodeRunHeader(const uint8_t* p, JournalRun* run) {
  uint32_t len = get32(p);
  const uint8_t* q = p + kRecordFrameSize;
  if (len < kEntriesHeaderSize || q[0] != static_cast<uint8_t>(RecordType::kEntries)) return false;
  run->ledgerId = static_cast<int64_t>(get64(q + 4));
  run->firstEntryId = static_cast<int64_t>(get64(q + 12));
  run->count = static_cast<int32_t>(get32(q + 20));
  run->length = kRecordFrameSize + len;
  // Entry sizes must add up exactly to the payload; a mismatch is a bug or corruption.
  size_t off = kEntriesHeaderSize;
  int64_t bytes = 0;
  for (int32_t i = 0; i < run->count; i++) {
    if (off + 4 > len) return false;
    uint32_t sz = get32(q + off);
    off += 4;
    if (sz > len - off) return false;
    off += sz;
    bytes += sz;
  }
  run->dataBytes = bytes;
  return off == len;
}

void decodeEntries(const uint8_t* p, int64_t fromEntry, int64_t toEntry,
                   std::vector<std::pair<int64_t, Buffer>>* out) {
  const uint8_t* q = p + kRecordFrameSize;
  int64_t first = static_cast<int64_t>(get64(q + 12));
  uint32_t count = get32(q + 20);
  size_t off = kEntriesHeaderSize;
  for (uint32_t i = 0; i < count; i++) {
    uint32_t sz = get32(q + off);
    off += 4;
    int64_t id = first + i;
    if (id > toEntry) break;
    if (id >= fromEntry) out->emplace_back(id, Buffer::copyOf(q + off, sz));
    off += sz;
  }
}

Result<uint64_t> scanSegment(Env* env, const std::string& path, uint64_t segment, uint64_t offset,
                             const std::function<void(const JournalRun&)>& fn) {
  auto file = env->openReadable(path);
  if (!file) return file.status();
  auto size = env->fileSize(path);
  if (!size) return size.status();
  uint8_t hdr[kSegmentHeaderSize];
  auto n = (*file)->readAt(0, hdr, sizeof(hdr));
  if (!n) return n.status();
  uint8_t want[kSegmentHeaderSize];
  encodeSegmentHeader(segment, want);
  if (*n < kSegmentHeaderSize || std::memcmp(hdr, want, sizeof(hdr)) != 0) {
    return Status::corruption("bad segment header in " + path);
  }
  offset = std::max<uint64_t>(offset, kSegmentHeaderSize);
  std::vector<uint8_t> buf(8 << 20);
  while (offset < *size) {
    auto got = (*file)->readAt(offset, buf.data(), buf.size());
    if (!got) return got.status();
    size_t pos = 0;
    while (pos < *got) {
      size_t len = validRecordLength(buf.data() + pos, *got - pos);
      if (len == 0) break;
      JournalRun run;
      if (decodeRunHeader(buf.data() + pos, &run)) {
        run.segment = segment;
        run.offset = offset + pos;
        fn(run);
      }
      pos += len;
    }
    if (pos == 0) {
      // Nothing valid at `offset`: either a record larger than the buffer or the end of the data.
      if (*got >= kRecordFrameSize) {
        uint32_t len = get32(buf.data());
        if (len <= kMaxRecordPayload && len + kRecordFrameSize > buf.size() &&
            offset + kRecordFrameSize + len <= *size) {
          buf.resize(kRecordFrameSize + len);
          continue;
        }
      }
      return offset;
    }
    offset += pos;
    if (pos < *got && *got < buf.size()) return offset;  // a bad record before the end
  }
  return offset;
}

}  // namespace magnetar::storage
