#include "app/mqtt_options.h"

#include "broker/service/broker_service.h"

namespace magnetar::app {

mqtt::MqttOptions mqttOptionsFrom(const config::ServiceConfiguration& cfg) {
  mqtt::MqttOptions o;
  o.listeners = cfg.mqttListeners();
  o.defaultTenant = cfg.defaultTenant();
  o.defaultNamespace = cfg.defaultNamespace();
  o.defaultTopicDomain = cfg.defaultTopicDomain();
  o.maxPacketSize = static_cast<size_t>(cfg.maxFrameSize());
  o.receiveMaximum = static_cast<uint16_t>(cfg.receiveMaximum());
  o.maxConnections = static_cast<int>(cfg.mqttMaxConnections());
  o.topicAliasMaximum = static_cast<uint16_t>(cfg.mqttTopicAliasMaximum());
  return o;
}

namespace {
bool anyListener(const config::ServiceConfiguration& cfg) {
  for (const auto& l : cfg.mqttListeners()) {
    if (!l.empty()) return true;
  }
  return false;
}
}  // namespace

std::shared_ptr<net::EventLoopGroup> makeMqttLoops(const config::ServiceConfiguration& cfg) {
  if (!anyListener(cfg)) return nullptr;
  return mqtt::makeMqttLoops(static_cast<int>(cfg.mqttNumIOThreads()));
}

Result<std::unique_ptr<mqtt::MqttService>> startMqttService(
    const config::ServiceConfiguration& cfg, broker::BrokerService& service,
    std::shared_ptr<net::EventLoopGroup> loops) {
  mqtt::MqttOptions o = mqttOptionsFrom(cfg);
  o.tlsContext = service.options().tlsContext;  // made for mqtt+ssl too (makeBrokerOptions)
  o.ioLoops = std::move(loops);
  if (!anyListener(cfg)) return std::unique_ptr<mqtt::MqttService>();
  auto m = std::make_unique<mqtt::MqttService>(service, std::move(o));
  if (Status s = m->start(); !s.isOk()) return s;
  return m;
}

bool hasMqttTlsListener(const config::ServiceConfiguration& cfg) {
  for (const auto& l : cfg.mqttListeners()) {
    if (l.rfind("mqtt+ssl://", 0) == 0) return true;
  }
  return false;
}

}  // namespace magnetar::app
