// The metadata::Store contract (Pulsar's MetadataStore semantics), run against every backend:
// LocalStore (local_store_test.cc) and ZkStore on a real ZooKeeper (zk_store_test.cc). Each backend
// gives sessions on one shared namespace, as brokers sharing a ZooKeeper have.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metadata/store.h"
#include "storage/tests/test_executor.h"

namespace magnetar::metadata::testing {

// Opens sessions on one namespace. sessionTimeoutMs: for backends with sessions that expire.
class SessionSource {
 public:
  virtual ~SessionSource() = default;
  virtual std::unique_ptr<Store> openSession() = 0;
};
using SourceMaker = std::function<std::unique_ptr<SessionSource>()>;

class StoreContractTest : public ::testing::TestWithParam<SourceMaker> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Runs executor tasks until pred() holds; fails the test after 15 s.
  void runUntil(const std::function<bool()>& pred);
  Result<std::optional<GetResult>> get(Store& s, const std::string& path);
  Result<Stat> put(Store& s, const std::string& path, const std::string& value,
                   const PutOptions& opts = {});
  Status remove(Store& s, const std::string& path, std::optional<Version> v = std::nullopt);
  Result<std::vector<std::string>> children(Store& s, const std::string& path);
  Result<bool> exists(Store& s, const std::string& path);
  // Collects s's notifications into `into` (read after runUntil).
  void listen(Store& s, std::vector<Notification>* into);
  bool has(const std::vector<Notification>& got, NotificationType t, const std::string& path);

  std::unique_ptr<SessionSource> source_;
  std::unique_ptr<Store> store_;
  std::string root_;  // a fresh path per test
  storage::testing::ManualExecutor ex_;
};

}  // namespace magnetar::metadata::testing
