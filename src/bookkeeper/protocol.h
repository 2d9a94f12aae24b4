// BookKeeper wire protocol v2 (the "pre-v3" protocol, Pulsar's bookkeeperUseV2WireProtocol=true):
// a pure codec, no I/O. Byte layouts are those of apache/bookkeeper 4.17 BookieProtocol,
// BookieProtoEncoding (RequestEnDeCoderPreV3, ResponseEnDeCoderPreV3) and DigestManager
// (computeDigestAndPackageForSendingV2, verifyDigest); docs/bookkeeper-client.md draws them.
// All integers big-endian. Thread: every function is pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/buffer.h"
#include "base/status.h"
#include "net/frame_batch.h"

namespace magnetar::bookkeeper {

// A bookie's id as registered under /ledgers/available: "host:port" (BookieId).
using BookieId = std::string;

// BookieProtocol.CURRENT_PROTOCOL_VERSION.
inline constexpr uint8_t kProtocolVersion = 2;
// Operation codes (BookieProtocol). Never renumber: wire values.
enum class OpCode : uint8_t {
  kAddEntry = 1,
  kReadEntry = 2,
  kAuth = 3,
  kReadLac = 4,  // v3 only: a v2 bookie rejects it; v2 reads the LAC with READ of entry -1
  kWriteLac = 5,
  kGetBookieInfo = 6,
  kBatchReadEntry = 7,
};
// Request flags (BookieProtocol.FLAG_*).
inline constexpr uint16_t kFlagNone = 0x0;
inline constexpr uint16_t kFlagDoFencing = 0x1;
inline constexpr uint16_t kFlagRecoveryAdd = 0x2;
inline constexpr uint16_t kFlagHighPriority = 0x4;
// BookieProtocol.LAST_ADD_CONFIRMED: as a READ's entry id, "the last entry this bookie has"
// (its piggybacked LAC is the bookie's view of the ledger's LAC); also "no entry" as a LAC.
inline constexpr int64_t kLastAddConfirmed = -1;
inline constexpr int64_t kInvalidEntryId = -1;
inline constexpr size_t kMasterKeyLength = 20;  // BookieProtocol.MASTER_KEY_LENGTH (SHA-1)
// DigestManager.METADATA_LENGTH: ledgerId, entryId, lastAddConfirmed, length (4 x int64).
inline constexpr size_t kEntryMetadataLength = 32;
inline constexpr size_t kCrc32cDigestLength = 4;  // CRC32CDigestManager.getMacCodeLength()
inline constexpr size_t kEntryHeaderLength = kEntryMetadataLength + kCrc32cDigestLength;
// Response header after the length: packet header, rc, ledgerId, entryId
// (ResponseEnDeCoderPreV3.RESPONSE_HEADERS_SIZE).
inline constexpr size_t kResponseHeaderLength = 24;
// Largest frame either side takes: nettyMaxFrameSizeBytes as Pulsar's conf/bookkeeper.conf sets
// it (5 MiB + 10 KiB; BookKeeper's own default is 5 MiB). A larger length prefix from a bookie is
// a protocol error that closes the connection; a bookie closes the connection on a larger ADD.
inline constexpr size_t kMaxFrameSize = 5 * 1024 * 1024 + 10 * 1024;
// An ADD frame's bytes besides the payload, as the bookie's frame decoder counts them: length
// prefix 4, header 4, master key 20, entry metadata 32, CRC32C digest 4.
inline constexpr size_t kAddFrameOverhead = 64;
// Largest entry payload an ADD can carry.
inline constexpr size_t kMaxEntryPayload = kMaxFrameSize - kAddFrameOverhead;

// Named results: BookKeeper's BKException codes that the v2 client can produce. Never renumber:
// values appear in logs.
enum class BkResult : int {
  kOk = 0,
  kNoSuchLedger,           // bookie ENOLEDGER / metadata znode missing (NoSuchLedgerExists)
  kNoSuchEntry,            // bookie ENOENTRY (NoSuchEntry)
  kLedgerFenced,           // bookie EFENCED (LedgerFenced)
  kUnauthorizedAccess,     // bookie EUA (master key mismatch)
  kBadVersion,             // bookie EBADVERSION (ProtocolVersion)
  kWriteOnReadOnlyBookie,  // bookie EREADONLY
  kTooManyRequests,        // bookie ETOOMANYREQUESTS
  kLedgerUnknownState,     // bookie EUNKNOWNLEDGERSTATE (DataUnknown)
  kBookieError,            // bookie EIO / EBADREQ / an unknown rc (WriteException / ReadException)
  kTimeout,                // no answer within the request timeout (Timeout)
  kBookieHandleNotAvailable,  // cannot connect, or the connection closed with the request open
  kProtocolError,             // the bookie sent bytes that are not a valid v2 frame
  kDigestMismatch,            // the entry's CRC32C or ids do not match (DigestMatchException)
  kNotEnoughBookies,          // fewer writable bookies than the ensemble size
  kLedgerClosed,              // add to a closed ledger (LedgerClosed)
  kMetadataVersion,           // metadata CAS lost (MetadataVersion)
  kMetadataError,             // ZooKeeper failed (ZKException)
  kIllegalOp,                 // bad arguments (IllegalOp), e.g. Qa > Qw > E
  kReadOutOfRange,            // read past the ledger's last entry (ReadException family)
  kClientClosed,              // the client is closed (ClientClosed)
  kDuplicateEntryId,          // an add completed twice
  // A new result goes last, with its row in protocol.cc's kResults.
};
std::string_view bkResultName(BkResult r);
// Bookie rc (BookieProtocol.E*) -> named result.
BkResult bkResultFromBookieRc(int32_t rc);

using MasterKey = std::array<uint8_t, kMasterKeyLength>;
// MacDigestManager.genDigest("ledger", password): SHA-1 of "ledger" || password (OpenSSL).
// Pulsar's password is empty: DigestManager.generateMasterKey(empty) = SHA-1("ledger").
MasterKey masterKeyFor(std::string_view password);

// The entry metadata every stored entry starts with (DigestManager.METADATA_LENGTH).
struct EntryHeader {
  int64_t ledgerId = 0;
  int64_t entryId = 0;
  int64_t lastAddConfirmed = kLastAddConfirmed;  // the writer's LAC when it sent the entry
  int64_t length = 0;  // the ledger's length in bytes including this entry's payload
};

// Running CRC32C (Crc32cIntChecksum.resumeChecksum from 0) over the 32 header bytes then the
// payload: CRC32CDigestManager's digest, stored as a big-endian int32.
uint32_t entryDigest(const EntryHeader& h, std::string_view payload);

// Payloads up to this size are copied into the frame's bytes (one contiguous segment with the
// headers: fewer iovecs per writev for small entries); larger ones are shared Buffers. Magnetar's.
inline constexpr size_t kAddPayloadCopyMax = 512;

// ADD: appends [length][packet header][master key][entry header 32][digest 4] as bytes and the
// payload, copied when at most kAddPayloadCopyMax bytes, else as a shared Buffer segment (no
// copy), i.e. computeDigestAndPackageForSendingV2. flags: kFlagNone or kFlagRecoveryAdd. Returns
// the bytes appended (frame including its length prefix).
size_t encodeAddRequest(net::FrameBatch& out, const MasterKey& key, const EntryHeader& h,
                        const Buffer& payload, uint16_t flags);
// READ of one entry (entryId may be kLastAddConfirmed). The master key is sent only with
// kFlagDoFencing (RequestEnDeCoderPreV3 reads it only then).
size_t encodeReadRequest(net::FrameBatch& out, int64_t ledgerId, int64_t entryId, uint16_t flags,
                         const MasterKey* key);

// A decoded request (the bookie's side; for fake bookies in tests and fuzzing).
struct Request {
  uint8_t version = 0;
  OpCode op = OpCode::kAddEntry;
  uint16_t flags = 0;
  int64_t ledgerId = 0;
  int64_t entryId = 0;
  std::optional<MasterKey> masterKey;
  std::string_view entry;  // ADD: the stored entry (header, digest, payload) in the frame
};
// `frame` is one frame without its 4-byte length. kCorruption for short or unknown frames.
Result<Request> decodeRequest(std::string_view frame);

// A decoded response frame. body points into the frame (READ: the stored entry; else empty).
struct Response {
  uint8_t version = 0;
  OpCode op = OpCode::kAddEntry;
  int32_t rc = 0;
  int64_t ledgerId = 0;
  int64_t entryId = 0;
  std::string_view body;
};
// `frame` is one frame without its 4-byte length. kCorruption for a short frame, a version other
// than 2 or 3... (pre-v3 uses 2), an opcode other than ADD or READ, or an ADD with trailing bytes.
Result<Response> decodeResponse(std::string_view frame);
// A bookie's reply (fake bookies): [length][header][rc][ledgerId][entryId][body].
std::string encodeResponse(OpCode op, int32_t rc, int64_t ledgerId, int64_t entryId,
                           std::string_view body = {});

// A stored entry checked against its digest (DigestManager.verifyDigest). payload points into
// the input.
struct VerifiedEntry {
  EntryHeader header;
  std::string_view payload;
};
// How a ledger's entries are checked (its metadata's digestType): CRC32C (4 bytes, what Magnetar
// writes), CRC32 (CRC32DigestManager: java.util.zip.CRC32 stored as a big-endian int64, 8 bytes;
// what Pulsar's compactor writes, Compactor.COMPACTED_TOPIC_LEDGER_DIGEST_TYPE) or DUMMY (none).
enum class EntryDigest { kCrc32c, kCrc32, kDummy };
// kDigestMismatch (as kCorruption with the name in the message) when the entry is shorter than
// its 32-byte header and digest, its digest differs, its ledger id is not `ledgerId`, or
// (expectedEntryId >= 0) its entry id differs.
Result<VerifiedEntry> verifyEntry(std::string_view entry, int64_t ledgerId, int64_t expectedEntryId,
                                  EntryDigest digest = EntryDigest::kCrc32c);
// java.util.zip.CRC32 (IEEE 802.3, reflected) of data, continuing from crc (0 to start).
uint32_t crc32Ieee(const void* data, size_t size, uint32_t crc = 0);
// The stored entry bytes an ADD carries: header, digest, payload (for fake bookies and tests).
std::string packEntry(const EntryHeader& h, std::string_view payload);

// Splits a byte stream into frames (4-byte big-endian length prefix). Thread: one owner.
class FrameReader {
 public:
  explicit FrameReader(size_t maxFrame = kMaxFrameSize) : maxFrame_(maxFrame) {}
  void append(const uint8_t* data, size_t len) {
    buf_.append(reinterpret_cast<const char*>(data), len);
  }
  // The next complete frame (without its length) or nullopt when more bytes are needed. Sets
  // error() and returns nullopt for a length of 0 or above the maximum.
  std::optional<std::string_view> next();
  // Drops the frames returned so far (call after processing them; views become invalid).
  void compact();
  const Status& error() const { return error_; }
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  size_t maxFrame_;
  std::string buf_;
  size_t pos_ = 0;
  Status error_;
};

}  // namespace magnetar::bookkeeper
