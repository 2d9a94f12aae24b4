// MqttProducers: the gateways over MQTT 3.1.1 for the mqtt gateway protocol of the perf worker
// (issue 51): one TCP connection per gateway (client id "gw<g>", clean session), PUBLISH QoS 1 to
// any topic, the PUBACK as the receipt. Plain mqtt:// only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace magnetar::perf {

class MqttProducers {
 public:
  // Called on an I/O thread (`gw-mqtt-N`) for each PUBACK with the context given to publish(),
  // ok=true; and once per failed connection (closed, write error, bad packet) with
  // context = kNoContext, ok=false and the error text.
  static constexpr uint32_t kNoContext = UINT32_MAX;
  using AckHandler = std::function<void(uint32_t context, bool ok, std::string_view error)>;

  // ioThreads >= 1 threads run every connection.
  MqttProducers(int ioThreads, AckHandler onAck);
  ~MqttProducers();

  // Connects to mqttUrl ("mqtt://host:port", numeric host), sends CONNECT (3.1.1, clean session,
  // keep alive 0) and waits for CONNACK 0 (blocking, at most 30 s); then reads PUBACKs. Returns
  // the connection's index. Thread: the controlling thread, before any publish().
  Result<size_t> open(const std::string& mqttUrl, const std::string& clientId);

  // Queues one PUBLISH QoS 1 on a connection (packet ids assigned in order, a used one skipped);
  // `context` comes back with its PUBACK. Any thread. At most 65,535 in flight per connection.
  void publish(size_t connection, std::string_view topic, std::string_view payload,
               uint32_t context);

  // Closes every connection and joins the I/O threads. Idempotent; the controlling thread.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magnetar::perf
