#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

namespace magnetar {
namespace {

// Bitwise reference implementation (reflected Castagnoli polynomial) to check ISA-L against.
uint32_t referenceCrc32c(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32cTest, StandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string_view("123456789")), 0xE3069283u);
}

TEST(Crc32cTest, EmptyInputIsZeroAndKeepsSeed) {
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(crc32c("", 0, 0x12345678u), 0x12345678u);
}

TEST(Crc32cTest, Rfc3720Vectors) {
  // iSCSI (RFC 3720, B.4) test patterns.
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
}

TEST(Crc32cTest, MatchesReferenceOnRandomData) {
  std::mt19937 rng(42);
  for (size_t len : {1u, 7u, 8u, 63u, 64u, 65u, 1000u, 4096u, 100003u}) {
    std::string s(len, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    EXPECT_EQ(crc32c(s), referenceCrc32c(s)) << "len " << len;
  }
}

TEST(Crc32cTest, IncrementalEqualsOneShot) {
  std::string s = "The quick brown fox jumps over the lazy dog, repeatedly and at length.";
  uint32_t whole = crc32c(s);
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    uint32_t first = crc32c(s.data(), cut);
    EXPECT_EQ(crc32c(s.data() + cut, s.size() - cut, first), whole) << "cut " << cut;
  }
  Crc32c inc;
  inc.update(s.substr(0, 10));
  inc.update(s.substr(10, 5));
  inc.update(s.substr(15));
  EXPECT_EQ(inc.value(), whole);
  inc.reset();
  EXPECT_EQ(inc.value(), 0u);
}

TEST(Crc32cTest, DetectsSingleBitFlip) {
  std::string s(256, 'a');
  uint32_t before = crc32c(s);
  s[100] ^= 0x01;
  EXPECT_NE(crc32c(s), before);
}

}  // namespace
}  // namespace magnetar
