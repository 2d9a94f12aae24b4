#include "admin/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "admin/http_server.h"
#include "broker/service/server_cnx.h"
#include "mqtt/mqtt_stats.h"

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
  double txnActive = 0, txnCommitted = 0, txnAborted = 0;

  void add(const TopicSnapshot& t) {
    topics += 1;
    // A remote cluster's replicator producer counts as replication in (Pulsar's aggregator).
    producers += static_cast<double>(
        std::count_if(t.publishers.begin(), t.publishers.end(),
                      [](const auto& p) { return !broker::isReplicatorName(p.producerName); }));
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
    txnActive += static_cast<double>(t.txnOngoing);
    txnCommitted += static_cast<double>(t.txnCommitted);
    txnAborted += static_cast<double>(t.txnAborted);
  }
};

using enum MetricType;

// A metric family with the value of its sample for one T (T's labels added by the caller).
template <typename T>
struct Metric {
  const char* name;
  MetricType type;
  const char* help;
  double (*value)(const T&);
};

template <typename T, size_t N>
void declare(PrometheusWriter& w, const Metric<T> (&table)[N]) {
  for (const Metric<T>& m : table) w.family(m.name, m.type, m.help);
}

template <typename T, size_t N>
void sampleAll(PrometheusWriter& w, const Labels& l, const Metric<T> (&table)[N], const T& v) {
  for (const Metric<T>& m : table) w.sample(m.name, l, m.value(v));
}

template <typename N>
double num(N n) {
  return static_cast<double>(n);
}

// Per namespace, or per topic without pulsar_topics_count (declared first, sampled apart).
// Samples with the same name are told apart by the label quota_type (Pulsar's evictions).
struct AggregateMetric {
  const char* name;
  MetricType type;
  const char* help;
  double Aggregate::*value;
  const char* quotaType = nullptr;
};
constexpr const char* kEvictionsHelp =
    "Times the backlog was evicted because it exceeded its quota, by quota_type";
const AggregateMetric kAggregateMetrics[] = {
    {"pulsar_subscriptions_count", kGauge, "Number of subscriptions", &Aggregate::subscriptions},
    {"pulsar_producers_count", kGauge, "Number of connected producers", &Aggregate::producers},
    {"pulsar_consumers_count", kGauge, "Number of connected consumers", &Aggregate::consumers},
    {"pulsar_rate_in", kGauge, "Messages published per second", &Aggregate::rateIn},
    {"pulsar_rate_out", kGauge, "Messages dispatched per second", &Aggregate::rateOut},
    {"pulsar_throughput_in", kGauge, "Bytes published per second", &Aggregate::throughputIn},
    {"pulsar_throughput_out", kGauge, "Bytes dispatched per second", &Aggregate::throughputOut},
    {"pulsar_storage_size", kGauge, "Bytes stored", &Aggregate::storageSize},
    {"pulsar_msg_backlog", kGauge, "Entries not yet acknowledged, summed over subscriptions",
     &Aggregate::msgBacklog},
    {"pulsar_storage_backlog_size", kGauge,
     "Bytes not yet acknowledged by the slowest subscription (estimate)", &Aggregate::backlogSize},
    {"pulsar_storage_backlog_quota_limit", kGauge,
     "The destination_storage backlog quota in bytes (-1: none)", &Aggregate::quotaLimit},
    {"pulsar_storage_backlog_quota_limit_time", kGauge,
     "The message_age backlog quota in seconds (-1: none)", &Aggregate::quotaLimitTime},
    {"pulsar_storage_backlog_age_seconds", kGauge,
     "Age of the oldest unacknowledged message, as the last backlog quota check read it",
     &Aggregate::backlogAge},
    {"pulsar_storage_backlog_quota_exceeded_evictions_total", kCounter, kEvictionsHelp,
     &Aggregate::sizeEvictions, "size"},
    {"pulsar_storage_backlog_quota_exceeded_evictions_total", kCounter, kEvictionsHelp,
     &Aggregate::timeEvictions, "time"},
    {"pulsar_in_messages_total", kCounter, "Messages published", &Aggregate::inMsgs},
    {"pulsar_in_bytes_total", kCounter, "Bytes published", &Aggregate::inBytes},
    {"pulsar_out_messages_total", kCounter, "Messages dispatched", &Aggregate::outMsgs},
    {"pulsar_out_bytes_total", kCounter, "Bytes dispatched", &Aggregate::outBytes},
    // Pulsar's transaction buffer counts (gauges there too), for every topic.
    {"pulsar_txn_tb_active_total", kGauge, "Ongoing transactions in the transaction buffer",
     &Aggregate::txnActive},
    {"pulsar_txn_tb_committed_total", kGauge, "Transactions committed since the topic loaded",
     &Aggregate::txnCommitted},
    {"pulsar_txn_tb_aborted_total", kGauge, "Transactions aborted since the topic loaded",
     &Aggregate::txnAborted},
};

