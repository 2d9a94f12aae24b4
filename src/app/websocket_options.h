// The WebSocket service's options from the configuration (settings.def's WebSocket section and
// the broker client's authentication).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "config/service_configuration.h"
#include "websocket/websocket_service.h"

namespace magnetar::broker {
class BrokerService;
}

namespace magnetar::app {

// webSocket* settings; the client connects to this broker's brokerServicePort on the bind
// address (127.0.0.1 for a wildcard one) and authenticates as brokerClientAuthenticationPlugin
// says (AuthenticationToken: its token, from "token:<JWT>", "file:///path" or the bare JWT).
websocket::WebSocketOptions webSocketOptionsFrom(const config::ServiceConfiguration& cfg,
                                                 int brokerServicePort);

// The Authorization header of this broker's calls to other brokers' admin API
// ("Bearer <token>" when brokerClientAuthenticationPlugin is AuthenticationToken and its
// parameters name a token), nullopt otherwise.
std::optional<std::string> brokerClientAuthorization(const config::ServiceConfiguration& cfg);

// The service when webSocketServiceEnabled, else null. Start it after the broker service.
std::shared_ptr<websocket::WebSocketService> makeWebSocketService(
    const config::ServiceConfiguration& cfg, broker::BrokerService& service);

}  // namespace magnetar::app
