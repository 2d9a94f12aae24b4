// Application: one consuming application of the IoT workload: a Key_Shared subscription
// (`iot-application-<i>`) on every topic, consumed by P pods (consumers, one connection each),
// checked by one SequenceTracker shared by its pods. Roles: kConsume (consume and ack), kTransform
// (consume-transform-produce into the output topics, with or without transactions, issue 45) and
// kVerify (reads a transforming application's output, checked by an OutputCheck).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "client/client.h"
#include "histogram.h"
#include "output_check.h"
#include "sequence_tracker.h"
#include "workload_config.h"

namespace magnetar::perf {

enum class AppRole { kConsume, kTransform, kVerify };

// Transactions of a kTransform application (all zero for the other roles).
struct TransformCounts {
  uint64_t committed = 0;  // batches committed (or flushed, without transactions)
  uint64_t aborted = 0;    // transactions aborted on purpose (txnAbortFraction), then redone
};

// Thread: createSubscriptions()/join()/close() from a controlling thread; the listener runs on
// the application's client I/O threads (`app<i>-io-N`) and does, per message: decode and check the
// payload, one tracker compare-and-swap, a histogram add (measured messages), an individual ack.
// No allocation of its own per message.
class Application {
 public:
  // config must outlive the application (a kVerify one gets WorkloadConfig::verifierOf()).
  Application(const WorkloadConfig& config, uint32_t index, AppRole role = AppRole::kConsume);
  ~Application();

  const std::string& name() const { return name_; }
  AppRole role() const { return role_; }
  double joinSeconds() const { return joinSeconds_; }

  // Creates the subscription on every topic without consuming (subscribe, then close), so a late
  // application's backlog starts now; produced[d] is the next counter of device d at this moment
  // (what the tracker expects first). Opens its own short-lived client.
  Status createSubscriptions(const std::vector<uint32_t>& produced);
  // Starts the pods: a client with one connection per pod, P consumers per topic (kTransform:
  // then an output producer per consumer and a thread per consumer running the transform loop). The
  // topics are subscribed one after another, the P consumers of a topic concurrently (as
  // independent pods would), so joining costs about one round trip per topic; each connection ends
  // up with one consumer per topic. Records when the join started and when every consumer was
  // subscribed.
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
  // kVerify: the output check; kTransform: batches committed and aborted. Exact after close().
  const OutputCheck& outputCheck() const { return output_; }
  TransformCounts transformCounts() const;
  // kTransform: time from opening a batch's transaction to its commit (or flush), us.
  LatencyHistogram& batchLatencyUs() { return batchUs_; }
  // kTransform: the first failure of a transform loop (a failed commit, flush, send or
  // newTransaction stops that loop); empty while none.
  std::string failure() const;

  // Closes the pods (pending acks are sent) and the client. Idempotent.
  void close();

 private:
  struct Pod {
    Application* app = nullptr;
    std::string name;                         // "iot-application-<i>-pod-<p>"
    std::vector<client::Consumer> consumers;  // [topic]
    std::vector<client::Producer> producers;  // kTransform: [topic], to outputTopic(i, topic)
  };

  void onMessage(Pod& pod, client::Consumer& consumer, const client::Message& m);
  // Decodes and checks one delivery (tracker or output check, latency, target); false when the
  // message is invalid (counted and sampled), else *d is what the tracker concluded.
  bool track(const Pod& pod, const client::Message& m, Delivery* d);
  // Subscribes every pod to every topic, all at once; the first failure, once all answered.
  Status subscribeAll();
  // kTransform (application_transform.cc): the output producers and loops; one loop per consumer.
  Status startTransform();
  void transformLoop(Pod& pod, uint32_t topic);
  bool fillBatch(Pod& pod, uint32_t topic, std::vector<client::Message>* batch);
  Status transformBatch(Pod& pod, uint32_t topic, const std::vector<client::Message>& batch,
                        bool abort);
  void fail(const std::string& what);

  const WorkloadConfig& config_;
  const uint32_t index_;
  const std::string name_;
  const double joinSeconds_;
  const AppRole role_;
  SequenceTracker tracker_;
  OutputCheck output_{tracker_};
  LatencyHistogram batchUs_;
  std::atomic<uint64_t> committed_{0};
  std::atomic<uint64_t> aborted_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> loops_;
  std::string failure_;  // GUARDED_BY(invalidMu_)
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
