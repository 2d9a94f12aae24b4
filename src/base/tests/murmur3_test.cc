#include "base/murmur3.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar {

// Reference values of MurmurHash3_x86_32 (the algorithm's published test vectors).
TEST(Murmur3Test, KnownVectors) {
  EXPECT_EQ(murmur3_32("", 0, 0), 0u);
  EXPECT_EQ(murmur3_32("", 0, 1), 0x514E28B7u);
  EXPECT_EQ(murmur3_32("", 0, 0xffffffff), 0x81F16F39u);
  EXPECT_EQ(murmur3_32("\xff\xff\xff\xff", 4, 0), 0x76293B50u);
  EXPECT_EQ(murmur3_32("\x21\x43\x65\x87", 4, 0), 0xF55B516Bu);
  EXPECT_EQ(murmur3_32("\x21\x43\x65", 3, 0), 0x7E4A8634u);
  EXPECT_EQ(murmur3_32("\x21\x43", 2, 0), 0xA0F7B07Au);
  EXPECT_EQ(murmur3_32("\x21", 1, 0), 0x72661CF4u);
  EXPECT_EQ(murmur3_32("Hello, world!", 13, 1234), 0xFAF6CDB3u);
}

TEST(Murmur3Test, StickyKeyHashInRange) {
  for (int i = 0; i < 1000; ++i) {
    auto h = stickyKeyHash("key-" + std::to_string(i));
    EXPECT_LT(h, 65536u);
  }
}

// Pulsar's own values, computed by running org.apache.pulsar.common.util.Murmur3_32Hash (Pulsar
// 4.2.4 jars in tools/pulsar-reference) over these key bytes: makeHash() (Murmur3_32 seed 0 &
// Integer.MAX_VALUE) and StickyKeyConsumerSelectorUtils.makeStickyKeyHash over [0, 65535] and
// [1, 65535]. See tools/pulsar-reference/hash-vectors/.
// Bytes >= 0x80 in the tail check that bytes are mixed unsigned, as Java's implementation does.
TEST(Murmur3Test, PulsarStickyKeyHashes) {
  struct Vector {
    std::string key;
    uint32_t makeHash;
    uint32_t sticky;      // range [0, 65535] (STICKY selectors)
    uint32_t consistent;  // range [1, 65535] (consistent hashing, Pulsar 4's AUTO_SPLIT default)
  };
  const Vector vectors[] = {
      {"", 0, 1, 1},
      {"a", 1009084850, 27058, 42456},
      {"key-0", 1664612543, 63679, 23544},
      {"key-1", 414258592, 5536, 11858},
      {"key-42", 81749783, 26391, 27639},
      {"device-000001", 517974301, 43293, 51197},
      {"NONE_KEY", 504741539, 48803, 56505},
      {"hello world", 1586663183, 36623, 60834},
      {"0123456789abcdef", 919068895, 57567, 6056},
      {"\xc3\xa9t\xc3\xa9", 865297935, 26127, 39331},
      {"iot-telemetry", 630108329, 45225, 54840},
      {"x", 1050319643, 39707, 55734},
      {"\xff", 2104291597, 61709, 28283},
      {"\x80\x81\x82", 1963501909, 43349, 7775},
      {"ab\xfe", 500427758, 60398, 2499},
      {"\x01\x02\x03\x04\x05\x06\x07", 2086180789, 38837, 5135},
      {std::string("\xde\xad\xbe\xef\x00\x01", 6), 235853523, 54995, 58594},
  };
  for (const auto& v : vectors) {
    SCOPED_TRACE(v.key);
    EXPECT_EQ(murmur3_32(v.key.data(), v.key.size(), 0) & 0x7fffffffu, v.makeHash);
    EXPECT_EQ(stickyKeyHash(v.key), v.sticky);
    EXPECT_EQ(stickyKeyHash(v.key, 1, 65535), v.consistent);
  }
}

}  // namespace magnetar
