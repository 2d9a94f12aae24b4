#include "admin/io_saturation.h"

#include <gtest/gtest.h>

namespace magnetar::admin {
namespace {

constexpr int64_t kSec = 1'000'000'000;

IoSaturationDetector detector() { return IoSaturationDetector({0.9, 60 * kSec}); }

TEST(IoSaturation, WarnsAfterAMinuteOfBusyIoAndGrowingBacklog) {
  auto d = detector();
  for (int i = 0; i < 6; ++i) {  // t = 0 .. 50 s: not a full minute yet
    EXPECT_FALSE(d.addSample(i * 10 * kSec, "pulsar-io-1", 0.95, {{"t/s", 100 * i}}));
  }
  auto w = d.addSample(60 * kSec, "pulsar-io-3", 0.97, {{"t/s", 700}, {"t/other", 5}});
  ASSERT_TRUE(w);
  EXPECT_NE(w->find("pulsar-io-3"), std::string::npos) << *w;
  EXPECT_NE(w->find("97%"), std::string::npos) << *w;
  EXPECT_NE(w->find("at least 95%"), std::string::npos) << *w;
  EXPECT_NE(w->find("t/s grew from 0 to 700"), std::string::npos) << *w;
  EXPECT_NE(w->find("numIOThreads"), std::string::npos) << *w;
  // The history restarts: no second warning until another full window.
  EXPECT_FALSE(d.addSample(70 * kSec, "pulsar-io-3", 0.97, {{"t/s", 800}}));
}

TEST(IoSaturation, NoWarningWhenTheBacklogDoesNotGrow) {
  auto d = detector();
  for (int i = 0; i <= 12; ++i) {
    EXPECT_FALSE(d.addSample(i * 10 * kSec, "pulsar-io-0", 0.99, {{"t/s", 500}}));
  }
}

TEST(IoSaturation, ADipBelowTheThresholdRestartsTheWindow) {
  auto d = detector();
  for (int i = 0; i < 5; ++i) d.addSample(i * 10 * kSec, "pulsar-io-0", 0.95, {{"t/s", i}});
  EXPECT_FALSE(d.addSample(50 * kSec, "pulsar-io-0", 0.5, {{"t/s", 50}}));
  EXPECT_FALSE(d.addSample(60 * kSec, "pulsar-io-0", 0.95, {{"t/s", 60}}));
  EXPECT_FALSE(d.addSample(110 * kSec, "pulsar-io-0", 0.95, {{"t/s", 110}}));
  EXPECT_TRUE(d.addSample(120 * kSec, "pulsar-io-0", 0.95, {{"t/s", 120}}));
}

TEST(IoSaturation, UsesTheSampleAtTheWindowStartAsBaseline) {
  auto d = detector();
  d.addSample(0, "pulsar-io-0", 0.95, {{"t/s", 900}});  // older than the window at t=100
  d.addSample(40 * kSec, "pulsar-io-0", 0.95, {{"t/s", 100}});
  d.addSample(70 * kSec, "pulsar-io-0", 0.95, {{"t/s", 120}});
  // At t=100 the baseline is the t=40 sample (backlog 100), not t=0 (900).
  auto w = d.addSample(100 * kSec, "pulsar-io-0", 0.95, {{"t/s", 150}});
  ASSERT_TRUE(w);
  EXPECT_NE(w->find("from 100 to 150"), std::string::npos) << *w;
}

}  // namespace
}  // namespace magnetar::admin