using broker::ConsumerSnapshot;
using broker::PublisherSnapshot;
using broker::SubscriptionSnapshot;
using Sub = SubscriptionSnapshot;
const Metric<Sub> kSubscriptionMetrics[] = {
    {"pulsar_subscription_back_log", kGauge, "Entries in the subscription's backlog",
     [](const Sub& s) { return num(s.msgBacklog); }},
    {"pulsar_subscription_back_log_no_delayed", kGauge,
     "Entries in the subscription's backlog not held for delayed delivery",
     [](const Sub& s) { return num(s.msgBacklog - s.msgDelayed); }},
    {"pulsar_subscription_delayed", kGauge, "Entries held back for delayed delivery",
     [](const Sub& s) { return num(s.msgDelayed); }},
    {"pulsar_delayed_message_index_size_bytes", kGauge,
     "Memory of the subscription's delayed-delivery tracker",
     [](const Sub& s) { return num(s.delayedMessageIndexSizeInBytes); }},
    {"pulsar_subscription_msg_rate_out", kGauge, "Messages dispatched per second",
     [](const Sub& s) { return s.rateOut.msgRate; }},
    {"pulsar_subscription_msg_throughput_out", kGauge, "Bytes dispatched per second",
     [](const Sub& s) { return s.rateOut.byteRate; }},
    {"pulsar_subscription_unacked_messages", kGauge, "Messages delivered and not acked",
     [](const Sub& s) { return num(s.unackedMessages); }},
    {"pulsar_subscription_blocked_on_unacked_messages", kGauge,
     "1 when maxUnackedMessagesPerSubscription blocks dispatch",
     [](const Sub& s) { return s.blockedOnUnackedMsgs ? 1.0 : 0.0; }},
    {"pulsar_subscription_msg_rate_redeliver", kGauge, "Messages redelivered per second",
     [](const Sub& s) { return s.msgRateRedeliver; }},
    {"pulsar_subscription_msg_drop_rate", kGauge,
     "Messages a non-persistent subscription dropped per second (no consumer could take them)",
     [](const Sub& s) { return s.msgDropRate; }},
    {"pulsar_subscription_consumers_count", kGauge, "Consumers of the subscription",
     [](const Sub& s) { return num(s.consumers.size()); }},
    {"pulsar_subscription_msg_rate_expired", kGauge,
     "Messages expired per second (message TTL, expire-messages)",
     [](const Sub& s) { return s.msgRateExpired; }},
    {"pulsar_subscription_total_msg_expired", kCounter, "Messages expired",
     [](const Sub& s) { return num(s.totalMsgExpired); }},
};

const Metric<ConsumerSnapshot> kConsumerMetrics[] = {
    {"pulsar_consumer_msg_rate_out", kGauge, "Messages dispatched per second",
     [](const ConsumerSnapshot& c) { return c.rateOut.msgRate; }},
    {"pulsar_consumer_msg_throughput_out", kGauge, "Bytes dispatched per second",
     [](const ConsumerSnapshot& c) { return c.rateOut.byteRate; }},
    {"pulsar_consumer_unacked_messages", kGauge, "Messages delivered and not acked",
     [](const ConsumerSnapshot& c) { return num(c.unackedMessages); }},
    {"pulsar_consumer_available_permits", kGauge, "Permits the consumer has left",
     [](const ConsumerSnapshot& c) { return num(c.availablePermits); }},
    {"pulsar_consumer_blocked_on_unacked_messages", kGauge,
     "1 when maxUnackedMessagesPerConsumer blocks the consumer",
     [](const ConsumerSnapshot& c) { return c.blockedConsumerOnUnackedMsgs ? 1.0 : 0.0; }},
};

