#include "broker/cluster/load_report.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "base/clock.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/cluster/bundles.h"

namespace magnetar::broker::cluster {

namespace {

constexpr const char* kBrokersRoot = "/loadbalance/brokers";
// A report change seen by the leader is sampled this long after (changes of several brokers
// within it are sampled once).
constexpr std::chrono::milliseconds kUpdateCoalesce{200};

int64_t wallMs() { return static_cast<int64_t>(nowMs()); }

std::string bundleDataPath(const std::string& bundle) {
  return std::string(kBundleDataRoot) + "/" + bundle;
}

std::string timeAveragePath(const std::string& broker) {
  return std::string(kBrokerTimeAverageRoot) + "/" + broker;
}

// LoadSheddingTask's period: loadBalancerSheddingIntervalMinutes, or the Magnetar test setting.
std::chrono::milliseconds sheddingInterval(const LoadBalanceSettings& b) {
  if (b.sheddingIntervalMillisForTesting > 0) {
    return std::chrono::milliseconds(b.sheddingIntervalMillisForTesting);
  }
  return std::chrono::minutes(std::max(1, b.sheddingIntervalMinutes));
}

}  // namespace

double percentChange(double oldValue, double newValue) {
  if (oldValue == 0) {
    return newValue == 0 ? 0 : std::numeric_limits<double>::infinity();
  }
  return 100 * std::abs((oldValue - newValue) / oldValue);
}

bool needBrokerDataUpdate(const LocalBrokerData& last, const LocalBrokerData& current,
                          int64_t nowMs, const LoadReportSettings& s, std::string* why) {
  int64_t maxIntervalMs = int64_t{s.reportUpdateMaxIntervalMinutes} * 60000;
  int64_t since = nowMs - current.lastUpdate;
  if (since > maxIntervalMs) {
    if (why) *why = "time since the last update exceeded " + std::to_string(maxIntervalMs) + " ms";
    return true;
  }
  auto weighted = [&s](const LocalBrokerData& d) {
    return d.maxResourceUsageWithWeight(s.cpuWeight, s.directMemoryWeight, s.bandwidthInWeight,
                                        s.bandwidthOutWeight);
  };
  double maxChange = std::max(
      {percentChange(last.msgRateIn + last.msgRateOut, current.msgRateIn + current.msgRateOut),
       percentChange(last.msgThroughputIn + last.msgThroughputOut,
                     current.msgThroughputIn + current.msgThroughputOut),
       percentChange(last.numBundles, current.numBundles),
       100.0 * std::abs(weighted(last) - weighted(current))});
  if (maxChange > s.reportUpdateThresholdPercentage) {
    if (why) {
      *why = "maximum change " + std::to_string(maxChange) + "% exceeded the threshold " +
             std::to_string(s.reportUpdateThresholdPercentage) + "%";
    }
    return true;
  }
  return false;
}

std::vector<std::string> LoadAggregator::unknownBundles(
    const std::map<std::string, LocalBrokerData>& reports) const {
  std::vector<std::string> out;
  for (const auto& [broker, report] : reports) {
    for (const auto& [bundle, stats] : report.lastStats) {
      if (bundleData_.count(bundle) == 0) out.push_back(bundle);
    }
  }
  return out;
}

LoadAggregator::Gone LoadAggregator::update(const std::map<std::string, LocalBrokerData>& reports,
                                            const std::map<std::string, BundleData>& stored) {
  const NamespaceBundleStats defaults = defaultBundleStats();
  std::set<std::string> active;
  for (const auto& [broker, report] : reports) {
    std::set<std::string> own;
    for (const auto& [bundle, stats] : report.lastStats) {
      active.insert(bundle);
      own.insert(bundle);
      auto it = bundleData_.find(bundle);
      if (it == bundleData_.end()) {
        auto s = stored.find(bundle);
        it =
            bundleData_
                .emplace(bundle, s != stored.end() ? s->second : BundleData::withDefaults(defaults))
                .first;
      }
      it->second.update(stats);
    }
    brokers_[broker].reset(own, bundleData_, defaults);
  }
  Gone gone;
  for (auto it = bundleData_.begin(); it != bundleData_.end();) {
    if (active.count(it->first) == 0) {
      gone.bundles.push_back(it->first);
      it = bundleData_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = brokers_.begin(); it != brokers_.end();) {
    if (reports.count(it->first) == 0) {
      gone.brokers.push_back(it->first);
      it = brokers_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

std::vector<std::string> LoadAggregator::topBundles(
    int k, const std::set<std::string>& excludedNamespaces) const {
  std::vector<std::string> out;
  out.reserve(bundleData_.size());
  for (const auto& [b, d] : bundleData_) {
    if (!excludedNamespaces.count(namespaceOfBundle(b))) out.push_back(b);
  }
  if (k <= 0) return out;
  size_t n = std::min(out.size(), static_cast<size_t>(k) * std::max<size_t>(1, brokers_.size()));
  std::stable_sort(out.begin(), out.end(), [this](const std::string& a, const std::string& b) {
    return bundleData_.at(a).compare(bundleData_.at(b)) > 0;
  });
  out.resize(n);
  return out;
}

LoadManager::LoadManager(NamespaceService* ns, metadata::Store* store, Options options)
    : ns_(ns), store_(store), options_(std::move(options)) {
  {
    MutexLock lock(mu_);
    for (LocalBrokerData* d : {&local_, &written_}) {
      d->brokerVersionString = options_.brokerVersion;
      d->loadManagerClassName = options_.loadManagerClassName;
    }
  }
  if (options_.hostUsage) {
    SystemResourceUsage u = options_.hostUsage();  // the first report has the host's figures
    MutexLock lock(mu_);
    usage_ = u;
  }
  if (ns_) {
    ns_->setRegistrationSource(
        [this](const BrokerUrls& self, const std::vector<std::string>& owned, int64_t startMs) {
          return registrationJson(self, owned, startMs);
        });
    // The leader's placement reads the aggregated bundle data (load_placement.h).
    ns_->setBundleDataSource([this] { return bundleData(); });
  }
}

LoadManager::~LoadManager() { stop(); }

LoadReportSettings LoadManager::settings() const {
  return options_.settings ? options_.settings() : LoadReportSettings{};
}

void LoadManager::start(const BrokerUrls& self) {
  {
    MutexLock lock(mu_);
    local_.urls = written_.urls = self;
  }
  loop_.start();
  if (!ns_ || !store_) {
    loop_.execute([this] { sampleHost(); });
    return;
  }
  listenerId_ = store_->registerListener(
      [this](const metadata::Notification& n) { onNotification(n); }, &loop_);
  loop_.execute([this, id = self.brokerId] {
    sampleHost();
    metadata::PutOptions o;
    store_->put(timeAveragePath(id), toJson(TimeAverageBrokerData{}), o, &loop_,
                [](const Result<metadata::Stat>& r) {
                  if (!r.isOk()) MLOG_WARN("time-average data: {}", r.status().message());
                });
    if (options_.enabled) {
      after(std::chrono::milliseconds(settings().reportUpdateMinIntervalMillis),
            [this] { reportTick(); });
      leaderTick();
      after(sheddingInterval(balanceSettings()), [this] { sheddingTick(); });
    }
  });
}

void LoadManager::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (listenerId_) store_->unregisterListener(*listenerId_);
  loop_.stop();
}

void LoadManager::after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(loop_.context(), delay);
  timer->async_wait([timer, fn = std::move(fn)](boost::system::error_code ec) {
    if (!ec) fn();
  });
}

void LoadManager::sampleHost() {
  MAGNETAR_DCHECK_ON(loop_);
  if (options_.hostUsage) {
    SystemResourceUsage u = options_.hostUsage();
    MutexLock lock(mu_);
    usage_ = u;
  }
  int minutes = std::max(1, settings().hostUsageCheckIntervalMinutes);
  after(std::chrono::minutes(minutes), [this] { sampleHost(); });
}

BundleStatsMap LoadManager::currentStats() const {
  BundleStatsMap stats = options_.bundleStats ? options_.bundleStats() : BundleStatsMap{};
  if (ns_) {
    for (const auto& b : ns_->ownedBundles()) stats.try_emplace(b);
  }
  return stats;
}

// Pulsar's LoadReportUpdaterTask: the figures updated, written when they changed enough.
void LoadManager::reportTick() {
  MAGNETAR_DCHECK_ON(loop_);
  LoadReportSettings s = settings();
  BundleStatsMap stats = currentStats();
  bool write = false;
  std::string why;
  {
    MutexLock lock(mu_);
    local_.update(usage_, std::move(stats));
    write = needBrokerDataUpdate(written_, local_, wallMs(), s, &why);
  }
  if (write) {
    MLOG_DEBUG("Writing the load report: {}", why);
    ns_->republishRegistration();
  }
  after(std::chrono::milliseconds(std::max<int64_t>(100, s.reportUpdateMinIntervalMillis)),
        [this] { reportTick(); });
}

std::string LoadManager::registrationJson(const BrokerUrls& self,
                                          const std::vector<std::string>& owned, int64_t startMs) {
  BundleStatsMap stats = options_.bundleStats ? options_.bundleStats() : BundleStatsMap{};
  for (const auto& b : owned) stats.try_emplace(b);
  MutexLock lock(mu_);
  local_.urls = self;
  local_.startTimestamp = startMs;
  local_.update(usage_, std::move(stats));
  local_.lastUpdate = wallMs();
  std::string json = toJson(local_);
  written_ = local_;
  local_.cleanDeltas();
  return json;
}

std::string LoadManager::generateLoadReport() {
  BundleStatsMap stats = currentStats();
  MutexLock lock(mu_);
  local_.update(usage_, std::move(stats));
  return toJson(local_);
}

SystemResourceUsage LoadManager::hostUsage() const {
  MutexLock lock(mu_);
  return usage_;
}

LocalBrokerData LoadManager::lastWritten() const {
  MutexLock lock(mu_);
  return written_;
}

std::map<std::string, BundleData> LoadManager::bundleData() const {
  MutexLock lock(mu_);
  return bundleSnapshot_;
}

// Every report change, on the leader: sampled (Pulsar's handleDataNotification -> updateAll).
void LoadManager::onNotification(const metadata::Notification& n) {
  MAGNETAR_DCHECK_ON(loop_);
  if (!leading_ || updatePending_ || n.type == metadata::NotificationType::kDeleted) return;
  if (n.path != kBrokersRoot && n.path.rfind(std::string(kBrokersRoot) + "/", 0) != 0) return;
  updatePending_ = true;
  after(kUpdateCoalesce, [this] {
    updatePending_ = false;
    if (leading_) updateAll([] {});
  });
}

// Leadership is followed once a second; the leader writes the bundle data every
// loadBalancerResourceQuotaUpdateIntervalMinutes from when it became leader (Pulsar schedules
// its LoadResourceQuotaUpdaterTask then, first run one interval later).
void LoadManager::leaderTick() {
  MAGNETAR_DCHECK_ON(loop_);
  bool leader = ns_->isLeader();
  if (leader && !leading_) {
    leading_ = true;
    MLOG_INFO("Load manager: leader; bundle data every {} min",
              settings().resourceQuotaUpdateIntervalMinutes);
    ++leaderGeneration_;
    updateAll([] {});
    int minutes = std::max(1, settings().resourceQuotaUpdateIntervalMinutes);
    after(std::chrono::minutes(minutes), [this, g = leaderGeneration_] { writeBundleData(g); });
  } else if (!leader && leading_) {
    leading_ = false;  // a pending writeBundleData sees it and stops
  }
  after(std::chrono::seconds(1), [this] { leaderTick(); });
}

void LoadManager::updateAll(std::function<void()> done) {
  MAGNETAR_DCHECK_ON(loop_);
  store_->getChildren(kBrokersRoot, &loop_,
                      [this, done = std::move(done)](Result<std::vector<std::string>> names) {
                        auto reports = std::make_shared<std::map<std::string, LocalBrokerData>>();
                        if (!names.isOk() || names->empty()) return sampleReports(reports, done);
                        auto left = std::make_shared<size_t>(names->size());
                        for (const auto& name : *names) {
                          std::string path = std::string(kBrokersRoot) + "/" + name;
                          store_->get(path, &loop_,
                                      [this, reports, left, name, path,
                                       done](Result<std::optional<metadata::GetResult>> r) {
                                        if (r.isOk() && r->has_value()) {
                                          auto rep = parseLoadReport((*r)->value, path);
                                          if (rep.isOk()) {
                                            (*reports)[name] = std::move(*rep);
                                          } else {
                                            MLOG_WARN("load report: {}", rep.status().message());
                                          }
                                        }
                                        if (--*left == 0) sampleReports(reports, done);
                                      });
                        }
                      });
}

// The stored BundleData of bundles seen for the first time are read, then every report sampled.
void LoadManager::sampleReports(
    const std::shared_ptr<std::map<std::string, LocalBrokerData>>& reports,
    const std::function<void()>& done) {
  MAGNETAR_DCHECK_ON(loop_);
  auto unknown = aggregator_.unknownBundles(*reports);
  auto stored = std::make_shared<std::map<std::string, BundleData>>();
  auto apply = [this, reports, stored, done] {
    auto gone = aggregator_.update(*reports, *stored);
    reports_ = *reports;
    {
      MutexLock lock(mu_);
      bundleSnapshot_ = aggregator_.bundleData();
    }
    for (const auto& b : gone.bundles) {
      store_->remove(bundleDataPath(b), std::nullopt, &loop_, [](const Status&) {});
    }
    for (const auto& b : gone.brokers) {
      store_->remove(timeAveragePath(b), std::nullopt, &loop_, [](const Status&) {});
    }
    // Pulsar's updateAll ends with checkNamespaceBundleSplit (the leader has fresh data).
    if (leading_) checkNamespaceBundleSplit();
    done();
  };
  if (unknown.empty()) return apply();
  auto left = std::make_shared<size_t>(unknown.size());
  for (const auto& b : unknown) {
    std::string path = bundleDataPath(b);
    store_->get(path, &loop_,
                [stored, left, b, path, apply](Result<std::optional<metadata::GetResult>> r) {
                  if (r.isOk() && r->has_value()) {
                    auto d = parseBundleData((*r)->value, path);
                    if (d.isOk()) (*stored)[b] = *d;
                  }
                  if (--*left == 0) apply();
                });
  }
}

// Pulsar's writeBundleDataOnZooKeeper, every loadBalancerResourceQuotaUpdateIntervalMinutes.
void LoadManager::writeBundleData(uint64_t generation) {
  MAGNETAR_DCHECK_ON(loop_);
  if (!leading_ || generation != leaderGeneration_) return;
  updateAll([this, generation] {
    LoadReportSettings s = settings();
    metadata::PutOptions o;
    auto logged = [](const Result<metadata::Stat>& r) {
      if (!r.isOk()) MLOG_WARN("load data write: {}", r.status().message());
    };
    auto excluded = balanceSettings().sheddingExcludedNamespaces;
    for (const auto& b : aggregator_.topBundles(s.maxNumberOfBundlesInBundleLoadReport, excluded)) {
      store_->put(bundleDataPath(b), toJson(aggregator_.bundleData().at(b)), o, &loop_, logged);
    }
    for (const auto& [broker, t] : aggregator_.timeAverages()) {
      store_->put(timeAveragePath(broker), toJson(t), o, &loop_, logged);
    }
    after(std::chrono::minutes(std::max(1, s.resourceQuotaUpdateIntervalMinutes)),
          [this, generation] { writeBundleData(generation); });
  });
}

}  // namespace magnetar::broker::cluster

namespace magnetar::broker::cluster {

LoadBalanceSettings LoadManager::balanceSettings() const {
  return options_.balanceSettings ? options_.balanceSettings() : LoadBalanceSettings{};
}

LoadManager::BalanceCounters LoadManager::balanceCounters() const {
  MutexLock lock(mu_);
  return counters_;
}

// Pulsar's LoadSheddingTask: every broker runs it, only the leader sheds
// (LoadManagerShared.isLoadSheddingEnabled); the period is read again at each run.
void LoadManager::sheddingTick() {
  MAGNETAR_DCHECK_ON(loop_);
  LoadBalanceSettings b = balanceSettings();
  if (leading_ && b.sheddingEnabled) doLoadShedding();
  after(sheddingInterval(b), [this] { sheddingTick(); });
}

// Pulsar's ModularLoadManagerImpl.doLoadShedding: the strategy's picks, minus bundles unloaded
// within the grace period (the strategies skip those), unloaded through their owners.
void LoadManager::doLoadShedding() {
  MAGNETAR_DCHECK_ON(loop_);
  if (!options_.unloadBundle) return;
  if (reports_.size() <= 1) {
    MLOG_INFO("Only 1 broker available: no load shedding will be performed");
    return;
  }
  LoadBalanceSettings b = balanceSettings();
  auto strategy = sheddingStrategyByName(b.sheddingStrategy);
  if (!strategy) {
    MLOG_WARN("loadBalancerLoadSheddingStrategy {} is not supported; no load shedding",
              b.sheddingStrategy);
    return;
  }
  {
    MutexLock lock(mu_);
    counters_.sheddingRan = true;
  }
  const int64_t now = wallMs();
  const int64_t timeout = now - b.sheddingGracePeriodMinutes * 60000;
  std::erase_if(recentlyUnloaded_, [timeout](const auto& e) { return e.second < timeout; });
  SheddingInput in{reports_, aggregator_.bundleData(), recentlyUnloaded_};
  BundlesToUnload picks;
  switch (*strategy) {
    case SheddingStrategy::kThreshold:
      picks = thresholdShedder_.findBundlesForUnloading(in, b.shedding);
      break;
    case SheddingStrategy::kOverload:
      picks = overloadShedder(in, b.shedding);
      break;
    case SheddingStrategy::kUniform:
      picks = uniformLoadShedder(in, b.shedding);
      break;
  }
  // One count per broker of this pass with a bundle unloaded (unloadBrokerCount).
  auto counted = std::make_shared<std::set<std::string>>();
  for (const auto& [broker, bundle] : picks) {
    if (reports_.find(broker) == reports_.end()) continue;
    if (b.sheddingExcludedNamespaces.count(namespaceOfBundle(bundle))) {
      MLOG_DEBUG("[{}] Skipping load shedding for bundle {}: its namespace is excluded",
                 b.sheddingStrategy, bundle);
      continue;
    }
    recentlyUnloaded_[bundle] = now;  // not picked again while the calls are under way
    if (!ns_) {
      unloadPicked(broker, bundle, std::nullopt, counted);
      continue;
    }
    // As Pulsar's doLoadShedding: the destination first (selectBroker); none, or the owner
    // itself, and the bundle stays.
    ns_->chooseUnloadDestination(
        bundle, broker, &loop_,
        [this, broker = broker, bundle = bundle, counted](std::optional<std::string> dest) {
          if (!dest || *dest == broker) {
            recentlyUnloaded_.erase(bundle);
            if (!dest) {
              MLOG_INFO("No broker available to unload bundle {} from broker {}", bundle, broker);
            } else {
              MLOG_WARN(
                  "The destination broker {} is the same as the current owner broker for "
                  "bundle {}",
                  *dest, bundle);
            }
            return;
          }
          unloadPicked(broker, bundle, dest, counted);
        });
  }
}

// Unloads a shed bundle through its owner (its destination preallocated by the placement).
void LoadManager::unloadPicked(const std::string& broker, const std::string& bundle,
                               const std::optional<std::string>& dest,
                               const std::shared_ptr<std::set<std::string>>& counted) {
  MAGNETAR_DCHECK_ON(loop_);
  auto owner = reports_.find(broker);
  if (owner == reports_.end()) {
    recentlyUnloaded_.erase(bundle);
    return;
  }
  LoadBalanceSettings b = balanceSettings();
  MLOG_INFO("[{}] Unloading bundle: {} from broker {} to dest broker {}", b.sheddingStrategy,
            bundle, broker, dest.value_or("(any)"));
  options_.unloadBundle(
      owner->second.urls, bundle, [this, broker, bundle, counted](const Status& s) {
        loop_.execute([this, broker, bundle, counted, s] {
          if (!s.isOk()) {
            MLOG_WARN("Error when trying to perform load shedding on {} for broker {}: {}", bundle,
                      broker, s.message());
            recentlyUnloaded_.erase(bundle);
            return;
          }
          MutexLock lock(mu_);
          ++counters_.unloadBundles;
          if (counted->insert(broker).second) ++counters_.unloadBrokers;
        });
      });
}

// Pulsar's checkNamespaceBundleSplit on the leader's data (BundleSplitterTask): the bundles
// past a threshold, checked against their namespace's current cut, split by their owners.
void LoadManager::checkNamespaceBundleSplit() {
  MAGNETAR_DCHECK_ON(loop_);
  LoadBalanceSettings b = balanceSettings();
  if (!b.split.enabled || !leading_ || reports_.size() <= 1 || splitting_ ||
      !options_.splitBundle) {
    return;
  }
  {
    MutexLock lock(mu_);
    counters_.splitRan = true;
  }
  auto owners = std::make_shared<std::map<std::string, std::string>>();
  auto loads = std::make_shared<std::map<std::string, BundleLoad>>(
      bundleLoadsForSplit(reports_, aggregator_.bundleData(), owners.get()));
  std::set<std::string> namespaces;
  for (const auto& key : findBundlesToSplit(*loads, {}, b.split.thresholds)) {
    namespaces.insert(namespaceOfBundle(key));
  }
  if (namespaces.empty()) return;
  splitting_ = true;
  auto cuts = std::make_shared<std::map<std::string, std::vector<uint64_t>>>();
  auto left = std::make_shared<size_t>(namespaces.size());
  for (const auto& ns : namespaces) {
    ns_->boundariesOf(ns, &loop_,
                      [this, ns, cuts, left, loads, owners, b](Result<std::vector<uint64_t>> r) {
                        if (r.isOk()) (*cuts)[ns] = std::move(*r);
                        if (--*left > 0) return;
                        splitPicked(*loads, *owners, *cuts, b);
                      });
  }
}

void LoadManager::splitPicked(const std::map<std::string, BundleLoad>& loads,
                              const std::map<std::string, std::string>& owners,
                              const std::map<std::string, std::vector<uint64_t>>& cuts,
                              const LoadBalanceSettings& b) {
  MAGNETAR_DCHECK_ON(loop_);
  std::map<std::string, int> counts;
  for (const auto& [ns, cut] : cuts) counts[ns] = static_cast<int>(cut.size()) - 1;
  auto todo = std::make_shared<std::vector<std::pair<std::string, BrokerUrls>>>();
  for (const auto& key : findBundlesToSplit(loads, counts, b.split.thresholds)) {
    std::string ns = namespaceOfBundle(key);
    auto cut = cuts.find(ns);
    uint64_t lo = 0, hi = 0;
    if (cut == cuts.end() || !parseBundleName(key.substr(ns.size() + 1), &lo, &hi).isOk() ||
        hi - lo <= 1) {
      continue;  // canSplitBundle
    }
    bool inCut = false;
    for (size_t i = 0; i + 1 < cut->second.size(); ++i) {
      inCut = inCut || (cut->second[i] == lo && cut->second[i + 1] == hi);
    }
    auto owner = reports_.find(owners.at(key));
    if (!inCut || owner == reports_.end()) {
      MLOG_WARN("Bundle {} has been removed, skip split this bundle", key);
      continue;
    }
    // Not picked again (Pulsar removes it from the load data and the store).
    aggregator_.forget(key);
    store_->remove(bundleDataPath(key), std::nullopt, &loop_, [](const Status&) {});
    todo->emplace_back(key, owner->second.urls);
  }
  if (todo->empty()) {
    splitting_ = false;
    return;
  }
  splitEach(todo, 0, b.split.unloadSplitBundles);
}

void LoadManager::splitEach(
    const std::shared_ptr<std::vector<std::pair<std::string, BrokerUrls>>>& todo, size_t n,
    bool unload) {
  MAGNETAR_DCHECK_ON(loop_);
  if (n == todo->size()) {
    splitting_ = false;
    return;
  }
  const auto& [key, owner] = (*todo)[n];
  MLOG_INFO("Load-manager splitting bundle {} and unloading {}", key, unload);
  options_.splitBundle(owner, key, unload, [this, todo, n, unload](const Status& s) {
    loop_.execute([this, todo, n, unload, s] {
      const std::string& k = (*todo)[n].first;
      if (s.isOk()) {
        MLOG_INFO("Successfully split namespace bundle {}", k);
        MutexLock lock(mu_);
        ++counters_.bundlesSplit;
      } else {
        MLOG_WARN("Failed to split namespace bundle {}: {}", k, s.message());
      }
      splitEach(todo, n + 1, unload);
    });
  });
}

}  // namespace magnetar::broker::cluster
