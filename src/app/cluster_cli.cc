#include "app/cluster_cli.h"

#include <future>
#include <iostream>
#include <memory>
#include <string>

#include "broker/cluster/bundles.h"
#include "broker/cluster/cluster_metadata.h"
#include "broker/transaction/coordinator_registry.h"
#include "metadata/zk_store.h"
#include "net/event_loop.h"

namespace magnetar::app {
namespace {

// Pulsar's DEFAULT_BUNDLE_NUMBER for public/default and pulsar/system (Pulsar 4.x).
constexpr int kDefaultBundleNumber = 16;
// Pulsar's default --initial-num-transaction-coordinators (both setup commands).
constexpr int kDefaultTransactionCoordinators = 16;

struct Args {
  std::string cluster;
  std::string metadataStore;
  std::string configurationMetadataStore;
  std::string webServiceUrl;
  std::string webServiceUrlTls;
  std::string brokerServiceUrl;
  std::string brokerServiceUrlTls;
  int defaultNamespaceBundles = 0;
  int zkSessionTimeoutMillis = 30000;
  int transactionCoordinators = kDefaultTransactionCoordinators;
};

// Creates path with value unless it exists (Pulsar's createMetadataNode / "if absent").
// Returns true when written, false when it was there.
Result<bool> createIfAbsent(metadata::Store& store, net::Executor* ex, const std::string& path,
                            const std::string& value) {
  auto done = std::make_shared<std::promise<Result<bool>>>();
  auto f = done->get_future();
  metadata::PutOptions o;
  o.expectedVersion = metadata::kNotExists;
  store.put(path, value, o, ex, [done](const Result<metadata::Stat>& r) {
    if (r.isOk()) return done->set_value(true);
    if (r.status().code() == StatusCode::kBadVersion) return done->set_value(false);
    done->set_value(r.status());
  });
  return f.get();
}

int run(const Args& a) {
  metadata::ZkConfig zc;
  zc.sessionTimeoutMs = a.zkSessionTimeoutMillis;
  zc.connectTimeoutMs = 15000;
  zc.operationTimeoutMs = 30000;
  zc.url = a.metadataStore;
  auto local = metadata::openZkStore(zc);
  if (!local.isOk()) {
    std::cerr << "initialize-cluster-metadata: metadata store " << a.metadataStore << ": "
              << local.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<metadata::Store> config;
  std::string configUrl =
      a.configurationMetadataStore.empty() ? a.metadataStore : a.configurationMetadataStore;
  if (configUrl != a.metadataStore) {
    zc.url = configUrl;
    auto c = metadata::openZkStore(zc);
    if (!c.isOk()) {
      std::cerr << "initialize-cluster-metadata: configuration metadata store " << configUrl << ": "
                << c.status().message() << "\n";
      return 1;
    }
    config = std::move(*c);
  }
  metadata::Store& cs = config ? *config : **local;
  net::EventLoop loop("metadata-setup");
  loop.start();
  int bundles = a.defaultNamespaceBundles > 0 ? a.defaultNamespaceBundles : kDefaultBundleNumber;
  auto defaultCut = broker::cluster::defaultBoundaries(bundles);
  auto systemCut = broker::cluster::defaultBoundaries(kDefaultBundleNumber);
  if (!defaultCut.isOk()) {
    std::cerr << "initialize-cluster-metadata: " << defaultCut.status().message() << "\n";
    return 1;
  }
  struct Node {
    metadata::Store* store;
    std::string path;
    std::string value;
  };
  std::vector<Node> nodes = {
      {&**local, "/bookies", "{}"},
      {&cs, "/admin/clusters/" + a.cluster,
       broker::cluster::clusterDataJson(a.webServiceUrl, a.webServiceUrlTls, a.brokerServiceUrl,
                                        a.brokerServiceUrlTls)},
      {&cs, "/admin/clusters/global", broker::cluster::clusterDataJson("", "", "", "")},
      {&cs, "/admin/policies/public", broker::cluster::tenantInfoJson({}, {a.cluster})},
      {&cs, "/admin/policies/pulsar", broker::cluster::tenantInfoJson({}, {a.cluster})},
      {&cs, "/admin/policies/public/default",
       broker::cluster::namespacePoliciesJson({a.cluster}, *defaultCut)},
      {&cs, "/admin/policies/pulsar/system",
       broker::cluster::namespacePoliciesJson({a.cluster}, *systemCut)},
      {&cs, broker::cluster::partitionedTopicPath(broker::kTransactionCoordinatorAssign),
       broker::cluster::partitionedTopicMetadataJson(a.transactionCoordinators)},
  };
  int rc = 0;
  for (const auto& n : nodes) {
    auto r = createIfAbsent(*n.store, &loop, n.path, n.value);
    if (!r.isOk()) {
      std::cerr << "initialize-cluster-metadata: cannot write " << n.path << ": "
                << r.status().message() << "\n";
      rc = 1;
      break;
    }
    std::cout << (*r ? "created " : "exists  ") << n.path << "\n";
  }
  if (config) config->close();
  (*local)->close();
  loop.stop();
  if (rc == 0) std::cout << "Cluster metadata for '" << a.cluster << "' setup correctly\n";
  return rc;
}

// Pulsar's PulsarTransactionCoordinatorMetadataSetup arguments.
struct TxnArgs {
  std::string cluster;
  std::string configurationStore;
  int zkSessionTimeoutMillis = 30000;
  int coordinators = kDefaultTransactionCoordinators;
};

// The pulsar tenant, the pulsar/system namespace and the assign topic with n partitions, each
// unless present (Pulsar's createTenantIfAbsent, createNamespaceIfAbsent, createPartitionedTopic).
Status createTransactionCoordinatorMetadata(metadata::Store& cs, net::Executor* ex,
                                            const std::string& cluster, int n) {
  auto systemCut = broker::cluster::defaultBoundaries(kDefaultBundleNumber);
  if (!systemCut.isOk()) return systemCut.status();
  const std::pair<std::string, std::string> nodes[] = {
      {"/admin/policies/pulsar", broker::cluster::tenantInfoJson({}, {cluster})},
      {"/admin/policies/pulsar/system",
       broker::cluster::namespacePoliciesJson({cluster}, *systemCut)},
      {broker::cluster::partitionedTopicPath(broker::kTransactionCoordinatorAssign),
       broker::cluster::partitionedTopicMetadataJson(n)},
  };
  for (const auto& [path, value] : nodes) {
    auto r = createIfAbsent(cs, ex, path, value);
    if (!r.isOk()) return Status::ioError("cannot write " + path + ": " + r.status().message());
    std::cout << (*r ? "created " : "exists  ") << path << "\n";
  }
  return Status::ok();
}

int runTxnSetup(const TxnArgs& a) {
  if (a.configurationStore.empty()) {
    std::cerr << "Configuration store address argument is required (--configuration-store)\n";
    return 1;
  }
  if (a.coordinators <= 0) {
    std::cerr << "Number of transaction coordinators must greater than 0\n";
    return 1;
  }
  metadata::ZkConfig zc;
  zc.sessionTimeoutMs = a.zkSessionTimeoutMillis;
  zc.connectTimeoutMs = 15000;
  zc.operationTimeoutMs = 30000;
  zc.url = a.configurationStore;
  auto store = metadata::openZkStore(zc);
  if (!store.isOk()) {
    std::cerr << "initialize-transaction-coordinator-metadata: configuration store "
              << a.configurationStore << ": " << store.status().message() << "\n";
    return 1;
  }
  net::EventLoop loop("metadata-setup");
  loop.start();
  Status s = createTransactionCoordinatorMetadata(**store, &loop, a.cluster, a.coordinators);
  (*store)->close();
  loop.stop();
  if (!s.isOk()) {
    std::cerr << "initialize-transaction-coordinator-metadata: " << s.message() << "\n";
    return 1;
  }
  std::cout << "Transaction coordinator metadata setup success\n";
  return 0;
}

}  // namespace

std::function<int()> addInitializeTransactionCoordinatorMetadataCommand(CLI::App& app) {
  auto args = std::make_shared<TxnArgs>();
  auto* cmd = app.add_subcommand(
      "initialize-transaction-coordinator-metadata",
      "Create the transaction coordinators' metadata in the configuration store (as `pulsar "
      "initialize-transaction-coordinator-metadata`)");
  cmd->add_option("-c,--cluster", args->cluster, "Cluster name")->required();
  cmd->add_option("--cs,--configuration-store", args->configurationStore,
                  "Configuration Store connection string (zk:host:port[/chroot])");
  cmd->add_option("--zookeeper-session-timeout-ms", args->zkSessionTimeoutMillis,
                  "Local zookeeper session timeout ms");
  cmd->add_option("--initial-num-transaction-coordinators", args->coordinators,
                  "Num transaction coordinators will assigned in cluster");
  return [cmd, args] { return cmd->parsed() ? runTxnSetup(*args) : -1; };
}

std::function<int()> addInitializeClusterMetadataCommand(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("initialize-cluster-metadata",
                                 "Write a new cluster's metadata to ZooKeeper (as `pulsar "
                                 "initialize-cluster-metadata`)");
  cmd->add_option("-c,--cluster", args->cluster, "Cluster name")->required();
  cmd->add_option("--md,--metadata-store", args->metadataStore,
                  "Metadata store service url (zk:host:port[/chroot])")
      ->required();
  cmd->add_option("--cms,--configuration-metadata-store", args->configurationMetadataStore,
                  "Configuration metadata store (default: the metadata store)");
  cmd->add_option("--uw,--web-service-url", args->webServiceUrl, "Web-service URL for new cluster");
  cmd->add_option("--tw,--web-service-url-tls", args->webServiceUrlTls,
                  "Web-service URL for new cluster with TLS encryption");
  cmd->add_option("--ub,--broker-service-url", args->brokerServiceUrl,
                  "Broker-service URL for new cluster");
  cmd->add_option("--tb,--broker-service-url-tls", args->brokerServiceUrlTls,
                  "Broker-service URL for new cluster with TLS encryption");
  cmd->add_option("--bn,--default-namespace-bundle-number", args->defaultNamespaceBundles,
                  "The bundle numbers for the default namespaces(public/default), default is 16");
  cmd->add_option("--zookeeper-session-timeout-ms", args->zkSessionTimeoutMillis,
                  "Local zookeeper session timeout ms");
  cmd->add_option("--initial-num-transaction-coordinators", args->transactionCoordinators,
                  "Num transaction coordinators will assigned in cluster")
      ->check(CLI::PositiveNumber);
  return [cmd, args] { return cmd->parsed() ? run(*args) : -1; };
}

}  // namespace magnetar::app
