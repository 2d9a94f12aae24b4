#include "app/run_broker.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "admin/broker_admin.h"
#include "admin/broker_info_routes.h"
#include "admin/broker_routes.h"
#include "admin/cluster_routes.h"
#include "admin/http_client.h"
#include "admin/http_server.h"
#include "app/dynamic_settings.h"
#include "app/mqtt_options.h"
#include "app/option_bindings.h"
#include "app/topic_storage.h"
#include "app/websocket_options.h"
#include "base/blocking_wait.h"
#include "base/logging.h"
#include "broker/cluster/configuration_store.h"
#include "broker/cluster/load_report.h"
#include "broker/cluster/namespace_service.h"
#include "broker/replication/replication_service.h"
#include "broker/service/broker_service.h"
#include "metadata/zk_store.h"

namespace magnetar::app {
namespace {

namespace asio = boost::asio;

bool isZooKeeperUrl(const std::string& url) { return url.rfind("zk:", 0) == 0; }

// Exit status for a start-up failure: 2 for a bad setting, 1 otherwise.
int exitCodeOf(const Status& s) { return s.code() == StatusCode::kInvalidArgument ? 2 : 1; }

// SIGINT/SIGTERM stop the main loop. Made first, so a signal during start-up still stops cleanly.
// Thread: main.
struct StopSignal {
  asio::io_context loop{1};
  asio::signal_set signals{loop, SIGINT, SIGTERM};
  int signal = 0;  // the signal received; 0 while running

  StopSignal() {
    signals.async_wait([this](boost::system::error_code ec, int sig) {
      if (!ec) signal = sig;
      loop.stop();
    });
  }
};

// Cluster mode's parts (docs/cluster-mode.md); all null in standalone.
struct Cluster {
  std::unique_ptr<metadata::Store> zk;
  std::unique_ptr<metadata::Store> zkConfig;  // configurationMetadataStoreUrl, when another one
  std::unique_ptr<broker::cluster::NamespaceService> namespaceService;
  // The load report (also in standalone, for broker-stats load-report and pulsar_lb_*); made by
  // serve() before the namespace service starts (it writes the registration's report).
  std::unique_ptr<broker::cluster::LoadManager> loadManager;

  metadata::Store* configStore() const { return zkConfig ? zkConfig.get() : zk.get(); }
  void stop() {
    if (loadManager) loadManager->stop();
    if (namespaceService) namespaceService->stop();
    if (zkConfig) zkConfig->close();
    if (zk) zk->close();  // ends the session: this broker's ephemeral znodes go at once
  }
};

// The admin REST API, /metrics and health (pulsar-web); destroyed before the broker service.
struct Web {
  std::atomic<bool> serving{false};  // the health route's answer
  std::shared_ptr<admin::Router> router = std::make_shared<admin::Router>();
  std::unique_ptr<admin::BrokerAdmin> brokerAdmin;
  std::unique_ptr<admin::HttpServer> http;   // started
  std::unique_ptr<admin::HttpServer> https;  // started, with webServicePortTls
  // webSocketServiceEnabled: the /ws/ sessions on both listeners (their upgrade hook).
  std::shared_ptr<websocket::WebSocketService> websocket;
  // mqttListeners: MQTT on the broker's pulsar-io loops; stopped first at shutdown.
  std::unique_ptr<mqtt::MqttService> mqtt;
  // mqttNumIOThreads > 0: MQTT's own loops (runBroker holds them past the BrokerService).
  std::shared_ptr<net::EventLoopGroup> mqttLoops;

