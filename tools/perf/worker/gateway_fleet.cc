#include "gateway_fleet.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <numeric>
#include <random>

#include "payload.h"

namespace magnetar::perf {

uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// The payload buffer of the calling thread, prepared once (header rewritten per message).
char* threadPayload(size_t size) {
  thread_local std::vector<char> buf;
  if (buf.size() != size) {
    buf.assign(size, 0);
    initPayload(buf.data(), size);
  }
  return buf.data();
}

}  // namespace

GatewayFleet::GatewayFleet(const WorkloadConfig& config)
    : config_(config),
      laneCount_(std::min<uint32_t>(config.devices, config.maxOutstanding)),
      lanes_(laneCount_),
      produced_(config.devices, 0) {
  for (uint32_t i = 0; i < laneCount_; ++i) lanes_[i].nextDevice = i;
  idle_.resize(laneCount_);
  if (config_.receiptTimeline) {
    timelineSize_ = static_cast<size_t>(config_.timeoutSeconds * 1000 / kTimelineBucketMs) + 1;
    timeline_ = std::make_unique<std::atomic<uint32_t>[]>(timelineSize_);
  }
  paceBatch_.reserve(laneCount_);
}

GatewayFleet::~GatewayFleet() { close(); }

Status GatewayFleet::connectWebSocket() {
  ws_ = std::make_unique<WsProducers>(
      config_.producerIoThreads, [this](std::string_view context, bool ok, std::string_view ack) {
        onWebSocketAck(context, ok, ack);
      });
  const uint32_t g = config_.gateways, t = config_.topics;
  gateways_.resize(static_cast<size_t>(g) * t);
  auto start = std::chrono::steady_clock::now();
  // Topic-major, one session at a time, as the binary fleet's sequential connects.
  for (uint32_t topic = 0; topic < t; ++topic) {
    const std::string path =
        "/ws/v2/producer/" + WsProducers::topicPath(config_.topicPrefix + std::to_string(topic));
    for (uint32_t gw = 0; gw < g; ++gw) {
      auto session = ws_->open(config_.webServiceUrl,
                               fmt::format("{}?producerName=gw{}-t{}", path, gw, topic));
      if (!session) return session.status();
      auto& slot = gateways_[gw * t + topic];
      slot = std::make_unique<Gateway>();
      slot->wsSession = *session;
    }
  }
  connectSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::ok();
}

Status GatewayFleet::connectMqtt() {
  mqtt_ = std::make_unique<MqttProducers>(
      config_.producerIoThreads,
      [this](uint32_t lane, bool ok, std::string_view error) { onMqttAck(lane, ok, error); });
  const uint32_t g = config_.gateways, t = config_.topics;
  gateways_.resize(static_cast<size_t>(g) * t);
  auto start = std::chrono::steady_clock::now();
  for (uint32_t gw = 0; gw < g; ++gw) {  // one connection per gateway, one at a time
    auto session = mqtt_->open(config_.mqttUrl, fmt::format("gw{}", gw));
    if (!session) return session.status();
    for (uint32_t topic = 0; topic < t; ++topic) {
      auto& slot = gateways_[gw * t + topic];
      slot = std::make_unique<Gateway>();
      slot->mqttSession = *session;
      slot->mqttTopic = config_.topicPrefix + std::to_string(topic);
    }
  }
  connectSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::ok();
}

void GatewayFleet::onMqttAck(uint32_t lane, bool ok, std::string_view error) {
  if (!ok || lane >= laneCount_) {
    // A failed connection: its lanes never finish, the run stalls and is reported invalid.
    if (sendErrors_.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(idleMu_);
      firstError_ = std::string(error);
    }
    return;
  }
  onReceipt(lane, Status::ok(), client::MessageId{0, 0});
}

Status GatewayFleet::connect() {
  Status s = connectGateways();
  if (s.isOk()) startPacer();
  return s;
}

