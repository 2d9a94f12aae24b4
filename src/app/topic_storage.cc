#include "app/topic_storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "app/option_bindings.h"
#include "base/logging.h"
#include "broker/cluster/local_records.h"
#include "broker/policies/policies.h"
#include "broker/schema/schema_registry.h"

namespace magnetar::app {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Waits until a server of BookKeeper's ZooKeeper ("h1:p1,h2:p2") accepts connections or
// `deadline` passes (false then): says at once what it waits for, then every 5 s, trying again
// every 500 ms, as the BookKeeper client's ZooKeeper keeps reconnecting within its zkTimeout.
bool waitForBookKeeperZk(const std::string& uri, const std::string& hosts, int timeoutMs,
                         std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  if (anyZkServerAccepts(hosts)) return true;
  MLOG_WARN(
      "waiting for BookKeeper's ZooKeeper at {} (bookkeeperMetadataServiceUri={}): no server "
      "accepts connections; trying again for up to {} ms (metadataStoreSessionTimeoutMillis)",
      hosts, uri, timeoutMs);
  auto nextLog = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(500), deadline - Clock::now()));
    if (anyZkServerAccepts(hosts, 500)) {
      MLOG_INFO("BookKeeper's ZooKeeper at {} accepts connections", hosts);
      return true;
    }
    if (Clock::now() >= nextLog && Clock::now() < deadline) {
      MLOG_WARN(
          "still waiting for BookKeeper's ZooKeeper at {} ({} ms left)", hosts,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      nextLog += std::chrono::seconds(5);
    }
  }
  return false;
}

}  // namespace

bool anyZkServerAccepts(const std::string& hosts, int timeoutMs) {
  std::string list = hosts.substr(0, hosts.find('/'));
  asio::io_context io;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string hp = list.substr(pos, comma - pos);
    pos = comma + 1;
    size_t colon = hp.rfind(':');
    if (colon == std::string::npos) continue;
    boost::system::error_code ec;
    tcp::resolver resolver(io);
    auto endpoints = resolver.resolve(hp.substr(0, colon), hp.substr(colon + 1), ec);
    if (ec) continue;
    tcp::socket sock(io);
    bool connected = false;
    asio::async_connect(sock, endpoints,
                        [&](boost::system::error_code e, const tcp::endpoint&) { connected = !e; });
    io.restart();
    io.run_for(std::chrono::milliseconds(timeoutMs));
    if (connected) return true;
  }
  return false;
}

Status TopicStorage::openLocalRecords(const broker::cluster::ConfigurationStoreOptions& o) {
  if (Status s = broker::cluster::migrateLegacyMetadata(metadata, o); !s) return s;
  std::vector<std::string> roots = broker::cluster::ConfigurationStore::roots();
  // LocalPolicies: a namespace's anti-affinity group (admin/placement_routes.h).
  // "/mqtt": MQTT's persistent sessions and retained messages (docs/mqtt-format.md).
  roots.insert(roots.end(), {broker::kTopicPoliciesRoot, broker::kSchemasRoot,
                             "/admin/local-policies", "/mqtt"});
  auto backend = broker::cluster::openLocalRecords(metadata, std::move(roots));
  if (!backend.isOk()) return backend.status();
  localRecords = std::move(*backend);
  localRecordStore = localRecords->openSession();
  return Status::ok();
}

void TopicStorage::shutdown() {
  if (localRecordStore) localRecordStore->close();
  if (localRecords) localRecords->flush();  // before the RocksDB below closes
  if (durable) durable->shutdown();
  if (bkFactory) bkFactory->shutdown();
  if (bk) bk->close();
}

