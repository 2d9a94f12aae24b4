// LoadManager: the reporting and aggregating half of Pulsar's ModularLoadManagerImpl.
//
// - Every broker keeps its LocalBrokerData (load_data.h) current: the host's figures (sampled
//   every loadBalancerHostUsageCheckIntervalMinutes) and its bundles' traffic (every
//   loadBalancerReportUpdateMinIntervalMillis), and has NamespaceService rewrite
//   /loadbalance/brokers/{brokerId} when needBrokerDataUpdate() says so. At start it writes an
//   empty /loadbalance/broker-time-average/{brokerId}, as Pulsar's start().
// - The leader samples every report into BundleData (one sample per bundle each time a report
//   changes, Pulsar's updateAll on the report's notification) and every
//   loadBalancerResourceQuotaUpdateIntervalMinutes writes /loadbalance/bundle-data/{bundle} for
//   the most loaded loadBalancerMaxNumberOfBundlesInBundleLoadReport x brokers bundles and
//   /loadbalance/broker-time-average/{brokerId} for every broker (writeBundleDataOnZooKeeper);
//   bundle data of bundles no broker reports any more and time averages of brokers gone are
//   deleted.
// - loadBalancerEnabled=false: as Pulsar, the report is written at registration and when the
//   owned bundles change only, and the leader aggregates nothing.
//
// Thread: its own loop `pulsar-load-manager`; generateLoadReport() and the getters from any
// thread; the registration source NamespaceService calls runs on `metadata-store`.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_CLUSTER)
#error "broker/cluster is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/cluster/load_data.h"
#include "broker/cluster/load_shedding.h"
#include "broker/cluster/namespace_service.h"
#include "metadata/store.h"
#include "net/event_loop.h"
#include "setting_defaults.h"

namespace magnetar::broker::cluster {

// The load manager's settings as they are now (all dynamic in Pulsar but the two intervals of
// tasks, which are read when a task is scheduled). Defaults: Pulsar's.
struct LoadReportSettings {
  int64_t reportUpdateMinIntervalMillis =
      setting_defaults::loadBalancerReportUpdateMinIntervalMillis;
  int32_t reportUpdateThresholdPercentage =
      setting_defaults::loadBalancerReportUpdateThresholdPercentage;
  int32_t reportUpdateMaxIntervalMinutes =
      setting_defaults::loadBalancerReportUpdateMaxIntervalMinutes;
  int32_t hostUsageCheckIntervalMinutes =
      setting_defaults::loadBalancerHostUsageCheckIntervalMinutes;
  int32_t resourceQuotaUpdateIntervalMinutes =
      setting_defaults::loadBalancerResourceQuotaUpdateIntervalMinutes;
  int32_t maxNumberOfBundlesInBundleLoadReport =
      setting_defaults::loadBalancerMaxNumberOfBundlesInBundleLoadReport;
  double cpuWeight = setting_defaults::loadBalancerCPUResourceWeight;
  double directMemoryWeight = setting_defaults::loadBalancerDirectMemoryResourceWeight;
  double bandwidthInWeight = setting_defaults::loadBalancerBandwidthInResourceWeight;
  double bandwidthOutWeight = setting_defaults::loadBalancerBandwidthOutResourceWeight;
};

// 100 * |old - new| / old; 0 when both are 0, +inf when only old is 0 (Pulsar's percentChange).
double percentChange(double oldValue, double newValue);

// The leader's shedding and auto-split settings as they are now (all dynamic in Pulsar; the
// interval is read when the task is scheduled again). Defaults: Pulsar's.
struct LoadBalanceSettings {
  bool sheddingEnabled = setting_defaults::loadBalancerSheddingEnabled;
  std::string sheddingStrategy{setting_defaults::loadBalancerLoadSheddingStrategy};
  int32_t sheddingIntervalMinutes = setting_defaults::loadBalancerSheddingIntervalMinutes;
  // Magnetar only, for tests: > 0 replaces sheddingIntervalMinutes (milliseconds).
  int64_t sheddingIntervalMillisForTesting = 0;
  int64_t sheddingGracePeriodMinutes = setting_defaults::loadBalancerSheddingGracePeriodMinutes;
  SheddingSettings shedding;
  AutoSplitSettings split;
  // loadBalancerSheddingExcludedNamespaces ("tenant/ns"): never shed, nor in the bundle data
  // written to /loadbalance/bundle-data.
  std::set<std::string> sheddingExcludedNamespaces;
};

// Pulsar's needBrokerDataUpdate: true when `current` was last written (current.lastUpdate, ms)
// more than reportUpdateMaxIntervalMinutes before nowMs, or when the largest of the changes from
// `last` (the report as last written) exceeds reportUpdateThresholdPercentage: msg rate in+out,
// throughput in+out, bundle count (percentChange), and 100 x the change of the weighted max
// resource usage. `why` (optional) gets the reason for the log.
bool needBrokerDataUpdate(const LocalBrokerData& last, const LocalBrokerData& current,
                          int64_t nowMs, const LoadReportSettings& s, std::string* why = nullptr);

// The leader's view of every bundle (Pulsar's LoadData with updateBundleData); no I/O.
class LoadAggregator {
 public:
  // Bundles in the reports' lastStats without BundleData here yet: the caller reads their
  // stored BundleData (/loadbalance/bundle-data) for update().
  std::vector<std::string> unknownBundles(
      const std::map<std::string, LocalBrokerData>& reports) const;
  // One sample for every bundle of every report (broker id -> report). A new bundle starts from
  // `stored` (BundleData read from the store) or from defaultBundleStats(). Each broker's
  // TimeAverageBrokerData is then the sum over its reported bundles. Bundles no report names any
  // more are forgotten and returned (the leader deletes their znodes); so are brokers.
  struct Gone {
    std::vector<std::string> bundles;
    std::vector<std::string> brokers;
  };
  Gone update(const std::map<std::string, LocalBrokerData>& reports,
              const std::map<std::string, BundleData>& stored);
  const std::map<std::string, BundleData>& bundleData() const { return bundleData_; }
  const std::map<std::string, TimeAverageBrokerData>& timeAverages() const { return brokers_; }
  // The bundles writeBundleDataOnZooKeeper writes: the k x (number of brokers, at least 1) most
  // loaded by BundleData::compare, greatest first (Pulsar's selectTopKBundle); k <= 0: all.
  std::vector<std::string> topBundles(int k,
                                      const std::set<std::string>& excludedNamespaces = {}) const;
  // Drops a bundle's data (a bundle being split, so that it is not picked again).
  void forget(const std::string& bundle) { bundleData_.erase(bundle); }

