#include "metadata/local_store.h"

#include "metadata/tests/store_contract.h"

namespace magnetar::metadata::testing {
namespace {

class LocalSource : public SessionSource {
 public:
  std::unique_ptr<Store> openSession() override { return backend_->openSession(); }

 private:
  std::shared_ptr<LocalBackend> backend_ = LocalBackend::create();
};

std::unique_ptr<SessionSource> makeLocal() { return std::make_unique<LocalSource>(); }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Local, StoreContractTest, ::testing::Values(SourceMaker(makeLocal)));

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
