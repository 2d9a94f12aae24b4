// WebSocketService: Pulsar's WebSocket API (`webSocketServiceEnabled`) on the broker's web
// service ports, as Pulsar runs it inside the broker: /ws/v2/producer, /ws/v2/consumer and
// /ws/v2/reader with Pulsar's JSON messages (src/websocket/README.md, docs/websocket.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "admin/upgrade_hook.h"

namespace magnetar::broker {
class BrokerService;
}

namespace magnetar::websocket {

// Defaults: Pulsar's (ServiceConfiguration / WebSocketProxyConfiguration); src/app reads them
// from settings.def.
struct WebSocketOptions {
  // The broker's own binary-protocol URL: the sessions' producers and consumers are clients
  // of it, as Pulsar's WebSocketService uses a PulsarClient of its own broker.
  std::string brokerServiceUrl;
  // That client's credentials (brokerClientAuthenticationPlugin/Parameters: "token" and the
  // JWT), so it passes the broker's authentication; empty: none.
  std::string authMethodName;
  std::string authData;
  int numIoThreads = 1;          // webSocketNumIoThreads: the client's client-io threads
  int connectionsPerBroker = 1;  // webSocketConnectionsPerBroker
  // webSocketSessionIdleTimeoutMillis: a session with no frame either way for this long is
  // closed (Jetty's idle timeout, 300 s).
  std::chrono::milliseconds sessionIdleTimeout{300000};
  // webSocketMaxTextFrameSize: a larger incoming message closes the session with 1009
  // ("message too big"), as Jetty does; 1 MiB.
  size_t maxTextFrameSize = 1048576;
  // webSocketPingDurationSeconds: a PING to every session this often; <= 0: none.
  int pingDurationSeconds = -1;
};

// Serves WebSocket upgrade requests handed over by the HTTP servers (admin::UpgradeHook).
// Thread: created and stopped on the owner thread; sessions run on the pulsar-web strand of
// their connection, client callbacks (client-io threads) are posted there.
class WebSocketService final : public admin::UpgradeHook {
 public:
  // broker: its authentication and authorization services check each session (as Pulsar's
  // AbstractWebSocketHandler.checkAuth); outlives this object.
  WebSocketService(broker::BrokerService& broker, WebSocketOptions options);
  ~WebSocketService() override;  // stops
  WebSocketService(const WebSocketService&) = delete;
  WebSocketService& operator=(const WebSocketService&) = delete;

  // Paths under /ws/ (those that name no endpoint answer 404, as Pulsar's servlets).
  bool accepts(const admin::HttpRequest& request) const override;
  void takePlain(PlainStream stream, Request request, admin::HttpRequest parsed) override;
  void takeTls(TlsStream stream, Request request, admin::HttpRequest parsed) override;

  // Closes the client (every session's producer and consumer). Call before the HTTP servers
  // stop. Idempotent.
  void stop();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace magnetar::websocket
