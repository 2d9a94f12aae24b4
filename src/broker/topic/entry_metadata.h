// A fast peek at the few MessageMetadata fields the dispatcher needs per entry, without a full
// protobuf parse (a hand-rolled scan of the wire format; fields per PulsarApi.proto).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace magnetar::broker {

// Views point into the entry's bytes: valid while the entry Buffer lives.
struct EntryMetadataPeek {
  std::string_view producerName;      // field 1
  uint64_t sequenceId = 0;            // field 2
  uint64_t publishTime = 0;           // field 3, ms
  std::string_view partitionKey;      // field 6
  int32_t numMessagesInBatch = 1;     // field 11 (default 1)
  bool partitionKeyB64 = false;       // field 17
  std::string_view orderingKey;       // field 18
  bool hasPartitionKey = false;
  bool hasOrderingKey = false;
  int64_t deliverAtTime = 0;  // field 19, epoch ms (a batch's: its first message's)
  bool hasDeliverAtTime = false;
  uint64_t highestSequenceId = 0;     // field 24
  bool hasHighestSequenceId = false;
  int32_t markerType = 0;  // field 20 (PulsarMarkers.proto MarkerType)
  bool hasMarkerType = false;
  uint64_t txnidLeastBits = 0;  // field 22
  uint64_t txnidMostBits = 0;   // field 23
  bool hasTxnid = false;        // both 22 and 23 present (Pulsar's hasTxnid* pair)
};

// PulsarMarkers.proto MarkerType of a replicated subscription snapshot (kept in the local topic;
// the dispatchers of replicated subscriptions hand it to the controller).
inline constexpr int32_t kReplicatedSubscriptionSnapshotMarker = 12;

// Scans the serialized MessageMetadata of an entry (entry = [0x0e02 bem]?[0x0e01][crc][size][md]
// [payload]). kCorruption if the entry or the metadata's wire format is malformed.
Status peekEntryMetadata(std::string_view entry, EntryMetadataPeek* out);
// Same over metadata bytes only.
Status peekMetadata(std::string_view metadata, EntryMetadataPeek* out);

}  // namespace magnetar::broker
