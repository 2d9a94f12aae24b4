// Test fixture: a BookKeeper cluster's ZooKeeper layout on a LocalStore (the LAYOUT znode,
// bookies registered under /ledgers/available) and a BookKeeperClient on it, for tests with fake
// bookies on loopback (fake_bookie.h). Every helper blocks the test thread until its callback ran.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "bookkeeper/client.h"
#include "bookkeeper/tests/fake_bookie.h"
#include "metadata/local_store.h"

namespace magnetar::bookkeeper {

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = metadata::LocalBackend::create();
    admin_ = backend_->openSession();
    put("/ledgers/LAYOUT", "2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n");
  }
  void TearDown() override {
    if (bk_) bk_->close();
  }
  void put(const std::string& path, const std::string& value) {
    std::promise<void> p;
    admin_->put(path, value, {}, &inline_, [&](Result<metadata::Stat> r) {
      EXPECT_TRUE(r.isOk()) << r.status().toString();
      p.set_value();
    });
    p.get_future().wait();
  }
  void remove(const std::string& path) {
    std::promise<void> p;
    admin_->remove(path, std::nullopt, &inline_, [&](const Status& s) {
      EXPECT_TRUE(s.isOk()) << s.toString();
      p.set_value();
    });
    p.get_future().wait();
  }
  // As a bookie does on start: /ledgers/available/<id>.
  void registerBookie(const FakeBookie& b) { put("/ledgers/available/" + b.id(), ""); }
  // Opens bk_ on the cluster with these bookie timeouts.
  void open(std::chrono::milliseconds readTimeout = std::chrono::milliseconds(30000),
            std::chrono::milliseconds addTimeout = std::chrono::milliseconds(2000)) {
    ClientConfig c;
    c.metadataServiceUri = "zk://127.0.0.1:1/ledgers";
    c.bookie.addTimeout = addTimeout;
    c.bookie.readTimeout = readTimeout;
    auto r = BookKeeperClient::openWithStore(c, backend_->openSession());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    bk_ = std::move(*r);
  }
  // A new ledger (expected to be created) with ensemble e, write quorum w, ack quorum a.
  std::shared_ptr<LedgerHandle> create(int e, int w, int a) {
    std::promise<std::pair<BkResult, std::shared_ptr<LedgerHandle>>> p;
    bk_->createLedger(e, w, a, {}, [&](BkResult rc, std::shared_ptr<LedgerHandle> h) {
      p.set_value({rc, std::move(h)});
    });
    auto [rc, h] = p.get_future().get();
    EXPECT_EQ(rc, BkResult::kOk);
    return h;
  }
  BkResult close(const std::shared_ptr<LedgerHandle>& h) {
    std::promise<BkResult> p;
    h->loop().execute([&, h] { h->close([&](BkResult rc) { p.set_value(rc); }); });
    return p.get_future().get();
  }
  LedgerMetadata metadataOf(int64_t id) {
    std::promise<LedgerMetadata> p;
    bk_->readLedgerMetadata(id, [&](BkResult rc, VersionedMetadata vm) {
      EXPECT_EQ(rc, BkResult::kOk);
      p.set_value(vm.metadata);
    });
    return p.get_future().get();
  }
  // A new handle on the ledger (expected to open); recovery: fence and close it first.
  std::shared_ptr<LedgerHandle> openLedger(int64_t id, bool recovery) {
    std::promise<std::shared_ptr<LedgerHandle>> opened;
    bk_->openLedger(
        id,
        [&](BkResult rc, std::shared_ptr<LedgerHandle> h) {
          EXPECT_EQ(rc, BkResult::kOk) << bkResultName(rc);
          opened.set_value(std::move(h));
        },
        recovery);
    return opened.get_future().get();
  }

  struct Inline : net::Executor {
    void execute(net::Task t) override { t(); }
    bool inExecutorThread() const override { return true; }
  } inline_;
  std::shared_ptr<metadata::LocalBackend> backend_;
  std::unique_ptr<metadata::LocalStore> admin_;
  std::unique_ptr<BookKeeperClient> bk_;
};

}  // namespace magnetar::bookkeeper