 private:
  std::map<std::string, BundleData> bundleData_;
  std::map<std::string, TimeAverageBrokerData> brokers_;
};

class LoadManager {
 public:
  struct Options {
    bool enabled = setting_defaults::loadBalancerEnabled;  // loadBalancerEnabled (static)
    std::function<LoadReportSettings()> settings;          // unset: the defaults
    // The host's figures (cpu, memory, directMemory, bandwidth); called on the loop.
    std::function<SystemResourceUsage()> hostUsage;
    // This broker's topics' figures by bundle (thread-safe, must not block); called on the loop
    // and by generateLoadReport().
    std::function<BundleStatsMap()> bundleStats;
    std::string brokerVersion;         // brokerVersionString
    std::string loadManagerClassName;  // loadManagerClassName
    // The leader's shedding and auto split (issue 48). Unset settings: the defaults.
    std::function<LoadBalanceSettings()> balanceSettings;
    // Unloads `bundle` ("tenant/ns/0x..._0x...") through its owner's admin API (Pulsar's leader
    // calls PUT .../{bundle}/unload); done once, on any thread. Unset: nothing is shed.
    std::function<void(const BrokerUrls& owner, const std::string& bundle,
                       std::function<void(Status)> done)>
        unloadBundle;
    // Splits `bundle` through its owner's admin API (PUT .../{bundle}/split?unload=..., the
    // owner's defaultNamespaceBundleSplitAlgorithm); done once, on any thread. Unset: no split.
    std::function<void(const BrokerUrls& owner, const std::string& bundle, bool unload,
                       std::function<void(Status)> done)>
        splitBundle;
  };

  // ns: the registration's writer (it calls this object's registration source); may be null
  // (standalone: no registration, generateLoadReport() only). store: the local metadata store
  // (ZooKeeper), null with ns null. Both outlive this. Installs the registration source:
  // construct before ns->start().
  LoadManager(NamespaceService* ns, metadata::Store* store, Options options);
  ~LoadManager();
  LoadManager(const LoadManager&) = delete;
  LoadManager& operator=(const LoadManager&) = delete;

  // Starts the loop and its tasks (after ns->start(): the broker is registered). self: this
  // broker's URLs (standalone: those generateLoadReport() names). Thread: main.
  void start(const BrokerUrls& self);
  void stop();

