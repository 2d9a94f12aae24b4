// Storage's records in the MetadataStore: keys and binary values (little-endian, each value starts
// with a version byte; docs/storage-format.md has the layouts).
//   /ml/<name>                         managed ledger: its ledgers (id, closed-at count, created,
//                                      closed time)
//   /ml-cursors/<name>/<cursor>        cursor: mark-delete, acked ranges, batch ack sets, props
//   /ml-index/<ledger %016x>/<first entry %016x>   one journal run (segment, offset, length, ...)
//   /ml-meta/next-ledger-id            u64: ledger ids below it were handed out
//   /ml-meta/checkpoint                journal position where recovery starts replaying
// <name> and <cursor> are escaped with escapePathComponent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/journal_format.h"
#include "storage/managed_ledger.h"

namespace magnetar::storage {

inline constexpr char kMlPrefix[] = "/ml/";
inline constexpr char kCursorPrefix[] = "/ml-cursors/";
inline constexpr char kIndexPrefix[] = "/ml-index/";
inline constexpr char kTerminatedPrefix[] = "/ml-terminated/";
inline constexpr char kNextLedgerIdKey[] = "/ml-meta/next-ledger-id";
inline constexpr char kCheckpointKey[] = "/ml-meta/checkpoint";

struct LedgerMeta {
  int64_t ledgerId = -1;
  int64_t closedAt = -1;  // entry count when closed; -1 while open
  int64_t createdMs = 0;
  int64_t closedMs = 0;  // wall clock when closed (retention counts from it); 0 while open
};

struct CursorMeta {
  Position markDelete;
  std::vector<std::pair<Position, Position>> ranges;  // acked [first, last], ordered
  std::vector<std::pair<Position, AckSet>> batchDeleted;  // partly acked batch entries, ordered
  CursorProperties properties;                             // of the last mark-delete with some
};

std::string mlKey(const std::string& name);
std::string cursorPrefix(const std::string& name);  // "/ml-cursors/<name>/"
std::string cursorKey(const std::string& name, const std::string& cursor);
std::string indexLedgerPrefix(int64_t ledgerId);  // "/ml-index/<ledger>/"
std::string indexKey(int64_t ledgerId, int64_t firstEntryId);
std::string terminatedKey(const std::string& name);  // "/ml-terminated/<name>"
// A terminated managed ledger's position: version 1, i64 ledger id, i64 entry id.
std::string encodeTerminated(Position p);
std::optional<Position> decodeTerminated(const std::string& v);

// Writes version 2; reads versions 1 (no close time: a closed ledger's is its creation time)
// and 2.
std::string encodeLedgerList(const std::vector<LedgerMeta>& ledgers);
std::optional<std::vector<LedgerMeta>> decodeLedgerList(const std::string& v);
// Writes version 2; reads versions 1 (no ack sets, no properties) and 2.
std::string encodeCursor(const CursorMeta& c);
std::optional<CursorMeta> decodeCursor(const std::string& v);
// Index value: the run without its ledger and first entry (those are in the key).
std::string encodeRun(const JournalRun& r);
std::optional<JournalRun> decodeRun(const std::string& key, const std::string& v);
std::string encodeU64(uint64_t v);
std::optional<uint64_t> decodeU64(const std::string& v);
std::string encodeCheckpoint(uint64_t segment, uint64_t offset);
std::optional<std::pair<uint64_t, uint64_t>> decodeCheckpoint(const std::string& v);

}  // namespace magnetar::storage
