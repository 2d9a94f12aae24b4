#include "bookkeeper/protocol.h"

#include <openssl/evp.h>

#include <cstring>
#include <iterator>

#include "base/crc32c.h"

namespace magnetar::bookkeeper {
namespace {

void put32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
void put64(uint8_t* p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p + 4, static_cast<uint32_t>(v));
}
uint32_t get32(const char* s) {
  auto* p = reinterpret_cast<const uint8_t*>(s);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint64_t get64(const char* s) { return (uint64_t{get32(s)} << 32) | get32(s + 4); }

// BookieProtocol.PacketHeader.toInt for version >= 1.
uint32_t packetHeader(OpCode op, uint16_t flags) {
  return (uint32_t{kProtocolVersion} << 24) | (uint32_t{static_cast<uint8_t>(op)} << 16) | flags;
}

void putHeader(uint8_t* p, const EntryHeader& h) {
  put64(p, static_cast<uint64_t>(h.ledgerId));
  put64(p + 8, static_cast<uint64_t>(h.entryId));
  put64(p + 16, static_cast<uint64_t>(h.lastAddConfirmed));
  put64(p + 24, static_cast<uint64_t>(h.length));
}

// Every BkResult in enum order: its name (BKException.Code's, as BookKeeper's tools print it) and
// the bookie rc (BookieProtocol.E*) that maps to it.
constexpr int32_t kNoBookieRc = -1;
struct ResultRow {
  BkResult result;
  std::string_view name;
  int32_t bookieRc;
};
constexpr ResultRow kResults[] = {
    {BkResult::kOk, "OK", 0},                                          // EOK
    {BkResult::kNoSuchLedger, "NoSuchLedgerExists", 1},                // ENOLEDGER
    {BkResult::kNoSuchEntry, "NoSuchEntry", 2},                        // ENOENTRY
    {BkResult::kLedgerFenced, "LedgerFenced", 104},                    // EFENCED
    {BkResult::kUnauthorizedAccess, "UnauthorizedAccess", 102},        // EUA
    {BkResult::kBadVersion, "ProtocolVersion", 103},                   // EBADVERSION
    {BkResult::kWriteOnReadOnlyBookie, "WriteOnReadOnlyBookie", 105},  // EREADONLY
    {BkResult::kTooManyRequests, "TooManyRequests", 106},              // ETOOMANYREQUESTS
    {BkResult::kLedgerUnknownState, "DataUnknown", 107},               // EUNKNOWNLEDGERSTATE
    {BkResult::kBookieError, "BookieError", kNoBookieRc},              // EBADREQ, EIO, unknown rcs
    {BkResult::kTimeout, "Timeout", kNoBookieRc},
    {BkResult::kBookieHandleNotAvailable, "BookieHandleNotAvailable", kNoBookieRc},
    {BkResult::kProtocolError, "ProtocolError", kNoBookieRc},
    {BkResult::kDigestMismatch, "DigestMatch", kNoBookieRc},
    {BkResult::kNotEnoughBookies, "NotEnoughBookies", kNoBookieRc},
    {BkResult::kLedgerClosed, "LedgerClosed", kNoBookieRc},
    {BkResult::kMetadataVersion, "MetadataVersion", kNoBookieRc},
    {BkResult::kMetadataError, "ZKException", kNoBookieRc},
    {BkResult::kIllegalOp, "IllegalOp", kNoBookieRc},
    {BkResult::kReadOutOfRange, "ReadOutOfRange", kNoBookieRc},
    {BkResult::kClientClosed, "ClientClosed", kNoBookieRc},
    {BkResult::kDuplicateEntryId, "DuplicateEntryId", kNoBookieRc},
};

constexpr bool rowsInEnumOrder() {
  for (size_t i = 0; i < std::size(kResults); ++i) {
    if (static_cast<size_t>(kResults[i].result) != i) return false;
  }
  return std::size(kResults) == static_cast<size_t>(BkResult::kDuplicateEntryId) + 1;
}
static_assert(rowsInEnumOrder(), "kResults needs one row per BkResult, in enum order");

}  // namespace

std::string_view bkResultName(BkResult r) {
  auto i = static_cast<size_t>(r);
  return i < std::size(kResults) ? kResults[i].name : "Unknown";
}

BkResult bkResultFromBookieRc(int32_t rc) {
  for (const ResultRow& row : kResults) {
    if (row.bookieRc != kNoBookieRc && row.bookieRc == rc) return row.result;
  }
  return BkResult::kBookieError;  // EBADREQ (100), EIO (101), others
}

MasterKey masterKeyFor(std::string_view password) {
  MasterKey key{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int len = 0;
  EVP_DigestInit_ex(ctx, EVP_sha1(), nullptr);
  EVP_DigestUpdate(ctx, "ledger", 6);
  EVP_DigestUpdate(ctx, password.data(), password.size());
  EVP_DigestFinal_ex(ctx, key.data(), &len);
  EVP_MD_CTX_free(ctx);
  return key;
}

uint32_t entryDigest(const EntryHeader& h, std::string_view payload) {
  uint8_t hdr[kEntryMetadataLength];
  putHeader(hdr, h);
  return crc32c(payload.data(), payload.size(), crc32c(hdr, sizeof(hdr)));
}

size_t encodeAddRequest(net::FrameBatch& out, const MasterKey& key, const EntryHeader& h,
                        const Buffer& payload, uint16_t flags) {
  constexpr size_t kHeaders = 4 + kMasterKeyLength + kEntryHeaderLength;
  uint8_t* p = out.appendSpace(4 + kHeaders);
  put32(p, static_cast<uint32_t>(kHeaders + payload.size()));
  put32(p + 4, packetHeader(OpCode::kAddEntry, flags));
  std::memcpy(p + 8, key.data(), kMasterKeyLength);
  uint8_t* meta = p + 8 + kMasterKeyLength;
  putHeader(meta, h);
  uint32_t digest = crc32c(payload.data(), payload.size(), crc32c(meta, kEntryMetadataLength));
  put32(meta + kEntryMetadataLength, digest);
  if (payload.size() <= kAddPayloadCopyMax) {
    out.appendBytes(payload.data(), payload.size());
  } else {
    out.appendBuffer(payload);
  }
  return 4 + kHeaders + payload.size();
}

size_t encodeReadRequest(net::FrameBatch& out, int64_t ledgerId, int64_t entryId, uint16_t flags,
                         const MasterKey* key) {
  bool withKey = (flags & kFlagDoFencing) != 0 && key != nullptr;
  size_t body = 4 + 8 + 8 + (withKey ? kMasterKeyLength : 0);
  uint8_t* p = out.appendSpace(4 + body);
  put32(p, static_cast<uint32_t>(body));
  put32(p + 4, packetHeader(OpCode::kReadEntry, flags));
  put64(p + 8, static_cast<uint64_t>(ledgerId));
  put64(p + 16, static_cast<uint64_t>(entryId));
  if (withKey) std::memcpy(p + 24, key->data(), kMasterKeyLength);
  return 4 + body;
}

Result<Request> decodeRequest(std::string_view f) {
  if (f.size() < 4) return Status::corruption("bookie request shorter than its header");
  uint32_t ph = get32(f.data());
  Request r;
  r.version = static_cast<uint8_t>(ph >> 24);
  r.op = static_cast<OpCode>((ph >> 16) & 0xff);
  r.flags = static_cast<uint16_t>(ph & 0xffff);
  f.remove_prefix(4);
  switch (r.op) {
    case OpCode::kAddEntry: {
      if (f.size() < kMasterKeyLength + kEntryHeaderLength) {
        return Status::corruption("ADD request shorter than key and entry header");
      }
      MasterKey k;
      std::memcpy(k.data(), f.data(), kMasterKeyLength);
      r.masterKey = k;
      r.entry = f.substr(kMasterKeyLength);
      r.ledgerId = static_cast<int64_t>(get64(r.entry.data()));
      r.entryId = static_cast<int64_t>(get64(r.entry.data() + 8));
      return r;
    }
    case OpCode::kReadEntry: {
      if (f.size() < 16) return Status::corruption("READ request shorter than 16 bytes");
      r.ledgerId = static_cast<int64_t>(get64(f.data()));
      r.entryId = static_cast<int64_t>(get64(f.data() + 8));
      if ((r.flags & kFlagDoFencing) != 0) {
        if (f.size() < 16 + kMasterKeyLength) {
          return Status::corruption("fencing READ request without its master key");
        }
        MasterKey k;
        std::memcpy(k.data(), f.data() + 16, kMasterKeyLength);
        r.masterKey = k;
      }
      return r;
    }
    default:
      return Status::corruption("unsupported bookie request op " +
                                std::to_string(static_cast<int>(r.op)));
  }
}

Result<Response> decodeResponse(std::string_view f) {
  if (f.size() < kResponseHeaderLength) {
    return Status::corruption("bookie response of " + std::to_string(f.size()) +
                              " bytes, shorter than its 24-byte header");
  }
  uint32_t ph = get32(f.data());
  Response r;
  r.version = static_cast<uint8_t>(ph >> 24);
  r.op = static_cast<OpCode>((ph >> 16) & 0xff);
  r.rc = static_cast<int32_t>(get32(f.data() + 4));
  r.ledgerId = static_cast<int64_t>(get64(f.data() + 8));
  r.entryId = static_cast<int64_t>(get64(f.data() + 16));
  if (r.version < 1 || r.version > 2) {
    return Status::corruption("bookie response with protocol version " + std::to_string(r.version));
  }
  if (r.op == OpCode::kAddEntry) {
    if (f.size() != kResponseHeaderLength) {
      return Status::corruption("ADD response with trailing bytes");
    }
  } else if (r.op == OpCode::kReadEntry) {
    r.body = f.substr(kResponseHeaderLength);
  } else {
    return Status::corruption("bookie response with unexpected op " +
                              std::to_string(static_cast<int>(r.op)));
  }
  return r;
}

std::string encodeResponse(OpCode op, int32_t rc, int64_t ledgerId, int64_t entryId,
                           std::string_view body) {
  std::string s(4 + kResponseHeaderLength, '\0');
  auto* p = reinterpret_cast<uint8_t*>(s.data());
  put32(p, static_cast<uint32_t>(kResponseHeaderLength + body.size()));
  put32(p + 4, packetHeader(op, 0));
  put32(p + 8, static_cast<uint32_t>(rc));
  put64(p + 12, static_cast<uint64_t>(ledgerId));
  put64(p + 20, static_cast<uint64_t>(entryId));
  s.append(body);
  return s;
}

uint32_t crc32Ieee(const void* data, size_t size, uint32_t crc) {
  static const auto kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

Result<VerifiedEntry> verifyEntry(std::string_view e, int64_t ledgerId, int64_t expectedEntryId,
                                  EntryDigest digest) {
  size_t digestLength = digest == EntryDigest::kCrc32c  ? kCrc32cDigestLength
                        : digest == EntryDigest::kCrc32 ? 8
                                                        : 0;
  size_t headerLength = kEntryMetadataLength + digestLength;
  if (e.size() < headerLength) {
    return Status::corruption("DigestMatch: entry of " + std::to_string(e.size()) +
                              " bytes, shorter than its " + std::to_string(headerLength) +
                              "-byte header");
  }
  VerifiedEntry v;
  v.header.ledgerId = static_cast<int64_t>(get64(e.data()));
  v.header.entryId = static_cast<int64_t>(get64(e.data() + 8));
  v.header.lastAddConfirmed = static_cast<int64_t>(get64(e.data() + 16));
  v.header.length = static_cast<int64_t>(get64(e.data() + 24));
  v.payload = e.substr(headerLength);
  if (digest == EntryDigest::kCrc32c) {
    uint32_t want =
        crc32c(v.payload.data(), v.payload.size(), crc32c(e.data(), kEntryMetadataLength));
    if (get32(e.data() + kEntryMetadataLength) != want) {
      return Status::corruption("DigestMatch: CRC32C mismatch in entry " +
                                std::to_string(v.header.entryId));
    }
  } else if (digest == EntryDigest::kCrc32) {
    uint64_t want =
        crc32Ieee(v.payload.data(), v.payload.size(), crc32Ieee(e.data(), kEntryMetadataLength));
    if (get64(e.data() + kEntryMetadataLength) != want) {
      return Status::corruption("DigestMatch: CRC32 mismatch in entry " +
                                std::to_string(v.header.entryId));
    }
  }
  if (v.header.ledgerId != ledgerId) {
    return Status::corruption("DigestMatch: entry of ledger " + std::to_string(v.header.ledgerId) +
                              ", expected " + std::to_string(ledgerId));
  }
  if (expectedEntryId >= 0 && v.header.entryId != expectedEntryId) {
    return Status::corruption("DigestMatch: entry " + std::to_string(v.header.entryId) +
                              ", expected " + std::to_string(expectedEntryId));
  }
  return v;
}

std::string packEntry(const EntryHeader& h, std::string_view payload) {
  std::string s(kEntryHeaderLength, '\0');
  auto* p = reinterpret_cast<uint8_t*>(s.data());
  putHeader(p, h);
  put32(p + kEntryMetadataLength, entryDigest(h, payload));
  s.append(payload);
  return s;
}

std::optional<std::string_view> FrameReader::next() {
  if (!error_.isOk() || buf_.size() - pos_ < 4) return std::nullopt;
  uint32_t len = get32(buf_.data() + pos_);
  if (len == 0 || len > maxFrame_) {
    error_ = Status::corruption("bookie frame length " + std::to_string(len) + " outside 1.." +
                                std::to_string(maxFrame_));
    return std::nullopt;
  }
  if (buf_.size() - pos_ - 4 < len) return std::nullopt;
  std::string_view f(buf_.data() + pos_ + 4, len);
  pos_ += 4 + len;
  return f;
}

void FrameReader::compact() {
  if (pos_ == 0) return;
  buf_.erase(0, pos_);
  pos_ = 0;
}

}  // namespace magnetar::bookkeeper
