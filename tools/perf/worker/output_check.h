// OutputCheck: the verifier's check of a transforming application's output (scenario
// iot-telemetry-txn, issue 45): every input exactly once on the output, in order per device,
// nothing written by an aborted transaction.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "payload.h"
#include "sequence_tracker.h"

namespace magnetar::perf {

// Thread: record() from any number of threads at once (as SequenceTracker::deliver); errors() once
// the verifier's pods stopped.
class OutputCheck {
 public:
  // tracker: the verifier's; it must outlive this object.
  explicit OutputCheck(SequenceTracker& tracker) : tracker_(tracker) {}

  // One output message. Flagged kFlagAborted (its transaction was aborted): counted as aborted
  // output seen, not tracked. Not flagged kFlagDerived (not a transformation): counted as such.
  // Otherwise tracked: an output seen twice is a duplicate, a skip an ordering violation.
  Delivery record(const TelemetryRecord& r, const char* where = "");

  uint64_t abortedVisible() const { return abortedVisible_.load(std::memory_order_relaxed); }
  uint64_t notDerived() const { return notDerived_.load(std::memory_order_relaxed); }

  // What makes the output wrong, one line each (empty: exactly once and in order so far):
  // duplicates, aborted output seen, underived output, ordering violations, and the inputs with
  // no output yet (produced[d]: the inputs of device d acknowledged by the broker).
  // REQUIRES: produced.size() == tracker.devices().
  std::vector<std::string> errors(const std::vector<uint32_t>& produced) const;

 private:
  SequenceTracker& tracker_;
  std::atomic<uint64_t> abortedVisible_{0};
  std::atomic<uint64_t> notDerived_{0};
};

}  // namespace magnetar::perf
