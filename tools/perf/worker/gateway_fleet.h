// GatewayFleet: the producer side of the IoT workload: G gateways (producers, one connection
// each) publishing the devices' telemetry with explicit sequence ids, one send per device in
// flight and at most maxOutstanding sends in flight overall.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "client/client.h"
#include "histogram.h"
#include "mqtt_producers.h"
#include "workload_config.h"
#include "ws_producers.h"

namespace magnetar::perf {

// Monotonic clock (CLOCK_MONOTONIC, the clock of Python's time.monotonic) in ns.
uint64_t monotonicNs();

// The sends in flight are `lanes`: lane i owns the devices i, i+L, i+2L, ... (L = min(devices,
// maxOutstanding)) and has exactly one send in flight while active. When its receipt comes, the
// lane sends its next device's next message through the next gateway, from the receipt callback
// (unlimited rate) or from the pacer (rate limit). The pacer runs as a timer on the gateways'
// I/O thread (`gw-io-0`) with the binary protocol and one I/O thread: every kPaceTickUs it issues
// the sends due at the rate from the thread that owns the connections, as relayload's paced
// mode does (no hand-over per send); otherwise (several I/O threads, WebSocket, MQTT) it is a
// thread of its own with the same tick. So a device never has two sends in
// flight, consecutive messages of a device go through different gateways, and the generator costs
// one payload header write, one producer lock and one sendAsync per message: no allocation (the
// callback's capture fits std::function's inline storage, the payload is a thread-local buffer).
//
// With gatewayProtocol "websocket" each (gateway, topic) is instead a session of Pulsar's
// WebSocket API (WsProducers): the payload base64 in a JSON frame, the text key, the lane as the
// frame's context, the ack as the receipt; no sequence ids (the API takes none).
//
// With gatewayProtocol "mqtt" each gateway is one MQTT 3.1.1 connection (MqttProducers, client
// id "gw<g>") publishing QoS 1 to every topic (the Pulsar topic name as the MQTT topic), the lane
// as the packet's context, the PUBACK as the receipt; no key and no sequence ids (MQTT has none;
// the broker names the producer by the client id).
//
// Thread: connect()/runPhase()/waitPhase()/close() from one controlling thread; receipts on the
// client's I/O threads (`gw-io-N`, or `gw-ws-N` over WebSocket).
class GatewayFleet {
 public:
  explicit GatewayFleet(const WorkloadConfig& config);
  ~GatewayFleet();

  // Creates the client (one connection per gateway) and the G x T producers, named
  // "gw<g>-t<t>". Sequential: one create at a time, gateway by gateway; concurrent: all creates
  // of a topic at once, gateways in a random order (seeded). Returns the first error.
  Status connect();
  double connectSeconds() const { return connectSeconds_; }

  // Starts a phase of `messages` sends (warmup messages carry the warmup flag and are left out of
  // the publish latency). seconds > 0: the phase instead runs that long, then stops issuing.
  void startPhase(uint64_t messages, bool warmup, double seconds = 0);
  // True once every lane of the current phase finished (all sends have a result).
  bool phaseDone() const;
  // Stops a time-bound phase: lanes issue nothing more after their current send.
  void stopIssuing();
  // CLOCK_MONOTONIC ns of the phase's last receipt (0 while running).
  uint64_t phaseDoneNs() const { return phaseDoneNs_.load(); }

  // Messages with a successful receipt so far (all phases), and failed sends.
  uint64_t published() const { return published_.load(std::memory_order_relaxed); }
  uint64_t sendErrors() const { return sendErrors_.load(std::memory_order_relaxed); }
  // Receipts with message id -1:-1: the broker's deduplication found the send already persisted
  // (a resend after a reconnect), as Pulsar answers duplicates.
  uint64_t dedupReceipts() const { return dedupReceipts_.load(std::memory_order_relaxed); }
  // With receiptTimeline: receipts are counted per kTimelineBucketMs from startNs on (a
  // CLOCK_MONOTONIC time, the measured phase's start) for timeoutSeconds.
  static constexpr uint64_t kTimelineBucketMs = 10;
  void startTimeline(uint64_t startNs) { timelineStartNs_.store(startNs); }
  // Receipts per bucket, trailing empty buckets cut. REQUIRES: phaseDone().
  std::vector<uint32_t> receiptTimeline() const;
  std::string firstSendError() const;
  // Messages produced per device so far (counters 0..n-1). REQUIRES: phaseDone().
  const std::vector<uint32_t>& produced() const { return produced_; }
  LatencyHistogram& publishLatencyUs() { return publishUs_; }