  // Pulsar's generateLoadReport (GET /admin/v2/broker-stats/load-report): LocalBrokerData with
  // the topics' figures now and the host's last sample, as JSON. Thread: any.
  std::string generateLoadReport();
  // The host's last sample (the pulsar_lb_* metrics). Thread: any.
  SystemResourceUsage hostUsage() const;
  // The report as last written to the store (Pulsar's lastData). Thread: any.
  LocalBrokerData lastWritten() const;
  // The leader's aggregation after its last update (empty on other brokers). Thread: any.
  std::map<std::string, BundleData> bundleData() const;
  // Counters of this broker's leaderships (Pulsar's brk_lb_unload_broker_total: shedding passes'
  // brokers with a bundle unloaded, brk_lb_unload_bundle_total: bundles unloaded,
  // brk_lb_bundles_split_total: bundles split). Thread: any.
  struct BalanceCounters {
    int64_t unloadBrokers = 0;
    int64_t unloadBundles = 0;
    int64_t bundlesSplit = 0;
    bool sheddingRan = false;  // this broker ran a shedding pass as leader
    bool splitRan = false;     // ... an auto-split check
  };
  BalanceCounters balanceCounters() const;

 private:
  // NamespaceService's registration source (its loop): the report as of now for `owned`,
  // recorded as written.
  std::string registrationJson(const BrokerUrls& self, const std::vector<std::string>& owned,
                               int64_t startMs);
  // The topics' figures plus a zero entry for each owned bundle without topics.
  BundleStatsMap currentStats() const;
  LoadReportSettings settings() const;
  void after(std::chrono::milliseconds delay, std::function<void()> fn);
  void sampleHost();
  void reportTick();
  void leaderTick();
  void onNotification(const metadata::Notification& n);
  // Reads every report (and the stored data of new bundles) and samples them; then `done`.
  void updateAll(std::function<void()> done);
  void sampleReports(const std::shared_ptr<std::map<std::string, LocalBrokerData>>& reports,
                     const std::function<void()>& done);
  // generation: the leadership it was scheduled in (a later one has its own schedule).
  void writeBundleData(uint64_t generation);
  LoadBalanceSettings balanceSettings() const;
  // Pulsar's LoadSheddingTask: doLoadShedding every loadBalancerSheddingIntervalMinutes.
  void sheddingTick();
  void doLoadShedding();
  void unloadPicked(const std::string& broker, const std::string& bundle,
                    const std::optional<std::string>& dest,
                    const std::shared_ptr<std::set<std::string>>& counted);
  // Pulsar's checkNamespaceBundleSplit, after each update of the leader's data.
  void checkNamespaceBundleSplit();
  // The picks of checkNamespaceBundleSplit in the namespaces' current cuts, split one after
  // the other through their owners.
  void splitPicked(const std::map<std::string, BundleLoad>& loads,
                   const std::map<std::string, std::string>& owners,
                   const std::map<std::string, std::vector<uint64_t>>& cuts,
                   const LoadBalanceSettings& b);
  void splitEach(const std::shared_ptr<std::vector<std::pair<std::string, BrokerUrls>>>& todo,
                 size_t n, bool unload);

  NamespaceService* ns_;
  metadata::Store* store_;
  Options options_;
  net::EventLoop loop_{"pulsar-load-manager"};
  std::optional<uint64_t> listenerId_;
  bool stopped_ = false;

  mutable Mutex mu_;
  SystemResourceUsage usage_ GUARDED_BY(mu_);
  LocalBrokerData local_ GUARDED_BY(mu_);    // Pulsar's localData
  LocalBrokerData written_ GUARDED_BY(mu_);  // Pulsar's lastData
  std::map<std::string, BundleData> bundleSnapshot_ GUARDED_BY(mu_);
  BalanceCounters counters_ GUARDED_BY(mu_);

  // Loop only.
  LoadAggregator aggregator_;
  bool leading_ = false;
  uint64_t leaderGeneration_ = 0;
  bool updatePending_ = false;
  std::map<std::string, LocalBrokerData> reports_;   // as last read by updateAll
  std::map<std::string, int64_t> recentlyUnloaded_;  // bundle -> ms of its unload
  ThresholdShedder thresholdShedder_;
  bool splitting_ = false;  // a split pass's calls are under way
};

}  // namespace magnetar::broker::cluster
