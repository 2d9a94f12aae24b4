// Topic names and partition routing (internal; unit-tested).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "client/client_config.h"

namespace magnetar::client {

// Full topic name, as Pulsar clients send it: "x" -> "persistent://public/default/x",
// "tenant/ns/x" -> "persistent://tenant/ns/x"; "persistent://..." and "non-persistent://..."
// unchanged. kInvalidArgument for an empty name or a wrong number of parts.
Result<std::string> normalizeTopic(std::string_view topic);

// "<topic>-partition-<i>" (Pulsar's TopicName.getPartition).
std::string partitionName(std::string_view topic, int index);

// Picks the partition of each message, like Pulsar's default router: a keyed message goes to
// (Murmur3_32(key, seed 0) & INT32_MAX) % numPartitions; a keyless one round-robin (or always the
// same random partition with kSinglePartition). Thread: any.
class PartitionRouter {
 public:
  PartitionRouter(RoutingMode mode, int numPartitions, uint32_t start = 0);
  int route(std::string_view key);
  int numPartitions() const { return n_; }

 private:
  RoutingMode mode_;
  int n_;
  uint32_t single_;
  std::atomic<uint32_t> next_;
};

// Partition of a key (the keyed rule above).
int partitionForKey(std::string_view key, int numPartitions);

}  // namespace magnetar::client
