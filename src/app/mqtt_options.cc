#include "app/mqtt_options.h"

namespace magnetar::app {

mqtt::MqttOptions mqttOptionsFrom(const config::ServiceConfiguration& cfg) {
  mqtt::MqttOptions o;
  o.listeners = cfg.mqttListeners();
  o.defaultTenant = cfg.defaultTenant();
  o.defaultNamespace = cfg.defaultNamespace();
  o.defaultTopicDomain = cfg.defaultTopicDomain();
  o.maxPacketSize = static_cast<size_t>(cfg.maxFrameSize());
  o.receiveMaximum = static_cast<uint16_t>(cfg.receiveMaximum());
  o.topicAliasMaximum = static_cast<uint16_t>(cfg.mqttTopicAliasMaximum());
  return o;
}

Result<std::unique_ptr<mqtt::MqttService>> startMqttService(const config::ServiceConfiguration& cfg,
                                                            broker::BrokerService& service) {
  mqtt::MqttOptions o = mqttOptionsFrom(cfg);
  bool any = false;
  for (const auto& l : o.listeners) any |= !l.empty();
  if (!any) return std::unique_ptr<mqtt::MqttService>();
  auto m = std::make_unique<mqtt::MqttService>(service, std::move(o));
  if (Status s = m->start(); !s.isOk()) return s;
  return m;
}

}  // namespace magnetar::app