const Metric<PublisherSnapshot> kProducerMetrics[] = {
    {"pulsar_producer_msg_rate_in", kGauge, "Messages published per second",
     [](const PublisherSnapshot& p) { return p.rateIn.msgRate; }},
    {"pulsar_producer_msg_throughput_in", kGauge, "Bytes published per second",
     [](const PublisherSnapshot& p) { return p.rateIn.byteRate; }},
};

// Pulsar's AggregatedReplicationStats: per topic and remote cluster, or summed per namespace and
// remote cluster (the delay summed too, as Pulsar's aggregator does).
struct Replication {
  double rateIn = 0, rateOut = 0, throughputIn = 0, throughputOut = 0, backlog = 0;
  double connected = 0, disconnected = 0, rateExpired = 0, delay = 0;

  // r and the remote's replicator producer on the topic (the inbound side), if any.
  void add(const broker::ReplicatorStats& r, const broker::PublisherSnapshot* in) {
    if (in) {
      rateIn += in->rateIn.msgRate;
      throughputIn += in->rateIn.byteRate;
    }
    rateOut += r.msgRateOut;
    throughputOut += r.msgThroughputOut;
    backlog += num(r.replicationBacklog);
    connected += r.connected ? 1 : 0;
    disconnected += r.connected ? 0 : 1;
    delay += r.replicationDelayInSeconds;
  }
};
using Repl = Replication;

// Each remote cluster's replication of t: its replicator and the remote's producer.
void addReplication(std::map<std::string, Replication>& byRemote, const TopicSnapshot& t) {
  for (const auto& [cluster, r] : t.replication) {
    const std::string& remote = cluster;  // clang 14 cannot capture a structured binding
    auto in = std::find_if(t.publishers.begin(), t.publishers.end(), [&remote](const auto& p) {
      return broker::replicatorProducerCluster(p.producerName) == remote;
    });
    byRemote[remote].add(r, in == t.publishers.end() ? nullptr : &*in);
  }
}
const Metric<Repl> kReplicationMetrics[] = {
    {"pulsar_replication_rate_in", kGauge, "Messages per second from the remote cluster",
     [](const Repl& r) { return r.rateIn; }},
    {"pulsar_replication_rate_out", kGauge, "Messages per second sent to the remote cluster",
     [](const Repl& r) { return r.rateOut; }},
    {"pulsar_replication_throughput_in", kGauge, "Bytes per second from the remote cluster",
     [](const Repl& r) { return r.throughputIn; }},
    {"pulsar_replication_throughput_out", kGauge, "Bytes per second sent to the remote cluster",
     [](const Repl& r) { return r.throughputOut; }},
    {"pulsar_replication_backlog", kGauge, "Entries not yet replicated to the remote cluster",
     [](const Repl& r) { return r.backlog; }},
    {"pulsar_replication_connected_count", kGauge, "Replicators connected to the remote cluster",
     [](const Repl& r) { return r.connected; }},
    {"pulsar_replication_disconnected_count", kGauge,
     "Replicators not connected to the remote cluster",
     [](const Repl& r) { return r.disconnected; }},
    {"pulsar_replication_rate_expired", kGauge,
     "Messages per second expired before replication (not counted: 0)",
     [](const Repl& r) { return r.rateExpired; }},
    {"pulsar_replication_delay_in_seconds", kGauge,
     "Age of the oldest message sent and not yet acknowledged by the remote cluster",
     [](const Repl& r) { return r.delay; }},
};

