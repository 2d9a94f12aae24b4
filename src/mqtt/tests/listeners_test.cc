// parseMqttListeners: MoP's mqttListeners form, mqtt:// and mqtt+ssl://.
#include <gtest/gtest.h>

#include "mqtt/mqtt_service.h"

namespace magnetar::mqtt {
namespace {

TEST(MqttListeners, PlainAndTlsEntries) {
  auto r = parseMqttListeners(
      {"mqtt://0.0.0.0:1883", "mqtt+ssl://127.0.0.1:8883", "", "mqtt+ssl://[::1]:0"});
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].host, "0.0.0.0");
  EXPECT_EQ((*r)[0].port, 1883);
  EXPECT_FALSE((*r)[0].tls);
  EXPECT_EQ((*r)[1].host, "127.0.0.1");
  EXPECT_EQ((*r)[1].port, 8883);
  EXPECT_TRUE((*r)[1].tls);
  EXPECT_EQ((*r)[2].host, "::1");
  EXPECT_EQ((*r)[2].port, 0);
  EXPECT_TRUE((*r)[2].tls);
}

TEST(MqttListeners, BadEntriesNameTheEntry) {
  for (const char* bad : {"mqtts://h:1", "mqtt+ssl+psk://h:1", "tcp://h:1", "mqtt://h",
                          "mqtt+ssl://h:65536", "mqtt+ssl://:8883", "mqtt://h:12x"}) {
    auto r = parseMqttListeners({bad});
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace magnetar::mqtt
