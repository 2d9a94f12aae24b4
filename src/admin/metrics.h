// The /metrics exposition: Pulsar's topic/namespace metrics (names and labels as Pulsar's
// PrometheusMetricsGenerator) from topic snapshots, plus Magnetar's thread and hand-over metrics.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "admin/prometheus.h"
#include "broker/cluster/load_data.h"
#include "broker/cluster/load_report.h"
#include "broker/service/broker_service.h"
#include "broker/topic/stats.h"
#include "net/event_loop.h"
#include "storage/durable_storage.h"

namespace magnetar::admin {

struct MetricsOptions {
  std::string cluster = "standalone";
  bool topicLevel = true;      // exposeTopicLevelMetricsInPrometheus; false: namespace aggregates
  bool consumerLevel = false;  // exposeConsumerLevelMetricsInPrometheus
  bool producerLevel = false;  // exposeProducerLevelMetricsInPrometheus
};

// pulsar_rate_in, pulsar_rate_out, pulsar_throughput_in/out, pulsar_storage_size,
// pulsar_msg_backlog, pulsar_storage_backlog_size,
// pulsar_{producers,consumers,subscriptions}_count, pulsar_in_{messages,bytes}_total,
// pulsar_out_{messages,bytes}_total; per subscription pulsar_subscription_back_log,
// _back_log_no_delayed, _delayed, pulsar_delayed_message_index_size_bytes, _msg_rate_out,
// _msg_throughput_out, _unacked_messages, _blocked_on_unacked_messages, _msg_rate_redeliver (topic
// level only); pulsar_topics_count per namespace; per remote cluster of a replicated topic
// pulsar_replication_rate_in/_out, _throughput_in/_out, _backlog, _connected_count,
// _disconnected_count, _rate_expired, _delay_in_seconds (label remote_cluster, summed per
// namespace without topic level). Labels: cluster, namespace[, topic[, subscription]]. Always,
// labelled cluster only: magnetar_consumers_blocked_on_unacked_messages and
// magnetar_subscriptions_blocked_on_unacked_messages (how many are held by the unacked limits).
void writeTopicMetrics(PrometheusWriter& w, const std::vector<broker::TopicSnapshot>& topics,
                       const MetricsOptions& o);

// magnetar_thread_cpu_utilization{thread} (0..1 per thread over the last scrape interval).
void writeThreadCpuMetrics(PrometheusWriter& w, const std::map<std::string, double>& byThread);

// magnetar_handover_tasks_total, magnetar_handover_wakeups_total, magnetar_handover_passes_total,
// magnetar_handover_held_tasks_total, magnetar_handover_held_batches_total
// and magnetar_writev_calls_total, labelled kind (pulsar-io, ml-worker) and thread (the target
// loop's name).
void writeLoopMetrics(PrometheusWriter& w, const std::string& kind, net::EventLoopGroup& group);

// maxMessagePublishBufferSizeInMB per pulsar-io thread: pending bytes, pauses, paused seconds.
void writePublishThrottleMetrics(PrometheusWriter& w, const broker::BrokerService& service);
// pulsar_ml_cache_used_size{cluster}: bytes the entry cache holds (managedLedgerCacheSizeMB);
// magnetar_storage_disk_reads_total{cluster}: preads for reads the cache missed.
void writeStorageMetrics(PrometheusWriter& w, const std::string& cluster,
                         const storage::StorageStats& s);
// Pulsar's ModularLoadManager gauges (its brk_lb_* renamed pulsar_lb_*): pulsar_lb_cpu_usage,
// pulsar_lb_memory_usage, pulsar_lb_directMemory_usage, pulsar_lb_bandwidth_in_usage,
// pulsar_lb_bandwidth_out_usage, each the resource's percentUsage() of the load manager's last
// host sample; labels cluster, broker (advertisedAddress), metric="loadBalancing".
void writeLoadBalancingMetrics(PrometheusWriter& w, const std::string& cluster,
                               const std::string& broker,
                               const broker::cluster::SystemResourceUsage& u);
// The leader's shedding and split counters, as Pulsar's ModularLoadManagerImpl exports them
// once it ran the task: pulsar_lb_unload_broker_total and pulsar_lb_unload_bundle_total
// (metric="bundleUnloading"), pulsar_lb_bundles_split_total (metric="bundlesSplit"); label cluster.
void writeBalanceMetrics(PrometheusWriter& w, const std::string& cluster,
                         const broker::cluster::LoadManager::BalanceCounters& c);
// magnetar_protocol_errors_total{error} (labels: broker::CnxErrorStats::label) and
// magnetar_http_bad_requests_total{error} (labels: HttpServerStats::label). Process-wide.
void writeProtocolErrorMetrics(PrometheusWriter& w);
// Pulsar's pulsar_authentication_success_total / _failures_total{reason} and
// pulsar_expired_token_total, and magnetar_authorization_denied_total{operation}.
void writeAuthMetrics(PrometheusWriter& w);

// MQTT (src/mqtt, process-wide MqttStats), MoP's MQTTMetricsCollector names labelled cluster:
// mop_active_client_count, mop_total_client_count, mop_maximum_client_count, mop_send_count,
// mop_send_bytes (PUBLISHes into topics), mop_received_count, mop_received_bytes (delivered to
// clients); Magnetar's magnetar_mqtt_subscriptions_total and
// magnetar_mqtt_connections_refused_total{reason}. Written when mqttListeners is set.
void writeMqttMetrics(PrometheusWriter& w, const std::string& cluster);

}  // namespace magnetar::admin
