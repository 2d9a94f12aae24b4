// WorkloadConfig: the resolved scenario the launcher hands to the perf worker (JSON).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace magnetar::perf {

// Field names match the `workload` and `loadgen` sections of tools/perf scenario YAML files
// (see docs/perf.md); the launcher writes them as JSON after resolving `extends` and overrides.
struct WorkloadConfig {
  std::string serviceUrl = "pulsar://127.0.0.1:6650";
  std::string tlsTrustCertsFilePath;  // CA of the broker for pulsar+ssl:// ("" = system CAs)
  std::string webServiceUrl;          // http://host:port, for gatewayProtocol "websocket"
  std::string mqttUrl;                // mqtt://host:port, for gatewayProtocol "mqtt"
  // workload
  uint32_t devices = 1000000;
  uint32_t gateways = 500;
  uint32_t topics = 1;
  std::string topicPrefix = "persistent://public/default/iot-telemetry-";
  uint32_t payloadBytes = 128;
  bool batching = false;
  uint32_t batchingMaxPublishDelayMs = 10;
  uint32_t maxOutstanding = 100000;
  double rate = 0;                         // msg/s over all gateways, 0 = unlimited
  std::string connectMode = "sequential";  // or "concurrent"
  // "binary" (Pulsar's protocol, client::Producer) or "websocket": the gateways publish through
  // the broker's WebSocket API at webServiceUrl (webSocketServiceEnabled); applications stay
  // binary. WebSocket gateways connect sequentially and send no sequence ids. "mqtt": each
  // gateway one MQTT 3.1.1 connection at mqttUrl publishing QoS 1 (mqttListeners), no key.
  std::string gatewayProtocol = "binary";
  uint32_t warmupRounds = 2;
  uint64_t warmupMessages = 500000;  // per round
  double warmupSeconds = 0;          // per round, instead of warmupMessages when > 0
  uint64_t measuredMessages = 4000000;
  uint32_t applications = 1;
  uint32_t pods = 20;
  std::vector<double> joinSeconds;  // per application, from the measured phase's start
  std::string subscriptionPrefix = "iot-application-";
  uint32_t receiverQueueSize = 1000;
  // A late application reads "at the tail" once it got every message published more than this
  // long ago; catch-up time = join to that moment.
  double catchUpLagMs = 1000;
  double timeoutSeconds = 600;  // whole run
  double stallSeconds = 30;     // no progress for this long fails the phase
  uint64_t seed = 1;            // random order of concurrent connects
  // Receipts counted per 10 ms of the measured phase (the launcher sets it for a reconnect
  // storm: the publish rate's dip and recovery at that resolution).
  bool receiptTimeline = false;
  // Consume-transform-produce (issue 45; scenario iot-telemetry-txn): each application turns every
  // input into one derived message on its output topics (outputTopic()), in batches of txnBatch
  // (a batch waits at most txnBatchWaitMs for more input), each batch one transaction (sends and
  // acks in it, then commit) when transactions is true, or plain sends and acks and one producer
  // flush when false. txnAbortFraction of the transactions are aborted first and the batch redone
  // in a new one (their output is flagged, and must never be read). A verifying application per
  // application (verifierOf()) reads the output: every input exactly once, in order per device.
  bool transform = false;
  bool transactions = false;
  uint32_t txnBatch = 100;
  uint32_t txnBatchWaitMs = 100;
  double txnAbortFraction = 0;
  uint32_t txnTimeoutMs = 60000;
  std::string outputTopicPrefix = "persistent://public/default/iot-telemetry-out-";
  uint32_t verifierPods = 1;
  // loadgen
  int producerIoThreads = 1;
  int consumerIoThreads = 1;  // per application
  int sendTimeoutMs = 0;      // 0: never time out (the broker bounds the wait)

  // Parses the JSON text of the resolved scenario: {"serviceUrl":..., "workload":{...},
  // "loadgen":{...}}. Unknown keys are errors (kInvalidArgument), so typos do not pass silently.
  static Result<WorkloadConfig> fromJson(const std::string& text);
  // kInvalidArgument when values cannot make a run (0 devices, payload < header, ...).
  Status validate() const;
  // Output topic of application a for input topic t: "<outputTopicPrefix><a>-<t>".
  std::string outputTopic(uint32_t a, uint32_t t) const {
    return outputTopicPrefix + std::to_string(a) + "-" + std::to_string(t);
  }
  // The configuration of application a's output verifier: the same workload read from a's output
  // topics by subscription "iot-output-check-<a>" with verifierPods pods, joining at 0.
  WorkloadConfig verifierOf(uint32_t a) const;
  // Join time of application a (0 when not listed).
  double joinOf(uint32_t a) const { return a < joinSeconds.size() ? joinSeconds[a] : 0.0; }
};

}  // namespace magnetar::perf
