// Ledger metadata encoding and paths, checked against layouts worked out from BookKeeper's
// LedgerMetadataSerDe and StringUtils (byte-exact agreement with BookKeeper's own serializer is
// checked by tests/bookkeeper against the Java tool).
#include "bookkeeper/ledger_metadata.h"

#include <gtest/gtest.h>

#include "bookkeeper/client.h"

namespace magnetar::bookkeeper {
namespace {

LedgerMetadata sample() {
  LedgerMetadata md;
  md.ensembleSize = 3;
  md.writeQuorumSize = 2;
  md.ackQuorumSize = 2;
  md.ensembles[0] = {"127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"};
  md.ensembles[10] = {"127.0.0.1:3181", "127.0.0.1:3184", "127.0.0.1:3183"};
  md.customMetadata["application"] = "pulsar";
  md.ctimeMs = 1700000000000;
  return md;
}

TEST(BkMetadataServiceUri, BookKeepersAndPulsarsForms) {
  auto bk = parseMetadataServiceUri("zk://h1:2181;h2:2182/ledgers");
  ASSERT_TRUE(bk.isOk()) << bk.status().toString();
  EXPECT_EQ(bk->first, "h1:2181,h2:2182");
  EXPECT_EQ(bk->second, "/ledgers");
  auto layout = parseMetadataServiceUri("zk+hierarchical://h1:2181/ledgers/");
  ASSERT_TRUE(layout.isOk());
  EXPECT_EQ(layout->second, "/ledgers");
  for (const char* pulsar : {"metadata-store:zk:h1:2181,h2:2182/ledgers",
                             "metadata-store:zk://h1:2181,h2:2182/ledgers"}) {
    auto p = parseMetadataServiceUri(pulsar);
    ASSERT_TRUE(p.isOk()) << pulsar << ": " << p.status().toString();
    EXPECT_EQ(p->first, "h1:2181,h2:2182");
    EXPECT_EQ(p->second, "/ledgers");
  }
  for (const char* bad :
       {"", "h1:2181/ledgers", "etcd://h1:2379/ledgers", "zk://h1:2181", "zk:///ledgers",
        "metadata-store:etcd:h1:2379/ledgers", "metadata-store:zk:h1:2181", "metadata-store:"}) {
    auto r = parseMetadataServiceUri(bad);
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(BkLedgerMetadata, HeaderAndRoundTrip) {
  LedgerMetadata md = sample();
  std::string b = serializeLedgerMetadata(md);
  EXPECT_EQ(b.substr(0, 30), "BookieMetadataFormatVersion\t3\n");
  // Then a varint length (here two bytes) and exactly that many protobuf bytes.
  ASSERT_NE(b[30] & 0x80, 0);
  ASSERT_EQ(b[31] & 0x80, 0);
  size_t len = (static_cast<uint8_t>(b[30]) & 0x7fu) | (static_cast<size_t>(b[31]) << 7);
  EXPECT_EQ(b.size(), 32u + len);
  // First field: quorumSize (field 1, varint) = 2.
  EXPECT_EQ(b[32], 0x08);
  EXPECT_EQ(b[33], 0x02);
  auto back = parseLedgerMetadata(b);
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(*back, md);
  EXPECT_EQ(back->ensembleFor(9)[1], "127.0.0.1:3182");
  EXPECT_EQ(back->ensembleFor(10)[1], "127.0.0.1:3184");
  EXPECT_EQ(back->ensembleFor(1000)[1], "127.0.0.1:3184");
}

TEST(BkLedgerMetadata, RejectsCorruptInput) {
  std::string b = serializeLedgerMetadata(sample());
  EXPECT_FALSE(parseLedgerMetadata("").isOk());
  EXPECT_FALSE(parseLedgerMetadata(b.substr(0, 20)).isOk());
  EXPECT_FALSE(parseLedgerMetadata(b.substr(0, b.size() - 3)).isOk());
  std::string v2 = b;
  v2[28] = '2';
  auto r = parseLedgerMetadata(v2);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  LedgerMetadata bad = sample();
  bad.ackQuorumSize = 3;  // Qa > Qw
  EXPECT_FALSE(parseLedgerMetadata(serializeLedgerMetadata(bad)).isOk());
}

TEST(BkLedgerMetadata, HierarchicalPaths) {
  EXPECT_EQ(ledgerPath("/ledgers", 1), "/ledgers/00/0000/L0001");
  EXPECT_EQ(ledgerPath("/ledgers", 1234567890), "/ledgers/12/3456/L7890");
  EXPECT_EQ(ledgerPath("/ledgers", 2147483646), "/ledgers/21/4748/L3646");
  // From Integer.MAX_VALUE on: %019d split 3-4-4-4-4.
  EXPECT_EQ(ledgerPath("/ledgers", 2147483647), "/ledgers/000/0000/0021/4748/L3647");
  EXPECT_EQ(ledgerPath("/bk", 9223372036854775807LL), "/bk/922/3372/0368/5477/L5807");
}

TEST(BkLedgerMetadata, Layout) {
  auto ok = parseLayout("2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1");
  ASSERT_TRUE(ok.isOk());
  EXPECT_FALSE(parseLayout("2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1").isOk());
  EXPECT_FALSE(parseLayout("garbage").isOk());
}

TEST(BkLedgerMetadata, ToStringAsBookKeeper) {
  LedgerMetadata md;
  md.ensembleSize = 3;
  md.writeQuorumSize = 2;
  md.ackQuorumSize = 2;
  md.state = LedgerState::kClosed;
  md.length = 410;
  md.lastEntryId = 4;
  md.ensembles[0] = {"127.0.0.1:53025", "127.0.0.1:37617", "127.0.0.1:42103"};
  // As printed by `bookkeeper shell ledgermetadata` 4.17.2 for a ledger of WriteLedger.java.
  EXPECT_EQ(ledgerMetadataToString(md),
            "LedgerMetadata{formatVersion=3, ensembleSize=3, writeQuorumSize=2, ackQuorumSize=2, "
            "state=CLOSED, length=410, lastEntryId=4, digestType=CRC32C, password=base64:, "
            "ensembles={0=[127.0.0.1:53025, 127.0.0.1:37617, 127.0.0.1:42103]}, "
            "customMetadata={}}");
  md.customMetadata["Bookie"] = "simpletest";
  EXPECT_NE(ledgerMetadataToString(md).find("customMetadata={Bookie=base64:c2ltcGxldGVzdA==}"),
            std::string::npos);
}

}  // namespace
}  // namespace magnetar::bookkeeper
