// Worker: runs one IoT telemetry workload end to end (connect, warmup rounds, measured phase,
// late joins, drain, end-state check) and writes the results for the launcher.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "application.h"
#include "gateway_fleet.h"
#include "workload_config.h"

namespace magnetar::perf {

// Thread: run() on the main thread; it starts a joiner thread per late application.
// Events go to stdout as one JSON object per line ({"event": ...}): connected, warmup_done,
// measured_start and measured_end (with CLOCK_MONOTONIC ns, so the launcher can cut its broker CPU
// samples to the measured phase), progress (each second), joined, caught_up, done.
class Worker {
 public:
  Worker(WorkloadConfig config, std::string outputDir);
  ~Worker();

  // Runs the workload and writes outputDir/worker-result.json, publish.hgrm, e2e.hgrm,
  // e2e-<application>.hgrm and violations.txt. Returns 0 for a valid run, 1 for an invalid one
  // (results written), 2 when nothing could run (no results).
  int run();

 private:
  struct AppState {
    uint64_t base = 0;        // messages published before the subscription existed
    uint64_t caughtUpNs = 0;  // late applications: when they first read at the tail
  };
  // Waits until the fleet's phase is done and every joined application reached its target;
  // samples each second when measuring. False on stall, timeout or error (errors_ says why).
  bool waitPhase(bool measuring);
  void setTargets();
  void sample(uint64_t now);
  void checkCatchUp(uint64_t now);
  bool allReached() const;
  nlohmann::json results();
  // The application's entry in worker-result.json, its problems appended to errors.
  nlohmann::json appResult(size_t a, std::vector<std::string>& errors);
  void writeFiles(const nlohmann::json& r);
  void emit(nlohmann::json event);

  const WorkloadConfig config_;
  const std::string outputDir_;
  GatewayFleet fleet_;
  // workload.transform: the output verifiers' configurations (their applications follow the
  // transforming ones in apps_, kVerify).
  std::vector<std::unique_ptr<WorkloadConfig>> verifierConfigs_;
  std::vector<std::unique_ptr<Application>> apps_;
  std::vector<AppState> state_;
  std::vector<std::string> errors_;
  uint64_t startNs_ = 0;
  uint64_t warmupMessages_ = 0;
  uint64_t measuredStartNs_ = 0;
  uint64_t measuredEndNs_ = 0;
  uint64_t publishedBefore_ = 0;  // receipts before the measured phase
  double cpuStart_ = 0, cpuEnd_ = 0;
  nlohmann::json series_ = nlohmann::json::array();
  uint64_t lastSampleNs_ = 0;
  LatencyHistogram::Snapshot lastPublish_;
  std::vector<LatencyHistogram::Snapshot> lastE2e_;
  std::vector<std::thread> joiners_;
  // (CLOCK_MONOTONIC ns, receipts so far) every poll of the measured phase, for catch-up.
  std::deque<std::pair<uint64_t, uint64_t>> publishedHistory_;
};

}  // namespace magnetar::perf
