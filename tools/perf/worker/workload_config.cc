#include "workload_config.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "payload.h"

namespace magnetar::perf {
namespace {

using nlohmann::json;
using Setter = std::function<void(const json&)>;

// Reads every key of obj through setters; unknown keys and type errors become kInvalidArgument.
Status readSection(const json& obj, const std::string& section,
                   const std::map<std::string, Setter>& setters) {
  if (!obj.is_object()) return Status::invalidArgument(section + " must be an object");
  for (const auto& [key, value] : obj.items()) {
    auto it = setters.find(key);
    if (it == setters.end()) {
      return Status::invalidArgument(fmt::format("unknown key {}.{}", section, key));
    }
    try {
      it->second(value);
    } catch (const json::exception& e) {
      return Status::invalidArgument(
          fmt::format("bad value for {}.{}: {}", section, key, e.what()));
    }
  }
  return Status::ok();
}

template <typename T>
Setter to(T* field) {
  return [field](const json& v) { *field = v.get<T>(); };
}

}  // namespace

Result<WorkloadConfig> WorkloadConfig::fromJson(const std::string& text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return Status::invalidArgument(std::string("workload JSON: ") + e.what());
  }
  WorkloadConfig c;
  const std::map<std::string, Setter> workload = {
      {"devices", to(&c.devices)},
      {"gateways", to(&c.gateways)},
      {"topics", to(&c.topics)},
      {"topicPrefix", to(&c.topicPrefix)},
      {"payloadBytes", to(&c.payloadBytes)},
      {"batching", to(&c.batching)},
      {"batchingMaxPublishDelayMs", to(&c.batchingMaxPublishDelayMs)},
      {"maxOutstanding", to(&c.maxOutstanding)},
      {"rate", to(&c.rate)},
      {"connectMode", to(&c.connectMode)},
      {"gatewayProtocol", to(&c.gatewayProtocol)},
      {"warmupRounds", to(&c.warmupRounds)},
      {"warmupMessages", to(&c.warmupMessages)},
      {"warmupSeconds", to(&c.warmupSeconds)},
      {"measuredMessages", to(&c.measuredMessages)},
      {"applications", to(&c.applications)},
      {"pods", to(&c.pods)},
      {"joinSeconds", to(&c.joinSeconds)},
      {"subscriptionPrefix", to(&c.subscriptionPrefix)},
      {"receiverQueueSize", to(&c.receiverQueueSize)},
      {"catchUpLagMs", to(&c.catchUpLagMs)},
      {"timeoutSeconds", to(&c.timeoutSeconds)},
      {"stallSeconds", to(&c.stallSeconds)},
      {"seed", to(&c.seed)},
      {"receiptTimeline", to(&c.receiptTimeline)},
      {"transform", to(&c.transform)},
      {"transactions", to(&c.transactions)},
      {"txnBatch", to(&c.txnBatch)},
      {"txnBatchWaitMs", to(&c.txnBatchWaitMs)},
      {"txnAbortFraction", to(&c.txnAbortFraction)},
      {"txnTimeoutMs", to(&c.txnTimeoutMs)},
      {"outputTopicPrefix", to(&c.outputTopicPrefix)},
      {"verifierPods", to(&c.verifierPods)},
  };
  const std::map<std::string, Setter> loadgen = {
      {"producerIoThreads", to(&c.producerIoThreads)},
      {"consumerIoThreads", to(&c.consumerIoThreads)},
      {"sendTimeoutMs", to(&c.sendTimeoutMs)},
  };
  const std::map<std::string, Setter> top = {
      {"serviceUrl", to(&c.serviceUrl)},
      {"tlsTrustCertsFilePath", to(&c.tlsTrustCertsFilePath)},
      {"webServiceUrl", to(&c.webServiceUrl)},
      {"mqttUrl", to(&c.mqttUrl)},
      {"workload",
       [&](const json& v) {
         Status s = readSection(v, "workload", workload);
         if (!s.isOk()) throw std::runtime_error(s.message());
       }},
      {"loadgen",
       [&](const json& v) {
         Status s = readSection(v, "loadgen", loadgen);
         if (!s.isOk()) throw std::runtime_error(s.message());
       }},
  };
  for (const auto& [key, value] : root.items()) {
    auto it = top.find(key);
    if (it == top.end()) continue;  // other sections (broker, sampling, ...) are the launcher's
    try {
      it->second(value);
    } catch (const std::exception& e) {
      return Status::invalidArgument(e.what());
    }
  }
  Status s = c.validate();
  if (!s.isOk()) return s;
  return c;
}

