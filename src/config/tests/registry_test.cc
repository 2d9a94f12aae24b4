#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "config/service_configuration.h"
#include "config/setting.h"
#include "config/text.h"

namespace magnetar::config {
namespace {

TEST(Registry, EveryDeclarationIsWellFormed) {
  std::set<std::string> names;
  int index = 0;
  for (const auto& def : allSettings()) {
    SCOPED_TRACE(def.name);
    EXPECT_EQ(static_cast<int>(def.id), index++);
    EXPECT_TRUE(names.insert(def.name).second) << "duplicate key";
    EXPECT_FALSE(def.doc.empty());
    EXPECT_EQ(def.doc.find('\n'), std::string::npos) << "doc must be one line";
    EXPECT_FALSE(def.category.empty());
    auto v = parseValue(def, def.defaultValue, " (default)");
    EXPECT_TRUE(v.isOk()) << v.status().toString();
    if (def.type == SettingType::kEnum) {
      EXPECT_GE(def.allowed.size(), 2u);
    } else {
      EXPECT_TRUE(def.allowed.empty());
    }
    if (def.min && def.max) {
      EXPECT_LE(*def.min, *def.max);
    }
    EXPECT_EQ(findSetting(def.name), &def);
  }
  EXPECT_EQ(static_cast<int>(allSettings().size()), kSettingCount);
  EXPECT_EQ(findSetting("numIoThreads"), nullptr) << "lookup is case-sensitive";
}

TEST(Registry, PulsarDefaults) {
  ServiceConfiguration cfg(4);
  EXPECT_EQ(cfg.brokerServicePort(), 6650);
  EXPECT_FALSE(cfg.brokerServicePortTls().has_value());
  EXPECT_EQ(cfg.webServicePort(), 8080);
  EXPECT_FALSE(cfg.webServicePortTls().has_value());
  EXPECT_EQ(cfg.bindAddress(), "0.0.0.0");
  EXPECT_EQ(cfg.advertisedAddress(), "");
  EXPECT_EQ(cfg.clusterName(), "standalone");
  EXPECT_EQ(cfg.maxMessageSize(), 5242880);
  EXPECT_EQ(cfg.maxPendingPublishRequestsPerConnection(), 1000);
  EXPECT_EQ(cfg.dispatcherMaxReadBatchSize(), 100);
  EXPECT_EQ(cfg.dispatcherMaxReadSizeBytes(), 5 * 1024 * 1024);
  EXPECT_EQ(cfg.dispatcherMaxRoundRobinBatchSize(), 20);
  EXPECT_EQ(cfg.maxUnackedMessagesPerConsumer(), 50000);
  EXPECT_EQ(cfg.maxUnackedMessagesPerSubscription(), 200000);
  EXPECT_EQ(cfg.keepAliveIntervalSeconds(), 30);
  EXPECT_TRUE(cfg.allowAutoTopicCreation());
  EXPECT_EQ(cfg.allowAutoTopicCreationType(), "non-partitioned");
  EXPECT_EQ(cfg.defaultNumPartitions(), 1);
  EXPECT_FALSE(cfg.brokerDeduplicationEnabled());
  EXPECT_EQ(cfg.brokerDeduplicationEntriesInterval(), 1000);
  EXPECT_EQ(cfg.brokerDeduplicationMaxNumberOfProducers(), 10000);
  EXPECT_EQ(cfg.brokerDeduplicationProducerInactivityTimeoutMinutes(), 360);
  EXPECT_EQ(cfg.defaultRetentionTimeInMinutes(), 0);
  EXPECT_EQ(cfg.defaultRetentionSizeInMB(), 0);
  EXPECT_EQ(cfg.managedLedgerMaxEntriesPerLedger(), 50000);
  EXPECT_EQ(cfg.managedLedgerMaxSizePerLedgerMbytes(), 2048);
  EXPECT_EQ(cfg.managedLedgerMinLedgerRolloverTimeMinutes(), 10);
  EXPECT_EQ(cfg.managedLedgerMaxLedgerRolloverTimeMinutes(), 240);
  EXPECT_EQ(cfg.managedLedgerMaxUnackedRangesToPersist(), 10000);
  EXPECT_DOUBLE_EQ(cfg.managedLedgerCacheEvictionWatermark(), 0.9);
  EXPECT_TRUE(cfg.subscriptionKeySharedUseConsistentHashing());
  EXPECT_EQ(cfg.subscriptionKeySharedConsistentHashingReplicaPoints(), 100);
  EXPECT_TRUE(cfg.exposeTopicLevelMetricsInPrometheus());
  EXPECT_TRUE(cfg.journalSyncData());
  EXPECT_EQ(cfg.journalDirectory(), "data/journal");
  EXPECT_EQ(cfg.ledgerDirectories(), std::vector<std::string>{"data/ledgers"});
  EXPECT_EQ(cfg.metadataStoreUrl(), "rocksdb:data/metadata");
  EXPECT_EQ(cfg.backlogQuotaDefaultLimitBytes(), -1);
  EXPECT_TRUE(cfg.superUserRoles().empty());
}

TEST(ParseValue, ErrorsNameKeyValueAndSource) {
  const SettingDef& io = *findSetting("numIOThreads");
  auto abc = parseValue(io, "abc", " at conf/x.conf:7");
  ASSERT_FALSE(abc.isOk());
  EXPECT_EQ(abc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(abc.status().message(),
            "invalid value 'abc' for numIOThreads at conf/x.conf:7: not an integer");
  auto neg = parseValue(io, "-2", " (--set)");
  ASSERT_FALSE(neg.isOk());
  EXPECT_EQ(neg.status().message(),
            "invalid value '-2' for numIOThreads (--set): below the minimum 0");
  EXPECT_FALSE(parseValue(io, "4.5", "").isOk());
  EXPECT_FALSE(parseValue(io, "8x", "").isOk());
  EXPECT_FALSE(parseValue(io, "5000", "").isOk());
  EXPECT_EQ(*parseValue(io, " +16 ", "")->number, 16);
}

// Settings a binding multiplies into bytes or milliseconds stop where the product still fits
// (journalMaxSizeMB << 20 in 64 bits, metadataStoreOperationTimeoutSeconds * 1000 in 32 bits).
TEST(ParseValue, ScaledSettingsStopWhereTheProductFits) {
  const SettingDef& journal = *findSetting("journalMaxSizeMB");
  EXPECT_TRUE(parseValue(journal, "8796093022207", "").isOk());
  EXPECT_FALSE(parseValue(journal, "8796093022208", "").isOk());
  const SettingDef& timeout = *findSetting("metadataStoreOperationTimeoutSeconds");
  EXPECT_TRUE(parseValue(timeout, "2147483", "").isOk());
  EXPECT_FALSE(parseValue(timeout, "2147484", "").isOk());
}

TEST(ParseValue, BoundsAndTypes) {
  const SettingDef& port = *findSetting("brokerServicePort");
  EXPECT_TRUE(parseValue(port, "0", "").isOk());
  EXPECT_TRUE(parseValue(port, "65535", "").isOk());
  auto big = parseValue(port, "65536", "");
  ASSERT_FALSE(big.isOk());
  EXPECT_NE(big.status().message().find("above the maximum 65535"), std::string::npos);

  const SettingDef& size = *findSetting("maxMessageSize");
  auto overflow = parseValue(size, "3000000000", "");
  ASSERT_FALSE(overflow.isOk());
  EXPECT_NE(overflow.status().message().find("32-bit"), std::string::npos);
  EXPECT_EQ(*parseValue(*findSetting("backlogQuotaDefaultLimitBytes"), "3000000000", "")->number,
            3000000000LL);
  EXPECT_FALSE(
      parseValue(*findSetting("backlogQuotaDefaultLimitBytes"), "99999999999999999999", "").isOk());

  const SettingDef& flag = *findSetting("journalSyncData");
  EXPECT_EQ(*parseValue(flag, "TRUE", "")->number, 1);
  EXPECT_EQ(*parseValue(flag, "false", "")->number, 0);
  EXPECT_FALSE(parseValue(flag, "yes", "").isOk());

  const SettingDef& kind = *findSetting("allowAutoTopicCreationType");
  EXPECT_EQ(parseValue(kind, "partitioned", "")->text, "partitioned");
  auto badKind = parseValue(kind, "Partitioned", "");
  ASSERT_FALSE(badKind.isOk());
  EXPECT_NE(badKind.status().message().find("non-partitioned, partitioned"), std::string::npos);

  const SettingDef& watermark = *findSetting("managedLedgerCacheEvictionWatermark");
  EXPECT_DOUBLE_EQ(parseValue(watermark, "0.5", "")->real, 0.5);
  EXPECT_FALSE(parseValue(watermark, "1.5", "").isOk());
  EXPECT_FALSE(parseValue(watermark, "half", "").isOk());
  EXPECT_FALSE(parseValue(watermark, "nan", "").isOk());

  const SettingDef& roles = *findSetting("superUserRoles");
  EXPECT_EQ(parseValue(roles, " admin, ops ,,root ", "")->list,
            (std::vector<std::string>{"admin", "ops", "root"}));

  // An empty value means the default.
  EXPECT_EQ(*parseValue(port, "  ", "")->number, 6650);
  EXPECT_FALSE(parseValue(*findSetting("numIOThreads"), "", "")->number.has_value());
}

TEST(FormatValue, CanonicalText) {
  EXPECT_EQ(formatDouble(1.0), "1.0");
  EXPECT_EQ(formatDouble(0.16), "0.16");
  ServiceConfiguration cfg(16);
  auto m = cfg.toStringMap();
  EXPECT_EQ(m.size(), allSettings().size());
  EXPECT_EQ(m["numIOThreads"], "8");
  EXPECT_EQ(m["brokerServicePortTls"], "");
  EXPECT_EQ(m["journalSyncData"], "true");
  EXPECT_EQ(m["managedLedgerDefaultMarkDeleteRateLimit"], "1.0");
  EXPECT_EQ(m["ledgerDirectories"], "data/ledgers");
  EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
  ASSERT_TRUE(cfg.set("superUserRoles", "a, b", ""));
  EXPECT_EQ(*cfg.getString("superUserRoles"), "a,b");
  EXPECT_EQ(cfg.getString("nope").status().code(), StatusCode::kNotFound);
}

TEST(DynamicUpdate, ValidatesAndAppliesOnlyDynamicKeys) {
  ServiceConfiguration cfg(4);
  std::vector<std::string> seen;
  cfg.addListener(
      [&](const SettingDef& d, const std::string& v) { seen.push_back(d.name + "=" + v); });

  ASSERT_TRUE(cfg.updateDynamic("dispatcherMaxReadBatchSize", "500"));
  EXPECT_EQ(cfg.dispatcherMaxReadBatchSize(), 500);

  Status bad = cfg.updateDynamic("dispatcherMaxReadBatchSize", "0");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("dispatcherMaxReadBatchSize"), std::string::npos);
  EXPECT_EQ(cfg.dispatcherMaxReadBatchSize(), 500) << "a rejected update changes nothing";

  Status fixed = cfg.updateDynamic("numIOThreads", "4");
  EXPECT_EQ(fixed.code(), StatusCode::kNotAllowed);
  EXPECT_EQ(cfg.numIOThreads(), 8);

  EXPECT_EQ(cfg.updateDynamic("noSuchKey", "1").code(), StatusCode::kNotFound);

  ASSERT_TRUE(cfg.updateDynamic("superUserRoles", "admin,ops"));
  EXPECT_EQ(cfg.superUserRoles(), (std::vector<std::string>{"admin", "ops"}));
  ASSERT_TRUE(cfg.updateDynamic("allowAutoTopicCreationType", "partitioned"));
  EXPECT_EQ(cfg.allowAutoTopicCreationType(), "partitioned");

  EXPECT_EQ(seen,
            (std::vector<std::string>{"dispatcherMaxReadBatchSize=500", "superUserRoles=admin,ops",
                                      "allowAutoTopicCreationType=partitioned"}));
}

TEST(DynamicUpdate, DynamicKeySet) {
  auto keys = ServiceConfiguration::dynamicKeys();
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  auto has = [&](const char* k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  EXPECT_TRUE(has("dispatcherMaxReadBatchSize"));
  EXPECT_TRUE(has("maxMessagePublishBufferSizeInMB"));
  EXPECT_FALSE(has("numIOThreads"));
  EXPECT_FALSE(has("brokerServicePort"));
  for (const auto& k : keys) EXPECT_TRUE(findSetting(k)->dynamic) << k;
}

TEST(DynamicUpdate, ConcurrentReadersSeeOnlyValidValues) {
  ServiceConfiguration cfg(4);
  std::atomic<bool> stop{false};
  std::atomic<int> badReads{0};
  std::thread reader([&] {
    while (!stop.load()) {
      int v = cfg.dispatcherMaxReadBatchSize();
      if (v != 100 && v != 200 && v != 300) badReads++;
      std::string kind = cfg.allowAutoTopicCreationType();
      if (kind != "partitioned" && kind != "non-partitioned") badReads++;
    }
  });
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(cfg.updateDynamic("dispatcherMaxReadBatchSize", i % 2 ? "200" : "300"));
    ASSERT_TRUE(
        cfg.updateDynamic("allowAutoTopicCreationType", i % 2 ? "partitioned" : "non-partitioned"));
  }
  stop = true;
  reader.join();
  EXPECT_EQ(badReads.load(), 0);
  EXPECT_EQ(cfg.dispatcherMaxReadBatchSize(), 200);
}

}  // namespace
}  // namespace magnetar::config
