// Ledger metadata: BookKeeper's LedgerMetadata, its ZooKeeper encoding (LedgerMetadataSerDe
// format version 3: the line "BookieMetadataFormatVersion\t3\n", then LedgerMetadataFormat as a
// varint-length-delimited protobuf) and where it lives (the hierarchical ledger manager's paths).
// Pure functions, thread-safe. docs/bookkeeper-client.md shows the bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "bookkeeper/protocol.h"

namespace magnetar::bookkeeper {

// LedgerMetadataFormat.State. Never renumber: stored.
enum class LedgerState : int { kOpen = 1, kInRecovery = 2, kClosed = 3 };
// LedgerMetadata.State names as BookKeeper prints them: OPEN, IN_RECOVERY, CLOSED.
std::string_view ledgerStateName(LedgerState s);
// LedgerMetadataFormat.DigestType. Never renumber: stored.
enum class DigestType : int { kCrc32 = 1, kHmac = 2, kCrc32c = 3, kDummy = 4 };
// How entries of a ledger with this digest type are checked (kDummy for DUMMY; MAC is not
// supported and reads as CRC32C, so its entries fail the check).
inline EntryDigest entryDigestOf(DigestType d) {
  return d == DigestType::kCrc32   ? EntryDigest::kCrc32
         : d == DigestType::kDummy ? EntryDigest::kDummy
                                   : EntryDigest::kCrc32c;
}

struct LedgerMetadata {
  int32_t ensembleSize = 0;
  int32_t writeQuorumSize = 0;
  int32_t ackQuorumSize = 0;
  int64_t length = 0;        // bytes of payload in the ledger (CLOSED), else 0
  int64_t lastEntryId = -1;  // last entry (CLOSED), else -1
  LedgerState state = LedgerState::kOpen;
  // Segments: first entry id -> the ensemble that stores entries from it on.
  std::map<int64_t, std::vector<BookieId>> ensembles;
  DigestType digestType = DigestType::kCrc32c;
  std::string password;  // Pulsar's: empty
  int64_t ctimeMs = 0;   // creation time; stored when > 0 (storeSystemtimeAsLedgerCreationTime)
  std::map<std::string, std::string> customMetadata;
  int64_t cToken = 0;

  // The ensemble that stores entryId (the last segment whose first entry <= entryId).
  const std::vector<BookieId>& ensembleFor(int64_t entryId) const;
  bool operator==(const LedgerMetadata&) const = default;
};

// LedgerMetadataSerDe.serialize for format version 3.
std::string serializeLedgerMetadata(const LedgerMetadata& md);
// LedgerMetadataSerDe.parseConfig for format version 3 (versions 1 and 2, text formats older
// clusters wrote, are kUnsupported). kCorruption for a bad header or protobuf.
Result<LedgerMetadata> parseLedgerMetadata(std::string_view bytes);

// The ledger's znode under `root` (e.g. "/ledgers") as HierarchicalLedgerManager places it
// (StringUtils.getHybridHierarchicalLedgerPath): ids below 2^31-1 as "%010d" split 2-4-4
// ("/ledgers/00/0000/L0001"), larger ids as "%019d" split 3-4-4-4-4.
std::string ledgerPath(std::string_view root, int64_t ledgerId);

// The ledger manager layout znode ("<root>/LAYOUT"): "2\n<factory class>:<version>\n" as
// LedgerManagerLayout writes it. Returns the factory class; kUnsupported unless it is the
// hierarchical (default) or long-hierarchical factory, whose paths ledgerPath() writes.
Result<std::string> parseLayout(std::string_view bytes);

// LedgerMetadata.toString() of BookKeeper 4.17, as `bookkeeper shell ledgermetadata` prints it:
// "LedgerMetadata{formatVersion=3, ensembleSize=3, ..., ensembles={0=[h:p, ...]},
// customMetadata={k=base64:...}}".
std::string ledgerMetadataToString(const LedgerMetadata& md);

}  // namespace magnetar::bookkeeper