// The replication samples of one topic or namespace (labels l) per remote cluster.
void writeReplication(PrometheusWriter& w, const Labels& l,
                      const std::map<std::string, Replication>& byRemote) {
  for (const auto& [remote, r] : byRemote) {
    Labels withRemote = l;
    withRemote.emplace_back("remote_cluster", remote);
    sampleAll(w, withRemote, kReplicationMetrics, r);
  }
}

void declareFamilies(PrometheusWriter& w) {
  w.family("pulsar_topics_count", kGauge, "Number of topics in the namespace");
  for (const AggregateMetric& m : kAggregateMetrics) w.family(m.name, m.type, m.help);
  declare(w, kSubscriptionMetrics);
  declare(w, kConsumerMetrics);
  declare(w, kProducerMetrics);
  declare(w, kReplicationMetrics);
}

void writeAggregate(PrometheusWriter& w, const Labels& l, const Aggregate& a) {
  for (const AggregateMetric& m : kAggregateMetrics) {
    if (m.quotaType == nullptr) {
      w.sample(m.name, l, a.*m.value);
      continue;
    }
    Labels withType = l;
    withType.emplace_back("quota_type", m.quotaType);
    w.sample(m.name, withType, a.*m.value);
  }
}

// l plus a producer's or consumer's labels: <kind>_name and <kind>_id, as Pulsar's.
Labels clientLabels(Labels l, const char* kind, const std::string& name, uint64_t id) {
  l.emplace_back(std::string(kind) + "_name", name);
  l.emplace_back(std::string(kind) + "_id", std::to_string(id));
  return l;
}

