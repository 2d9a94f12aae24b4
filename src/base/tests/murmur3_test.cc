#include "base/murmur3.h"

#include <gtest/gtest.h>

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

}  // namespace magnetar
