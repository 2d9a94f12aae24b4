// Topic stats snapshots (src/broker/topic/stats.h) as Pulsar's JSON: TopicStats,
// PartitionedTopicStats, PersistentTopicInternalStats, with Pulsar's field names.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "broker/topic/stats.h"

namespace magnetar::admin {

// Pulsar's GetStatsOptions as the stats requests' query parameters excludePublishers and
// excludeConsumers ("true", any case, as Jersey reads a boolean): an excluded list is answered
// empty; the topic's and subscriptions' sums still count every producer and consumer.
struct StatsOptions {
  bool excludePublishers = false;
  bool excludeConsumers = false;
};

// Pulsar's TopicStats of one topic (or of a merged partitioned topic).
boost::json::object topicStatsJson(const broker::TopicSnapshot& t, const StatsOptions& opts = {});

// Merges partition snapshots into one (counters, rates and backlogs summed; publishers merged by
// producer name; subscriptions by name, their consumers by consumer name).
broker::TopicSnapshot mergeTopicSnapshots(const std::string& name,
                                          const std::vector<broker::TopicSnapshot>& parts);

// Pulsar's PartitionedTopicStats: the merged stats plus "metadata": {"partitions": N} and, with
// perPartition, "partitions": {partition name: stats}.
boost::json::object partitionedStatsJson(const std::string& name,
                                         const std::vector<broker::TopicSnapshot>& parts,
                                         bool perPartition, const StatsOptions& opts = {});

// Pulsar's PartitionedTopicStats from each partition's TopicStats JSON (cluster mode: some came
// from the partitions' owners over HTTP; a null part, a partition that could not be read, counts
// as empty): the same sums and merges as mergeTopicSnapshots, done on the JSON fields (Pulsar's
// PartitionedTopicStatsImpl.add), plus "metadata" and, with perPartition, "partitions".
boost::json::object partitionedStatsFromJson(const std::string& name,
                                             const std::vector<std::string>& partitionNames,
                                             const std::vector<boost::json::value>& parts,
                                             bool perPartition);

// Pulsar's PersistentTopicInternalStats: ledgerInternalStatsJson plus schemaLedgers and
// compactedLedger.
boost::json::object internalStatsJson(const broker::InternalStatsSnapshot& s);
// Pulsar's ManagedLedgerInternalStats (counters, ledgers, cursors with their properties, the
// ledger's properties: none here).
boost::json::object ledgerInternalStatsJson(const broker::InternalStatsSnapshot& s);

// Milliseconds since the epoch as Pulsar prints connectedSince ("2024-01-02T03:04:05.678Z").
std::string isoTime(int64_t epochMs);

}  // namespace magnetar::admin