Status GatewayFleet::connectGateways() {
  if (config_.gatewayProtocol == "websocket") return connectWebSocket();
  if (config_.gatewayProtocol == "mqtt") return connectMqtt();
  client::ClientConfig cc;
  cc.ioThreads = config_.producerIoThreads;
  cc.ioThreadPrefix = "gw-io";
  cc.tlsTrustCertsFilePath = config_.tlsTrustCertsFilePath;
  cc.connectionsPerBroker = static_cast<int>(config_.gateways);
  cc.operationTimeout = std::chrono::milliseconds(60000);
  client_ = std::make_unique<client::Client>(config_.serviceUrl, cc);
  if (!client_->status().isOk()) return client_->status();

  const uint32_t g = config_.gateways, t = config_.topics;
  gateways_.resize(static_cast<size_t>(g) * t);
  for (auto& gw : gateways_) gw = std::make_unique<Gateway>();
  std::vector<uint32_t> order(g);
  std::iota(order.begin(), order.end(), 0);
  const bool concurrent = config_.connectMode == "concurrent";
  if (concurrent) {
    std::mt19937_64 rng(config_.seed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  auto configFor = [&](uint32_t gw, uint32_t topic) {
    client::ProducerConfig pc;
    pc.producerName = fmt::format("gw{}-t{}", gw, topic);  // short: no heap copy per message
    pc.batchingEnabled = config_.batching;
    pc.batchingMaxPublishDelay = std::chrono::milliseconds(config_.batchingMaxPublishDelayMs);
    pc.maxPendingMessages = 0;  // maxOutstanding bounds the sends over all gateways
    pc.sendTimeout = std::chrono::milliseconds(config_.sendTimeoutMs);
    return pc;
  };
  auto start = std::chrono::steady_clock::now();
  // Topic-major: producer id k = topic * G + i lands on connection slot i, so with sequential
  // connects every producer of gateway g shares gateway g's connection.
  for (uint32_t topic = 0; topic < t; ++topic) {
    const std::string name = config_.topicPrefix + std::to_string(topic);
    if (!concurrent) {
      for (uint32_t gw : order) {
        auto p = client_->createProducer(name, configFor(gw, topic));
        if (!p)
          return Status::error(p.status().code(), fmt::format("producer gw{}-t{}: {}", gw, topic,
                                                              p.status().message()));
        gateways_[gw * t + topic]->producer = *p;
      }
      continue;
    }
    std::mutex mu;
    std::condition_variable cv;
    uint32_t left = g;
    Status first = Status::ok();
    for (uint32_t gw : order) {
      client_->createProducerAsync(name, configFor(gw, topic), [&, gw](Result<client::Producer> p) {
        std::lock_guard<std::mutex> lock(mu);
        if (p) {
          gateways_[gw * t + topic]->producer = *p;
        } else if (first.isOk()) {
          first = Status::error(p.status().code(), fmt::format("producer gw{}-t{}: {}", gw, topic,
                                                               p.status().message()));
        }
        if (--left == 0) cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return left == 0; });
    if (!first.isOk()) return first;
  }
  // A producer name the broker knows (dedup state of an earlier run) continues after its last id.
  for (auto& gw : gateways_) {
    int64_t last = gw->producer.lastSequenceId();
    gw->nextSequenceId = last < 0 ? 0 : static_cast<uint64_t>(last) + 1;
  }
  connectSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::ok();
}

void GatewayFleet::startPhase(uint64_t messages, bool warmup, double seconds) {
  warmup_ = warmup;
  stop_ = false;
  lanesDone_ = 0;
  phaseDoneNs_ = 0;
  uint32_t active = 0;
  for (uint32_t i = 0; i < laneCount_; ++i) {
    Lane& l = lanes_[i];
    l.remaining = seconds > 0 ? UINT64_MAX : messages / laneCount_ + (i < messages % laneCount_);
    if (l.remaining > 0) ++active;
  }
  activeLanes_ = active;
  if (active == 0) {
    phaseDoneNs_ = monotonicNs();
    return;
  }
  phaseStartNs_ = monotonicNs();
  if (config_.rate > 0) {
    std::lock_guard<std::mutex> lock(idleMu_);
    idleHead_ = idleSize_ = 0;
    for (uint32_t i = 0; i < laneCount_; ++i) {
      if (lanes_[i].remaining > 0) pushIdleLocked(i);
    }
    return;
  }
  for (uint32_t i = 0; i < laneCount_; ++i) {
    if (lanes_[i].remaining > 0) issue(i);
  }
}

bool GatewayFleet::phaseDone() const { return lanesDone_.load() >= activeLanes_.load(); }

void GatewayFleet::issue(uint32_t laneIndex, uint64_t nowNs) {
  Lane& l = lanes_[laneIndex];
  const uint32_t device = l.nextDevice;
  l.nextDevice += laneCount_;
  if (l.nextDevice >= config_.devices) l.nextDevice = laneIndex;
  const uint32_t topic = device % config_.topics;
  const uint32_t gw = (laneIndex + l.sends++) % config_.gateways;
  Gateway& g = *gateways_[static_cast<size_t>(gw) * config_.topics + topic];

  TelemetryRecord r;
  r.device = device;
  r.counter = produced_[device]++;
  r.warmup = warmup_;
  char* payload = threadPayload(config_.payloadBytes);
  if (ws_) {
    l.sentAtNs = r.sendTimeNs = monotonicNs();
    encodeHeader(r, payload);
    return issueWebSocket(g, laneIndex, std::string_view(payload, config_.payloadBytes), device);
  }
  if (mqtt_) {
    l.sentAtNs = r.sendTimeNs = monotonicNs();
    encodeHeader(r, payload);
    return mqtt_->publish(g.mqttSession, g.mqttTopic,
                          std::string_view(payload, config_.payloadBytes), laneIndex);
  }
  char key[kKeyBytes];
  encodeKey(device, key);
  client::OutgoingMessage m;
  m.payload = std::string_view(payload, config_.payloadBytes);
  m.key = std::string_view(key, kKeyBytes);

  std::lock_guard<std::mutex> lock(g.mu);
  m.sequenceId = g.nextSequenceId++;
  l.sentAtNs = r.sendTimeNs = nowNs != 0 ? nowNs : monotonicNs();
  encodeHeader(r, payload);
  g.producer.sendAsync(m, [this, laneIndex](const Status& s, const client::MessageId& id) {
    onReceipt(laneIndex, s, id);
  });
}

void GatewayFleet::issueWebSocket(Gateway& g, uint32_t lane, std::string_view payload,
                                  uint32_t device) {
  // {"payload":"<base64>","key":"<8 hex digits>","context":"<lane>"}
  constexpr std::string_view kHead = "{\"payload\":\"", kKey = "\",\"key\":\"",
                             kContext = "\",\"context\":\"", kTail = "\"}";
  const std::string laneText = std::to_string(lane);
  std::string frame;
  frame.reserve(kHead.size() + base64Size(payload.size()) + kKey.size() + kTextKeyBytes +
                kContext.size() + laneText.size() + kTail.size());
  frame += kHead;
  const size_t at = frame.size();
  frame.resize(at + base64Size(payload.size()));
  base64Encode(payload.data(), payload.size(), frame.data() + at);
  frame += kKey;
  char key[kTextKeyBytes];
  encodeTextKey(device, key);
  frame.append(key, kTextKeyBytes);
  frame += kContext;
  frame += laneText;
  frame += kTail;
  ws_->send(g.wsSession, std::move(frame));
}

void GatewayFleet::onWebSocketAck(std::string_view context, bool ok, std::string_view ack) {
  uint32_t lane = 0;
  const auto [end, ec] = std::from_chars(context.data(), context.data() + context.size(), lane);
  if (context.empty() || ec != std::errc() || end != context.data() + context.size() ||
      lane >= laneCount_) {
    // A failed session (or an ack without our context): its lanes never finish, the run stalls
    // and is reported invalid with this error.
    if (sendErrors_.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(idleMu_);
      firstError_ = "WebSocket: " + std::string(ack);
    }
    return;
  }
  onReceipt(lane, ok ? Status::ok() : Status::ioError("WebSocket ack " + std::string(ack)),
            client::MessageId{0, 0});
}

void GatewayFleet::onReceipt(uint32_t laneIndex, const Status& s, const client::MessageId& id) {
  const uint64_t now = monotonicNs();
  Lane& l = lanes_[laneIndex];
  if (!s.isOk()) {
    if (sendErrors_.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(idleMu_);
      firstError_ = s.toString();
    }
    laneFinished();  // a failed send ends its lane; the run is invalid
    return;
  }
  published_.fetch_add(1, std::memory_order_relaxed);
  if (id.ledgerId < 0 && id.entryId < 0) dedupReceipts_.fetch_add(1, std::memory_order_relaxed);
  if (timeline_) {
    const uint64_t start = timelineStartNs_.load(std::memory_order_relaxed);
    if (start != 0 && now >= start) {
      const uint64_t bucket = (now - start) / (kTimelineBucketMs * 1000000);
      if (bucket < timelineSize_) timeline_[bucket].fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (!warmup_) publishUs_.record((now - l.sentAtNs) / 1000);
  if (--l.remaining == 0 || stop_.load(std::memory_order_relaxed)) {
    laneFinished();
    return;
  }
  if (config_.rate > 0) {
    {
      std::lock_guard<std::mutex> lock(idleMu_);
      // stopIssuing() sets stop_ before it empties the ring under this lock.
      if (!stop_.load()) {
        pushIdleLocked(laneIndex);
        return;
      }
    }
    laneFinished();
    return;
  }
  issue(laneIndex, now);
}

std::vector<uint32_t> GatewayFleet::receiptTimeline() const {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < timelineSize_; ++i) out.push_back(timeline_[i].load());
  while (!out.empty() && out.back() == 0) out.pop_back();
  return out;
}

void GatewayFleet::laneFinished() {
  if (lanesDone_.fetch_add(1) + 1 == activeLanes_.load()) phaseDoneNs_ = monotonicNs();
}

void GatewayFleet::startPacer() {
  if (config_.rate <= 0 || pacerRun_.load()) return;
  pacerRun_ = true;
  if (client_ && config_.producerIoThreads == 1) {
    // Every gateway's connection is on the one I/O thread: pace there, as relayload does.
    Status s = client_->runEvery(0, std::chrono::microseconds(kPaceTickUs), [this] {
      if (!pacerRun_.load()) return false;
      paceTick();
      return true;
    });
    if (s.isOk()) return;
  }
  pacer_ = std::thread([this] { pacerLoop(); });
}

void GatewayFleet::pacerLoop() {
  while (pacerRun_.load()) {
    std::this_thread::sleep_for(std::chrono::microseconds(kPaceTickUs));
    paceTick();
  }
}

void GatewayFleet::paceTick() {
  uint64_t start = phaseStartNs_.load();
  if (start != pacePhaseStart_) {
    pacePhaseStart_ = start;
    paceIssued_ = 0;
  }
  if (pacePhaseStart_ == 0) return;
  double elapsed = static_cast<double>(monotonicNs() - pacePhaseStart_) / 1e9;
  auto due = static_cast<uint64_t>(config_.rate * elapsed);
  if (due <= paceIssued_) return;
  uint64_t want = due - paceIssued_;
  {
    std::lock_guard<std::mutex> lock(idleMu_);
    size_t n = static_cast<size_t>(std::min<uint64_t>(want, idleSize_));
    paceBatch_.clear();
    for (size_t k = 0; k < n; ++k) {
      paceBatch_.push_back(idle_[idleHead_]);
      idleHead_ = (idleHead_ + 1) % laneCount_;
    }
    idleSize_ -= n;
  }
  // A rate the lanes cannot keep up with is not saved up for later bursts.
  paceIssued_ = paceBatch_.size() < want ? due : paceIssued_ + paceBatch_.size();
  for (uint32_t lane : paceBatch_) {
    if (stop_.load(std::memory_order_relaxed)) {
      laneFinished();
    } else {
      issue(lane);
    }
  }
}

void GatewayFleet::pushIdleLocked(uint32_t lane) {
  idle_[(idleHead_ + idleSize_) % laneCount_] = lane;
  ++idleSize_;
}

void GatewayFleet::stopIssuing() {
  stop_.store(true);
  size_t parked = 0;
  {
    std::lock_guard<std::mutex> lock(idleMu_);
    parked = idleSize_;
    idleHead_ = idleSize_ = 0;
  }
  for (size_t k = 0; k < parked; ++k) laneFinished();
}

std::string GatewayFleet::firstSendError() const {
  std::lock_guard<std::mutex> lock(idleMu_);
  return firstError_;
}

void GatewayFleet::close() {
  if (closed_) return;
  closed_ = true;
  pacerRun_ = false;
  if (pacer_.joinable()) pacer_.join();
  for (auto& g : gateways_) {
    if (g && g->producer) (void)g->producer.closeAsync([](const Status&) {});
  }
  if (ws_) ws_->close();
  if (mqtt_) mqtt_->close();
  if (client_) (void)client_->close();
}

}  // namespace magnetar::perf
