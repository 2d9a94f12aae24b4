#include "sequence_tracker.h"

namespace magnetar::perf {

SequenceTracker::SequenceTracker(uint32_t devices, size_t maxSamples)
    : devices_(devices), maxSamples_(maxSamples), next_(new std::atomic<uint32_t>[devices]) {
  for (uint32_t d = 0; d < devices; ++d) next_[d].store(0, std::memory_order_relaxed);
}

Delivery SequenceTracker::deliver(uint32_t device, uint32_t counter, const char* where) {
  auto& slot = next_[device];
  uint32_t expected = slot.load(std::memory_order_relaxed);
  while (true) {
    if (counter < expected) {
      duplicates_.fetch_add(1, std::memory_order_relaxed);
      return Delivery::kDuplicate;
    }
    if (slot.compare_exchange_weak(expected, counter + 1, std::memory_order_relaxed)) break;
  }
  unique_.fetch_add(1, std::memory_order_relaxed);
  if (counter == expected) return Delivery::kUnique;
  violations_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  if (samples_.size() < maxSamples_) {
    samples_.push_back(ViolationSample{device, expected, counter, where});
  }
  return Delivery::kViolation;
}

void SequenceTracker::startAt(const std::vector<uint32_t>& next) {
  for (uint32_t d = 0; d < devices_ && d < next.size(); ++d) {
    next_[d].store(next[d], std::memory_order_relaxed);
  }
}

uint64_t SequenceTracker::missing(const std::vector<uint32_t>& produced) const {
  uint64_t n = 0;
  for (uint32_t d = 0; d < devices_ && d < produced.size(); ++d) {
    uint32_t got = next_[d].load(std::memory_order_relaxed);
    if (produced[d] > got) n += produced[d] - got;
  }
  return n;
}

uint64_t SequenceTracker::beyondProduced(const std::vector<uint32_t>& produced) const {
  uint64_t n = 0;
  for (uint32_t d = 0; d < devices_ && d < produced.size(); ++d) {
    if (next_[d].load(std::memory_order_relaxed) > produced[d]) ++n;
  }
  return n;
}

std::vector<ViolationSample> SequenceTracker::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

}  // namespace magnetar::perf
