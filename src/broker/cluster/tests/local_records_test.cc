// Standalone's persistent record store (local_records.h): a data directory written by the
// synchronous registries before (keys and records of docs/broker-metadata-format.md) loads
// unchanged, and what the registries write survives a restart, in the same format.
#include "broker/cluster/local_records.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "base/blocking_wait.h"
#include "broker/policies/policies.h"
#include "broker/schema/schema_registry.h"
#include "net/event_loop.h"
#include "storage/rocksdb_metadata_store.h"

namespace magnetar::broker::cluster {
namespace {

template <typename T>
T waitFor(const std::function<void(std::function<void(T)>)>& call) {
  auto p = std::make_shared<std::promise<T>>();
  std::future<T> f = p->get_future();
  call([p](T v) { p->set_value(std::move(v)); });
  return blockingGet(f, "local records test");
}

// One broker start on the data directory: RocksDB, the record store and both registries.
struct Broker {
  explicit Broker(const std::string& dir) {
    loop.start();
    auto db = storage::RocksDbMetadataStore::open(dir, false);
    EXPECT_TRUE(db.isOk());
    rocks = std::move(*db);
    auto b = openLocalRecords(rocks.get(), {kTopicPoliciesRoot, kSchemasRoot});
    EXPECT_TRUE(b.isOk());
    backend = *b;
    session = backend->openSession();
    EXPECT_TRUE(waitFor<Status>([&](auto done) { schemas.attach(session.get(), &loop, done); }));
    EXPECT_TRUE(waitFor<Status>(
        [&](auto done) { policies.attachTopicPolicies(session.get(), &loop, nullptr, done); }));
  }
  ~Broker() {  // as the broker stops: the store thread's writes end before RocksDB closes
    schemas.detach();
    policies.detachTopicPolicies();
    session->close();
    backend->flush();
    loop.stop();
  }

  std::unique_ptr<storage::RocksDbMetadataStore> rocks;
  std::shared_ptr<metadata::LocalBackend> backend;
  std::unique_ptr<metadata::Store> session;
  SchemaRegistry schemas;
  PolicyRegistry policies;
  net::EventLoop loop{"test-metadata"};  // stopped before the registries go
};

TEST(LocalRecords, AnOldDataDirectoryLoadsAndWritesSurviveARestart) {
  std::string dir = ::testing::TempDir() + "local-records-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string topic = "persistent://acme/ns/odd,name";
  const std::string id = "acme/ns/odd,name";
  {  // written as the broker did before: storage::MetadataStore keys, no root nodes
    auto db = storage::RocksDbMetadataStore::open(dir, false);
    ASSERT_TRUE(db.isOk());
    StoredSchema v0;
    v0.schema = SchemaData{SchemaType::STRING, "", {{"k", "v"}}};
    v0.timestampMs = 1;
    ASSERT_TRUE((*db)->put(std::string(kSchemasRoot) + "/" + storage::escapePathComponent(id),
                           encodeSchemaRecord({v0})));
    ASSERT_TRUE(
        (*db)->put(std::string(kTopicPoliciesRoot) + "/" + storage::escapePathComponent(topic),
                   encodeTopicPolicies({{"maxProducers", "3"}})));
    ASSERT_TRUE((*db)->put("/ml/acme/ns/persistent/odd", "a ledger list, not a record"));
  }
  {
    Broker b(dir);
    ASSERT_TRUE(b.schemas.getSchema(id).has_value());
    EXPECT_EQ(b.schemas.getSchema(id)->schema.properties.at("k"), "v");
    EXPECT_EQ(b.policies.topicPolicyInt(topic, "maxProducers"), 3);
    SchemaData json{SchemaType::JSON, R"({"type":"record","name":"R","fields":[]})", {}};
    auto v = waitFor<Result<int64_t>>([&](auto cb) {
      b.schemas.putSchemaIfAbsent(id, json, SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE, &b.loop,
                                  cb);
    });
    ASSERT_TRUE(v.isOk()) << v.status().toString();
    EXPECT_EQ(*v, 1);
    EXPECT_TRUE(waitFor<Status>(
        [&](auto done) { b.policies.setTopicPolicy(topic, "maxConsumers", "5", done); }));
    EXPECT_TRUE(waitFor<Status>(
        [&](auto done) { b.policies.setTopicPolicy("persistent://a/b/c", "x", "1", done); }));
  }
  {
    Broker b(dir);  // restarted
    EXPECT_EQ(b.schemas.getAllSchemas(id).size(), 2u);
    EXPECT_EQ(b.schemas.getSchema(id)->schema.type, SchemaType::JSON);
    EXPECT_EQ(b.policies.topicPolicyInt(topic, "maxProducers"), 3);
    EXPECT_EQ(b.policies.topicPolicyInt(topic, "maxConsumers"), 5);
    EXPECT_EQ(b.policies.topicPolicyInt("persistent://a/b/c", "x"), 1);
    b.policies.removeTopicPolicies("persistent://a/b/c");
    // The records are still the keys and formats of docs/broker-metadata-format.md.
    auto raw = b.rocks->get(std::string(kSchemasRoot) + "/" + storage::escapePathComponent(id));
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(decodeSchemaRecord(*raw).size(), 2u);
    auto ml = b.rocks->get("/ml/acme/ns/persistent/odd");
    EXPECT_EQ(*ml, "a ledger list, not a record");  // storage's keys are not the store's
  }
  {
    Broker b(dir);
    EXPECT_TRUE(b.policies.topicPolicies("persistent://a/b/c").empty());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace magnetar::broker::cluster
