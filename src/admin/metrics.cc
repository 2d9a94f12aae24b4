#include "admin/metrics.h"

#include <algorithm>

#include "admin/http_server.h"
#include "broker/service/server_cnx.h"

namespace magnetar::admin {
namespace {

using broker::TopicSnapshot;

// The topic-level values Pulsar aggregates per namespace too.
struct Aggregate {
  double producers = 0, consumers = 0, subscriptions = 0, topics = 0;
  double rateIn = 0, rateOut = 0, throughputIn = 0, throughputOut = 0;
  double storageSize = 0, msgBacklog = 0, backlogSize = 0;
  double inMsgs = 0, inBytes = 0, outMsgs = 0, outBytes = 0;
  // Backlog quotas: the largest limits and age of the topics, their evictions summed.
  double quotaLimit = -1, quotaLimitTime = -1, backlogAge = -1;
  double sizeEvictions = 0, timeEvictions = 0;

  void add(const TopicSnapshot& t) {
    topics += 1;
    producers += static_cast<double>(t.publishers.size());
    subscriptions += static_cast<double>(t.subscriptions.size());
    for (const auto& s : t.subscriptions) consumers += static_cast<double>(s.consumers.size());
    rateIn += t.rateIn.msgRate;
    rateOut += t.rateOut.msgRate;
    throughputIn += t.rateIn.byteRate;
    throughputOut += t.rateOut.byteRate;
    storageSize += static_cast<double>(t.storageSize);
    msgBacklog += static_cast<double>(t.msgBacklog);
    backlogSize += static_cast<double>(t.backlogSize);
    inMsgs += static_cast<double>(t.msgInCounter);
    inBytes += static_cast<double>(t.bytesInCounter);
    outMsgs += static_cast<double>(t.msgOutCounter);
    outBytes += static_cast<double>(t.bytesOutCounter);
    quotaLimit = std::max(quotaLimit, static_cast<double>(t.backlogQuotaLimitSize));
    quotaLimitTime = std::max(quotaLimitTime, static_cast<double>(t.backlogQuotaLimitTime));
    backlogAge = std::max(backlogAge, static_cast<double>(t.oldestBacklogMessageAgeSeconds));
    sizeEvictions += static_cast<double>(t.sizeBacklogEvictions);
    timeEvictions += static_cast<double>(t.timeBacklogEvictions);
  }
};

void declareFamilies(PrometheusWriter& w) {
  using enum MetricType;
  w.family("pulsar_topics_count", kGauge, "Number of topics in the namespace");
  w.family("pulsar_subscriptions_count", kGauge, "Number of subscriptions");
  w.family("pulsar_producers_count", kGauge, "Number of connected producers");
  w.family("pulsar_consumers_count", kGauge, "Number of connected consumers");
  w.family("pulsar_rate_in", kGauge, "Messages published per second");
  w.family("pulsar_rate_out", kGauge, "Messages dispatched per second");
  w.family("pulsar_throughput_in", kGauge, "Bytes published per second");
  w.family("pulsar_throughput_out", kGauge, "Bytes dispatched per second");
  w.family("pulsar_storage_size", kGauge, "Bytes stored");
  w.family("pulsar_msg_backlog", kGauge, "Entries not yet acknowledged, summed over subscriptions");
  w.family("pulsar_storage_backlog_size", kGauge,
           "Bytes not yet acknowledged by the slowest subscription (estimate)");
  w.family("pulsar_storage_backlog_quota_limit", kGauge,
           "The destination_storage backlog quota in bytes (-1: none)");
  w.family("pulsar_storage_backlog_quota_limit_time", kGauge,
           "The message_age backlog quota in seconds (-1: none)");
  w.family("pulsar_storage_backlog_age_seconds", kGauge,
           "Age of the oldest unacknowledged message, as the last backlog quota check read it");
  w.family("pulsar_storage_backlog_quota_exceeded_evictions_total", kCounter,
           "Times the backlog was evicted because it exceeded its quota, by quota_type");
  w.family("pulsar_in_messages_total", kCounter, "Messages published");
  w.family("pulsar_in_bytes_total", kCounter, "Bytes published");
  w.family("pulsar_out_messages_total", kCounter, "Messages dispatched");
  w.family("pulsar_out_bytes_total", kCounter, "Bytes dispatched");
  w.family("pulsar_subscription_back_log", kGauge, "Entries in the subscription's backlog");
  w.family("pulsar_subscription_back_log_no_delayed", kGauge,
           "Entries in the subscription's backlog not held for delayed delivery");
  w.family("pulsar_subscription_delayed", kGauge, "Entries held back for delayed delivery");
  w.family("pulsar_delayed_message_index_size_bytes", kGauge,
           "Memory of the subscription's delayed-delivery tracker");
  w.family("pulsar_subscription_msg_rate_out", kGauge, "Messages dispatched per second");
  w.family("pulsar_subscription_msg_throughput_out", kGauge, "Bytes dispatched per second");
  w.family("pulsar_subscription_unacked_messages", kGauge, "Messages delivered and not acked");
  w.family("pulsar_subscription_blocked_on_unacked_messages", kGauge,
           "1 when maxUnackedMessagesPerSubscription blocks dispatch");
  w.family("pulsar_subscription_msg_rate_redeliver", kGauge, "Messages redelivered per second");
  w.family("pulsar_subscription_consumers_count", kGauge, "Consumers of the subscription");
  w.family("pulsar_subscription_msg_rate_expired", kGauge,
           "Messages expired per second (message TTL, expire-messages)");
  w.family("pulsar_subscription_total_msg_expired", kCounter, "Messages expired");
  w.family("pulsar_consumer_msg_rate_out", kGauge, "Messages dispatched per second");
  w.family("pulsar_consumer_msg_throughput_out", kGauge, "Bytes dispatched per second");
  w.family("pulsar_consumer_unacked_messages", kGauge, "Messages delivered and not acked");
  w.family("pulsar_consumer_available_permits", kGauge, "Permits the consumer has left");
  w.family("pulsar_consumer_blocked_on_unacked_messages", kGauge,
           "1 when maxUnackedMessagesPerConsumer blocks the consumer");
  w.family("pulsar_producer_msg_rate_in", kGauge, "Messages published per second");
  w.family("pulsar_producer_msg_throughput_in", kGauge, "Bytes published per second");
}

void writeAggregate(PrometheusWriter& w, const Labels& l, const Aggregate& a, bool withTopics) {
  if (withTopics) w.sample("pulsar_topics_count", l, a.topics);
  w.sample("pulsar_subscriptions_count", l, a.subscriptions);
  w.sample("pulsar_producers_count", l, a.producers);
  w.sample("pulsar_consumers_count", l, a.consumers);
  w.sample("pulsar_rate_in", l, a.rateIn);
  w.sample("pulsar_rate_out", l, a.rateOut);
  w.sample("pulsar_throughput_in", l, a.throughputIn);
  w.sample("pulsar_throughput_out", l, a.throughputOut);
  w.sample("pulsar_storage_size", l, a.storageSize);
  w.sample("pulsar_msg_backlog", l, a.msgBacklog);
  w.sample("pulsar_storage_backlog_size", l, a.backlogSize);
  w.sample("pulsar_storage_backlog_quota_limit", l, a.quotaLimit);
  w.sample("pulsar_storage_backlog_quota_limit_time", l, a.quotaLimitTime);
  w.sample("pulsar_storage_backlog_age_seconds", l, a.backlogAge);
  Labels size = l;
  size.emplace_back("quota_type", "size");
  w.sample("pulsar_storage_backlog_quota_exceeded_evictions_total", size, a.sizeEvictions);
  Labels time = l;
  time.emplace_back("quota_type", "time");
  w.sample("pulsar_storage_backlog_quota_exceeded_evictions_total", time, a.timeEvictions);
  w.sample("pulsar_in_messages_total", l, a.inMsgs);
  w.sample("pulsar_in_bytes_total", l, a.inBytes);
  w.sample("pulsar_out_messages_total", l, a.outMsgs);
  w.sample("pulsar_out_bytes_total", l, a.outBytes);
}

void writeSubscriptions(PrometheusWriter& w, const Labels& topicLabels, const TopicSnapshot& t,
                        const MetricsOptions& o) {
  for (const auto& s : t.subscriptions) {
    Labels l = topicLabels;
    l.emplace_back("subscription", s.name);
    w.sample("pulsar_subscription_back_log", l, static_cast<double>(s.msgBacklog));
    w.sample("pulsar_subscription_back_log_no_delayed", l,
             static_cast<double>(s.msgBacklog - s.msgDelayed));
    w.sample("pulsar_subscription_delayed", l, static_cast<double>(s.msgDelayed));
    w.sample("pulsar_delayed_message_index_size_bytes", l,
             static_cast<double>(s.delayedMessageIndexSizeInBytes));
    w.sample("pulsar_subscription_msg_rate_out", l, s.rateOut.msgRate);
    w.sample("pulsar_subscription_msg_throughput_out", l, s.rateOut.byteRate);
    w.sample("pulsar_subscription_unacked_messages", l, static_cast<double>(s.unackedMessages));
    w.sample("pulsar_subscription_blocked_on_unacked_messages", l, s.blockedOnUnackedMsgs ? 1 : 0);
    w.sample("pulsar_subscription_msg_rate_redeliver", l, s.msgRateRedeliver);
    w.sample("pulsar_subscription_consumers_count", l, static_cast<double>(s.consumers.size()));
    w.sample("pulsar_subscription_msg_rate_expired", l, s.msgRateExpired);
    w.sample("pulsar_subscription_total_msg_expired", l, static_cast<double>(s.totalMsgExpired));
    if (!o.consumerLevel) continue;
    for (const auto& c : s.consumers) {
      Labels cl = l;
      cl.emplace_back("consumer_name", c.consumerName);
      cl.emplace_back("consumer_id", std::to_string(c.consumerId));
      w.sample("pulsar_consumer_msg_rate_out", cl, c.rateOut.msgRate);
      w.sample("pulsar_consumer_msg_throughput_out", cl, c.rateOut.byteRate);
      w.sample("pulsar_consumer_unacked_messages", cl, static_cast<double>(c.unackedMessages));
      w.sample("pulsar_consumer_available_permits", cl, static_cast<double>(c.availablePermits));
      w.sample("pulsar_consumer_blocked_on_unacked_messages", cl,
               c.blockedConsumerOnUnackedMsgs ? 1 : 0);
    }
  }
}

// Broker-wide counts of what maxUnackedMessagesPerConsumer/PerSubscription hold back now (Pulsar
// has the per-subscription and per-consumer 0/1 gauges only; a count needs no consumer labels).
void writeUnackedLimitCounts(PrometheusWriter& w, const std::vector<TopicSnapshot>& topics,
                             const MetricsOptions& o) {
  double consumers = 0, subscriptions = 0;
  for (const auto& t : topics) {
    for (const auto& s : t.subscriptions) {
      if (s.blockedOnUnackedMsgs) subscriptions += 1;
      for (const auto& c : s.consumers) {
        if (c.blockedConsumerOnUnackedMsgs) consumers += 1;
      }
    }
  }
  using enum MetricType;
  w.family("magnetar_consumers_blocked_on_unacked_messages", kGauge,
           "Consumers not dispatched to because maxUnackedMessagesPerConsumer is reached");
  w.family("magnetar_subscriptions_blocked_on_unacked_messages", kGauge,
           "Subscriptions not dispatching because maxUnackedMessagesPerSubscription is reached");
  Labels l{{"cluster", o.cluster}};
  w.sample("magnetar_consumers_blocked_on_unacked_messages", l, consumers);
  w.sample("magnetar_subscriptions_blocked_on_unacked_messages", l, subscriptions);
}

// The broker's backlog quota evictions, by quota type (Pulsar's broker-level counter).
void writeBrokerEvictions(PrometheusWriter& w, const std::vector<TopicSnapshot>& topics,
                          const MetricsOptions& o) {
  double size = 0, time = 0;
  for (const auto& t : topics) {
    size += static_cast<double>(t.sizeBacklogEvictions);
    time += static_cast<double>(t.timeBacklogEvictions);
  }
  const char* name = "pulsar_broker_storage_backlog_quota_exceeded_evictions_total";
  w.family(name, MetricType::kCounter,
           "Times a backlog was evicted because it exceeded its quota, by quota_type");
  w.sample(name, {{"cluster", o.cluster}, {"quota_type", "size"}}, size);
  w.sample(name, {{"cluster", o.cluster}, {"quota_type", "time"}}, time);
}

}  // namespace

void writeTopicMetrics(PrometheusWriter& w, const std::vector<TopicSnapshot>& topics,
                       const MetricsOptions& o) {
  declareFamilies(w);
  writeUnackedLimitCounts(w, topics, o);
  writeBrokerEvictions(w, topics, o);
  std::map<std::string, Aggregate> byNamespace;
  for (const auto& t : topics) byNamespace[t.namespaceName].add(t);
  for (const auto& [ns, agg] : byNamespace) {
    Labels l{{"cluster", o.cluster}, {"namespace", ns}};
    if (o.topicLevel) {
      w.sample("pulsar_topics_count", l, agg.topics);
    } else {
      writeAggregate(w, l, agg, true);
    }
  }
  if (!o.topicLevel) return;
  for (const auto& t : topics) {
    Labels l{{"cluster", o.cluster}, {"namespace", t.namespaceName}, {"topic", t.name}};
    Aggregate one;
    one.add(t);
    writeAggregate(w, l, one, false);
    writeSubscriptions(w, l, t, o);
    if (!o.producerLevel) continue;
    for (const auto& p : t.publishers) {
      Labels pl = l;
      pl.emplace_back("producer_name", p.producerName);
      pl.emplace_back("producer_id", std::to_string(p.producerId));
      w.sample("pulsar_producer_msg_rate_in", pl, p.rateIn.msgRate);
      w.sample("pulsar_producer_msg_throughput_in", pl, p.rateIn.byteRate);
    }
  }
}

void writeThreadCpuMetrics(PrometheusWriter& w, const std::map<std::string, double>& byThread) {
  w.family("magnetar_thread_cpu_utilization", MetricType::kGauge,
           "CPU used by the thread over the last scrape interval (1 = one core); threads "
           "sharing a name are summed");
  for (const auto& [name, u] : byThread) {
    w.sample("magnetar_thread_cpu_utilization", {{"thread", name}}, u);
  }
}

void writeLoopMetrics(PrometheusWriter& w, const std::string& kind, net::EventLoopGroup& group) {
  w.family("magnetar_handover_tasks_total", MetricType::kCounter,
           "Tasks handed over to the thread from other threads");
  w.family("magnetar_handover_wakeups_total", MetricType::kCounter,
           "Wake-ups of the thread for handed-over tasks (coalesced: at most one pending)");
  w.family("magnetar_handover_passes_total", MetricType::kCounter,
           "Passes of the thread over its hand-over inbox");
  w.family("magnetar_handover_held_tasks_total", MetricType::kCounter,
           "Tasks handed over to the thread at the end of another thread's pass, batched");
  w.family("magnetar_handover_held_batches_total", MetricType::kCounter,
           "End-of-pass hand-overs to the thread (one lock, one wake-up at most each)");
  w.family("magnetar_writev_calls_total", MetricType::kCounter,
           "writev() calls of the connections served by the thread");
  for (int i = 0; i < group.size(); ++i) {
    const net::LoopStats& s = group.at(i).stats();
    Labels l{{"kind", kind}, {"thread", group.at(i).name()}};
    w.sample("magnetar_handover_tasks_total", l, static_cast<double>(s.tasks.load()));
    w.sample("magnetar_handover_wakeups_total", l, static_cast<double>(s.wakeups.load()));
    w.sample("magnetar_handover_passes_total", l, static_cast<double>(s.passes.load()));
    w.sample("magnetar_handover_held_tasks_total", l, static_cast<double>(s.heldTasks.load()));
    w.sample("magnetar_handover_held_batches_total", l,
             static_cast<double>(s.heldHandovers.load()));
    if (kind == "pulsar-io") {
      w.sample("magnetar_writev_calls_total", l, static_cast<double>(s.writevCalls.load()));
    }
  }
}

void writeStorageMetrics(PrometheusWriter& w, const std::string& cluster,
                         const storage::StorageStats& s) {
  w.family("pulsar_ml_cache_used_size", MetricType::kGauge,
           "Bytes of entries the entry cache holds (managedLedgerCacheSizeMB is its limit)");
  w.sample("pulsar_ml_cache_used_size", {{"cluster", cluster}}, static_cast<double>(s.cacheBytes));
  w.family("magnetar_storage_disk_reads_total", MetricType::kCounter,
           "Journal reads (one pread each) for reads the entry cache did not answer");
  w.sample("magnetar_storage_disk_reads_total", {{"cluster", cluster}},
           static_cast<double>(s.diskReads));
  const Labels l{{"cluster", cluster}};
  auto one = [&](const char* name, MetricType type, const char* help, double v) {
    w.family(name, type, help);
    w.sample(name, l, v);
  };
  one("magnetar_storage_ledgers_deleted_total", MetricType::kCounter,
      "Ledgers deleted by retention trimming, truncate and topic deletes",
      static_cast<double>(s.ledgersDeleted));
  one("magnetar_storage_segments_deleted_total", MetricType::kCounter,
      "Journal segment files deleted (no live entry left)", static_cast<double>(s.segmentsDeleted));
  one("magnetar_storage_segments_compacted_total", MetricType::kCounter,
      "Journal segments compacted (live entries copied forward, minor/majorCompactionThreshold)",
      static_cast<double>(s.segmentsCompacted));
  one("magnetar_storage_compacted_bytes_total", MetricType::kCounter,
      "Bytes of live journal records copied by compaction", static_cast<double>(s.compactedBytes));
  one("magnetar_storage_journal_write_errors_total", MetricType::kCounter,
      "Journal group writes that failed (ENOSPC, EIO); their adds failed with PersistenceError",
      static_cast<double>(s.journalWriteErrors));
  one("magnetar_storage_metadata_write_errors_total", MetricType::kCounter,
      "Metadata store (RocksDB) writes that failed", static_cast<double>(s.metadataWriteErrors));
  one("magnetar_storage_publish_refused_total", MetricType::kCounter,
      "Adds refused at once: journal disk full, or usage above diskUsageThreshold",
      static_cast<double>(s.publishesRefused));
  one("magnetar_storage_writable", MetricType::kGauge,
      "1 while publishes are accepted, 0 while the disk is full or above diskUsageThreshold",
      s.writable ? 1 : 0);
  one("magnetar_storage_disk_usage_ratio", MetricType::kGauge,
      "Fraction in use of the fuller of the journal's and the metadata's file systems",
      s.diskUsage);
  one("magnetar_storage_index_runs", MetricType::kGauge,
      "Journal records of live ledgers located in memory (about 160 bytes each)",
      static_cast<double>(s.indexRuns));
}

void writePublishThrottleMetrics(PrometheusWriter& w, const broker::BrokerService& service) {
  w.family("magnetar_io_thread_publish_pending_bytes", MetricType::kGauge,
           "Bytes of publishes read by the I/O thread and not yet persisted "
           "(maxMessagePublishBufferSizeInMB / numIOThreads is its share)");
  w.family("magnetar_io_thread_read_paused_total", MetricType::kCounter,
           "Times the I/O thread stopped reading because its publish buffer share was full");
  w.family("magnetar_io_thread_read_paused_seconds_total", MetricType::kCounter,
           "Seconds the I/O thread spent with reads paused (completed pauses)");
  for (const auto& [thread, s] : service.publishThrottleStats()) {
    Labels l{{"thread", thread}};
    w.sample("magnetar_io_thread_publish_pending_bytes", l, static_cast<double>(s.pendingBytes));
    w.sample("magnetar_io_thread_read_paused_total", l, static_cast<double>(s.pausedTotal));
    w.sample("magnetar_io_thread_read_paused_seconds_total", l, s.pausedSeconds);
  }
  const auto& a = service.frameAdmission();
  w.family("magnetar_publish_buffer_pending_bytes", MetricType::kGauge,
           "Bytes charged to maxMessagePublishBufferSizeInMB by all I/O threads (publishes not "
           "yet persisted and frames being read)");
  w.sample("magnetar_publish_buffer_pending_bytes", {}, static_cast<double>(a.pendingBytes()));
  w.family("magnetar_publish_frames_waiting", MetricType::kGauge,
           "Connections holding a frame header until the publish buffer has room for the frame");
  w.sample("magnetar_publish_frames_waiting", {}, static_cast<double>(a.waiting()));
  w.family("magnetar_publish_frames_waited_total", MetricType::kCounter,
           "Frames that waited at their header for room in the publish buffer");
  w.sample("magnetar_publish_frames_waited_total", {}, static_cast<double>(a.waitedTotal()));
}

void writeProtocolErrorMetrics(PrometheusWriter& w) {
  using broker::CnxErrorStats;
  using broker::ProtocolError;
  w.family("magnetar_protocol_errors_total", MetricType::kCounter,
           "Bad input from binary-protocol clients, by kind");
  for (size_t i = 0; i < static_cast<size_t>(ProtocolError::kCount); ++i) {
    auto e = static_cast<ProtocolError>(i);
    w.sample("magnetar_protocol_errors_total", {{"error", CnxErrorStats::label(e)}},
             static_cast<double>(CnxErrorStats::get(e)));
  }
  w.family("magnetar_http_bad_requests_total", MetricType::kCounter,
           "HTTP requests refused before routing or answered 400, by kind");
  for (size_t i = 0; i < static_cast<size_t>(HttpBadRequest::kCount); ++i) {
    auto e = static_cast<HttpBadRequest>(i);
    w.sample("magnetar_http_bad_requests_total", {{"error", HttpServerStats::label(e)}},
             static_cast<double>(HttpServerStats::get(e)));
  }
  w.family("magnetar_tls_errors_total", MetricType::kCounter,
           "TLS failures on brokerServicePortTls and webServicePortTls, by kind");
  for (size_t i = 0; i < static_cast<size_t>(net::TlsError::kCount); ++i) {
    auto e = static_cast<net::TlsError>(i);
    w.sample("magnetar_tls_errors_total", {{"error", net::TlsErrorStats::label(e)}},
             static_cast<double>(net::TlsErrorStats::get(e)));
  }
  writeAuthMetrics(w);
}

void writeAuthMetrics(PrometheusWriter& w) {
  using broker::AuthenticationMetrics;
  w.family("pulsar_authentication_success_total", MetricType::kCounter,
           "Pulsar authentication success");
  for (const auto& [k, n] : AuthenticationMetrics::successes()) {
    w.sample("pulsar_authentication_success_total",
             {{"provider_name", k.provider}, {"auth_method", k.method}}, static_cast<double>(n));
  }
  w.family("pulsar_authentication_failures_total", MetricType::kCounter,
           "Pulsar authentication failures");
  for (const auto& [k, n] : AuthenticationMetrics::failures()) {
    w.sample("pulsar_authentication_failures_total",
             {{"provider_name", k.provider}, {"auth_method", k.method}, {"reason", k.reason}},
             static_cast<double>(n));
  }
  w.family("pulsar_expired_token_total", MetricType::kCounter, "Pulsar expired token");
  w.sample("pulsar_expired_token_total", {}, static_cast<double>(AuthenticationMetrics::expired()));
  w.family("magnetar_authorization_denied_total", MetricType::kCounter,
           "Requests refused for lack of permission (binary protocol and HTTP), by operation");
  for (size_t i = 0; i < broker::AuthorizationStats::denied.size(); ++i) {
    w.sample("magnetar_authorization_denied_total",
             {{"operation", broker::AuthorizationStats::label(i)}},
             static_cast<double>(broker::AuthorizationStats::denied[i].load()));
  }
}

}  // namespace magnetar::admin
