// Application: one consuming application of the IoT workload: a Key_Shared subscription
// (`iot-application-<i>`) on every topic, consumed by P pods (consumers, one connection each),
// checked by one SequenceTracker shared by its pods.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/client.h"
#include "histogram.h"
#include "sequence_tracker.h"
#include "workload_config.h"

namespace magnetar::perf {

// Thread: createSubscriptions()/join()/close() from a controlling thread; the listener runs on
// the application's client I/O threads (`app<i>-io-N`) and does, per message: decode and check the
// payload, one tracker compare-and-swap, a histogram add (measured messages), an individual ack.
// No allocation of its own per message.
class Application {
 public:
  Application(const WorkloadConfig& config, uint32_t index);
  ~Application();

  const std::string& name() const { return name_; }
  double joinSeconds() const { return joinSeconds_; }

  // Creates the subscription on every topic without consuming (subscribe, then close), so a late
  // application's backlog starts now; produced[d] is the next counter of device d at this moment
  // (what the tracker expects first). Opens its own short-lived client.
  Status createSubscriptions(const std::vector<uint32_t>& produced);
  // Starts the pods: a client with one connection per pod, P consumers per topic. The topics are
  // subscribed one after another, the P consumers of a topic concurrently (as independent pods
  // would), so joining costs about one round trip per topic; each connection ends up with one
  // consumer per topic. Records when the join started and when every consumer was subscribed.
  Status join();
  bool joined() const { return joinNs_.load() != 0; }
  // CLOCK_MONOTONIC ns: join() called / every consumer subscribed (0 before).
  uint64_t joinStartNs() const { return joinStartNs_.load(); }
  uint64_t joinNs() const { return joinNs_.load(); }

  // The application is done once unique deliveries reach target (cumulative, all phases).
  // When it is already reached, the time of the last unique delivery is taken as the moment.
  void setTarget(uint64_t uniqueTarget);
  bool reachedTarget() const { return tracker_.unique() >= target_.load(); }
  // CLOCK_MONOTONIC ns when unique deliveries first reached the target set last (0: not yet).
  uint64_t targetReachedNs() const { return targetNs_.load(); }
  void clearTargetReached() { targetNs_.store(0); }

  // Unique measured (non-warmup) messages delivered.
  uint64_t measuredDelivered() const { return measured_.load(std::memory_order_relaxed); }

  const SequenceTracker& tracker() const { return tracker_; }
  LatencyHistogram& e2eLatencyUs() { return e2eUs_; }
  // Consumer-side anomalies: permit violations reported by the client, invalid samples.
  uint64_t permitViolations() const;
  std::vector<std::string> invalidSamples() const;

  // Closes the pods (pending acks are sent) and the client. Idempotent.
  void close();

 private:
  struct Pod {
    Application* app = nullptr;
    std::string name;  // "iot-application-<i>-pod-<p>"
    std::vector<client::Consumer> consumers;
  };

  void onMessage(Pod& pod, client::Consumer& consumer, const client::Message& m);

  const WorkloadConfig& config_;
  const uint32_t index_;
  const std::string name_;
  const double joinSeconds_;
  SequenceTracker tracker_;
  LatencyHistogram e2eUs_;
  std::unique_ptr<client::Client> client_;
  std::vector<std::unique_ptr<Pod>> pods_;
  std::atomic<uint64_t> joinStartNs_{0};
  std::atomic<uint64_t> joinNs_{0};
  std::atomic<uint64_t> target_{UINT64_MAX};
  std::atomic<uint64_t> targetNs_{0};
  alignas(64) std::atomic<uint64_t> measured_{0};
  std::atomic<uint64_t> lastUniqueNs_{0};
  mutable std::mutex invalidMu_;
  std::vector<std::string> invalidSamples_;  // GUARDED_BY(invalidMu_), first 100
  bool closed_ = false;
};

}  // namespace magnetar::perf
