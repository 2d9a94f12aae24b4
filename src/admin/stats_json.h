// Topic stats snapshots (src/broker/stats.h) as Pulsar's JSON: TopicStats, PartitionedTopicStats,
// PersistentTopicInternalStats, with Pulsar's field names.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "broker/stats.h"

namespace magnetar::admin {

// Pulsar's TopicStats of one topic (or of a merged partitioned topic).
boost::json::object topicStatsJson(const broker::TopicSnapshot& t);

// Merges partition snapshots into one (counters, rates and backlogs summed; publishers merged by
// producer name; subscriptions by name, their consumers by consumer name).
broker::TopicSnapshot mergeTopicSnapshots(const std::string& name,
                                          const std::vector<broker::TopicSnapshot>& parts);

// Pulsar's PartitionedTopicStats: the merged stats plus "metadata": {"partitions": N} and, with
// perPartition, "partitions": {partition name: stats}.
boost::json::object partitionedStatsJson(const std::string& name,
                                         const std::vector<broker::TopicSnapshot>& parts,
                                         bool perPartition);

// Pulsar's PersistentTopicInternalStats.
boost::json::object internalStatsJson(const broker::InternalStatsSnapshot& s);

// Milliseconds since the epoch as Pulsar prints connectedSince ("2024-01-02T03:04:05.678Z").
std::string isoTime(int64_t epochMs);

}  // namespace magnetar::admin
