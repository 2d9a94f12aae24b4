#include "payload.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar::perf {
namespace {

struct Encoded {
  std::string payload;
  std::string key;
};

Encoded encode(const TelemetryRecord& r, size_t size) {
  Encoded e;
  e.payload.assign(size, '\0');
  initPayload(e.payload.data(), size);
  encodeHeader(r, e.payload.data());
  e.key.assign(kKeyBytes, '\0');
  encodeKey(r.device, e.key.data());
  return e;
}

TEST(PayloadTest, RoundTrip) {
  TelemetryRecord in{123456, 77, true, 987654321012345ull};
  auto e = encode(in, 128);
  TelemetryRecord out;
  ASSERT_TRUE(decodePayload(e.payload, e.key, 128, 1000000, &out));
  EXPECT_EQ(out.device, in.device);
  EXPECT_EQ(out.counter, in.counter);
  EXPECT_TRUE(out.warmup);
  EXPECT_EQ(out.sendTimeNs, in.sendTimeNs);
  in.warmup = false;
  e = encode(in, kPayloadHeaderBytes);  // no padding at all
  ASSERT_TRUE(decodePayload(e.payload, e.key, kPayloadHeaderBytes, 1000000, &out));
  EXPECT_FALSE(out.warmup);
}

TEST(PayloadTest, RejectsWhatIsNotOurs) {
  TelemetryRecord in{5, 1, false, 42};
  auto e = encode(in, 64);
  TelemetryRecord out;
  EXPECT_FALSE(decodePayload(e.payload, e.key, 128, 100, &out));  // wrong size
  EXPECT_FALSE(decodePayload(e.payload, e.key, 64, 5, &out));     // device out of range
  std::string otherKey(kKeyBytes, '\0');
  encodeKey(6, otherKey.data());
  EXPECT_FALSE(decodePayload(e.payload, otherKey, 64, 100, &out));  // key of another device
  EXPECT_FALSE(decodePayload(e.payload, "", 64, 100, &out));        // no key
  auto bad = e;
  bad.payload[0] ^= 1;  // magic
  EXPECT_FALSE(decodePayload(bad.payload, bad.key, 64, 100, &out));
  bad = e;
  bad.payload[12] = 8;  // unknown flag (1, 2 and 4 are warmup, derived, aborted)
  EXPECT_FALSE(decodePayload(bad.payload, bad.key, 64, 100, &out));
  bad = e;
  bad.payload[63] = 'x';  // damaged padding
  EXPECT_FALSE(decodePayload(bad.payload, bad.key, 64, 100, &out));
  EXPECT_TRUE(decodePayload(e.payload, e.key, 64, 100, &out));
}

TEST(PayloadTest, TextKeyOfTheWebSocketGateways) {
  char text[kTextKeyBytes];
  encodeTextKey(123456, text);
  EXPECT_EQ(std::string(text, kTextKeyBytes), "0001e240");
  encodeTextKey(0xdeadbeef, text);
  EXPECT_EQ(std::string(text, kTextKeyBytes), "deadbeef");
  TelemetryRecord in{123456, 3, false, 9};
  auto e = encode(in, 64);
  TelemetryRecord out;
  encodeTextKey(123456, text);
  EXPECT_TRUE(decodePayload(e.payload, std::string(text, kTextKeyBytes), 64, 1000000, &out));
  encodeTextKey(123457, text);
  EXPECT_FALSE(decodePayload(e.payload, std::string(text, kTextKeyBytes), 64, 1000000, &out));
  EXPECT_FALSE(decodePayload(e.payload, "0001E240", 64, 1000000, &out));  // not the same text
}

TEST(PayloadTest, Base64) {
  auto b64 = [](std::string in) {
    std::string out(base64Size(in.size()), '?');
    base64Encode(in.data(), in.size(), out.data());
    return out;
  };
  EXPECT_EQ(b64(""), "");
  EXPECT_EQ(b64("f"), "Zg==");
  EXPECT_EQ(b64("fo"), "Zm8=");
  EXPECT_EQ(b64("foo"), "Zm9v");
  EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(b64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

}  // namespace
}  // namespace magnetar::perf