Status WorkloadConfig::validate() const {
  auto bad = [](std::string m) { return Status::invalidArgument(std::move(m)); };
  if (devices == 0) return bad("workload.devices must be > 0");
  if (gateways == 0) return bad("workload.gateways must be > 0");
  if (topics == 0) return bad("workload.topics must be > 0");
  if (payloadBytes < kPayloadHeaderBytes) {
    return bad(fmt::format("workload.payloadBytes must be >= {}", kPayloadHeaderBytes));
  }
  if (maxOutstanding == 0) return bad("workload.maxOutstanding must be > 0");
  if (rate < 0) return bad("workload.rate must be >= 0");
  if (connectMode != "sequential" && connectMode != "concurrent") {
    return bad("workload.connectMode must be sequential or concurrent");
  }
  if (gatewayProtocol != "binary" && gatewayProtocol != "websocket" && gatewayProtocol != "mqtt") {
    return bad("workload.gatewayProtocol must be binary, websocket or mqtt");
  }
  if (gatewayProtocol == "mqtt" && mqttUrl.empty()) {
    return bad("workload.gatewayProtocol mqtt needs mqttUrl");
  }
  if (gatewayProtocol == "mqtt" && (batching || transform)) {
    return bad("workload.gatewayProtocol mqtt takes neither batching nor transform");
  }
  if (gatewayProtocol == "websocket" && webServiceUrl.empty()) {
    return bad("workload.gatewayProtocol websocket needs webServiceUrl");
  }
  if (gatewayProtocol == "websocket" && (batching || transform)) {
    return bad("workload.gatewayProtocol websocket takes neither batching nor transform");
  }
  if (measuredMessages == 0) return bad("workload.measuredMessages must be > 0");
  if (warmupRounds > 0 && warmupMessages == 0 && warmupSeconds <= 0) {
    return bad("workload.warmupMessages or warmupSeconds must be > 0 when warmupRounds > 0");
  }
  if (applications == 0 || pods == 0) return bad("workload.applications and pods must be > 0");
  if (joinSeconds.size() > applications) {
    return bad("workload.joinSeconds has more entries than applications");
  }
  for (double j : joinSeconds) {
    if (j < 0) return bad("workload.joinSeconds must be >= 0");
  }
  if (producerIoThreads < 1 || consumerIoThreads < 1) {
    return bad("loadgen.producerIoThreads and consumerIoThreads must be >= 1");
  }
  if (transform && (txnBatch == 0 || verifierPods == 0)) {
    return bad("workload.txnBatch and verifierPods must be > 0");
  }
  if (txnAbortFraction < 0 || txnAbortFraction >= 1) {
    return bad("workload.txnAbortFraction must be in [0, 1)");
  }
  if (txnAbortFraction > 0 && !(transform && transactions)) {
    return bad("workload.txnAbortFraction needs transform and transactions");
  }
  if (transform && !joinSeconds.empty()) {
    for (double j : joinSeconds) {
      if (j > 0) return bad("workload.transform does not take late applications (joinSeconds)");
    }
  }
  return Status::ok();
}

WorkloadConfig WorkloadConfig::verifierOf(uint32_t a) const {
  WorkloadConfig v = *this;
  v.topicPrefix = outputTopicPrefix + std::to_string(a) + "-";
  v.subscriptionPrefix = "iot-output-check-";
  v.pods = verifierPods;
  v.joinSeconds.clear();
  v.transform = false;
  return v;
}

}  // namespace magnetar::perf
