#include "app/websocket_options.h"

#include <fstream>
#include <sstream>

#include "base/logging.h"
#include "broker/service/broker_service.h"

namespace magnetar::app {
namespace {

// The token of AuthenticationToken's parameters, "" when none can be read.
std::string tokenOf(const std::string& params) {
  std::string p = params;
  if (p.rfind("token:", 0) == 0) return p.substr(6);
  if (p.rfind("file://", 0) == 0) {
    std::ifstream in(p.substr(7));
    std::stringstream text;
    text << in.rdbuf();
    std::string t = text.str();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    if (t.empty()) MLOG_WARN("brokerClientAuthenticationParameters: no token in {}", p);
    return t;
  }
  return p;
}

bool isTokenPlugin(const std::string& plugin) {
  return plugin.size() >= 19 && plugin.compare(plugin.size() - 19, 19, "AuthenticationToken") == 0;
}

}  // namespace

std::optional<std::string> brokerClientAuthorization(const config::ServiceConfiguration& cfg) {
  if (!isTokenPlugin(cfg.brokerClientAuthenticationPlugin())) return std::nullopt;
  std::string token = tokenOf(cfg.brokerClientAuthenticationParameters());
  if (token.empty()) return std::nullopt;
  return "Bearer " + token;
}

websocket::WebSocketOptions webSocketOptionsFrom(const config::ServiceConfiguration& cfg,
                                                 int brokerServicePort) {
  websocket::WebSocketOptions o;
  std::string host = cfg.bindAddress();
  if (host.empty() || host == "0.0.0.0" || host == "::") host = "127.0.0.1";
  o.brokerServiceUrl = "pulsar://" + host + ":" + std::to_string(brokerServicePort);
  if (isTokenPlugin(cfg.brokerClientAuthenticationPlugin())) {
    o.authMethodName = "token";
    o.authData = tokenOf(cfg.brokerClientAuthenticationParameters());
  }
  o.numIoThreads = cfg.webSocketNumIoThreads();
  o.connectionsPerBroker = cfg.webSocketConnectionsPerBroker();
  o.sessionIdleTimeout = std::chrono::milliseconds(cfg.webSocketSessionIdleTimeoutMillis());
  o.maxTextFrameSize = static_cast<size_t>(cfg.webSocketMaxTextFrameSize());
  o.pingDurationSeconds = cfg.webSocketPingDurationSeconds();
  return o;
}

std::shared_ptr<websocket::WebSocketService> makeWebSocketService(
    const config::ServiceConfiguration& cfg, broker::BrokerService& service) {
  if (!cfg.webSocketServiceEnabled()) return nullptr;
  return std::make_shared<websocket::WebSocketService>(
      service, webSocketOptionsFrom(cfg, service.brokerServicePort()));
}

}  // namespace magnetar::app
