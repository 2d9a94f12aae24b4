#include "broker/common/listeners.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(AdvertisedListenersTest, ParsesNamesAndUrls) {
  auto l = parseAdvertisedListeners(
      "internal:pulsar://10.0.0.1:6650, external:pulsar://ext.example:6650,"
      "external:pulsar+ssl://ext.example:6651",
      "internal");
  ASSERT_TRUE(l.isOk()) << l.status().message();
  EXPECT_EQ(l->internalListenerName, "internal");
  EXPECT_EQ(l->byName.at("internal").brokerServiceUrl, "pulsar://10.0.0.1:6650");
  EXPECT_EQ(l->byName.at("external").brokerServiceUrl, "pulsar://ext.example:6650");
  EXPECT_EQ(l->byName.at("external").brokerServiceUrlTls, "pulsar+ssl://ext.example:6651");
}

TEST(AdvertisedListenersTest, InternalDefaultsToTheFirstAndMustExist) {
  auto l = parseAdvertisedListeners("a:pulsar://h:1,b:pulsar://h:2", "");
  ASSERT_TRUE(l.isOk());
  EXPECT_EQ(l->internalListenerName, "a");
  EXPECT_FALSE(parseAdvertisedListeners("a:pulsar://h:1", "zzz").isOk());
  EXPECT_FALSE(parseAdvertisedListeners("", "zzz").isOk());
  auto none = parseAdvertisedListeners("", "");
  ASSERT_TRUE(none.isOk());
  EXPECT_TRUE(none->byName.empty());
}

TEST(AdvertisedListenersTest, BadEntriesAreErrors) {
  EXPECT_FALSE(parseAdvertisedListeners("a:pulsar://h:1,a:pulsar://h:2", "").isOk());
  EXPECT_FALSE(parseAdvertisedListeners("a:http://h:1", "").isOk());
  EXPECT_FALSE(parseAdvertisedListeners("pulsar://h:1", "").isOk());
  EXPECT_FALSE(parseAdvertisedListeners("a:pulsar://h", "").isOk());
  EXPECT_FALSE(parseAdvertisedListeners("a:pulsar://h:x1", "").isOk());
}

}  // namespace
}  // namespace magnetar::broker
