// The configuration store over standalone's persistent local store (local_records.h): tenants,
// clusters, resource groups, namespaces with their policies and partitioned topics survive a
// restart, and a data directory of a build that kept them in its own keys
// (docs/broker-metadata-format.md, "Before") is migrated once and served unchanged.
#include "broker/cluster/configuration_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "broker/cluster/local_records.h"
#include "broker/policies/namespace_resources.h"
#include "broker/policies/policies.h"
#include "storage/rocksdb_metadata_store.h"

namespace magnetar::broker::cluster {
namespace {

// A broker's view (as BrokerService's) over the configuration store on `store`.
struct View : SharedConfigView {
  void applySharedTenant(const std::string& name, const std::optional<TenantInfo>& i) override {
    policies.applyTenant(name, i);
  }
  void applySharedNamespace(const std::string& ns,
                            const std::optional<NamespacePolicies>& p) override {
    namespaces.applyNamespace(ns, p.has_value());
    policies.applyNamespacePolicies(ns, p);
  }
  void applySharedPartitioned(const std::string& topic, std::optional<int> n) override {
    namespaces.applyPartitioned(topic, n);
  }
  void applySharedCluster(const std::string& name,
                          const std::optional<std::string>& data) override {
    policies.applyCluster(name, data);
  }
  void applySharedResourceGroup(const std::string& name,
                                const std::optional<std::string>& json) override {
    policies.applyResourceGroup(name, json);
  }
  void clearShared() override {
    namespaces.clear();
    policies.clearTenantsAndPolicies();
  }
  size_t sharedTenantCount() const override { return policies.tenants().size(); }
  size_t sharedNamespaceCount() const override { return namespaces.list().size(); }

  PolicyRegistry policies;
  NamespaceResources namespaces;
};

// One broker start: the view loaded from a configuration store over `store`.
struct Broker {
  explicit Broker(metadata::Store* store) : config(store, store, {"standalone"}) {
    view.policies.setShared(&config);
    EXPECT_TRUE(config.start(&view).isOk());
  }
  ~Broker() { config.stop(); }

