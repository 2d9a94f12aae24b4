// The v2 codec against byte layouts written out by hand from BookKeeper's BookieProtoEncoding and
// DigestManager, with golden values computed independently (a bitwise CRC-32C in Python and
// `sha1sum`), not by the code under test.
#include "bookkeeper/protocol.h"

#include <gtest/gtest.h>

#include <random>

#include "net/tests/frame_bytes.h"

namespace magnetar::bookkeeper {
namespace {

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

TEST(BkProtocol, EmptyPasswordMasterKeyIsSha1OfLedger) {
  MasterKey k = masterKeyFor("");
  EXPECT_EQ(hex(std::string_view(reinterpret_cast<const char*>(k.data()), k.size())),
            "850bf1071c5e3d8c24235676f8816ae0cbe2f14f");  // sha1("ledger")
  EXPECT_NE(masterKeyFor("secret"), k);
}

TEST(BkProtocol, DigestIsRunningCrc32cOverHeaderAndPayload) {
  EntryHeader h{7, 3, 2, 15};
  EXPECT_EQ(entryDigest(h, "hello"), 0x7d33938fu);
}

TEST(BkProtocol, AddRequestLayout) {
  net::FrameBatch b;
  Buffer payload = Buffer::copyOf("hello");
  size_t n =
      encodeAddRequest(b, masterKeyFor(""), EntryHeader{7, 3, 2, 15}, payload, kFlagRecoveryAdd);
  std::string f = flatten(b);
  ASSERT_EQ(n, f.size());
  // length = 4 (header) + 20 (key) + 32 (metadata) + 4 (digest) + 5 (payload) = 65
  EXPECT_EQ(hex(f.substr(0, 8)),
            "00000041"
            "02010002");  // version 2, ADD, FLAG_RECOVERY_ADD
  EXPECT_EQ(hex(f.substr(8, 20)), "850bf1071c5e3d8c24235676f8816ae0cbe2f14f");
  EXPECT_EQ(hex(f.substr(28, 32)),
            "0000000000000007"
            "0000000000000003"
            "0000000000000002"
            "000000000000000f");
  EXPECT_EQ(hex(f.substr(60, 4)), "7d33938f");
  EXPECT_EQ(f.substr(64), "hello");
  // A small payload is copied next to the headers: one segment.
  EXPECT_EQ(b.segmentCount(), 1u);

  auto req = decodeRequest(std::string_view(f).substr(4));
  ASSERT_TRUE(req.isOk()) << req.status().toString();
  EXPECT_EQ(req->op, OpCode::kAddEntry);
  EXPECT_EQ(req->flags, kFlagRecoveryAdd);
  EXPECT_EQ(req->ledgerId, 7);
  EXPECT_EQ(req->entryId, 3);
  auto v = verifyEntry(req->entry, 7, 3);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v->payload, "hello");
  EXPECT_EQ(v->header.lastAddConfirmed, 2);
  EXPECT_EQ(v->header.length, 15);
}

TEST(BkProtocol, AddRequestSharesPayloadsOverTheCopyLimit) {
  for (size_t size : {kAddPayloadCopyMax, kAddPayloadCopyMax + 1}) {
    net::FrameBatch b;
    Buffer payload = Buffer::copyOf(std::string(size, 'p'));
    size_t n = encodeAddRequest(b, masterKeyFor(""), EntryHeader{1, 0, -1, 0}, payload, 0);
    std::string f = flatten(b);
    ASSERT_EQ(n, f.size());
    EXPECT_EQ(f.substr(64), std::string(size, 'p'));
    if (size <= kAddPayloadCopyMax) {
      EXPECT_EQ(b.segmentCount(), 1u) << size;
    } else {
      ASSERT_EQ(b.segmentCount(), 2u) << size;
      EXPECT_EQ(b.segments()[1].buffer.data(), payload.data());  // shared, not copied
    }
    auto req = decodeRequest(std::string_view(f).substr(4));
    ASSERT_TRUE(req.isOk()) << req.status().toString();
    auto v = verifyEntry(req->entry, 1, 0);
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    EXPECT_EQ(v->payload.size(), size);
  }
}

TEST(BkProtocol, ReadRequestSendsKeyOnlyWhenFencing) {
  MasterKey k = masterKeyFor("");
  net::FrameBatch plain;
  encodeReadRequest(plain, 9, kLastAddConfirmed, kFlagNone, &k);
  EXPECT_EQ(hex(flatten(plain)),
            "00000014"
            "02020000"
            "0000000000000009"
            "ffffffffffffffff");
  net::FrameBatch fence;
  encodeReadRequest(fence, 9, 4, kFlagDoFencing, &k);
  std::string f = flatten(fence);
  EXPECT_EQ(hex(f.substr(0, 24)),
            "00000028"
            "02020001"
            "0000000000000009"
            "0000000000000004");
  EXPECT_EQ(hex(f.substr(24)), "850bf1071c5e3d8c24235676f8816ae0cbe2f14f");
  auto r = decodeRequest(std::string_view(f).substr(4));
  ASSERT_TRUE(r.isOk());
  ASSERT_TRUE(r->masterKey.has_value());
  EXPECT_EQ(*r->masterKey, k);
}

TEST(BkProtocol, ResponsesAndErrorCodes) {
  std::string add = encodeResponse(OpCode::kAddEntry, 104, 5, 6);
  EXPECT_EQ(hex(add),
            "00000018"
            "02010000"
            "00000068"
            "0000000000000005"
            "0000000000000006");
  auto r = decodeResponse(std::string_view(add).substr(4));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->op, OpCode::kAddEntry);
  EXPECT_EQ(bkResultFromBookieRc(r->rc), BkResult::kLedgerFenced);
  EXPECT_EQ(bkResultName(BkResult::kLedgerFenced), "LedgerFenced");
  EXPECT_EQ(bkResultFromBookieRc(1), BkResult::kNoSuchLedger);
  EXPECT_EQ(bkResultFromBookieRc(2), BkResult::kNoSuchEntry);
  EXPECT_EQ(bkResultFromBookieRc(101), BkResult::kBookieError);
  EXPECT_EQ(bkResultFromBookieRc(102), BkResult::kUnauthorizedAccess);

