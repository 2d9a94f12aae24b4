// MqttStats: the process-wide MQTT counters /metrics shows (MoP's MQTTMetricsCollector names,
// admin/metrics.h writeMqttMetrics). Header-only atomics, so the admin module reads them without
// linking the MQTT service. Bumped on the connections' loops, read at scrape time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace magnetar::mqtt {

// Why a connection was refused before its session began; a label value of
// magnetar_mqtt_connections_refused_total{reason}.
enum class MqttRefusal {
  kMaxConnections,  // mqttMaxConnections reached (CONNACK 0x97 / 3.1.1 0x03)
  kAuthentication,  // CONNACK 0x86 / 3.1.1 0x04 (token, basic, TLS certificate)
  kCount
};

struct MqttStats {
  // Connections that completed CONNECT and are open now (mop_active_client_count), ever
  // (mop_total_client_count), and the most open at once (mop_maximum_client_count).
  static inline std::atomic<int64_t> activeClients{0};
  static inline std::atomic<uint64_t> totalClients{0};
  static inline std::atomic<int64_t> maximumClients{0};
  // PUBLISHes from clients into topics and their payload bytes (mop_send_count, mop_send_bytes);
  // PUBLISHes delivered to clients and their payload bytes (mop_received_count,
  // mop_received_bytes); SUBSCRIBE topic filters granted (magnetar_mqtt_subscriptions_total).
  static inline std::atomic<uint64_t> sendCount{0};
  static inline std::atomic<uint64_t> sendBytes{0};
  static inline std::atomic<uint64_t> receivedCount{0};
  static inline std::atomic<uint64_t> receivedBytes{0};
  static inline std::atomic<uint64_t> subscriptions{0};
  static inline std::array<std::atomic<uint64_t>, static_cast<size_t>(MqttRefusal::kCount)>
      refused{};

  static void clientConnected() {
    totalClients.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = activeClients.fetch_add(1, std::memory_order_relaxed) + 1;
    int64_t max = maximumClients.load(std::memory_order_relaxed);
    while (now > max && !maximumClients.compare_exchange_weak(max, now)) {
    }
  }
  static void clientClosed() { activeClients.fetch_sub(1, std::memory_order_relaxed); }
  static void published(uint64_t payloadBytes) {
    sendCount.fetch_add(1, std::memory_order_relaxed);
    sendBytes.fetch_add(payloadBytes, std::memory_order_relaxed);
  }
  static void delivered(uint64_t payloadBytes) {
    receivedCount.fetch_add(1, std::memory_order_relaxed);
    receivedBytes.fetch_add(payloadBytes, std::memory_order_relaxed);
  }
  static void refuse(MqttRefusal r) {
    refused[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  }
  static const char* label(MqttRefusal r) {
    return r == MqttRefusal::kMaxConnections ? "max_connections" : "authentication";
  }
};

}  // namespace magnetar::mqtt
