// The hand-over of dynamic settings: a value `brokers update-dynamic-config` changed in the
// registry reaches the broker or storage object that enforces it, at once.
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"
#include "broker/service/broker_service.h"
#include "config/service_configuration.h"

namespace magnetar::app {

// Copies the current value of dynamic setting `id` from `cfg` to the broker or storage. Returns
// false for a setting it has no target for (a kNotEnforced one: the registry keeps the value,
// nothing else changes). Thread: any (the targets are atomics or post to their owner).
// setCacheSizeMB: the topics' storage's entry cache resize (managedLedgerCacheSizeMB).
bool applyDynamicSetting(config::SettingId id, const config::ServiceConfiguration& cfg,
                         broker::BrokerService& broker,
                         const std::function<void(int64_t)>& setCacheSizeMB);

// Registers applyDynamicSetting as a listener of `cfg`; broker and storage must outlive every
// later cfg.updateDynamic(). Errors: kInternal naming each dynamic kEnforced setting that
// applyDynamicSetting has no target for (so the broker does not start with one that would
// change the registry and not the behaviour).
Status connectDynamicSettings(config::ServiceConfiguration& cfg, broker::BrokerService& broker,
                              std::function<void(int64_t)> setCacheSizeMB);

}  // namespace magnetar::app
