#include "app/dynamic_settings.h"

#include <string>

#include "app/option_bindings.h"

namespace magnetar::app {

namespace {

// The rate-limit settings whose change reconfigures limiters (the others are read at each use).
bool changesRateLimits(config::SettingId id) {
  using config::SettingId;
  switch (id) {
    case SettingId::brokerPublisherThrottlingMaxMessageRate:
    case SettingId::brokerPublisherThrottlingMaxByteRate:
    case SettingId::maxPublishRatePerTopicInMessages:
    case SettingId::maxPublishRatePerTopicInBytes:
    case SettingId::dispatchThrottlingRateInMsg:
    case SettingId::dispatchThrottlingRateInByte:
    case SettingId::dispatchThrottlingRatePerTopicInMsg:
    case SettingId::dispatchThrottlingRatePerTopicInByte:
    case SettingId::dispatchThrottlingRatePerSubscriptionInMsg:
    case SettingId::dispatchThrottlingRatePerSubscriptionInByte:
    case SettingId::dispatchThrottlingRateRelativeToPublishRate:
    case SettingId::subscribeThrottlingRatePerConsumer:
    case SettingId::subscribeRatePeriodPerConsumerInSecond:
      return true;
    default:
      return false;
  }
}

// The load manager's settings (placement, reports, shedding, splits): read at each use.
bool loadManagerReadsAtUse(config::SettingId id) {
  using config::SettingId;
  switch (id) {
    // The leader's placement reads them at each assignment (NamespaceServiceOptions::
    // placementSettings).
    case SettingId::loadBalancerLoadPlacementStrategy:
    case SettingId::loadBalancerBrokerMaxTopics:
    case SettingId::loadBalancerMemoryResourceWeight:
    case SettingId::loadBalancerBandwithInResourceWeight:
    case SettingId::loadBalancerBandwithOutResourceWeight:
      return true;
    case SettingId::namespaceBundleUnloadingTimeoutMs:  // read at each bundle release
      return true;
    // The load manager reads them at each use (LoadManager::Options::settings).
    case SettingId::loadBalancerReportUpdateThresholdPercentage:
    case SettingId::loadBalancerReportUpdateMinIntervalMillis:
    case SettingId::loadBalancerReportUpdateMaxIntervalMinutes:
    case SettingId::loadBalancerHostUsageCheckIntervalMinutes:
    case SettingId::loadBalancerMaxNumberOfBundlesInBundleLoadReport:
    case SettingId::loadBalancerCPUResourceWeight:
    case SettingId::loadBalancerDirectMemoryResourceWeight:
    case SettingId::loadBalancerBandwidthInResourceWeight:
    case SettingId::loadBalancerBandwidthOutResourceWeight:
      return true;
    // The leader's shedding reads them at each pass (LoadManager::Options::balanceSettings).
    case SettingId::loadBalancerLoadSheddingStrategy:
    case SettingId::loadBalancerSheddingEnabled:
    case SettingId::loadBalancerSheddingIntervalMinutes:
    case SettingId::loadBalancerSheddingIntervalMillisForTesting:
    case SettingId::loadBalancerSheddingGracePeriodMinutes:
    case SettingId::loadBalancerBrokerOverloadedThresholdPercentage:
    case SettingId::loadBalancerBrokerThresholdShedderPercentage:
    case SettingId::minUnloadMessage:
    case SettingId::minUnloadMessageThroughput:
    case SettingId::maxUnloadPercentage:
    case SettingId::loadBalancerMsgRateDifferenceShedderThreshold:
    case SettingId::loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold:
    case SettingId::maxUnloadBundleNumPerShedding:
    case SettingId::loadBalancerHistoryResourcePercentage:
    case SettingId::loadBalancerBundleUnloadMinThroughputThreshold:
    case SettingId::loadBalancerSheddingExcludedNamespaces:
      return true;
    // Written in the report (loadManagerClassName); read when the load manager starts.
    case SettingId::loadManagerClassName:
      return true;
    // Read at each split and each auto-split pass (the leader's LoadManager).
    case SettingId::flowOrQpsDifferenceThresholdPercentage:
    case SettingId::loadBalancerAutoBundleSplitEnabled:
    case SettingId::loadBalancerAutoUnloadSplitBundlesEnabled:
    case SettingId::loadBalancerNamespaceBundleMaxTopics:
    case SettingId::loadBalancerNamespaceBundleMaxSessions:
    case SettingId::loadBalancerNamespaceBundleMaxMsgRate:
    case SettingId::loadBalancerNamespaceBundleMaxBandwidthMbytes:
    case SettingId::loadBalancerNamespaceMaximumBundles:
    case SettingId::supportedNamespaceBundleSplitAlgorithms:
    case SettingId::defaultNamespaceBundleSplitAlgorithm:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool applyDynamicSetting(config::SettingId id, const config::ServiceConfiguration& cfg,
                         broker::BrokerService& broker,
                         const std::function<void(int64_t)>& setCacheSizeMB) {
  using config::SettingId;
  // BrokerOptions::dynamic: the same bindings that gave the start-up values.
  for (const auto& b : brokerDynamicOptionBindings()) {
    if (b.id != id) continue;
    b.apply(cfg, broker.dynamicOptions());
    if (changesRateLimits(id)) broker.onRateSettingsChanged();
    return true;
  }
  if (loadManagerReadsAtUse(id)) return true;
  switch (id) {
    case SettingId::maxMessagePublishBufferSizeInMB:
      broker.setMaxMessagePublishBufferSizeInMB(cfg.maxMessagePublishBufferSizeInMB());
      return true;
    case SettingId::superUserRoles:
      broker.authorization().setSuperUserRoles(cfg.superUserRoles());
      return true;
    case SettingId::managedLedgerCacheSizeMB:
      setCacheSizeMB(cfg.managedLedgerCacheSizeMB());
      return true;
    // ReplicationService reads them at each check (every second).
    case SettingId::dispatchThrottlingRatePerReplicatorInMsg:
    case SettingId::dispatchThrottlingRatePerReplicatorInByte:
      return true;
    case SettingId::brokerShutdownTimeoutMs:  // read from cfg when the broker stops
      return true;
    case SettingId::loadBalancerDistributeBundlesEvenlyEnabled:  // read at each assignment
      return true;
    // Stored only: the broker-to-broker client reads them at start, as Pulsar builds its
    // PulsarService client once (a change applies after a restart there too).
    case SettingId::brokerClientAuthenticationPlugin:
    case SettingId::brokerClientAuthenticationParameters:
    case SettingId::brokerClientTlsEnabled:
      return true;
    default:
      return false;
  }
}

Status connectDynamicSettings(config::ServiceConfiguration& cfg, broker::BrokerService& broker,
                              std::function<void(int64_t)> setCacheSizeMB) {
  std::string missing;
  for (const auto& def : config::allSettings()) {
    // Applying the value the broker started with changes nothing; it proves a target exists.
    if (def.dynamic && def.enforced && !applyDynamicSetting(def.id, cfg, broker, setCacheSizeMB)) {
      missing += (missing.empty() ? "" : ", ") + def.name;
    }
  }
  if (!missing.empty()) {
    return Status::internal(
        "dynamic settings without a run-time target (give each one in "
        "src/app/dynamic_settings.cc or declare it kStatic): " +
        missing);
  }
  const config::ServiceConfiguration* registry = &cfg;
  cfg.addListener([registry, &broker, setCacheSizeMB = std::move(setCacheSizeMB)](
                      const config::SettingDef& def, const std::string&) {
    applyDynamicSetting(def.id, *registry, broker, setCacheSizeMB);
  });
  return Status::ok();
}

}  // namespace magnetar::app
