#include "metadata/local_store.h"

#include <map>
#include <mutex>

#include "metadata/tests/cache_contract.h"
#include "metadata/tests/store_contract.h"

namespace magnetar::metadata::testing {
namespace {

// A persistence in memory that outlives the backends opened on it (a data directory).
struct Disk {
  std::mutex mu;
  std::map<std::string, std::string> kv;
  bool failWrites = false;
};

class DiskPersistence : public LocalPersistence {
 public:
  DiskPersistence(std::shared_ptr<Disk> disk, std::string prefix)
      : disk_(std::move(disk)), prefix_(std::move(prefix)) {}
  bool persists(const std::string& path) const override { return path.rfind(prefix_, 0) == 0; }
  Result<std::vector<std::pair<std::string, std::string>>> load() override {
    std::lock_guard lock(disk_->mu);
    return std::vector<std::pair<std::string, std::string>>(disk_->kv.begin(), disk_->kv.end());
  }
  Status write(const std::string& path, const std::optional<std::string>& value) override {
    std::lock_guard lock(disk_->mu);
    if (disk_->failWrites) return Status::ioError("disk full");
    if (value) {
      disk_->kv[path] = *value;
    } else {
      disk_->kv.erase(path);
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<Disk> disk_;
  std::string prefix_;  // the kept subtree
};

std::shared_ptr<LocalBackend> openOn(const std::shared_ptr<Disk>& disk,
                                     const std::string& prefix = "/kept") {
  auto b = LocalBackend::open(std::make_unique<DiskPersistence>(disk, prefix));
  EXPECT_TRUE(b.isOk());
  return *b;
}

// The contract on a persistent backend (everything under /kept... is written through).
class PersistentSource : public SessionSource {
 public:
  std::unique_ptr<Store> openSession() override { return backend_->openSession(); }

 private:
  std::shared_ptr<LocalBackend> backend_ = openOn(std::make_shared<Disk>(), "/");
};

class LocalSource : public SessionSource {
 public:
  std::unique_ptr<Store> openSession() override { return backend_->openSession(); }

 private:
  std::shared_ptr<LocalBackend> backend_ = LocalBackend::create();
};

std::unique_ptr<SessionSource> makeLocal() { return std::make_unique<LocalSource>(); }
std::unique_ptr<SessionSource> makePersistent() { return std::make_unique<PersistentSource>(); }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Local, StoreContractTest, ::testing::Values(SourceMaker(makeLocal)));
INSTANTIATE_TEST_SUITE_P(Local, MetadataCacheContractTest,
                         ::testing::Values(SourceMaker(makeLocal)));
INSTANTIATE_TEST_SUITE_P(LocalPersistent, StoreContractTest,
                         ::testing::Values(SourceMaker(makePersistent)));

class LocalPersistenceTest : public StoreContractTest {};
INSTANTIATE_TEST_SUITE_P(Local, LocalPersistenceTest, ::testing::Values(SourceMaker(makeLocal)));

TEST_P(LocalPersistenceTest, PersistentNodesSurviveAReopenEphemeralOnesDoNot) {
  auto disk = std::make_shared<Disk>();
  disk->kv["/kept/old/record"] = "written by an older broker";  // a data directory as it was
  {
    auto backend = openOn(disk);
    auto s = backend->openSession();
    auto old = get(*s, "/kept/old/record");
    ASSERT_TRUE(old.isOk() && old->has_value());
    EXPECT_EQ((*old)->value, "written by an older broker");
    ASSERT_TRUE(put(*s, "/kept/a/b", "v1").isOk());
    ASSERT_TRUE(put(*s, "/kept/a/b", "v2").isOk());
    ASSERT_TRUE(put(*s, "/kept/a/gone", "x").isOk());
    ASSERT_TRUE(remove(*s, "/kept/a/gone").isOk());
    PutOptions eph;
    eph.ephemeral = true;
    ASSERT_TRUE(put(*s, "/kept/a/eph", "e", eph).isOk());
    ASSERT_TRUE(put(*s, "/memory/only", "m").isOk());
  }
  EXPECT_EQ(disk->kv.count("/kept/a/eph"), 0u);
  EXPECT_EQ(disk->kv.count("/memory/only"), 0u);
  auto backend = openOn(disk);
  auto s = backend->openSession();
  auto b = get(*s, "/kept/a/b");
  ASSERT_TRUE(b.isOk() && b->has_value());
  EXPECT_EQ((*b)->value, "v2");
  EXPECT_FALSE(get(*s, "/kept/a/gone")->has_value());
  EXPECT_FALSE(get(*s, "/kept/a/eph")->has_value());
  EXPECT_FALSE(get(*s, "/memory/only")->has_value());
  auto kids = children(*s, "/kept/a");
  ASSERT_TRUE(kids.isOk());
  EXPECT_EQ(*kids, std::vector<std::string>{"b"});
}

TEST_P(LocalPersistenceTest, AFailedWriteIsAnIoErrorNamingThePath) {
  auto disk = std::make_shared<Disk>();
  auto backend = openOn(disk);
  auto s = backend->openSession();
  disk->failWrites = true;
  auto r = put(*s, "/kept/x", "v");
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("/kept"), std::string::npos);
}

TEST(MetadataPath, ParentsAndValidation) {
  EXPECT_EQ(parentPath("/a/b"), "/a");
  EXPECT_EQ(parentPath("/a"), "/");
  EXPECT_TRUE(validatePath("/").isOk());
  EXPECT_TRUE(validatePath("/a/b-c_d.e").isOk());
  EXPECT_FALSE(validatePath("a").isOk());
  EXPECT_FALSE(validatePath("/a/").isOk());
  EXPECT_FALSE(validatePath("/a//b").isOk());
  EXPECT_FALSE(validatePath(std::string("/a\0b", 4)).isOk());
}

}  // namespace magnetar::metadata::testing