  std::string entry = packEntry(EntryHeader{5, 6, 5, 100}, "payload");
  std::string read = encodeResponse(OpCode::kReadEntry, 0, 5, 6, entry);
  auto rr = decodeResponse(std::string_view(read).substr(4));
  ASSERT_TRUE(rr.isOk());
  EXPECT_EQ(rr->body, entry);
  auto v = verifyEntry(rr->body, 5, 6);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v->payload, "payload");
}

// Every bookie rc (BookieProtocol.E*) and its named result; names as BookKeeper prints them.
TEST(BkProtocol, EveryBookieRcAndResultName) {
  const std::pair<int32_t, BkResult> rcs[] = {
      {0, BkResult::kOk},
      {1, BkResult::kNoSuchLedger},
      {2, BkResult::kNoSuchEntry},
      {100, BkResult::kBookieError},  // EBADREQ
      {101, BkResult::kBookieError},  // EIO
      {102, BkResult::kUnauthorizedAccess},
      {103, BkResult::kBadVersion},
      {104, BkResult::kLedgerFenced},
      {105, BkResult::kWriteOnReadOnlyBookie},
      {106, BkResult::kTooManyRequests},
      {107, BkResult::kLedgerUnknownState},
      {-1, BkResult::kBookieError},
      {999, BkResult::kBookieError},
  };
  for (const auto& [rc, want] : rcs) EXPECT_EQ(bkResultFromBookieRc(rc), want) << rc;
  EXPECT_EQ(bkResultName(BkResult::kOk), "OK");
  EXPECT_EQ(bkResultName(BkResult::kNoSuchLedger), "NoSuchLedgerExists");
  EXPECT_EQ(bkResultName(BkResult::kLedgerUnknownState), "DataUnknown");
  EXPECT_EQ(bkResultName(BkResult::kDigestMismatch), "DigestMatch");
  EXPECT_EQ(bkResultName(BkResult::kMetadataError), "ZKException");
  EXPECT_EQ(bkResultName(BkResult::kDuplicateEntryId), "DuplicateEntryId");
  EXPECT_EQ(bkResultName(static_cast<BkResult>(99)), "Unknown");
}