  View view;
  ConfigurationStore config;
};

TEST(ConfigurationStoreLocal, TenantsClustersAndNamespacePoliciesSurviveARestart) {
  auto backend = metadata::LocalBackend::create();
  auto session = backend->openSession();
  {
    Broker b(session.get());
    PolicyRegistry& r = b.view.policies;
    ASSERT_TRUE(r.createTenant("acme", {{"ops"}, {"standalone"}}));
    EXPECT_EQ(r.createTenant("acme", {}).code(), StatusCode::kAlreadyExists);
    ASSERT_TRUE(r.createTenant("gone", {}));
    ASSERT_TRUE(r.deleteTenant("gone"));
    ASSERT_TRUE(r.createCluster("c2", R"({"serviceUrl":"http://c2:8080"})"));
    EXPECT_EQ(r.createCluster("c2", "{}").code(), StatusCode::kAlreadyExists);
    ASSERT_TRUE(r.createCluster("c3", "{}"));
    ASSERT_TRUE(r.updateCluster("c3", R"({"serviceUrl":"http://c3:8080"})"));
    EXPECT_EQ(r.updateCluster("c4", "{}").code(), StatusCode::kNotFound);
    ASSERT_TRUE(r.createCluster("gone", "{}"));
    ASSERT_TRUE(r.deleteCluster("gone"));
    EXPECT_EQ(r.deleteCluster("gone").code(), StatusCode::kNotFound);
    NamespacePolicies initial;
    initial.replicationClusters = std::vector<std::string>{"standalone", "c2"};
    initial.keptFields["properties"] = R"({"k":"v,=%"})";
    initial.keptFields["bundles"] = R"({"boundaries":["0x00000000","0xffffffff"],"numBundles":1})";
    ASSERT_TRUE(b.config.createNamespace("acme/a", initial, 1));
    ASSERT_TRUE(b.config.createNamespace("acme/x", {}, 0));
    EXPECT_TRUE(r.updateNamespacePolicies("acme/a", [](NamespacePolicies& p) {
                   p.deduplicationEnabled = true;
                   p.subscriptionExpirationTimeMinutes = 15;
                   p.autoTopicCreation = AutoTopicCreationOverride{true, "partitioned", 3};
                   p.limits["maxProducersPerTopic"] = 2;
                   p.limits["maxUnackedMessagesPerConsumer"] = 0;
                 }).isOk());
    EXPECT_EQ(r.updateNamespacePolicies("acme/none", [](NamespacePolicies&) {}).code(),
              StatusCode::kNotFound);
    ASSERT_TRUE(b.config.deleteNamespace("acme/x"));
    ASSERT_TRUE(b.config.createPartitioned("persistent://acme/a/p", 3));
  }
  Broker again(session.get());  // a restarted broker
  PolicyRegistry& r = again.view.policies;
  ASSERT_TRUE(r.tenant("acme"));
  EXPECT_EQ(r.tenant("acme")->adminRoles, std::vector<std::string>{"ops"});
  EXPECT_FALSE(r.tenant("gone"));
  EXPECT_EQ(r.clusters(), (std::vector<std::string>{"c2", "c3"}));
  EXPECT_EQ(r.cluster("c3"), R"({"serviceUrl":"http://c3:8080"})");
  EXPECT_EQ(again.view.namespaces.list(), std::vector<std::string>{"acme/a"});
  NamespacePolicies p = r.namespacePolicies("acme/a");
  EXPECT_EQ(p.deduplicationEnabled, true);
  EXPECT_EQ(p.subscriptionExpirationTimeMinutes, 15);
  ASSERT_TRUE(p.autoTopicCreation);
  EXPECT_EQ(p.autoTopicCreation->defaultNumPartitions, 3);
  EXPECT_EQ(p.limits, (std::map<std::string, int32_t>{{"maxProducersPerTopic", 2},
                                                      {"maxUnackedMessagesPerConsumer", 0}}));
  EXPECT_EQ(p.replicationClusters, (std::vector<std::string>{"standalone", "c2"}));
  EXPECT_EQ(p.keptFields.at("properties"), R"({"k":"v,=%"})");
  EXPECT_EQ(p.keptFields.at("bundles"),
            R"({"boundaries":["0x00000000","0xffffffff"],"numBundles":1})");
  EXPECT_EQ(again.view.namespaces.partitions("persistent://acme/a/p"), 3);
}

// A data directory as the build before this one left it: tenants, clusters, namespaces, their
// policies and partitioned topics under /admin/magnetar/..., written through storage's
// synchronous store exactly as that build did.
void writeOldLayout(storage::MetadataStore& db) {
  TenantInfo acme{{"ops", "a,b"}, {"standalone"}};
  NamespacePolicies ns;
  ns.retention = RetentionPolicy{60, 10};
  ns.messageTtlSeconds = 30;
  ns.permissions["app"] = {"produce", "consume"};
  ns.replicationClusters = std::vector<std::string>{"standalone"};
  ns.keptFields["encryption_required"] = "true";
  ASSERT_TRUE(db.write({
      storage::MetadataOp::put("/admin/magnetar/namespaces", "public/default\nacme/ns\n"),
      storage::MetadataOp::put("/admin/magnetar/partitioned-topics",
                               "persistent://acme/ns/p=4\npersistent://acme/ns/odd name=2\n"
                               "persistent://acme/ns/bad=x\n"),
      storage::MetadataOp::put("/admin/magnetar/tenants/acme", encodeTenant(acme)),
      storage::MetadataOp::put("/admin/magnetar/policies/acme%2Fns", encodePolicies(ns)),
      storage::MetadataOp::put("/admin/magnetar/policies/acme%2Fgone", encodePolicies(ns)),
      storage::MetadataOp::put("/admin/magnetar/clusters/c2", R"({"serviceUrl":"http://c2"})"),
      storage::MetadataOp::put("/ml/acme/ns/persistent/p-partition-0", "a ledger list"),
  }));
}

// What the old layout held, as the broker now serves it.
void expectOldData(const View& v) {
  EXPECT_EQ(v.namespaces.list(), (std::vector<std::string>{"acme/ns", "public/default"}));
  ASSERT_TRUE(v.policies.tenant("acme"));
  EXPECT_EQ(v.policies.tenant("acme")->adminRoles, (std::vector<std::string>{"ops", "a,b"}));
  EXPECT_EQ(v.policies.tenant("acme")->allowedClusters, std::vector<std::string>{"standalone"});
  // "public" was built in, never stored: it keeps its allowed cluster.
  ASSERT_TRUE(v.policies.tenant("public"));
  EXPECT_EQ(v.policies.tenant("public")->allowedClusters, std::vector<std::string>{"standalone"});
  EXPECT_EQ(v.policies.cluster("c2"), R"({"serviceUrl":"http://c2"})");
  NamespacePolicies p = v.policies.namespacePolicies("acme/ns");
  ASSERT_TRUE(p.retention);
  EXPECT_EQ(p.retention->retentionTimeInMinutes, 60);
  EXPECT_EQ(p.retention->retentionSizeInMB, 10);
  EXPECT_EQ(p.messageTtlSeconds, 30);
  EXPECT_EQ(p.permissions.at("app"), (std::set<std::string>{"consume", "produce"}));
  EXPECT_EQ(p.keptFields.at("encryption_required"), "true");
  EXPECT_EQ(v.namespaces.partitions("persistent://acme/ns/p"), 4);
  EXPECT_EQ(v.namespaces.partitions("persistent://acme/ns/odd name"), 2);
  EXPECT_FALSE(v.namespaces.partitions("persistent://acme/ns/bad"));
}

TEST(ConfigurationStoreLocal, ResourceGroupsAreStoredWatchedAndSurviveARestart) {
  auto backend = metadata::LocalBackend::create();
  auto session = backend->openSession();
  auto otherSession = backend->openSession();
  const std::string rg1 = R"({"publishRateInMsgs":10,"publishRateInBytes":-1,)"
                          R"("dispatchRateInMsgs":-1,"dispatchRateInBytes":-1})";
  {
    Broker b(session.get());
    Broker other(otherSession.get());  // a second broker on the same store
    PolicyRegistry& r = b.view.policies;
    ASSERT_TRUE(r.putResourceGroup("rg1", "{}"));
    ASSERT_TRUE(r.putResourceGroup("rg1", rg1));  // replaced
    ASSERT_TRUE(r.putResourceGroup("gone", "{}"));
    ASSERT_TRUE(r.deleteResourceGroup("gone"));
    EXPECT_EQ(r.deleteResourceGroup("gone").code(), StatusCode::kNotFound);
    EXPECT_EQ(r.resourceGroups(), std::vector<std::string>{"rg1"});
    ASSERT_TRUE(b.config.createNamespace("public/rg", {}, 1));
    EXPECT_FALSE(r.resourceGroupInUse("rg1"));
    ASSERT_TRUE(r.updateNamespacePolicies("public/rg", [](NamespacePolicies& p) {
      p.keptFields["resource_group_name"] = R"("rg1")";
    }));
    EXPECT_TRUE(r.resourceGroupInUse("rg1"));
    EXPECT_EQ(resourceGroupOf(r.namespacePolicies("public/rg")), "rg1");
    // The other broker follows through its watches.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (other.view.policies.resourceGroup("rg1") != rg1 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(other.view.policies.resourceGroup("rg1"), rg1);
    EXPECT_FALSE(other.view.policies.resourceGroup("gone"));
  }
  Broker again(session.get());  // a restarted broker
  EXPECT_EQ(again.view.policies.resourceGroups(), std::vector<std::string>{"rg1"});
  EXPECT_EQ(again.view.policies.resourceGroup("rg1"), rg1);
  EXPECT_TRUE(again.view.policies.resourceGroupInUse("rg1"));
}

TEST(ConfigurationStoreLocal, AnOldStandaloneDataDirectoryIsMigratedOnce) {
  std::string dir = ::testing::TempDir() + "config-store-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ConfigurationStoreOptions o{"standalone"};
  {
    auto db = storage::RocksDbMetadataStore::open(dir, false);
    ASSERT_TRUE(db.isOk());
    writeOldLayout(**db);
  }
  for (int start = 0; start < 2; ++start) {  // the first start migrates, the second finds it done
    auto db = storage::RocksDbMetadataStore::open(dir, false);
    ASSERT_TRUE(db.isOk());
    ASSERT_TRUE(migrateLegacyMetadata(db->get(), o));
    for (const char* old :
         {"/admin/magnetar/namespaces", "/admin/magnetar/partitioned-topics",
          "/admin/magnetar/tenants/acme", "/admin/magnetar/policies/acme%2Fns",
          "/admin/magnetar/policies/acme%2Fgone", "/admin/magnetar/clusters/c2"}) {
      EXPECT_EQ((*db)->get(old).status().code(), StatusCode::kNotFound) << old;
    }
    EXPECT_EQ(*(*db)->get("/ml/acme/ns/persistent/p-partition-0"), "a ledger list");
    auto backend = openLocalRecords(db->get(), ConfigurationStore::roots());
    ASSERT_TRUE(backend.isOk());
    auto session = (*backend)->openSession();
    {
      Broker b(session.get());
      expectOldData(b.view);
      if (start == 0) {  // a change after the migration is kept too
        ASSERT_TRUE(b.view.policies.createTenant("later", {}));
      } else {
        EXPECT_TRUE(b.view.policies.tenant("later"));
      }
    }
    // Pulsar's nodes, as its tools read them.
    auto ns = (*db)->get("/admin/policies/acme/ns");
    ASSERT_TRUE(ns.isOk());
    EXPECT_NE(ns->find(R"("message_ttl_in_seconds":30)"), std::string::npos) << *ns;
    EXPECT_NE(ns->find(R"("bundles":{"boundaries":["0x00000000","0x40000000")"), std::string::npos);
    auto pt = (*db)->get("/admin/partitioned-topics/acme/ns/persistent/odd+name");
    ASSERT_TRUE(pt.isOk());
    EXPECT_NE(pt->find(R"("partitions":2)"), std::string::npos) << *pt;
    session->close();
    (*backend)->flush();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace magnetar::broker::cluster
