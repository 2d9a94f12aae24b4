// BrokerAdmin: the broker's admin surface in one object: every /admin/v2 and /lookup/v2 route,
// GET /metrics, and the `pulsar-stats` thread that updates message rates and watches for
// saturated I/O threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "admin/bundle_split_routes.h"
#include "admin/placement_routes.h"
#include "admin/router.h"
#include "broker/service/broker_service.h"
#include "config/service_configuration.h"
#include "storage/durable_storage.h"

namespace magnetar::broker::cluster {
class LoadManager;
}  // namespace magnetar::broker::cluster

namespace magnetar::admin {

// Thread: construct/destroy on the owner thread; routes run on HTTP threads and answer from topic
// executors or the `pulsar-stats` thread.
class BrokerAdmin {
 public:
  struct Options {
    // Rates (msgRateIn, ...) are the counter change over this interval (Pulsar's
    // statsUpdateFrequencyInSecs, shorter so rates react within seconds).
    std::chrono::milliseconds rateInterval{2000};
    // I/O saturation check: a sample every checkInterval, warning after `window` (see
    // IoSaturationDetector).
    std::chrono::milliseconds checkInterval{10000};
    std::chrono::milliseconds window{60000};
    double ioBusyThreshold = 0.9;
    // The durable storage's counters (any thread); when set, /metrics shows the entry cache
    // (pulsar_ml_cache_used_size) and the disk reads (magnetar_storage_disk_reads_total).
    std::function<storage::StorageStats()> storageStats;
    // GET /admin/v2/broker-stats/load-report and the pulsar_lb_* metrics; outlives this.
    broker::cluster::LoadManager* loadManager = nullptr;
    // Cluster mode: the namespace service (split route); null in standalone. The auto split is
    // the leader's (broker/cluster/load_report.h).
    broker::cluster::NamespaceService* namespaceService = nullptr;
    // The configuration and local metadata stores of the placement policies' routes
    // (placement_routes.h; standalone: both the local record store); null: no such routes.
    metadata::Store* configStore = nullptr;
    metadata::Store* localStore = nullptr;
  };

  // Starts the `pulsar-stats` thread. service and config must outlive this object.
  BrokerAdmin(broker::BrokerService& service, std::shared_ptr<config::ServiceConfiguration> config,
              const Options& options);
  BrokerAdmin(broker::BrokerService& service, std::shared_ptr<config::ServiceConfiguration> config)
      : BrokerAdmin(service, std::move(config), Options{}) {}
  ~BrokerAdmin();  // stops the thread
  BrokerAdmin(const BrokerAdmin&) = delete;
  BrokerAdmin& operator=(const BrokerAdmin&) = delete;

  // Registers the clusters, tenants, namespaces, persistent-topic, lookup, dynamic configuration
  // and /metrics routes. Call before the HTTP server starts.
  void addRoutes(Router& router);

 private:
  // The placement policies' routes' stores and broker functions (placement_routes.h).
  PlacementStores placementStores();
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace magnetar::admin
