// The option structs against the registry (src/app/option_bindings.h): a default configuration
// gives settings.def's defaults in every struct, each struct's own default member values agree
// with settings.def, and each bound field follows its setting and no other.
#include "app/option_bindings.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "setting_defaults.h"

namespace magnetar::app {
namespace {

using config::ServiceConfiguration;
using config::SettingDef;
using config::SettingType;

// Thread-count defaults are sized for this many processors.
constexpr int kProcessors = 4;

std::shared_ptr<ServiceConfiguration> defaultConfig() {
  return std::make_shared<ServiceConfiguration>(kProcessors);
}

// A valid value of `def` other than its current one in `cfg`.
std::string otherValue(const SettingDef& def, const ServiceConfiguration& cfg) {
  const std::string text = *cfg.getString(def.name);
  switch (def.type) {
    case SettingType::kBool:
      return text == "true" ? "false" : "true";
    case SettingType::kInt:
    case SettingType::kLong:
    case SettingType::kOptInt:
    case SettingType::kThreads: {
      int64_t v = text.empty() ? static_cast<int64_t>(def.min.value_or(0)) : std::stoll(text);
      if (!def.max || v + 1 <= *def.max) return std::to_string(v + 1);
      return std::to_string(v - 1);
    }
    case SettingType::kDouble: {
      double v = std::stod(text);
      for (double c : {v + 0.5, v - 0.5, v / 2}) {
        if ((!def.min || c >= *def.min) && (!def.max || c <= *def.max) && c != v) {
          return std::to_string(c);
        }
      }
      return std::to_string((*def.min + *def.max) / 2);
    }
    case SettingType::kEnum:
      for (const auto& a : def.allowed) {
        if (a != text) return a;
      }
      return text;
    case SettingType::kList:
      return "a,b";
    case SettingType::kString:
      return text + "x";
  }
  return text;
}

// Fields whose struct default is no setting's on purpose: the app always gives them.
const std::set<std::string> kNoStructDefault = {
    "NamespaceServiceOptions.clusterName",
    "ConfigurationStoreOptions.clusterName",
};

// Checks one struct's table against `from` (the app's *From() function).
template <class Options>
void checkBindings(const std::string& name, const SettingBindings<Options>& bindings,
                   const std::function<Options(std::shared_ptr<ServiceConfiguration>)>& from) {
  SCOPED_TRACE(name);
  ASSERT_FALSE(bindings.empty());
  const auto defaults = defaultConfig();
  const Options made = from(defaults);
  const Options plain{};
  std::set<config::SettingId> seen;
  for (const auto& b : bindings) {
    const SettingDef& def = config::settingDef(b.id);
    EXPECT_TRUE(seen.insert(b.id).second) << def.name << " is bound twice";
    EXPECT_TRUE(b.holds(*defaults, made))
        << def.name << ": a default configuration does not give its default";
    // Thread counts have no settings.def default: theirs depends on the processors.
    if (def.type != SettingType::kThreads && !kNoStructDefault.count(name + "." + def.name)) {
      EXPECT_TRUE(b.holds(*defaults, plain))
          << name << "'s default for " << def.name << " is not settings.def's '" << def.defaultValue
          << "'";
    }
  }
  for (const auto& b : bindings) {
    const SettingDef& def = config::settingDef(b.id);
    auto changed = defaultConfig();
    const std::string value = otherValue(def, *changed);
    ASSERT_TRUE(changed->set(def.name, value, " (test)")) << def.name << "=" << value;
    const Options o = from(changed);
    EXPECT_FALSE(b.holds(*defaults, o)) << def.name << "=" << value << " did not reach its field";
    for (const auto& other : bindings) {
      EXPECT_TRUE(other.holds(*changed, o))
          << def.name << "=" << value << ": the field of " << config::settingDef(other.id).name
          << " does not hold its setting";
    }
  }
}

TEST(AppOptionBindings, StorageOptions) {
  checkBindings<storage::StorageOptions>("StorageOptions", storageOptionBindings(),
                                         [](auto cfg) { return *storageOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, BkStorageOptions) {
  checkBindings<storage::bk::BkStorageOptions>("BkStorageOptions", bkStorageOptionBindings(),
                                               [](auto cfg) { return bkStorageOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, BrokerOptions) {
  checkBindings<broker::BrokerOptions>("BrokerOptions", brokerOptionBindings(),
                                       [](auto cfg) { return *brokerOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, BrokerDynamicOptions) {
  checkBindings<broker::BrokerDynamicOptions>(
      "BrokerDynamicOptions", brokerDynamicOptionBindings(),
      [](auto cfg) { return brokerOptionsFrom(*cfg)->dynamic; });
  for (const auto& b : brokerDynamicOptionBindings()) {
    EXPECT_TRUE(config::settingDef(b.id).dynamic) << config::settingDef(b.id).name;
  }
}

TEST(AppOptionBindings, TlsOptions) {
  checkBindings<net::TlsOptions>("TlsOptions", tlsOptionBindings(),
                                 [](auto cfg) { return tlsOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, AuthenticationOptions) {
  checkBindings<broker::AuthenticationOptions>(
      "AuthenticationOptions", authenticationOptionBindings(),
      [](auto cfg) { return authenticationOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, BrokerClientOptions) {
  checkBindings<broker::BrokerClientOptions>(
      "BrokerClientOptions", brokerClientOptionBindings(),
      [](auto cfg) { return brokerOptionsFrom(*cfg)->brokerClient; });
}

TEST(AppOptionBindings, BookKeeperClientConfig) {
  checkBindings<bookkeeper::ClientConfig>("ClientConfig", bookKeeperClientBindings(), [](auto cfg) {
    return bookKeeperClientConfigFrom(*cfg);
  });
}

TEST(AppOptionBindings, ZkConfig) {
  checkBindings<metadata::ZkConfig>("ZkConfig", zkConfigBindings(),
                                    [](auto cfg) { return zkConfigFrom(*cfg, "zk:h:2181"); });
  auto cfg = defaultConfig();
  ASSERT_TRUE(cfg->set("metadataStoreSessionTimeoutMillis", "2000", " (test)"));
  auto zc = zkConfigFrom(*cfg, "zk:h:2181");
  EXPECT_EQ(zc.url, "zk:h:2181");
  EXPECT_EQ(zc.connectTimeoutMs, 5000);  // at least 5 s for the first session
}

TEST(AppOptionBindings, NamespaceServiceOptions) {
  checkBindings<broker::cluster::NamespaceServiceOptions>(
      "NamespaceServiceOptions", namespaceServiceBindings(),
      [](auto cfg) { return namespaceServiceOptionsFrom(cfg); });
  // The dynamic ones are read at each use.
  auto cfg = defaultConfig();
  auto o = namespaceServiceOptionsFrom(cfg);
  ASSERT_TRUE(cfg->updateDynamic("namespaceBundleUnloadingTimeoutMs", "1234"));
  EXPECT_EQ(o.bundleUnloadingTimeoutMs(), 1234);
  ASSERT_TRUE(cfg->updateDynamic("loadBalancerDistributeBundlesEvenlyEnabled", "false"));
  EXPECT_FALSE(o.placementSettings().distributeBundlesEvenly);
  ASSERT_TRUE(cfg->updateDynamic("loadBalancerBrokerOverloadedThresholdPercentage", "70"));
  EXPECT_EQ(o.placementSettings().overloadedThresholdPercentage, 70);
  ASSERT_TRUE(cfg->updateDynamic("loadBalancerBandwithInResourceWeight", "2.5"));
  EXPECT_EQ(o.placementSettings().bandwithInWeight, 2.5);
}

TEST(AppOptionBindings, ConfigurationStoreOptions) {
  checkBindings<broker::cluster::ConfigurationStoreOptions>(
      "ConfigurationStoreOptions", configurationStoreBindings(),
      [](auto cfg) { return configurationStoreOptionsFrom(*cfg); });
}

TEST(AppOptionBindings, HttpServerOptions) {
  checkBindings<admin::HttpServer::Options>("HttpServer::Options", httpServerBindings(),
                                            [](auto cfg) { return httpServerOptionsFrom(*cfg); });
}

// The conversions, spelled out once against setting_defaults.h.
TEST(AppOptionBindings, DefaultsThroughTheirConversions) {
  auto cfg = defaultConfig();
  auto s = storageOptionsFrom(*cfg);
  ASSERT_TRUE(s.isOk());
  EXPECT_EQ(s->journalSegmentSizeBytes, setting_defaults::journalMaxSizeMB << 20);
  EXPECT_EQ(s->journalMaxGroupBytes, setting_defaults::journalBufferedWritesThreshold);
  EXPECT_EQ(s->metadataDirectory, "data/metadata");  // rocksdb:data/metadata
  EXPECT_EQ(s->testJournalDelayMicros, 0);
  auto b = brokerOptionsFrom(*cfg);
  ASSERT_TRUE(b.isOk());
  EXPECT_EQ(b->advertisedAddress, "localhost");  // advertisedAddress empty: this host
  EXPECT_FALSE(b->brokerServicePortTls.has_value());
  EXPECT_EQ(b->dynamic.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds.load(), -1);
  EXPECT_EQ(b->numIOThreads, cfg->numIOThreads());
  ASSERT_TRUE(cfg->set("journalBufferedWritesThreshold", "0", " (test)"));
  EXPECT_EQ(storageOptionsFrom(*cfg)->journalMaxGroupBytes, 4 << 20);  // 0: 4 MiB groups at most
}

TEST(AppOptionBindings, MetadataDirectoryFromTheUrl) {
  auto cfg = defaultConfig();
  ASSERT_TRUE(cfg->set("metadataStoreUrl", "rocksdb:///var/m", " (test)"));
  EXPECT_EQ(storageOptionsFrom(*cfg)->metadataDirectory, "/var/m");
  ASSERT_TRUE(cfg->set("metadataStoreUrl", "zk:h:2181", " (test)"));
  ASSERT_TRUE(cfg->set("journalDirectory", "/d/journal", " (test)"));
  EXPECT_EQ(storageOptionsFrom(*cfg)->metadataDirectory, "/d/metadata");
  ASSERT_TRUE(cfg->set("metadataStoreUrl", "etcd:h:2379", " (test)"));
  auto bad = storageOptionsFrom(*cfg);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(AppOptionBindings, BadAdvertisedListenersAreAnError) {
  auto cfg = defaultConfig();
  ASSERT_TRUE(cfg->set("advertisedListeners", "nonsense", " (test)"));
  EXPECT_FALSE(brokerOptionsFrom(*cfg).isOk());
}

}  // namespace
}  // namespace magnetar::app
