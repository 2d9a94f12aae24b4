// SequenceTracker: per-application correctness check of the IoT workload (PERF_FRAMEWORK.md,
// "Sequence tracker"): per device the next expected counter, shared by the application's pods.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace magnetar::perf {

// One ordering violation: device got `counter` while `expected` was the next one due.
struct ViolationSample {
  uint32_t device = 0;
  uint32_t expected = 0;
  uint32_t counter = 0;
  std::string where;  // pod / topic that saw it
};

// What deliver() concluded about one message.
enum class Delivery { kUnique, kDuplicate, kViolation };

// Thread: deliver()/invalid() from any number of threads at once (one lock-free compare-and-swap
// on the device's slot; Key_Shared gives a device to one pod at a time, so it is uncontended).
// Counters are read with relaxed loads while running and exactly after the pods stopped.
class SequenceTracker {
 public:
  // devices: number of device ids [0, devices). maxSamples: violations kept with details.
  explicit SequenceTracker(uint32_t devices, size_t maxSamples = 1000);

  // A delivery of (device, counter): below the next expected counter is a duplicate (counted,
  // allowed); equal is the next unique message; above is an ordering violation (a message of this
  // device was skipped or reordered): counted, sampled, and the expected counter moves past it,
  // so the skipped one counts as a duplicate if it comes later. REQUIRES: device < devices.
  Delivery deliver(uint32_t device, uint32_t counter, const char* where = "");
  // Sets every device's next expected counter (an application that subscribes mid-stream starts
  // at what was produced so far). REQUIRES: next.size() == devices(); no deliveries running.
  void startAt(const std::vector<uint32_t>& next);
  // An unparsable message (wrong size, magic, device out of range, key mismatch).
  void invalid() { invalid_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t unique() const { return unique_.load(std::memory_order_relaxed); }
  uint64_t duplicates() const { return duplicates_.load(std::memory_order_relaxed); }
  uint64_t violations() const { return violations_.load(std::memory_order_relaxed); }
  uint64_t invalidCount() const { return invalid_.load(std::memory_order_relaxed); }
  uint32_t expected(uint32_t device) const {
    return next_[device].load(std::memory_order_relaxed);
  }
  uint32_t devices() const { return devices_; }

  // End-state comparison: for each device, produced[device] messages were acknowledged by the
  // broker (counters 0..produced-1). Returns the messages never delivered (sum over devices of
  // produced - expected when positive): this catches a missing tail that never showed a gap.
  // REQUIRES: produced.size() == devices(); the pods have stopped.
  uint64_t missing(const std::vector<uint32_t>& produced) const;
  // Devices that got more than was produced (counter beyond what the producer sent: invalid).
  uint64_t beyondProduced(const std::vector<uint32_t>& produced) const;

  std::vector<ViolationSample> samples() const;

 private:
  const uint32_t devices_;
  const size_t maxSamples_;
  std::unique_ptr<std::atomic<uint32_t>[]> next_;
  alignas(64) std::atomic<uint64_t> unique_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> violations_{0};
  std::atomic<uint64_t> invalid_{0};
  mutable std::mutex mu_;
  std::vector<ViolationSample> samples_;  // GUARDED_BY(mu_)
};

}  // namespace magnetar::perf
