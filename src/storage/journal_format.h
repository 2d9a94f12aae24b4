// Journal on-disk format (docs/storage-format.md has it byte by byte): segment files
// "journal-<20-digit id>.log" = a 16-byte header, then records. A record is an 8-byte frame
// (payload length, crc32c over length and payload) plus a payload; the only payload type today is
// ENTRIES: consecutive entries of one ledger. All integers little-endian.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "storage/env.h"

namespace magnetar::storage {

inline constexpr uint32_t kSegmentMagic = 0x4C4A474D;  // "MGJL" on disk
inline constexpr uint32_t kSegmentVersion = 1;
inline constexpr size_t kSegmentHeaderSize = 16;
inline constexpr size_t kRecordFrameSize = 8;     // u32 length, u32 crc
inline constexpr size_t kEntriesHeaderSize = 24;  // type, 3 reserved, ledger, first entry, count
inline constexpr uint32_t kMaxRecordPayload = 64u << 20;
// Record types; written to disk: never renumber.
enum class RecordType : uint8_t { kEntries = 1 };

// Where one ENTRIES record sits: entries [firstEntryId, firstEntryId + count) of a ledger.
// The unit of the index (one per ledger per group commit).
struct JournalRun {
  int64_t ledgerId = -1;
  int64_t firstEntryId = 0;
  int32_t count = 0;
  uint64_t segment = 0;
  uint64_t offset = 0;    // of the record frame in the segment file
  uint32_t length = 0;    // frame + payload bytes
  int64_t dataBytes = 0;  // sum of the entry sizes
};

std::string segmentFileName(uint64_t segment);
// Parses "journal-<id>.log"; false for other names.
bool parseSegmentFileName(const std::string& name, uint64_t* segment);
void encodeSegmentHeader(uint64_t segment, uint8_t out[kSegmentHeaderSize]);

// Appends one ENTRIES record holding n entries (entry i is at(i)) to `out`; returns its byte
// length.
size_t appendEntriesRecord(std::string* out, int64_t ledgerId, int64_t firstEntryId, size_t n,
                           const std::function<const Buffer&(size_t)>& at);

// Checks a record frame at p (avail bytes readable). Returns the record length (frame+payload) if
// the whole record is present and its crc matches, 0 if incomplete or corrupt.
size_t validRecordLength(const uint8_t* p, size_t avail);
// Describes a valid ENTRIES record (REQUIRES validRecordLength(p) > 0). False for unknown types.
bool decodeRunHeader(const uint8_t* p, JournalRun* run);
// Copies the entries of a valid ENTRIES record whose ids are in [fromEntry, toEntry] into out.
void decodeEntries(const uint8_t* p, int64_t fromEntry, int64_t toEntry,
                   std::vector<std::pair<int64_t, Buffer>>* out);

// Scans a segment from `offset` (>= header size) and calls fn(run) for each valid ENTRIES record
// in order. Stops at end of file or at the first incomplete/corrupt record. Returns the offset
// where valid data ends, or an error if the file cannot be read or its header is wrong.
Result<uint64_t> scanSegment(Env* env, const std::string& path, uint64_t segment, uint64_t offset,
                             const std::function<void(const JournalRun&)>& fn);

}  // namespace magnetar::storage