  // Closes the producers and the client. Idempotent.
  void close();

 private:
  struct Lane {
    uint32_t nextDevice = 0;
    uint32_t sends = 0;      // rotates the gateway
    uint64_t remaining = 0;  // sends left in this phase
    uint64_t sentAtNs = 0;
  };
  struct alignas(64) Gateway {
    std::mutex mu;  // orders sequence id assignment with sendAsync
    uint64_t nextSequenceId = 0;
    client::Producer producer;
    size_t wsSession = 0;    // websocket: the session of WsProducers
    size_t mqttSession = 0;  // mqtt: the gateway's connection of MqttProducers
    std::string mqttTopic;   // mqtt: the topic name
  };

  Status connectGateways();
  Status connectWebSocket();
  Status connectMqtt();
  void onMqttAck(uint32_t lane, bool ok, std::string_view error);
  // Sends the lane's next message, stamped with nowNs (monotonic; 0: read the clock here). An
  // unpaced lane's next send follows its receipt at once and reuses the receipt's time.
  void issue(uint32_t lane, uint64_t nowNs = 0);
  void issueWebSocket(Gateway& g, uint32_t lane, std::string_view payload, uint32_t device);
  void onWebSocketAck(std::string_view context, bool ok, std::string_view ack);
  void onReceipt(uint32_t lane, const Status& s, const client::MessageId& id);
  void laneFinished();
  void startPacer();
  void pacerLoop();
  void paceTick();
  void pushIdleLocked(uint32_t lane);

  const WorkloadConfig config_;
  const uint32_t laneCount_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<WsProducers> ws_;                 // gatewayProtocol "websocket"
  std::unique_ptr<MqttProducers> mqtt_;             // gatewayProtocol "mqtt"
  std::vector<std::unique_ptr<Gateway>> gateways_;  // index g * topics + t
  std::vector<Lane> lanes_;
  std::vector<uint32_t> produced_;  // per device: the next counter (written by its lane only)
  double connectSeconds_ = 0;
  bool warmup_ = false;

  std::atomic<uint32_t> activeLanes_{0};
  std::atomic<uint32_t> lanesDone_{0};
  std::atomic<uint64_t> phaseDoneNs_{0};
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<uint64_t> published_{0};
  alignas(64) std::atomic<uint64_t> sendErrors_{0};
  std::atomic<uint64_t> dedupReceipts_{0};
  std::atomic<uint64_t> timelineStartNs_{0};
  std::unique_ptr<std::atomic<uint32_t>[]> timeline_;  // receiptTimeline only
  size_t timelineSize_ = 0;
  LatencyHistogram publishUs_;

  // Rate limit: idle lanes wait here for the pacer.
  mutable std::mutex idleMu_;
  // FIFO ring of idle lanes: idle_[(idleHead_ + k) % laneCount_] for k < idleSize_.
  std::vector<uint32_t> idle_;  // GUARDED_BY(idleMu_), laneCount_ entries
  size_t idleHead_ = 0;         // GUARDED_BY(idleMu_)
  size_t idleSize_ = 0;         // GUARDED_BY(idleMu_)
  std::string firstError_;      // GUARDED_BY(idleMu_)
  std::atomic<bool> pacerRun_{false};
  std::atomic<uint64_t> phaseStartNs_{0};
  static constexpr int64_t kPaceTickUs = 500;
  // The pacer's state: touched by the pacing thread only (the timer's I/O thread or pacer_).
  uint64_t pacePhaseStart_ = 0, paceIssued_ = 0;
  std::vector<uint32_t> paceBatch_;
  std::thread pacer_;  // the pacer when it does not run on the I/O thread
  bool closed_ = false;
};

}  // namespace magnetar::perf
