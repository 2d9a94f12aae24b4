#include "app/dynamic_settings.h"

#include <string>

namespace magnetar::app {

bool applyDynamicSetting(config::SettingId id, const config::ServiceConfiguration& cfg,
                         broker::BrokerService& broker,
                         const std::function<void(int64_t)>& setCacheSizeMB) {
  using config::SettingId;
  broker::BrokerDynamicOptions& d = broker.dynamicOptions();
  switch (id) {
    case SettingId::allowAutoTopicCreation:
      d.allowAutoTopicCreation.store(cfg.allowAutoTopicCreation());
      return true;
    case SettingId::allowAutoTopicCreationType:
      d.allowAutoTopicCreationType.store(cfg.allowAutoTopicCreationType());
      return true;
    case SettingId::defaultNumPartitions:
      d.defaultNumPartitions.store(cfg.defaultNumPartitions());
      return true;
    case SettingId::allowAutoSubscriptionCreation:
      d.allowAutoSubscriptionCreation.store(cfg.allowAutoSubscriptionCreation());
      return true;
    case SettingId::dispatcherMaxReadBatchSize:
      d.dispatcherMaxReadBatchSize.store(cfg.dispatcherMaxReadBatchSize());
      return true;
    case SettingId::dispatcherMaxReadSizeBytes:
      d.dispatcherMaxReadSizeBytes.store(cfg.dispatcherMaxReadSizeBytes());
      return true;
    case SettingId::keySharedLookAheadMsgInReplayThresholdPerConsumer:
      d.keySharedLookAheadMsgInReplayThresholdPerConsumer.store(
          cfg.keySharedLookAheadMsgInReplayThresholdPerConsumer());
      return true;
    case SettingId::keySharedLookAheadMsgInReplayThresholdPerSubscription:
      d.keySharedLookAheadMsgInReplayThresholdPerSubscription.store(
          cfg.keySharedLookAheadMsgInReplayThresholdPerSubscription());
      return true;
    case SettingId::isAllowAutoUpdateSchemaEnabled:
      d.isAllowAutoUpdateSchemaEnabled.store(cfg.isAllowAutoUpdateSchemaEnabled());
      return true;
    case SettingId::brokerDeleteInactiveTopicsEnabled:
      d.brokerDeleteInactiveTopicsEnabled.store(cfg.brokerDeleteInactiveTopicsEnabled());
      return true;
    case SettingId::brokerDeleteInactiveTopicsMode:
      d.brokerDeleteInactiveTopicsMode.store(cfg.brokerDeleteInactiveTopicsMode());
      return true;
    case SettingId::brokerDeleteInactiveTopicsMaxInactiveDurationSeconds:
      d.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds.store(
          cfg.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds().value_or(-1));
      return true;
    case SettingId::brokerDeleteInactivePartitionedTopicMetadataEnabled:
      d.brokerDeleteInactivePartitionedTopicMetadataEnabled.store(
          cfg.brokerDeleteInactivePartitionedTopicMetadataEnabled());
      return true;
    case SettingId::maxMessagePublishBufferSizeInMB:
      broker.setMaxMessagePublishBufferSizeInMB(cfg.maxMessagePublishBufferSizeInMB());
      return true;
    case SettingId::superUserRoles:
      broker.authorization().setSuperUserRoles(cfg.superUserRoles());
      return true;
    case SettingId::managedLedgerCacheSizeMB:
      setCacheSizeMB(cfg.managedLedgerCacheSizeMB());
      return true;
    case SettingId::brokerShutdownTimeoutMs:  // read from cfg when the broker stops
      return true;
    case SettingId::loadBalancerDistributeBundlesEvenlyEnabled:  // read at each assignment
      return true;
    case SettingId::namespaceBundleUnloadingTimeoutMs:  // read at each bundle release
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
    return Status::internal("dynamic settings without a run-time target (give each one in "
                            "src/app/dynamic_settings.cc or declare it kStatic): " + missing);
  }
  const config::ServiceConfiguration* registry = &cfg;
  cfg.addListener([registry, &broker, setCacheSizeMB = std::move(setCacheSizeMB)](
                      const config::SettingDef& def, const std::string&) {
    applyDynamicSetting(def.id, *registry, broker, setCacheSizeMB);
  });
  return Status::ok();
}

}  // namespace magnetar::app
