// IoSaturationDetector: "the busiest pulsar-io thread stays above 90 % while a subscription's
// backlog grows for a minute", the symptom of too few I/O threads (numIOThreads). Pure logic fed
// with periodic samples, so it is unit-tested with made-up numbers.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace magnetar::admin {

// Thread: one owner.
class IoSaturationDetector {
 public:
  struct Options {
    double threshold = 0.9;             // utilization of the busiest pulsar-io thread
    int64_t windowNs = 60'000'000'000;  // how long both must hold
  };
  explicit IoSaturationDetector(Options options) : options_(options) {}

  // One periodic sample: the busiest pulsar-io thread and its utilization over the period that
  // just ended, and every subscription's backlog (entries) now, keyed "topic/subscription".
  // Returns a warning text when, for a full window, every sample's busiest I/O thread was above
  // the threshold and some subscription's backlog grew from the window's first sample to now.
  // After a warning the history restarts (at most one warning per window).
  std::optional<std::string> addSample(int64_t nowNs, const std::string& busiestThread,
                                       double utilization,
                                       const std::map<std::string, int64_t>& backlogs);

 private:
  struct Sample {
    int64_t nowNs;
    std::string thread;
    double utilization;
    std::map<std::string, int64_t> backlogs;
  };
  Options options_;
  std::deque<Sample> samples_;
};

}  // namespace magnetar::admin
