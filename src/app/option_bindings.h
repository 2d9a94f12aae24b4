// Settings bound once: each option struct the app hands to a module is filled from the config
// registry (src/config/settings.def) by one table of bindings, setting -> field, here and nowhere
// else. The structs' own defaults are settings.def's (setting_defaults.h); option_bindings_test
// checks that they agree, and that each field follows its setting and no other.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "admin/http_server.h"
#include "base/status.h"
#include "bookkeeper/client.h"
#include "broker/auth/authentication.h"
#include "broker/cluster/configuration_store.h"
#include "broker/cluster/load_report.h"
#include "broker/cluster/namespace_service.h"
#include "broker/common/broker_options.h"
#include "config/service_configuration.h"
#include "metadata/zk_store.h"
#include "net/tls.h"
#include "storage/bk/bk_storage.h"
#include "storage/durable_storage.h"
#include "storage/storage_options.h"

namespace magnetar::app {

// One setting bound to one field of `Options`, with the conversion when the units differ (MiB to
// bytes, an unset OptInt to -1).
template <class Options>
struct SettingBinding {
  config::SettingId id;
  // Stores the setting's (converted) value into the field.
  void (*apply)(const config::ServiceConfiguration& cfg, Options& o);
  // Whether the field holds what apply() would store.
  bool (*holds)(const config::ServiceConfiguration& cfg, const Options& o);
};

template <class Options>
using SettingBindings = std::vector<SettingBinding<Options>>;

template <class Options>
void applyBindings(const SettingBindings<Options>& bindings,
                   const config::ServiceConfiguration& cfg, Options& o) {
  for (const auto& b : bindings) b.apply(cfg, o);
}

// An Options with its own defaults and then every binding of `bindings` applied from cfg.
template <class Options>
Options optionsFrom(const SettingBindings<Options>& bindings,
                    const config::ServiceConfiguration& cfg) {
  Options o;
  applyBindings(bindings, cfg, o);
  return o;
}

// The tables. Fields not listed are not settings (test hooks, injection points, intervals
// Magnetar fixes) or are derived from several keys by the *From() functions below.
const SettingBindings<storage::StorageOptions>& storageOptionBindings();
const SettingBindings<storage::bk::BkStorageOptions>& bkStorageOptionBindings();
const SettingBindings<broker::BrokerOptions>& brokerOptionBindings();
// Dynamic keys only: applied at start-up and again by dynamic_settings.cc on each change.
const SettingBindings<broker::BrokerDynamicOptions>& brokerDynamicOptionBindings();
const SettingBindings<net::TlsOptions>& tlsOptionBindings();
const SettingBindings<broker::AuthenticationOptions>& authenticationOptionBindings();
const SettingBindings<broker::BrokerClientOptions>& brokerClientOptionBindings();
const SettingBindings<bookkeeper::ClientConfig>& bookKeeperClientBindings();
const SettingBindings<metadata::ZkConfig>& zkConfigBindings();
const SettingBindings<broker::cluster::NamespaceServiceOptions>& namespaceServiceBindings();
const SettingBindings<broker::cluster::ConfigurationStoreOptions>& configurationStoreBindings();
const SettingBindings<admin::HttpServer::Options>& httpServerBindings();

// The embedded storage's options; metadataDirectory from metadataStoreUrl (rocksdb:<dir>, or
// <journalDirectory's parent>/metadata in cluster mode), the test hook from
// MAGNETAR_TEST_STORAGE_DELAY_MICROS. Errors: kInvalidArgument for a metadataStoreUrl this
// build cannot serve.
Result<storage::StorageOptions> storageOptionsFrom(const config::ServiceConfiguration& cfg);
storage::bk::BkStorageOptions bkStorageOptionsFrom(const config::ServiceConfiguration& cfg);
// advertisedListeners parsed with internalListenerName; tlsContext is left to the caller.
// Errors: kInvalidArgument for bad advertisedListeners.
Result<broker::BrokerOptions> brokerOptionsFrom(const config::ServiceConfiguration& cfg);
net::TlsOptions tlsOptionsFrom(const config::ServiceConfiguration& cfg);
broker::AuthenticationOptions authenticationOptionsFrom(const config::ServiceConfiguration& cfg);
// metadataServiceUri is bookkeeperMetadataServiceUri; zkConnectTimeoutMs is the caller's.
bookkeeper::ClientConfig bookKeeperClientConfigFrom(const config::ServiceConfiguration& cfg);
// A ZooKeeper session for `url` (metadataStoreUrl or configurationMetadataStoreUrl); the first
// session is awaited max(metadataStoreSessionTimeoutMillis, 5 s).
metadata::ZkConfig zkConfigFrom(const config::ServiceConfiguration& cfg, const std::string& url);
// The dynamic keys (loadBalancerDistributeBundlesEvenlyEnabled,
// namespaceBundleUnloadingTimeoutMs) are read from `cfg` at each use.
broker::cluster::NamespaceServiceOptions namespaceServiceOptionsFrom(
    const std::shared_ptr<const config::ServiceConfiguration>& cfg);
broker::cluster::ConfigurationStoreOptions configurationStoreOptionsFrom(
    const config::ServiceConfiguration& cfg);
// The load manager's options: loadBalancerEnabled, the report and aggregation settings read from
// `cfg` at each use, the host's figures from a config::HostUsageSampler (directMemory: the entry
// cache, storageStats' cacheBytes, against managedLedgerCacheSizeMB; storageStats may be unset:
// 0), the broker's version and loadManagerClassName. bundleStats is the caller's.
broker::cluster::LoadManager::Options loadManagerOptionsFrom(
    const std::shared_ptr<const config::ServiceConfiguration>& cfg,
    std::function<storage::StorageStats()> storageStats, const std::string& brokerVersion);
// The plain listener (webServicePort); the caller sets port to webServicePortTls for HTTPS.
admin::HttpServer::Options httpServerOptionsFrom(const config::ServiceConfiguration& cfg);

}  // namespace magnetar::app
