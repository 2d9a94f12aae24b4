// OutputCheck on crafted output records: the iot-telemetry-txn verifier's exactly-once check.
#include "output_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace magnetar::perf {
namespace {

// An output record as a transforming application writes it, through encode and decode.
TelemetryRecord output(uint32_t device, uint32_t counter, uint32_t flags = kFlagDerived) {
  std::string buf(64, '\0');
  initPayload(buf.data(), buf.size());
  encodeHeader(TelemetryRecord{.device = device, .counter = counter}, buf.data());
  setFlags(buf.data(), flags);
  char key[kKeyBytes];
  encodeKey(device, key);
  TelemetryRecord r;
  EXPECT_TRUE(decodePayload(buf, std::string_view(key, kKeyBytes), 64, 10, &r));
  return r;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(OutputCheckTest, ExactlyOnceInOrderPasses) {
  SequenceTracker t(2);
  OutputCheck check(t);
  for (uint32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(check.record(output(0, c)), Delivery::kUnique);
    EXPECT_EQ(check.record(output(1, c)), Delivery::kUnique);
  }
  EXPECT_TRUE(check.errors({3, 3}).empty()) << joined(check.errors({3, 3}));
}

TEST(OutputCheckTest, DuplicatedOutputFails) {
  SequenceTracker t(1);
  OutputCheck check(t);
  check.record(output(0, 0));
  check.record(output(0, 1));
  EXPECT_EQ(check.record(output(0, 1)), Delivery::kDuplicate);  // a batch committed twice
  auto errors = check.errors({2});
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0], "1 duplicate outputs (each input must be transformed once)");
}

TEST(OutputCheckTest, OutputOfAnAbortedTransactionFails) {
  SequenceTracker t(1);
  OutputCheck check(t);
  // The aborted attempt's output shows up before the redo's: counted, not tracked.
  check.record(output(0, 0, kFlagDerived | kFlagAborted));
  check.record(output(0, 0));
  EXPECT_EQ(check.abortedVisible(), 1u);
  EXPECT_EQ(t.duplicates(), 0u);
  auto errors = check.errors({1});
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_EQ(errors[0], "1 outputs of aborted transactions were read");
}

TEST(OutputCheckTest, LostReorderedAndUnderivedOutputFail) {
  SequenceTracker t(2);
  OutputCheck check(t);
  check.record(output(0, 0));
  check.record(output(0, 2));     // 1 skipped: an ordering violation
  check.record(output(1, 0, 0));  // an input copied to the output without transformation
  auto errors = check.errors({3, 2});
  std::string all = joined(errors);
  EXPECT_NE(all.find("1 outputs not derived"), std::string::npos) << all;
  EXPECT_NE(all.find("1 output ordering violations"), std::string::npos) << all;
  EXPECT_NE(all.find("2 inputs without output"), std::string::npos) << all;  // device 1: 0, 1
}

}  // namespace
}  // namespace magnetar::perf
