// WsProducers: the gateways' producers over Pulsar's WebSocket API (ws:// only) for the
// websocket gateway protocol of the perf worker: one WebSocket session per (gateway, topic) on
// /ws/v2/producer/..., JSON text frames out, ProducerAck frames in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"

namespace magnetar::perf {

class WsProducers {
 public:
  // Called for each ack on an I/O thread (`gw-ws-N`): the ack's context (the text the frame
  // carried in "context"), and whether its result is "ok" (else the ack's text as the error).
  // Also called with an empty context and ok=false when a session fails (closed, write error).
  using AckHandler = std::function<void(std::string_view context, bool ok, std::string_view ack)>;

  // ioThreads >= 1 threads run every session.
  WsProducers(int ioThreads, AckHandler onAck);
  ~WsProducers();

  // Opens a session to webServiceUrl ("http://host:port"; the host must be a numeric address)
  // + path, a blocking connect and handshake (at most 30 s), and starts reading its acks.
  // Returns the session's index. Thread: the controlling thread, before any send().
  Result<size_t> open(const std::string& webServiceUrl, const std::string& path);

  // Queues one text frame on a session; frames of a session go out in order. Any thread.
  void send(size_t session, std::string frame);

  // Closes every session and joins the I/O threads. Idempotent; the controlling thread.
  void close();

  // The topic path of the API for a topic name: "persistent://t/ns/x" -> "persistent/t/ns/x".
  static std::string topicPath(std::string_view topic);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magnetar::perf