  ~Web() { stop(); }
  void stop() {
    if (mqtt) mqtt->stop();
    if (websocket) websocket->stop();  // its client first: no callback after the servers stop
    if (https) https->stop();
    if (http) http->stop();
  }
};

// The bound ports; a TLS port is written only when it listens (> 0).
struct BoundPorts {
  uint16_t broker = 0;
  uint16_t web = 0;
  int brokerTls = 0;
  int webTls = 0;
  int mqtt = 0;     // the first mqtt:// of mqttListeners, 0 without one
  int mqttTls = 0;  // the first mqtt+ssl:// of mqttListeners, 0 without one
};

Status writePortsFile(const std::string& path, const BoundPorts& p) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "brokerServicePort=" << p.broker << "\nwebServicePort=" << p.web << "\n";
    if (p.brokerTls > 0) out << "brokerServicePortTls=" << p.brokerTls << "\n";
    if (p.webTls > 0) out << "webServicePortTls=" << p.webTls << "\n";
    if (p.mqtt > 0) out << "mqttPort=" << p.mqtt << "\n";
    if (p.mqttTls > 0) out << "mqttPortTls=" << p.mqttTls << "\n";
    if (!out) return Status::ioError(fmt::format("cannot write ports file '{}'", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::ioError(fmt::format("cannot rename to '{}': {}", path, ec.message()));
  return Status::ok();
}

// Opens a ZooKeeper session for `url`. While no server of the list accepts connections, logs
// "not reachable" at once and tries again every 5 s (kZkRetry), polling the stop signal's loop
// every 100 ms, so SIGTERM ends the wait at once. Errors: kInvalidArgument for a bad url;
// kClosed when stopped first.
constexpr std::chrono::seconds kZkRetry{5};
Result<std::unique_ptr<metadata::Store>> openClusterStore(const std::string& url,
                                                          const config::ServiceConfiguration& cfg,
                                                          StopSignal& stop) {
  metadata::ZkConfig zc = zkConfigFrom(cfg, url);
  auto hosts = metadata::parseZkUrl(url);
  if (!hosts.isOk()) return hosts.status();
  auto waitRetry = [&]() -> bool {  // false: stopped
    auto until = std::chrono::steady_clock::now() + kZkRetry;
    while (std::chrono::steady_clock::now() < until) {
      stop.loop.poll();
      if (stop.signal) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    stop.loop.poll();
    return !stop.signal;
  };
  for (;;) {
    stop.loop.poll();
    if (stop.signal) return Status::closed("stopped while waiting for ZooKeeper");
    if (!anyZkServerAccepts(*hosts)) {
      MLOG_ERROR(
          "ZooKeeper at {} is not reachable (no server accepts connections); trying again "
          "in {} s",
          url, kZkRetry.count());
      if (!waitRetry()) return Status::closed("stopped while waiting for ZooKeeper");
      continue;
    }
    auto store = metadata::openZkStore(zc);
    if (store.isOk() || store.status().code() == StatusCode::kInvalidArgument) return store;
    MLOG_ERROR("ZooKeeper at {} is not reachable ({}); trying again in {} s", url,
               store.status().message(), kZkRetry.count());
    if (!waitRetry()) return Status::closed("stopped while waiting for ZooKeeper");
  }
}

// Cluster mode (`magnetar broker` with metadataStoreUrl=zk:...): opens the ZooKeeper sessions and
// makes the namespace service; nothing in standalone. Returns 0 or the exit status (logged).
int openCluster(const BrokerOptions& options, StopSignal& stop, Cluster& cluster) {
  const config::ServiceConfiguration& cfg = *options.config;
  const std::string url = cfg.metadataStoreUrl();
  if (!isZooKeeperUrl(url)) return 0;
  if (options.standalone) {
    MLOG_ERROR(
        "metadataStoreUrl={}: `magnetar standalone` keeps its metadata embedded; run "
        "`magnetar broker` for cluster mode",
        url);
    return 2;
  }
  auto store = openClusterStore(url, cfg, stop);
  if (!store.isOk()) {
    MLOG_ERROR("metadataStoreUrl={}: {}", url, store.status().message());
    return exitCodeOf(store.status());
  }
  cluster.zk = std::move(*store);
  std::string configUrl = cfg.configurationMetadataStoreUrl();
  if (!configUrl.empty() && configUrl != url) {
    auto c = openClusterStore(configUrl, cfg, stop);
    if (!c.isOk()) {
      MLOG_ERROR("configurationMetadataStoreUrl={}: {}", configUrl, c.status().message());
      return exitCodeOf(c.status());
    }
    cluster.zkConfig = std::move(*c);
  }
  cluster.namespaceService = std::make_unique<broker::cluster::NamespaceService>(
      cluster.zk.get(), cluster.configStore(), namespaceServiceOptionsFrom(options.config));
  return 0;
}

// The broker module's options with the TLS context (certificates loaded and checked before
// anything listens; null without a TLS port). Errors: kInvalidArgument, the message logged.
Result<broker::BrokerOptions> makeBrokerOptions(const config::ServiceConfiguration& cfg) {
  auto o = brokerOptionsFrom(cfg);
  if (!o.isOk()) return o.status();
  if (cfg.brokerServicePortTls() || cfg.webServicePortTls() || hasMqttTlsListener(cfg)) {
    auto created = net::TlsContext::create(tlsOptionsFrom(cfg));
    if (!created.isOk()) {
      return Status::invalidArgument("cannot start TLS: " + created.status().message());
    }
    o->tlsContext = std::move(*created);
  }
  return o;
}

// Bundles lost (session expired, unloaded): the clients of their topics are closed, so they look
// the topics up again; on BookKeeper the topics are unloaded too (ledger closed, cursors
// written), so the next owner takes them over cleanly. A voluntary release closes them first.
void installOwnershipHandlers(broker::cluster::NamespaceService& ns, broker::BrokerService& service,
                              bool unload) {
  // Transaction coordinators follow their assign partitions' bundles (Pulsar's
  // TransactionMetadataStoreService): loaded when one is taken, closed when it leaves.
  ns.setBundleOwnedHandler(
      [&service](const std::string&) { service.syncTransactionCoordinators(); });
  ns.setOwnershipLostHandler([&service, &ns, unload] {
    service.syncTransactionCoordinators();
    for (auto& t : service.topics()) {
      if (ns.owns(t->name())) continue;
      if (unload) {
        // Another broker may own it already: give it up without writing.
        service.unloadTopic(t, /*release=*/true);
      } else {
        t->executor().execute([t] { t->disconnectClients(); });
      }
    }
  });
  // A voluntary release: on BookKeeper the bundle's topics close cleanly (cursors written,
  // ledgers closed) before the ownership znode goes, so the next owner starts from their last
  // state; the namespace service waits for `closed` (namespaceBundleUnloadingTimeoutMs).
  ns.setBundleReleaseHandler(
      [&service, &ns, unload](const std::string& bundle, const std::function<void()>& closed) {
        service.syncTransactionCoordinators();
        std::vector<std::shared_ptr<broker::PersistentTopic>> gone;
        for (auto& t : service.topics()) {
          if (!ns.owns(t->name())) gone.push_back(t);
        }
        if (!unload || gone.empty()) {
          for (auto& t : gone) t->executor().execute([t] { t->disconnectClients(); });
          return closed();
        }
        MLOG_INFO("Unloading bundle {}: closing {} topic(s)", bundle, gone.size());
        auto left = std::make_shared<std::atomic<size_t>>(gone.size());
        for (auto& t : gone) {
          service.unloadTopic(t, /*release=*/false, [left, closed](const Status&) {
            if (left->fetch_sub(1) == 1) closed();
          });
        }
      });
}

// Cluster mode: topic ownership from the namespace service; on each broker's own storage,
// GET_TOPICS_OF_NAMESPACE lists every broker's topics.
void addClusterDeps(const Cluster& cluster, const TopicStorage& storage,
                    broker::BrokerService::Deps& deps) {
  deps.ownership = cluster.namespaceService.get();
  if (storage.onBookKeeper) return;
  deps.clusterTopicLister = [ns = cluster.namespaceService.get()](
                                broker::BrokerService& service, const std::string& nsName,
                                broker::TopicDomain domain,
                                const std::optional<std::string>& authorization,
                                std::function<void(Result<std::vector<std::string>>)> cb) {
    admin::clusterTopicsOfNamespace(*ns, service, nsName, domain, authorization, std::move(cb));
  };
}

// The configuration store behind the broker's tenants, clusters, namespaces and partitioned
// topics, and the store of its topic policies and schemas: ZooKeeper in cluster mode,
// standalone's persistent local store (a data directory of a build before migrated first) else
// (one code path: docs/broker-metadata-format.md). Errors: the local store's.
// Fills deps' sharedConfig and recordStore.
Result<std::unique_ptr<broker::cluster::ConfigurationStore>> openConfiguration(
    Cluster& cluster, TopicStorage& storage, const config::ServiceConfiguration& cfg,
    broker::BrokerService::Deps& deps) {
  auto cso = configurationStoreOptionsFrom(cfg);
  metadata::Store* config = cluster.configStore();
  metadata::Store* local = cluster.zk.get();
  if (!cluster.namespaceService) {
    if (Status s = storage.openLocalRecords(cso); !s) return s;
    config = local = storage.localRecordStore.get();
  }
  auto store = std::make_unique<broker::cluster::ConfigurationStore>(config, local, cso);
  deps.sharedConfig = store.get();
  deps.recordStore = config;  // every broker's topic policies and schemas in cluster mode
  return store;
}

// Stops the configuration store on every way out of runBroker: declared after the service, so its
// watches stop applying to the service before the service goes.
struct StopConfigurationStore {
  broker::cluster::ConfigurationStore& store;
  ~StopConfigurationStore() { store.stop(); }
};

// Authentication, the broker's loops and listener, the cluster's stores, the dynamic settings.
// Returns 0 or the exit status (logged), having stopped what it started.
int startBroker(const BrokerOptions& options, broker::BrokerService& service, Cluster& cluster,
                broker::cluster::ConfigurationStore& configStore, const TopicStorage& storage) {
  const config::ServiceConfiguration& cfg = *options.config;
  auto authentication = broker::AuthenticationService::create(authenticationOptionsFrom(cfg));
  if (!authentication.isOk()) {
    MLOG_ERROR("Authentication: {}", authentication.status().message());
    return 2;
  }
  service.configureSecurity(std::move(*authentication), cfg.authorizationEnabled(),
                            cfg.superUserRoles());
  // Tenants and namespaces loaded (and watched) before the broker listens.
  if (Status s = configStore.start(&service); !s) {
    MLOG_ERROR("cannot load the tenants and namespaces: {}", s.message());
    configStore.stop();
    cluster.stop();
    return 1;
  }
  if (Status s = service.start(); !s) {
    MLOG_ERROR("{}", s.message());
    return 1;
  }
  if (Status s = connectDynamicSettings(*options.config, service, storage.setCacheSizeMB); !s) {
    MLOG_ERROR("{}", s.message());
    service.stop();
    return 1;
  }
  return 0;
}

void addRoutes(Web& web, const BrokerOptions& options, broker::BrokerService& service,
               const Cluster& cluster, const TopicStorage& storage) {
  admin::Router& router = *web.router;
  if (cluster.namespaceService) {
    admin::addClusterRoutes(router, *cluster.namespaceService, service,
                            options.config->clusterName());
    admin::installTopicOwnershipGuard(router, *cluster.namespaceService, service);
  }
  admin::addHealthRoute(router, [&web] { return web.serving.load(); });
  admin::addBrokerConfigurationRoutes(router, options.config);
  admin::BrokerAdmin::Options adminOptions;
  adminOptions.storageStats = storage.stats;
  adminOptions.loadManager = cluster.loadManager.get();
  adminOptions.namespaceService = cluster.namespaceService.get();
  adminOptions.configStore =
      cluster.namespaceService ? cluster.configStore() : storage.localRecordStore.get();
  adminOptions.localStore =
      cluster.namespaceService ? cluster.zk.get() : storage.localRecordStore.get();
  web.brokerAdmin = std::make_unique<admin::BrokerAdmin>(service, options.config, adminOptions);
  web.brokerAdmin->addRoutes(router);
}

// Starts the HTTP listener and, with webServicePortTls, the HTTPS one; a listener is kept in
// `web` only once started.
Status startHttpServers(Web& web, const config::ServiceConfiguration& cfg,
                        broker::BrokerService& service) {
  std::shared_ptr<net::TlsContext> tls = service.options().tlsContext;
  web.websocket = makeWebSocketService(cfg, service);
  auto options = httpServerOptionsFrom(cfg);
  options.upgrade = web.websocket;
  auto http = std::make_unique<admin::HttpServer>(web.router, options);
  if (Status s = http->start(); !s) return s;
  web.http = std::move(http);
  if (auto port = cfg.webServicePortTls()) {
    auto o = options;
    o.port = static_cast<uint16_t>(*port);
    auto https = std::make_unique<admin::HttpServer>(web.router, o, std::move(tls));
    if (Status s = https->start(); !s) return s;
    web.https = std::move(https);
  }
  return Status::ok();
}

// Logs "magnetar listening: ..." and writes the ports file when asked for.
Status announce(const BoundPorts& bound, const std::string& portsFile) {
  MLOG_INFO("magnetar listening: brokerServicePort={} webServicePort={}{}{}{}{}", bound.broker,
            bound.web,
            bound.brokerTls ? fmt::format(" brokerServicePortTls={}", bound.brokerTls) : "",
            bound.webTls ? fmt::format(" webServicePortTls={}", bound.webTls) : "",
            bound.mqtt ? fmt::format(" mqttPort={}", bound.mqtt) : "",
            bound.mqttTls ? fmt::format(" mqttPortTls={}", bound.mqttTls) : "");
  if (portsFile.empty()) return Status::ok();
  return writePortsFile(portsFile, bound);
}

// This broker's addresses as the cluster lists them (Pulsar's BrokerLookupData).
broker::cluster::BrokerUrls selfUrls(const broker::BrokerService& service,
                                     const BoundPorts& bound) {
  const std::string& host = service.options().advertisedAddress;
  broker::cluster::BrokerUrls self;
  self.brokerId = host + ":" + std::to_string(bound.web);
  self.pulsarServiceUrl = service.brokerServiceUrl();
  self.pulsarServiceUrlTls = service.brokerServiceUrlTls();
  self.webServiceUrl = "http://" + self.brokerId;
  if (bound.webTls) self.webServiceUrlTls = "https://" + host + ":" + std::to_string(bound.webTls);
  for (const auto& [name, l] : service.options().advertisedListeners.byName) {
    self.listeners[name] = {l.brokerServiceUrl, l.brokerServiceUrlTls};
  }
  return self;
}

// The leader's call to a bundle's owner (Pulsar's leader uses its PulsarAdmin client): PUT
// {owner's web URL}/admin/v2/namespaces/{bundle}/{action}; a 2xx answer is success.
void putToOwner(broker::BrokerService& service, const config::ServiceConfiguration& cfg,
                const broker::cluster::BrokerUrls& owner, const std::string& bundle,
                const std::string& action, const std::function<void(Status)>& done) {
  if (owner.webServiceUrl.empty()) return done(Status::notFound("no web service URL"));
  admin::HttpClientRequest req;
  req.method = "PUT";
  req.url = owner.webServiceUrl + "/admin/v2/namespaces/" + bundle + "/" + action;
  req.authorization = brokerClientAuthorization(cfg);
  std::string url = req.url;
  admin::httpCall(
      service.ioLoops().next(), std::move(req), [done, url](Result<admin::HttpClientResponse> r) {
        if (!r.isOk()) return done(r.status());
        if (r->status / 100 == 2) return done(Status::ok());
        done(Status::ioError("PUT " + url + ": HTTP " + std::to_string(r->status) + " " + r->body));
      });
}

// The admin routes and listeners, the ports announced, then (cluster mode) this broker joins
// the cluster. Returns 0 or the exit status (logged), having stopped the web and the broker.
int serve(const BrokerOptions& options, Web& web, broker::BrokerService& service, Cluster& cluster,
          const TopicStorage& storage) {
  const config::ServiceConfiguration& cfg = *options.config;
  auto lmOptions =
      loadManagerOptionsFrom(options.config, storage.stats, service.options().serverVersion);
  lmOptions.bundleStats = [&service] { return admin::bundleStats(service); };
  lmOptions.unloadBundle = [&service, config = options.config](
                               const broker::cluster::BrokerUrls& owner, const std::string& bundle,
                               const std::function<void(Status)>& done) {
    putToOwner(service, *config, owner, bundle, "unload", done);
  };
  lmOptions.splitBundle = [&service, config = options.config](
                              const broker::cluster::BrokerUrls& owner, const std::string& bundle,
                              bool unload, const std::function<void(Status)>& done) {
    putToOwner(service, *config, owner, bundle,
               std::string("split?unload=") + (unload ? "true" : "false"), done);
  };
  cluster.loadManager = std::make_unique<broker::cluster::LoadManager>(
      cluster.namespaceService.get(), cluster.zk.get(), std::move(lmOptions));
  addRoutes(web, options, service, cluster, storage);
  Status s = startHttpServers(web, cfg, service);
  if (s) {
    auto mqtt = startMqttService(cfg, service, web.mqttLoops);
    if (mqtt.isOk()) {
      web.mqtt = std::move(*mqtt);
    } else {
      s = mqtt.status();
    }
  }
  BoundPorts bound;
  if (s) {
    bound = {static_cast<uint16_t>(service.brokerServicePort()),
             web.http->port(),
             service.brokerServicePortTls(),
             web.https ? web.https->port() : 0,
             web.mqtt ? web.mqtt->firstPort(false) : 0,
             web.mqtt ? web.mqtt->firstPort(true) : 0};
    s = announce(bound, options.portsFile);
  }
  if (!s) {
    MLOG_ERROR("{}", s.message());
    web.stop();
    service.stop();
    return 1;
  }
  const broker::cluster::BrokerUrls self = selfUrls(service, bound);
  if (!cluster.namespaceService) {
    cluster.loadManager->start(self);
    return 0;
  }
  service.setBrokerId(self.brokerId);
  if (Status joined = cluster.namespaceService->start(self); !joined) {
    MLOG_ERROR("cannot join the cluster: {}", joined.message());
    web.stop();
    service.stop();
    cluster.stop();
    return exitCodeOf(joined);
  }
  service.setProducerNameGeneratorId(cluster.namespaceService->producerNameGeneratorId());
  cluster.loadManager->start(self);
  return 0;
}

// Unloads every topic and waits for their ledgers to close (at most `timeout`).
void unloadAll(broker::BrokerService& service, std::chrono::milliseconds timeout) {
  auto topics = service.topics();
  if (topics.empty()) return;
  auto left = std::make_shared<std::atomic<int>>(static_cast<int>(topics.size()));
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  for (auto& t : topics) {
    service.unloadTopic(t, /*release=*/false, [left, done](const Status&) {
      if (left->fetch_sub(1) == 1) done->set_value();
    });
  }
  if (!blockingReady(finished, timeout, "closing topics at shutdown")) {
    MLOG_WARN("{} topic(s) not closed after {} ms; stopping anyway", left->load(), timeout.count());
  }
}

// After the stop signal: connections drained, topics handed over (BookKeeper) or cursors
// flushed (embedded), then everything stopped in reverse order.
void shutdown(const config::ServiceConfiguration& cfg, broker::BrokerService& service,
              TopicStorage& storage, Cluster& cluster,
              broker::cluster::ConfigurationStore& configStore, Web& web) {
  web.serving = false;
  // MQTT connections close first: their producers and consumers leave the topics as the
  // binary protocol's do below.
  if (web.mqtt) web.mqtt->stop();
  // Read now: the setting is dynamic.
  service.drainConnections(std::chrono::milliseconds(cfg.brokerShutdownTimeoutMs()));
  if (storage.onBookKeeper) {
    // Hand the topics over cleanly (as Pulsar unloads its bundles): ledgers closed, cursors
    // written, before the ownership znodes go with the session.
    unloadAll(service,
              std::chrono::milliseconds(std::max<int64_t>(cfg.brokerShutdownTimeoutMs(), 5000)));
  }
  if (storage.durable) {
    // Acks the mark-delete rate limit held back reach the disk before the workers stop.
    if (!storage.durable->flushCursors(std::chrono::milliseconds(5000))) {
      MLOG_WARN("cursor writes not finished after 5000 ms; stopping anyway");
    }
  }
  configStore.stop();
  cluster.stop();
  web.stop();
  service.stop();
  storage.shutdown();
}

}  // namespace

int runBroker(const BrokerOptions& options) {
  const config::ServiceConfiguration& cfg = *options.config;
  StopSignal stop;
  auto storageOptions = storageOptionsFrom(cfg);
  if (!storageOptions.isOk()) {
    MLOG_ERROR("{}", storageOptions.status().message());
    return 2;
  }
  auto brokerOptions = makeBrokerOptions(cfg);
  if (!brokerOptions.isOk()) {
    MLOG_ERROR("{}", brokerOptions.status().message());
    return 2;
  }
  Cluster cluster;
  if (int code = openCluster(options, stop, cluster)) return code;
  // Topics: the embedded journal, or BookKeeper in cluster mode with bookkeeperMetadataServiceUri.
  auto opened = openTopicStorage(cfg, *storageOptions, cluster.zk.get());
  if (!opened.isOk()) {
    MLOG_ERROR(
        "cannot open storage (journalDirectory={}, metadataStoreUrl={}, "
        "bookkeeperMetadataServiceUri={}): {}",
        storageOptions->journalDirectory, cfg.metadataStoreUrl(),
        cfg.bookkeeperMetadataServiceUri(), opened.status().toString());
    cluster.stop();
    return exitCodeOf(opened.status());
  }
  TopicStorage storage = std::move(*opened);
  broker::BrokerService::Deps deps;
  if (cluster.namespaceService) addClusterDeps(cluster, storage, deps);
  auto configStore = openConfiguration(cluster, storage, cfg, deps);
  if (!configStore.isOk()) {
    MLOG_ERROR("cannot open the local metadata store: {}", configStore.status().toString());
    storage.shutdown();
    return exitCodeOf(configStore.status());
  }
  // Made before `service` so they outlive it: a topic's task may still hold a closed MQTT
  // connection, whose socket belongs to its loop.
  const std::shared_ptr<net::EventLoopGroup> mqttLoops = makeMqttLoops(cfg);
  broker::BrokerService service(std::move(*brokerOptions), storage.factory, std::move(deps));
  StopConfigurationStore stopConfigStore{**configStore};
  if (cluster.namespaceService) {
    installOwnershipHandlers(*cluster.namespaceService, service, storage.onBookKeeper);
  }
  // A start that fails stops the storage's threads before `service` goes: the local record
  // store's thread posts its callbacks to the service's metadata loop.
  if (int code = startBroker(options, service, cluster, **configStore, storage)) {
    (*configStore)->stop();
    storage.shutdown();
    return code;
  }
  Web web;
  web.mqttLoops = mqttLoops;
  if (int code = serve(options, web, service, cluster, storage)) {
    (*configStore)->stop();
    storage.shutdown();
    return code;
  }
  web.serving = true;
  MLOG_INFO("{} broker serving (cluster {})", options.standalone ? "Standalone" : "The",
            cfg.clusterName());
  // Geo-replication: the replicators of the topics whose namespace lists other clusters.
  broker::ReplicationService replication(service);
  replication.setDefaultDispatchRate([&cfg] {
    return broker::DispatchRate{cfg.dispatchThrottlingRatePerReplicatorInMsg(),
                                cfg.dispatchThrottlingRatePerReplicatorInByte(),
                                cfg.dispatchThrottlingRateRelativeToPublishRate(), 1};
  });
  if (Status started = replication.start(); !started) {
    MLOG_ERROR("geo-replication not started (brokerClient* settings): {}", started.message());
  }

  stop.loop.run();

  MLOG_INFO("Stopping on signal {}", stop.signal);
  replication.stop();
  shutdown(cfg, service, storage, cluster, **configStore, web);
  MLOG_INFO("Stopped");
  return 0;
}

}  // namespace magnetar::app
