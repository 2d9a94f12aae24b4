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

// Two devices' outputs checked by a verifier's OutputCheck.
class OutputCheckTest : public ::testing::Test {
 protected:
  // The check's one error for what was produced (fails the test when there are others).
  std::string onlyError(const std::vector<uint32_t>& produced) {
    auto errors = check_.errors(produced);
    EXPECT_EQ(errors.size(), 1u) << joined(errors);
    return errors.empty() ? "" : errors[0];
  }

  SequenceTracker tracker_{2};
  OutputCheck check_{tracker_};
};

TEST_F(OutputCheckTest, ExactlyOnceInOrderPasses) {
  for (uint32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(check_.record(output(0, c)), Delivery::kUnique);
    EXPECT_EQ(check_.record(output(1, c)), Delivery::kUnique);
  }
  EXPECT_TRUE(check_.errors({3, 3}).empty()) << joined(check_.errors({3, 3}));
}

TEST_F(OutputCheckTest, DuplicatedOutputFails) {
  check_.record(output(0, 0));
  check_.record(output(0, 1));
  EXPECT_EQ(check_.record(output(0, 1)), Delivery::kDuplicate);  // a batch committed twice
  EXPECT_EQ(onlyError({2, 0}), "1 duplicate outputs (each input must be transformed once)");
}

TEST_F(OutputCheckTest, OutputOfAnAbortedTransactionFails) {
  // The aborted attempt's output shows up before the redo's: counted, not tracked.
  check_.record(output(0, 0, kFlagDerived | kFlagAborted));
  check_.record(output(0, 0));
  EXPECT_EQ(check_.abortedVisible(), 1u);
  EXPECT_EQ(tracker_.duplicates(), 0u);
  EXPECT_EQ(onlyError({1, 0}), "1 outputs of aborted transactions were read");
}

TEST_F(OutputCheckTest, LostReorderedAndUnderivedOutputFail) {
  check_.record(output(0, 0));
  check_.record(output(0, 2));     // 1 skipped: an ordering violation
  check_.record(output(1, 0, 0));  // an input copied to the output without transformation
  std::string all = joined(check_.errors({3, 2}));
  EXPECT_NE(all.find("1 outputs not derived"), std::string::npos) << all;
  EXPECT_NE(all.find("1 output ordering violations"), std::string::npos) << all;
  EXPECT_NE(all.find("2 inputs without output"), std::string::npos) << all;  // device 1: 0, 1
}

}  // namespace
}  // namespace magnetar::perf
