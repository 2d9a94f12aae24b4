// Pulsar's managed-ledger formats without bookies: name encoding, paths, custom metadata, and the
// MLDataFormats messages against hand-derived protobuf bytes.
#include "storage/bk/ml_formats.h"

#include <gtest/gtest.h>

#include <ostream>

namespace magnetar::storage {
inline void PrintTo(const Position& p, std::ostream* os) { *os << p.ledgerId << ":" << p.entryId; }
}  // namespace magnetar::storage

namespace magnetar::storage::bk {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

LedgerSet twoLedgers() {
  LedgerSet l;
  l.addLedger(LedgerInfo{3, 10, 100, 1});
  l.addLedger(LedgerInfo{4, 5, 50, 2});
  return l;
}

TEST(MlFormatsTest, UrlEncodingIsJavas) {
  // URLEncoder keeps [A-Za-z0-9.*_-], writes ' ' as '+' and the rest as %XX of the UTF-8 bytes.
  EXPECT_EQ(urlEncode("my topic/a+b~\xc3\xa9.x*_-"), "my+topic%2Fa%2Bb%7E%C3%A9.x*_-");
  EXPECT_EQ(*urlDecode("my+topic%2Fa%2Bb%7E%C3%A9"), "my topic/a+b~\xc3\xa9");
  EXPECT_EQ(urlDecode("bad%2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(urlDecode("bad%zz").status().code(), StatusCode::kInvalidArgument);
}

TEST(MlFormatsTest, TopicNamesArePulsarsPersistenceNames) {
  EXPECT_EQ(pulsarLedgerName("public/default/persistent/my topic"),
            "public/default/persistent/my+topic");
  EXPECT_EQ(pulsarLedgerName("t/ns/persistent/a/b"), "t/ns/persistent/a%2Fb");
  EXPECT_EQ(pulsarLedgerName("t/add"), "t/add");  // not a topic's name: as it is
  EXPECT_EQ(*storageLedgerName("public/default/persistent/my+topic"),
            "public/default/persistent/my topic");
  EXPECT_EQ(*storageLedgerName("t/ns/persistent/a%2Fb"), "t/ns/persistent/a/b");
  EXPECT_EQ(managedLedgerPath(kManagedLedgersRoot, "public/default/persistent/t1"),
            "/managed-ledgers/public/default/persistent/t1");
  EXPECT_EQ(cursorPath(kManagedLedgersRoot, "public/default/persistent/t 1", "sub"),
            "/managed-ledgers/public/default/persistent/t+1/sub");
}

TEST(MlFormatsTest, LedgerCustomMetadataIsPulsars) {
  auto d = dataLedgerMetadata("public/default/persistent/t1");
  EXPECT_EQ(d, (std::map<std::string, std::string>{
                   {"application", "pulsar"},
                   {"component", "managed-ledger"},
                   {"pulsar/managed-ledger", "public/default/persistent/t1"}}));
  auto c = cursorLedgerMetadata("public/default/persistent/t1", "sub");
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(c["pulsar/cursor"], "sub");
  EXPECT_EQ(c["component"], "managed-ledger");
}

TEST(MlFormatsTest, ManagedLedgerInfoParsesPulsarsBytes) {
  // ledgerInfo { ledgerId: 7 entries: 10 size: 100 timestamp: 1 }, then ledgerInfo { ledgerId: 8 }
  auto info = parseManagedLedgerInfo(
      bytes({0x0a, 0x08, 0x08, 0x07, 0x10, 0x0a, 0x18, 0x64, 0x20, 0x01, 0x0a, 0x02, 0x08, 0x08}));
  ASSERT_TRUE(info.isOk()) << info.status().toString();
  ASSERT_EQ(info->ledgerinfo_size(), 2);
  EXPECT_EQ(info->ledgerinfo(0).ledgerid(), 7);
  EXPECT_EQ(info->ledgerinfo(0).entries(), 10);
  EXPECT_EQ(info->ledgerinfo(0).size(), 100);
  EXPECT_EQ(info->ledgerinfo(0).timestamp(), 1);
  EXPECT_EQ(info->ledgerinfo(1).ledgerid(), 8);
  EXPECT_FALSE(info->ledgerinfo(1).has_entries());
  // What MetaStoreImpl writes when it creates the node: nothing.
  auto empty = parseManagedLedgerInfo("");
  ASSERT_TRUE(empty.isOk());
  EXPECT_EQ(empty->ledgerinfo_size(), 0);
  // Compressed (magic 0x4778) is refused by name; garbage is corruption.
  EXPECT_EQ(parseManagedLedgerInfo(bytes({0x47, 0x78, 0, 0, 0, 2, 8, 1})).status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(parseManagedCursorInfo(bytes({0x47, 0x78, 0, 0, 0, 2, 8, 1})).status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(parseManagedLedgerInfo(bytes({0x0a, 0x7f, 0x08})).status().code(),
            StatusCode::kCorruption);
}

TEST(MlFormatsTest, PositionInfoBytesArePulsars) {
  LedgerSet l = twoLedgers();
  CursorState s(Position{3, 5});
  ASSERT_TRUE(s.ack(Position{3, 7}, l));
  ASSERT_TRUE(s.ack(Position{3, 8}, l));
  s.setProperties({{"a", 1}});
  auto p = makePositionInfo(s, l, CursorPersistLimits{});
  // ledgerId 3, entryId 5, individualDeletedMessages { (3:6, 3:8] }, properties { a = 1 }
  EXPECT_EQ(p.SerializeAsString(),
            bytes({0x08, 0x03, 0x10, 0x05, 0x1a, 0x0c, 0x0a, 0x04, 0x08, 0x03, 0x10, 0x06, 0x12,
                   0x04, 0x08, 0x03, 0x10, 0x08, 0x22, 0x05, 0x0a, 0x01, 0x61, 0x10, 0x01}));
}

TEST(MlFormatsTest, RangesAreSplitAtLedgersAndMergedBack) {
  LedgerSet l = twoLedgers();
  CursorState s(Position{3, 5});
  for (Position p : {Position{3, 8}, Position{3, 9}, Position{4, 0}, Position{4, 1}}) {
    ASSERT_TRUE(s.ack(p, l));
  }
  ASSERT_EQ(s.rangeCount(), 1u);  // one range across the ledger boundary
  s.ackBatchIndexes(Position{4, 3}, AckSet{0b1010}, l);
  auto p = makePositionInfo(s, l, CursorPersistLimits{});
  // Pulsar's range set is per ledger: (3:7, 3:9] and (4:-1, 4:1].
  ASSERT_EQ(p.individualdeletedmessages_size(), 2);
  EXPECT_EQ(p.individualdeletedmessages(0).lowerendpoint().entryid(), 7);
  EXPECT_EQ(p.individualdeletedmessages(0).upperendpoint().entryid(), 9);
  EXPECT_EQ(p.individualdeletedmessages(1).lowerendpoint().ledgerid(), 4);
  EXPECT_EQ(p.individualdeletedmessages(1).lowerendpoint().entryid(), -1);
  EXPECT_EQ(p.individualdeletedmessages(1).upperendpoint().entryid(), 1);
  ASSERT_EQ(p.batchedentrydeletionindexinfo_size(), 1);
  EXPECT_EQ(p.batchedentrydeletionindexinfo(0).deleteset(0), 0b1010);

  auto parsed = parsePositionInfo(p.SerializeAsString());
  ASSERT_TRUE(parsed.isOk());
  CursorState r = restoreCursor(cursorMetaFrom(*parsed), l, l.lastConfirmed());
  EXPECT_EQ(r.markDelete(), (Position{3, 5}));
  ASSERT_EQ(r.rangeCount(), 1u);
  r.forEachRange([](Position first, const CursorState::Range& range) {
    EXPECT_EQ(first, (Position{3, 8}));
    EXPECT_EQ(range.last, (Position{4, 1}));
    EXPECT_EQ(range.count, 4);
  });
  EXPECT_EQ(r.individuallyAcked(), 4);
  EXPECT_EQ(r.backlog(l), 15 - 6 - 4);
  ASSERT_NE(r.batchAckSet(Position{4, 3}), nullptr);
  EXPECT_EQ(*r.batchAckSet(Position{4, 3}), AckSet{0b1010});

  // At most maxUnackedRanges ranges are written.
  auto capped = makePositionInfo(s, l, CursorPersistLimits{1, 0});
  EXPECT_EQ(capped.individualdeletedmessages_size(), 1);
  EXPECT_EQ(capped.batchedentrydeletionindexinfo_size(), 0);
}

TEST(MlFormatsTest, LongArrayAcksAreRead) {
  // managedLedgerPersistIndividualAckAsLongArray: ledger 4's acked entries as BitSet words.
  mledger::PositionInfo p;
  p.set_ledgerid(3);
  p.set_entryid(9);
  auto* m = p.add_individualdeletedmessageranges();
  m->set_key(4);
  m->add_values(0b1011);  // entries 0, 1 and 3
  CursorMeta meta = cursorMetaFrom(p);
  ASSERT_EQ(meta.ranges.size(), 2u);
  EXPECT_EQ(meta.ranges[0], std::make_pair(Position{4, 0}, Position{4, 1}));
  EXPECT_EQ(meta.ranges[1], std::make_pair(Position{4, 3}, Position{4, 3}));
  LedgerSet l = twoLedgers();
  CursorState r = restoreCursor(meta, l, l.lastConfirmed());
  // (3:9 is the last of ledger 3, so 4:0 and 4:1 fold into the mark-delete position.)
  EXPECT_EQ(r.markDelete(), (Position{4, 1}));
  EXPECT_TRUE(r.isAcked(Position{4, 3}));
  EXPECT_FALSE(r.isAcked(Position{4, 2}));
}

TEST(MlFormatsTest, CursorInfoHoldsTheStateOnlyWhenAsked) {
  LedgerSet l = twoLedgers();
  CursorState s(Position{3, 2});
  ASSERT_TRUE(s.ack(Position{3, 4}, l));
  s.setProperties({{"p", -3}});
  auto withLedger = makeCursorInfo(17, s, l, CursorPersistLimits{}, 1234, false, {{"k", "v"}});
  EXPECT_EQ(withLedger.cursorsledgerid(), 17);
  EXPECT_EQ(withLedger.markdeleteledgerid(), 3);
  EXPECT_EQ(withLedger.markdeleteentryid(), 2);
  EXPECT_EQ(withLedger.lastactive(), 1234);
  EXPECT_EQ(withLedger.individualdeletedmessages_size(), 0);
  ASSERT_EQ(withLedger.cursorproperties_size(), 1);
  EXPECT_EQ(withLedger.cursorproperties(0).value(), "v");

  auto closed = makeCursorInfo(-1, s, l, CursorPersistLimits{}, 1234, true);
  auto parsed = parseManagedCursorInfo(closed.SerializeAsString());
  ASSERT_TRUE(parsed.isOk());
  EXPECT_EQ(parsed->cursorsledgerid(), -1);
  CursorMeta m = cursorMetaFrom(*parsed);
  EXPECT_EQ(m.markDelete, (Position{3, 2}));
  ASSERT_EQ(m.ranges.size(), 1u);
  EXPECT_EQ(m.ranges[0], std::make_pair(Position{3, 4}, Position{3, 4}));
  EXPECT_EQ(m.properties.at("p"), -3);
}

}  // namespace
}  // namespace magnetar::storage::bk

namespace magnetar::storage::bk {
namespace {

// RawMessageImpl.serialize: [u32 BE idSize][MessageIdData][u32 BE size][entry].
TEST(CompactedLedgerFormatTest, RawMessageBytesArePulsars) {
  Buffer raw = encodeRawMessage({5, 300}, "abc");
  EXPECT_EQ(std::string(raw.view()),
            bytes({0, 0, 0, 5, 0x08, 0x05, 0x10, 0xAC, 0x02, 0, 0, 0, 3, 'a', 'b', 'c'}));
  auto e = parseRawMessage(raw.view());
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ(e->position, (Position{5, 300}));
  EXPECT_EQ(e->data.view(), "abc");
  EXPECT_EQ(messageIdDataBytes({5, 300}), bytes({0x08, 0x05, 0x10, 0xAC, 0x02}));
}

TEST(CompactedLedgerFormatTest, RawMessageIdWithOtherFieldsParses) {
  // ledgerId 5, entryId 7, partition -1 (a 10-byte varint), batch_index 2, ack_set packed [1].
  std::string id = bytes({0x08, 0x05, 0x10, 0x07, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                          0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x20, 0x02, 0x2A, 0x01, 0x01});
  std::string raw = bytes({0, 0, 0, static_cast<int>(id.size())}) + id + bytes({0, 0, 0, 1}) + "x";
  auto e = parseRawMessage(raw);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ(e->position, (Position{5, 7}));
  EXPECT_EQ(e->data.view(), "x");
}

TEST(CompactedLedgerFormatTest, BadRawMessagesSayWhat) {
  std::string good(encodeRawMessage({5, 300}, "abc").view());
  auto expectError = [](std::string_view in, std::string_view what) {
    auto e = parseRawMessage(in);
    ASSERT_FALSE(e.isOk()) << "parsed: " << testing::PrintToString(std::string(in));
    EXPECT_EQ(e.status().code(), StatusCode::kCorruption);
    EXPECT_NE(e.status().message().find(what), std::string::npos) << e.status().message();
  };
  expectError("", "shorter than its id size");
  expectError(good.substr(0, 3), "shorter than its id size");
  expectError(good.substr(0, 7), "id size 5 past the end");
  expectError(good.substr(0, 9), "no payload size");
  expectError(good.substr(0, 15), "payload size 3 past the end");
  // An id without its entryId, and one cut inside a varint.
  expectError(bytes({0, 0, 0, 2, 0x08, 0x05, 0, 0, 0, 0}), "without ledgerId or entryId");
  expectError(bytes({0, 0, 0, 2, 0x08, 0x85, 0, 0, 0, 0}), "truncated varint");
}

TEST(CompactedLedgerFormatTest, CompactedLedgerMetadataIsPulsars) {
  EXPECT_EQ(pulsarTopicName("public/default/persistent/a/b"), "persistent://public/default/a/b");
  auto m = compactedLedgerMetadata("persistent://public/default/t", {5, 300});
  EXPECT_EQ(m.size(), 4u);
  EXPECT_EQ(m.at("application"), "pulsar");
  EXPECT_EQ(m.at("component"), "compacted-ledger");
  EXPECT_EQ(m.at("pulsar/compactedTopic"), "persistent://public/default/t");
  EXPECT_EQ(m.at("pulsar/compactedTo"), messageIdDataBytes({5, 300}));
}

}  // namespace
}  // namespace magnetar::storage::bk
