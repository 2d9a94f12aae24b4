// The MQTT listeners' options from the configuration (settings.def's MQTT section).
#pragma once

#include <memory>

#include "config/service_configuration.h"
#include "mqtt/mqtt_service.h"

namespace magnetar::app {

mqtt::MqttOptions mqttOptionsFrom(const config::ServiceConfiguration& cfg);

// The started MQTT service when mqttListeners is set, else null. Start it after the broker
// service (it serves on its pulsar-io loops, or on `loops` when not null: mqttNumIOThreads).
// Errors: bad mqttListeners, a port not bound.
Result<std::unique_ptr<mqtt::MqttService>> startMqttService(
    const config::ServiceConfiguration& cfg, broker::BrokerService& service,
    std::shared_ptr<net::EventLoopGroup> loops = nullptr);

// mqttNumIOThreads' loops, started, when MQTT is on and the setting > 0; else null. The caller
// holds them until after the BrokerService is destroyed (mqtt::MqttOptions::ioLoops). Thread: main.
std::shared_ptr<net::EventLoopGroup> makeMqttLoops(const config::ServiceConfiguration& cfg);

// Whether mqttListeners has an mqtt+ssl:// entry (the broker's TLS context is then loaded).
bool hasMqttTlsListener(const config::ServiceConfiguration& cfg);

}  // namespace magnetar::app
