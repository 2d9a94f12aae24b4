#include "storage/metadata_store.h"

#include <gtest/gtest.h>

#include "storage/metadata_codec.h"
#include "storage/rocksdb_metadata_store.h"
#include "storage/tests/ledger_test_util.h"

namespace magnetar::storage::testing {
namespace {

class MetadataStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      auto db = RocksDbMetadataStore::open(dir_.path() + "/db", false);
      ASSERT_TRUE(db.isOk()) << db.status().toString();
      store_ = std::move(*db);
    } else {
      store_ = std::make_unique<MemoryMetadataStore>();
    }
  }
  TempDir dir_;
  std::unique_ptr<MetadataStore> store_;
};

TEST_P(MetadataStoreTest, GetPutDeleteScan) {
  EXPECT_EQ(store_->get("/a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->put("/a", "1").isOk());
  ASSERT_TRUE(store_->put("/a/b", "2").isOk());
  ASSERT_TRUE(store_->put("/ab", "3").isOk());
  EXPECT_EQ(*store_->get("/a"), "1");
  auto s = store_->scan("/a/");
  ASSERT_TRUE(s.isOk());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].second, "2");
  ASSERT_TRUE(store_->remove("/a").isOk());
  ASSERT_TRUE(store_->remove("/missing").isOk());
  EXPECT_FALSE(store_->get("/a").isOk());
}

TEST_P(MetadataStoreTest, ChildrenAreDirectNamesOnly) {
  for (const char* k : {"/admin/tenants/acme", "/admin/tenants/acme/ns1", "/admin/tenants/b.c",
                        "/admin/tenants/b/x/y", "/admin/tenantsX", "/admin/policies/p"}) {
    ASSERT_TRUE(store_->put(k, "v").isOk());
  }
  auto c = store_->getChildren("/admin/tenants");
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(*c, (std::vector<std::string>{"acme", "b", "b.c"}));
  EXPECT_EQ(*store_->getChildren("/admin"),
            (std::vector<std::string>{"policies", "tenants", "tenantsX"}));
  EXPECT_TRUE(store_->getChildren("/nothing")->empty());
}

TEST_P(MetadataStoreTest, BatchIsAppliedInOrder) {
  ASSERT_TRUE(store_->put("/x/1", "a").isOk());
  ASSERT_TRUE(store_->put("/x/2", "b").isOk());
  ASSERT_TRUE(store_
                  ->write({MetadataOp::delPrefix("/x/"), MetadataOp::put("/x/3", "c"),
                           MetadataOp::put("/y", "d"), MetadataOp::del("/y")})
                  .isOk());
  auto s = store_->scan("/");
  ASSERT_TRUE(s.isOk());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].first, "/x/3");
}

INSTANTIATE_TEST_SUITE_P(Stores, MetadataStoreTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "RocksDb" : "Memory"; });

TEST(MetadataCodecTest, RoundTrips) {
  EXPECT_EQ(unescapePathComponent(escapePathComponent("a/b%c\n")), "a/b%c\n");
  EXPECT_EQ(escapePathComponent("public/default/persistent/t"),
            "public%2Fdefault%2Fpersistent%2Ft");
  std::vector<LedgerMeta> ls{{3, 10, 1000}, {4, -1, 2000}};
  auto l = decodeLedgerList(encodeLedgerList(ls));
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ((*l)[1].ledgerId, 4);
  EXPECT_EQ((*l)[0].closedAt, 10);
  ls[0].closedMs = 1500;
  l = decodeLedgerList(encodeLedgerList(ls));
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ((*l)[0].closedMs, 1500);
  EXPECT_EQ((*l)[1].closedMs, 0);
  // Version 1 has no close time: a closed ledger's is taken as its creation time.
  std::string listV1("\x01\x01\x00\x00\x00", 5);
  for (int64_t x : {int64_t{3}, int64_t{10}, int64_t{1000}}) {
    for (int b = 0; b < 8; b++) listV1.push_back(static_cast<char>((x >> (8 * b)) & 0xff));
  }
  l = decodeLedgerList(listV1);
  ASSERT_TRUE(l.has_value());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].createdMs, 1000);
  EXPECT_EQ((*l)[0].closedMs, 1000);
  EXPECT_FALSE(decodeLedgerList(listV1.substr(0, listV1.size() - 1)));
  CursorMeta c{{3, 4}, {{{3, 6}, {3, 9}}, {{4, 0}, {4, 0}}}, {}, {}};
  auto c2 = decodeCursor(encodeCursor(c));
  ASSERT_TRUE(c2.has_value());
  EXPECT_EQ(c2->markDelete, (Position{3, 4}));
  ASSERT_EQ(c2->ranges.size(), 2u);
  EXPECT_EQ(c2->ranges[0].second, (Position{3, 9}));
  JournalRun r{7, 100, 5, 2, 4096, 300, 250};
  auto r2 = decodeRun(indexKey(7, 100), encodeRun(r));
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->ledgerId, 7);
  EXPECT_EQ(r2->firstEntryId, 100);
  EXPECT_EQ(r2->offset, 4096u);
  EXPECT_EQ(r2->dataBytes, 250);
  EXPECT_FALSE(decodeCursor("garbage").has_value());
  // Version 2: ack sets and properties.
  c.batchDeleted = {{Position{3, 7}, AckSet{0b101, -1}}};
  c.properties = {{"producer-1", 42}, {"", -5}};
  auto c3 = decodeCursor(encodeCursor(c));
  ASSERT_TRUE(c3.has_value());
  ASSERT_EQ(c3->batchDeleted.size(), 1u);
  EXPECT_EQ(c3->batchDeleted[0].first, (Position{3, 7}));
  EXPECT_EQ(c3->batchDeleted[0].second, (AckSet{0b101, -1}));
  EXPECT_EQ(c3->properties, c.properties);
  std::string v2 = encodeCursor(c);
  EXPECT_FALSE(decodeCursor(v2.substr(0, v2.size() - 1)).has_value());
  // Version 1 (mark-delete and ranges only) still reads.
  std::string v1 = encodeCursor(CursorMeta{{3, 4}, {{{3, 6}, {3, 9}}}, {}, {}});
  v1[0] = 1;
  v1.resize(v1.size() - 8);  // no batch or property counts in version 1
  auto c4 = decodeCursor(v1);
  ASSERT_TRUE(c4.has_value());
  EXPECT_EQ(c4->ranges.size(), 1u);
  EXPECT_TRUE(c4->batchDeleted.empty());
}

}  // namespace
}  // namespace magnetar::storage::testing