namespace {

Result<TopicStorage> openEmbedded(const storage::StorageOptions& options) {
  TopicStorage t;
  auto opened = storage::DurableManagedLedgerFactory::open(options);
  if (!opened.isOk()) return opened.status();
  t.durable = std::move(*opened);
  t.factory = t.durable;
  t.metadata = t.durable->metadataStore();
  t.setCacheSizeMB = [d = t.durable](int64_t mb) { d->setCacheSizeMB(mb); };
  t.stats = [d = t.durable] { return d->stats(); };
  return t;
}

// The settings the BookKeeper back end refuses. Errors: kInvalidArgument naming them.
Status checkBookKeeperSettings(const config::ServiceConfiguration& cfg,
                               const storage::bk::BkStorageOptions& o, bool clusterMode) {
  if (!clusterMode) {
    return Status::invalidArgument(
        "bookkeeperMetadataServiceUri=" + cfg.bookkeeperMetadataServiceUri() +
        ": topics on BookKeeper need cluster mode (`magnetar broker` "
        "with metadataStoreUrl=zk:...)");
  }
  if (cfg.managedLedgerDigestType() != "CRC32C") {
    return Status::invalidArgument("managedLedgerDigestType=" + cfg.managedLedgerDigestType() +
                                   ": Magnetar writes BookKeeper entries with CRC32C only");
  }
  if (o.managedLedgerDefaultAckQuorum > o.managedLedgerDefaultWriteQuorum ||
      o.managedLedgerDefaultWriteQuorum > o.managedLedgerDefaultEnsembleSize) {
    return Status::invalidArgument(
        "managedLedgerDefaultAckQuorum <= managedLedgerDefaultWriteQuorum <= "
        "managedLedgerDefaultEnsembleSize is required");
  }
  return Status::ok();
}

// Pulsar's broker gives its BookKeeper client zkTimeout = metadataStoreSessionTimeoutMillis, and
// the client waits that long for its ZooKeeper session (reconnecting meanwhile), then fails the
// broker's start. Errors: kTimeout naming the servers, the client's.
Result<std::unique_ptr<bookkeeper::BookKeeperClient>> connectBookKeeper(
    bookkeeper::ClientConfig bc) {
  const std::string& uri = bc.metadataServiceUri;
  auto parsed = bookkeeper::parseMetadataServiceUri(uri);
  if (!parsed.isOk()) return parsed.status();
  const std::string& hosts = parsed->first;
  const int timeoutMs = std::max(1000, bc.zkSessionTimeoutMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  const Status unreachable = Status::error(
      StatusCode::kTimeout,
      fmt::format("BookKeeper's ZooKeeper at {} (bookkeeperMetadataServiceUri={}) did not answer "
                  "within {} ms (metadataStoreSessionTimeoutMillis)",
                  hosts, uri, timeoutMs));
  if (!waitForBookKeeperZk(uri, hosts, timeoutMs, deadline)) return unreachable;
  bc.zkConnectTimeoutMs =
      std::max<int>(1000, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - std::chrono::steady_clock::now())
                                               .count()));
  auto client = bookkeeper::BookKeeperClient::open(bc);
  if (!client.isOk() && client.status().code() == StatusCode::kTimeout) return unreachable;
  return client;
}

Result<TopicStorage> openOnBookKeeper(const config::ServiceConfiguration& cfg,
                                      const storage::StorageOptions& durableOptions,
                                      metadata::Store* clusterStore) {
  auto o = bkStorageOptionsFrom(cfg);
  if (Status s = checkBookKeeperSettings(cfg, o, clusterStore != nullptr); !s) return s;
  bookkeeper::ClientConfig bc = bookKeeperClientConfigFrom(cfg);
  auto client = connectBookKeeper(bc);
  if (!client.isOk()) return client.status();
  TopicStorage t;
  t.bk = std::move(*client);
  std::error_code ec;
  std::filesystem::create_directories(durableOptions.metadataDirectory, ec);
  if (ec) {
    return Status::ioError("creating " + durableOptions.metadataDirectory + ": " + ec.message());
  }
  auto local = storage::RocksDbMetadataStore::open(durableOptions.metadataDirectory,
                                                   durableOptions.journalSyncData);
  if (!local.isOk()) return local.status();
  t.localMetadata = std::move(*local);
  t.metadata = t.localMetadata.get();
  t.bkFactory = std::make_shared<storage::bk::BkManagedLedgerFactory>(o, t.bk.get(), clusterStore);
  t.factory = t.bkFactory;
  t.setCacheSizeMB = [f = t.bkFactory](int64_t mb) { f->cacheManager().setMaxBytes(mb << 20); };
  t.stats = [f = t.bkFactory] { return f->stats(); };  // pulsar_ml_cache_used_size, ...
  t.onBookKeeper = true;
  MLOG_INFO("topics on BookKeeper at {} (E={} Qw={} Qa={}, {} bookkeeper-io threads)",
            bc.metadataServiceUri, o.managedLedgerDefaultEnsembleSize,
            o.managedLedgerDefaultWriteQuorum, o.managedLedgerDefaultAckQuorum, bc.numIoThreads);
  return t;
}

}  // namespace

Result<TopicStorage> openTopicStorage(const config::ServiceConfiguration& cfg,
                                      const storage::StorageOptions& durableOptions,
                                      metadata::Store* clusterStore) {
  if (cfg.bookkeeperMetadataServiceUri().empty()) return openEmbedded(durableOptions);
  return openOnBookKeeper(cfg, durableOptions, clusterStore);
}

}  // namespace magnetar::app