void writeSubscriptions(PrometheusWriter& w, const Labels& topicLabels, const TopicSnapshot& t,
                        const MetricsOptions& o) {
  for (const auto& s : t.subscriptions) {
    Labels l = topicLabels;
    l.emplace_back("subscription", s.name);
    sampleAll(w, l, kSubscriptionMetrics, s);
    if (!o.consumerLevel) continue;
    for (const auto& c : s.consumers) {
      sampleAll(w, clientLabels(l, "consumer", c.consumerName, c.consumerId), kConsumerMetrics, c);
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

// Pulsar's PendingAckHandleStatsImpl metrics (Prometheus client families: counters printed with
// _total, a summary in microseconds over a 10-minute window).
constexpr const char* kTpCommitted = "pulsar_txn_tp_committed_count";
constexpr const char* kTpAborted = "pulsar_txn_tp_aborted_count";
constexpr const char* kTpLatency = "pulsar_txn_tp_commit_latency";
constexpr std::pair<const char*, double> kTpQuantiles[] = {
    {"0.5", 0.5}, {"0.9", 0.9}, {"0.99", 0.99}, {"0.999", 0.999}};

void addPendingAck(broker::PendingAckMetrics& into, const broker::PendingAckMetrics& m) {
  into.commitSucceeded += m.commitSucceeded;
  into.commitFailed += m.commitFailed;
  into.abortSucceeded += m.abortSucceeded;
  into.abortFailed += m.abortFailed;
  into.latencyCount += m.latencyCount;
  into.latencySumMicros += m.latencySumMicros;
  into.recentLatencyMicros.insert(into.recentLatencyMicros.end(), m.recentLatencyMicros.begin(),
                                  m.recentLatencyMicros.end());
}

// A series appears once counted, as Pulsar's labelled children; quantiles are NaN when no commit
// fell in the window (as Pulsar's Summary).
void writePendingAckSeries(PrometheusWriter& w, const Labels& l, broker::PendingAckMetrics m) {
  auto counter = [&](const char* family, uint64_t n, const char* status) {
    if (n == 0) return;
    Labels withStatus = l;
    withStatus.emplace_back("status", status);
    w.sampleIn(family, std::string(family) + "_total", withStatus, static_cast<double>(n));
  };
  counter(kTpCommitted, m.commitSucceeded, "succeed");
  counter(kTpCommitted, m.commitFailed, "failed");
  counter(kTpAborted, m.abortSucceeded, "succeed");
  counter(kTpAborted, m.abortFailed, "failed");
  if (m.latencyCount == 0) return;
  std::vector<double>& v = m.recentLatencyMicros;
  std::sort(v.begin(), v.end());
  for (const auto& [label, q] : kTpQuantiles) {
    Labels withQuantile = l;
    withQuantile.emplace_back("quantile", label);
    double value = std::nan("");
    if (!v.empty()) {
      const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
      value = v[std::min(v.size(), std::max<size_t>(rank, 1)) - 1];
    }
    w.sampleIn(kTpLatency, kTpLatency, withQuantile, value);
  }
  const std::string name = kTpLatency;
  w.sampleIn(name, name + "_count", l, static_cast<double>(m.latencyCount));
  w.sampleIn(name, name + "_sum", l, m.latencySumMicros);
}

// Per subscription (labels namespace, topic, subscription) with topic-level metrics, else per
// namespace, as Pulsar's exposeTopicLevelMetricsInPrometheus.
void writePendingAckMetrics(PrometheusWriter& w, const std::vector<TopicSnapshot>& topics,
                            const MetricsOptions& o) {
  w.family(kTpCommitted, kCounter, "Transaction commits on subscriptions' pending acks");
  w.family(kTpAborted, kCounter, "Transaction aborts on subscriptions' pending acks");
  w.family(kTpLatency, MetricType::kSummary,
           "Microseconds from a pending-ack commit's request to its end");
  std::map<std::string, broker::PendingAckMetrics> byNamespace;
  for (const auto& t : topics) {
    for (const auto& s : t.subscriptions) {
      if (!o.topicLevel) {
        addPendingAck(byNamespace[t.namespaceName], s.pendingAck);
        continue;
      }
      Labels l{{"cluster", o.cluster},
               {"namespace", t.namespaceName},
               {"topic", t.name},
               {"subscription", s.name}};
      writePendingAckSeries(w, l, s.pendingAck);
    }
  }
  for (const auto& [ns, m] : byNamespace) {
    writePendingAckSeries(w, {{"cluster", o.cluster}, {"namespace", ns}}, m);
  }
}

}  // namespace

void writeTopicMetrics(PrometheusWriter& w, const std::vector<TopicSnapshot>& topics,
                       const MetricsOptions& o) {
  declareFamilies(w);
  writeUnackedLimitCounts(w, topics, o);
  writeBrokerEvictions(w, topics, o);
  writePendingAckMetrics(w, topics, o);
  std::map<std::string, Aggregate> byNamespace;
  std::map<std::string, std::map<std::string, Replication>> replicationByNamespace;
  for (const auto& t : topics) {
    byNamespace[t.namespaceName].add(t);
    addReplication(replicationByNamespace[t.namespaceName], t);
  }
  for (const auto& [ns, agg] : byNamespace) {
    Labels l{{"cluster", o.cluster}, {"namespace", ns}};
    w.sample("pulsar_topics_count", l, agg.topics);
    if (o.topicLevel) continue;
    writeAggregate(w, l, agg);
    writeReplication(w, l, replicationByNamespace[ns]);
  }
  if (!o.topicLevel) return;
  for (const auto& t : topics) {
    Labels l{{"cluster", o.cluster}, {"namespace", t.namespaceName}, {"topic", t.name}};
    Aggregate one;
    one.add(t);
    writeAggregate(w, l, one);
    writeSubscriptions(w, l, t, o);
    std::map<std::string, Replication> byRemote;
    addReplication(byRemote, t);
    writeReplication(w, l, byRemote);
    if (!o.producerLevel) continue;
    for (const auto& p : t.publishers) {
      if (broker::isReplicatorName(p.producerName)) continue;
      sampleAll(w, clientLabels(l, "producer", p.producerName, p.producerId), kProducerMetrics, p);
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

namespace {

using storage::StorageStats;
const Metric<StorageStats> kStorageMetrics[] = {
    {"pulsar_ml_cache_used_size", kGauge,
     "Bytes of entries the entry cache holds (managedLedgerCacheSizeMB is its limit)",
     [](const StorageStats& s) { return num(s.cacheBytes); }},
    {"magnetar_storage_disk_reads_total", kCounter,
     "Journal reads (one pread each) for reads the entry cache did not answer",
     [](const StorageStats& s) { return num(s.diskReads); }},
    {"magnetar_storage_ledgers_deleted_total", kCounter,
     "Ledgers deleted by retention trimming, truncate and topic deletes",
     [](const StorageStats& s) { return num(s.ledgersDeleted); }},
    {"magnetar_storage_segments_deleted_total", kCounter,
     "Journal segment files deleted (no live entry left)",
     [](const StorageStats& s) { return num(s.segmentsDeleted); }},
    {"magnetar_storage_segments_compacted_total", kCounter,
     "Journal segments compacted (live entries copied forward, minor/majorCompactionThreshold)",
     [](const StorageStats& s) { return num(s.segmentsCompacted); }},
    {"magnetar_storage_compacted_bytes_total", kCounter,
     "Bytes of live journal records copied by compaction",
     [](const StorageStats& s) { return num(s.compactedBytes); }},
    {"magnetar_storage_journal_write_errors_total", kCounter,
     "Journal group writes that failed (ENOSPC, EIO); their adds failed with PersistenceError",
     [](const StorageStats& s) { return num(s.journalWriteErrors); }},
    {"magnetar_storage_metadata_write_errors_total", kCounter,
     "Metadata store (RocksDB) writes that failed",
     [](const StorageStats& s) { return num(s.metadataWriteErrors); }},
    {"magnetar_storage_publish_refused_total", kCounter,
     "Adds refused at once: journal disk full, or usage above diskUsageThreshold",
     [](const StorageStats& s) { return num(s.publishesRefused); }},
    {"magnetar_storage_writable", kGauge,
     "1 while publishes are accepted, 0 while the disk is full or above diskUsageThreshold",
     [](const StorageStats& s) { return s.writable ? 1.0 : 0.0; }},
    {"magnetar_storage_disk_usage_ratio", kGauge,
     "Fraction in use of the fuller of the journal's and the metadata's file systems",
     [](const StorageStats& s) { return s.diskUsage; }},
    {"magnetar_storage_index_runs", kGauge,
     "Journal records of live ledgers located in memory (about 160 bytes each)",
     [](const StorageStats& s) { return num(s.indexRuns); }},
};

// A counter family with one sample per value of the error enum E (labelled error=Stats::label).
template <typename E, typename Stats>
void writeErrorCounts(PrometheusWriter& w, const char* name, const char* help) {
  w.family(name, kCounter, help);
  for (size_t i = 0; i < static_cast<size_t>(E::kCount); ++i) {
    auto e = static_cast<E>(i);
    w.sample(name, {{"error", Stats::label(e)}}, num(Stats::get(e)));
  }
}

}  // namespace

void writeStorageMetrics(PrometheusWriter& w, const std::string& cluster, const StorageStats& s) {
  declare(w, kStorageMetrics);
  sampleAll(w, {{"cluster", cluster}}, kStorageMetrics, s);
}

void writeLoadBalancingMetrics(PrometheusWriter& w, const std::string& cluster,
                               const std::string& broker,
                               const broker::cluster::SystemResourceUsage& u) {
  const std::pair<const char*, const broker::cluster::ResourceUsage*> kGauges[] = {
      {"pulsar_lb_cpu_usage", &u.cpu},
      {"pulsar_lb_memory_usage", &u.memory},
      {"pulsar_lb_directMemory_usage", &u.directMemory},
      {"pulsar_lb_bandwidth_in_usage", &u.bandwidthIn},
      {"pulsar_lb_bandwidth_out_usage", &u.bandwidthOut}};
  Labels l{{"cluster", cluster}, {"broker", broker}, {"metric", "loadBalancing"}};
  for (const auto& [name, r] : kGauges) {
    w.family(name, MetricType::kGauge,
             "Load manager: usage of the resource in percent of its limit");
    w.sample(name, l, r->percentUsage());
  }
}

void writeBalanceMetrics(PrometheusWriter& w, const std::string& cluster,
                         const broker::cluster::LoadManager::BalanceCounters& c) {
  if (c.sheddingRan) {
    Labels l{{"cluster", cluster}, {"metric", "bundleUnloading"}};
    w.family("pulsar_lb_unload_broker_total", MetricType::kGauge,
             "Load manager: brokers a bundle was unloaded from, per shedding pass, in all");
    w.sample("pulsar_lb_unload_broker_total", l, static_cast<double>(c.unloadBrokers));
    w.family("pulsar_lb_unload_bundle_total", MetricType::kGauge,
             "Load manager: bundles unloaded by load shedding");
    w.sample("pulsar_lb_unload_bundle_total", l, static_cast<double>(c.unloadBundles));
  }
  if (c.splitRan) {
    w.family("pulsar_lb_bundles_split_total", MetricType::kGauge,
             "Load manager: bundles split automatically");
    w.sample("pulsar_lb_bundles_split_total", {{"cluster", cluster}, {"metric", "bundlesSplit"}},
             static_cast<double>(c.bundlesSplit));
  }
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
  writeErrorCounts<broker::ProtocolError, broker::CnxErrorStats>(
      w, "magnetar_protocol_errors_total", "Bad input from binary-protocol clients, by kind");
  writeErrorCounts<HttpBadRequest, HttpServerStats>(
      w, "magnetar_http_bad_requests_total",
      "HTTP requests refused before routing or answered 400, by kind");
  writeErrorCounts<net::TlsError, net::TlsErrorStats>(
      w, "magnetar_tls_errors_total",
      "TLS failures on brokerServicePortTls and webServicePortTls, by kind");
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

void writeMqttMetrics(PrometheusWriter& w, const std::string& cluster) {
  using mqtt::MqttStats;
  const std::vector<std::pair<std::string, std::string>> labels{{"cluster", cluster}};
  struct Row {
    const char* name;
    MetricType type;
    const char* help;
    double value;
  };
  const Row rows[] = {
      {"mop_active_client_count", MetricType::kGauge, "MQTT connections open (past CONNECT)",
       static_cast<double>(MqttStats::activeClients.load())},
      {"mop_total_client_count", MetricType::kCounter, "MQTT connections accepted at CONNECT",
       static_cast<double>(MqttStats::totalClients.load())},
      {"mop_maximum_client_count", MetricType::kGauge, "Most MQTT connections open at once",
       static_cast<double>(MqttStats::maximumClients.load())},
      {"mop_send_count", MetricType::kCounter, "MQTT PUBLISHes from clients into topics",
       static_cast<double>(MqttStats::sendCount.load())},
      {"mop_send_bytes", MetricType::kCounter, "Payload bytes of MQTT PUBLISHes from clients",
       static_cast<double>(MqttStats::sendBytes.load())},
      {"mop_received_count", MetricType::kCounter, "MQTT PUBLISHes delivered to clients",
       static_cast<double>(MqttStats::receivedCount.load())},
      {"mop_received_bytes", MetricType::kCounter, "Payload bytes of MQTT PUBLISHes delivered",
       static_cast<double>(MqttStats::receivedBytes.load())},
      {"magnetar_mqtt_subscriptions_total", MetricType::kCounter,
       "MQTT topic filters granted in SUBSCRIBE packets",
       static_cast<double>(MqttStats::subscriptions.load())},
  };
  for (const Row& r : rows) {
    w.family(r.name, r.type, r.help);
    w.sample(r.name, labels, r.value);
  }
  w.family("magnetar_mqtt_connections_refused_total", MetricType::kCounter,
           "MQTT CONNECTs refused, by reason (max_connections, authentication)");
  for (size_t i = 0; i < MqttStats::refused.size(); ++i) {
    const auto reason = static_cast<mqtt::MqttRefusal>(i);
    w.sample("magnetar_mqtt_connections_refused_total",
             {{"cluster", cluster}, {"reason", MqttStats::label(reason)}},
             static_cast<double>(MqttStats::refused[i].load()));
  }
}

}  // namespace magnetar::admin