TEST(BkProtocol, VerifyEntryRejectsCorruption) {
  std::string e = packEntry(EntryHeader{5, 6, 5, 100}, "payload");
  EXPECT_FALSE(verifyEntry(e, 4, 6).isOk());  // another ledger
  EXPECT_FALSE(verifyEntry(e, 5, 7).isOk());  // another entry
  EXPECT_TRUE(verifyEntry(e, 5, -1).isOk());  // entry id not checked (LAC reads)
  for (size_t i = 0; i < e.size(); ++i) {
    std::string bad = e;
    bad[i] ^= 0x01;
    EXPECT_FALSE(verifyEntry(bad, 5, 6).isOk()) << "flipped byte " << i;
  }
  EXPECT_FALSE(verifyEntry(e.substr(0, 35), 5, 6).isOk());
}

// CRC32DigestManager (Pulsar's compacted ledgers): java.util.zip.CRC32 over the 32-byte header
// and the payload, as a big-endian int64 after the header.
TEST(BkProtocol, VerifyEntryReadsCrc32Digests) {
  EXPECT_EQ(crc32Ieee("123456789", 9), 0xCBF43926U);  // the check value of CRC-32/ISO-HDLC
  std::string c = packEntry(EntryHeader{5, 6, 5, 100}, "payload");
  std::string header = c.substr(0, 32);
  uint32_t crc = crc32Ieee("payload", 7, crc32Ieee(header.data(), header.size()));
  std::string e = header + std::string(4, '\0');
  for (int i = 3; i >= 0; --i) e.push_back(static_cast<char>(crc >> (8 * i)));
  e += "payload";
  auto v = verifyEntry(e, 5, 6, EntryDigest::kCrc32);
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v->payload, "payload");
  EXPECT_EQ(v->header.length, 100);
  for (size_t i = 0; i < e.size(); ++i) {
    std::string bad = e;
    bad[i] ^= 0x01;
    EXPECT_FALSE(verifyEntry(bad, 5, 6, EntryDigest::kCrc32).isOk()) << "flipped byte " << i;
  }
  EXPECT_FALSE(verifyEntry(e, 5, 6).isOk());  // read as CRC32C
  EXPECT_FALSE(verifyEntry(e.substr(0, 39), 5, 6, EntryDigest::kCrc32).isOk());
}

TEST(BkProtocol, BadResponsesAreErrors) {
  EXPECT_FALSE(decodeResponse("short").isOk());
  std::string add = encodeResponse(OpCode::kAddEntry, 0, 5, 6);
  std::string withTail = add + "x";
  EXPECT_FALSE(decodeResponse(std::string_view(withTail).substr(4)).isOk());
  std::string badVersion = add;
  badVersion[4] = 9;
  EXPECT_FALSE(decodeResponse(std::string_view(badVersion).substr(4)).isOk());
  std::string badOp = encodeResponse(OpCode::kGetBookieInfo, 0, 5, 6);
  EXPECT_FALSE(decodeResponse(std::string_view(badOp).substr(4)).isOk());
}

TEST(BkProtocol, FrameReaderSplitsAndRejectsBadLengths) {
  std::string a = encodeResponse(OpCode::kAddEntry, 0, 1, 2);
  std::string b = encodeResponse(OpCode::kReadEntry, 2, 1, 3, "xyz");
  std::string stream = a + b;
  FrameReader r;
  int frames = 0;
  for (char c : stream) {  // one byte at a time
    r.append(reinterpret_cast<const uint8_t*>(&c), 1);
    while (auto f = r.next()) {
      ++frames;
      EXPECT_TRUE(decodeResponse(*f).isOk());
    }
    r.compact();
  }
  EXPECT_EQ(frames, 2);
  EXPECT_TRUE(r.error().isOk());
  FrameReader big;
  const uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
  big.append(huge, 4);
  EXPECT_FALSE(big.next().has_value());
  EXPECT_FALSE(big.error().isOk());
  FrameReader zero;
  const uint8_t z[4] = {0, 0, 0, 0};
  zero.append(z, 4);
  EXPECT_FALSE(zero.next().has_value());
  EXPECT_FALSE(zero.error().isOk());
}

TEST(BkProtocol, RandomBytesNeverCrashTheDecoders) {
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 80, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    (void)decodeResponse(s);
    (void)decodeRequest(s);
    (void)verifyEntry(s, 1, 1);
    FrameReader r(1024);
    r.append(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    while (r.next()) {
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace magnetar::bookkeeper
