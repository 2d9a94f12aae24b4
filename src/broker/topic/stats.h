// Topic statistics in Pulsar's shapes (TopicStats, PersistentTopicInternalStats), captured on the
// topic's executor as plain values that any thread may then read, and the message/byte rates
// computed from the counters by a periodic update.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/thread_annotations.h"
#include "broker/compaction/compaction.h"
#include "broker/topic/pending_ack_handle.h"
#include "broker/topic/topic_replicator.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

class PersistentTopic;

// Messages and bytes per second.
struct RateValue {
  double msgRate = 0;
  double byteRate = 0;
};

// What the stats of a producer and of a consumer both tell of its client (Pulsar's address,
// clientVersion, connectedSince and metadata).
struct ClientSnapshot {
  std::string address;
  std::string clientVersion;  // CONNECT's client_version
  int64_t connectedSinceMs = 0;
  std::map<std::string, std::string> metadata;  // CommandProducer / CommandSubscribe metadata
};

struct PublisherSnapshot : ClientSnapshot {
  std::string producerName;
  uint64_t producerId = 0;
  std::string accessMode;  // "Shared" | "Exclusive"
  uint64_t msgInCounter = 0;
  uint64_t bytesInCounter = 0;
  RateValue rateIn;
  double msgDropRate = 0;  // non-persistent: publisher-side drops per second (Pulsar's)
};

// A Key_Shared hash waiting for its previous consumer's acks (Pulsar's DrainingHash).
struct DrainingHashSnapshot {
  int32_t hash = 0;
  int32_t unackMsgs = 0;  // entries of the hash unacked at the consumer
  uint32_t blockedAttempts = 0;
};

struct ConsumerSnapshot : ClientSnapshot {
  std::string consumerName;
  uint64_t consumerId = 0;
  int priorityLevel = 0;
  int64_t availablePermits = 0;
  int64_t unackedMessages = 0;
  bool blockedConsumerOnUnackedMsgs = false;
  uint64_t msgOutCounter = 0;
  uint64_t bytesOutCounter = 0;
  RateValue rateOut;
  std::vector<std::pair<int32_t, int32_t>> keyHashRanges;  // Key_Shared: [start, end], merged
  // Key_Shared draining (Pulsar 4's ConsumerStats): hashes this consumer holds unacked messages
  // of while another consumer owns them now.
  int32_t drainingHashesCount = 0;
  uint64_t drainingHashesClearedTotal = 0;
  int32_t drainingHashesUnackedMessages = 0;
  std::vector<DrainingHashSnapshot> drainingHashes;
};

struct SubscriptionSnapshot {
  std::string name;
  std::string type;  // "Exclusive", "Shared", "Failover", "Key_Shared"; "None" before a consumer
  bool durable = true;
  bool replicated = false;  // isReplicated: the pulsar.replicated.subscription property
  int64_t msgBacklog = 0;
  int64_t backlogSize = 0;  // bytes, estimated from the average entry size
  int64_t unackedMessages = 0;
  int64_t msgDelayed = 0;                      // entries held back for delayed delivery
  int64_t delayedMessageIndexSizeInBytes = 0;  // the delayed-delivery tracker's memory
  bool blockedOnUnackedMsgs = false;
  uint64_t msgOutCounter = 0;
  uint64_t bytesOutCounter = 0;
  uint64_t msgRedeliverCounter = 0;
  RateValue rateOut;
  double msgRateRedeliver = 0;
  // Non-persistent topics: messages dropped because no consumer could take them, and their
  // rate (Pulsar's NonPersistentSubscriptionStats msgDropRate).
  uint64_t msgDropCounter = 0;
  double msgDropRate = 0;
  uint64_t totalMsgExpired = 0;     // entries expired by admin expire-messages
  int64_t lastExpireTimestamp = 0;  // epoch ms of the last expiry, 0: never
  double msgRateExpired = 0;
  std::string activeConsumerName;  // Exclusive/Failover
  std::string keySharedMode;       // Key_Shared: "AUTO_SPLIT" | "STICKY"
  // Key_Shared draining (Pulsar 4's SubscriptionStats names), plus the entries held back now
  // because their hash drains and the dispatch attempts it held back so far.
  int32_t drainingHashesCount = 0;
  uint64_t drainingHashesClearedTotal = 0;
  int32_t drainingHashesUnackedMessages = 0;
  int64_t drainingBlockedEntries = 0;
  uint64_t drainingBlockedAttemptsTotal = 0;
  std::vector<ConsumerSnapshot> consumers;
  PendingAckMetrics pendingAck;  // the subscription's txn ends (pulsar_txn_tp_*)
};

struct TopicSnapshot {
  std::string name;           // persistent://tenant/ns/local
  std::string namespaceName;  // tenant/ns
  // A non-persistent topic: Pulsar's NonPersistentTopicStats (msgDropRate fields, subscriptions
  // not durable).
  bool nonPersistent = false;
  uint64_t msgInCounter = 0;
  uint64_t bytesInCounter = 0;
  uint64_t msgOutCounter = 0;  // sum over subscriptions
  uint64_t bytesOutCounter = 0;
  RateValue rateIn;
  RateValue rateOut;                   // sum over subscriptions
  int64_t storageSize = 0;             // bytes stored
  int64_t backlogSize = 0;             // bytes not yet acked by the slowest subscription (estimate)
  int64_t backlogQuotaLimitSize = -1;  // the topic's destination_storage quota, bytes (-1: none)
  int64_t backlogQuotaLimitTime = -1;  // its message_age quota, seconds (-1: none)
  // Age of the oldest unacked message of the durable subscriptions as the last backlog quota
  // check read it (seconds; -1: not checked yet) and its subscription ("" none).
  int64_t oldestBacklogMessageAgeSeconds = -1;
  std::string oldestBacklogMessageSubscriptionName;
  // consumer_backlog_eviction passes, by quota (Pulsar's
  // pulsar_storage_backlog_quota_exceeded_evictions_total quota_type size / time).
  uint64_t sizeBacklogEvictions = 0;
  uint64_t timeBacklogEvictions = 0;
  int64_t msgBacklog = 0;  // entries, the sum over subscriptions (Pulsar's pulsar_msg_backlog)
  // The transaction buffer's ongoing txns and commits/aborts since load (Pulsar's
  // ongoingTxnCount / committedTxnCount / abortedTxnCount, pulsar_txn_tb_*).
  int64_t txnOngoing = 0;
  int64_t txnCommitted = 0;
  int64_t txnAborted = 0;
  int64_t numberOfEntries = 0;
  uint64_t publishRateLimitedTimes = 0;  // SENDs that paused their connection (rate limits)
  bool terminated = false;
  bool deduplicationEnabled = false;  // Pulsar's deduplicationStatus "Enabled"/"Disabled"
  CompactionRecord compaction;        // Pulsar's "compaction" block
  // Pulsar's "replication": the replicator of each remote cluster (geo-replication).
  std::map<std::string, ReplicatorStats> replication;
  std::vector<PublisherSnapshot> publishers;
  std::vector<SubscriptionSnapshot> subscriptions;
};

struct CursorSnapshot {
  std::string name;
  storage::Position markDeletePosition;
  storage::Position readPosition;  // the first entry after mark-delete not acked yet
  int64_t backlog = 0;
  int64_t messagesConsumedCounter = 0;
  // Acked ranges after the mark-delete position, (from, to] as Pulsar prints them; the scan stops
  // after kMaxScannedEntries entries.
  std::vector<std::pair<storage::Position, storage::Position>> individuallyDeleted;
  bool active = false;        // a consumer is connected
  int64_t cursorLedger = -1;  // ManagedCursor::cursorLedger()
  int64_t cursorLedgerLastEntry = -1;
  storage::CursorProperties properties;  // filled for ledgers that are not topics' only
};

struct InternalStatsSnapshot {
  uint64_t entriesAddedCounter = 0;
  int64_t numberOfEntries = 0;
  int64_t totalSize = 0;
  int64_t currentLedgerEntries = 0;
  int64_t currentLedgerSize = 0;
  storage::Position lastConfirmedEntry;
  std::string state;  // "LedgerOpened" | "Terminated"
  std::vector<storage::LedgerStats> ledgers;
  std::vector<CursorSnapshot> cursors;
  // Pulsar's compactedLedger: the compacted view's (first) ledger id, entries and bytes; -1 when
  // the topic was never compacted.
  int64_t compactedLedgerId = -1;
  int64_t compactedEntries = -1;
  int64_t compactedSize = -1;
};

// A topic's figures for the load report (its share of Pulsar's NamespaceBundleStats) as of the
// last TopicRates::update(): rates per second, throughput in bytes per second.
struct TopicLoad {
  double msgRateIn = 0;
  double msgThroughputIn = 0;
  double msgRateOut = 0;  // all subscriptions
  double msgThroughputOut = 0;
  int32_t producers = 0;
  int32_t consumers = 0;
};

// The rates of one topic's producers, subscriptions and consumers over the last update interval.
// Thread: the topic's executor (update() and the reads inside snapshotTopic()); load() any.
class TopicRates {
 public:
  // The figures the last update() took, read without the topic's executor. Thread: any.
  TopicLoad load() const;

  // Samples the counters at nowNs. Rates are the counter change over the time since this
  // object's previous update; an object not seen at the previous update (new since then) counts
  // from 0 at prevTickNs. A counter that went down (a recreated object) restarts from 0.
  void update(PersistentTopic& topic, int64_t nowNs, int64_t prevTickNs);
  // The rate of key ("in", "p:<producer>", "s:<sub>", "r:<sub>" redeliveries, "x:<sub>" expired,
  // "d:<sub>" non-persistent drops, "pd:<producer>" publisher-side drops, "c:<sub>/<consumer
  // address>"); zero when unknown.
  RateValue rate(const std::string& key) const;

 private:
  struct Sample {
    uint64_t msgs = 0;
    uint64_t bytes = 0;
    RateValue rate;
  };
  void sample(std::unordered_map<std::string, Sample>& next, const std::string& key, uint64_t msgs,
              uint64_t bytes, int64_t nowNs, int64_t prevTickNs) const;

  mutable Mutex loadMu_;
  TopicLoad load_ GUARDED_BY(loadMu_);
  const PersistentTopic* owner_ = nullptr;  // a topic recreated under the same name starts over
  int64_t lastNs_ = 0;
  std::unordered_map<std::string, Sample> samples_;
};

// The TopicRates of every topic by name. Thread: any (a mutex guards the table; each TopicRates is
// then used on its topic's executor).
class RateRegistry {
 public:
  std::shared_ptr<TopicRates> of(const std::string& topicName);
  std::shared_ptr<TopicRates> find(const std::string& topicName) const;
  // Forgets topics not in `live` (sorted names).
  void retainOnly(const std::vector<std::string>& live);

 private:
  mutable Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<TopicRates>> rates_ GUARDED_BY(mu_);
};

// Rate keys used by snapshotTopic (exposed for tests).
std::string consumerRateKey(const std::string& sub, const void* consumer);

// Builds the stats of `topic`. rates may be null (all rates 0). Thread: the topic's executor.
TopicSnapshot snapshotTopic(PersistentTopic& topic, const TopicRates* rates);
// What CONSUMER_STATS answers about one consumer (Pulsar's CommandConsumerStatsResponse).
struct ConsumerStatsSnapshot {
  ConsumerSnapshot consumer;
  std::string type;        // the subscription's type name
  int64_t msgBacklog = 0;  // the subscription's backlog, entries
};
class Consumer;
// nullopt when `consumer` is not (or no longer) on subscription `sub`. Thread: the topic's
// executor.
std::optional<ConsumerStatsSnapshot> snapshotConsumerStats(PersistentTopic& topic,
                                                           const std::string& sub,
                                                           const Consumer* consumer,
                                                           const TopicRates* rates);
// Builds the internal stats of `topic`. Thread: the topic's executor.
InternalStatsSnapshot snapshotInternalStats(PersistentTopic& topic);
// The internal stats of a managed ledger with all its cursors and their properties (Pulsar's
// ManagedLedgerInternalStats of a transaction log or pending-ack log, or of a topic's ledger
// with its transaction-buffer snapshot cursor). entriesAdded: entries appended since the ledger
// was opened (its owner counts them). Thread: the ledger's executor.
InternalStatsSnapshot snapshotLedgerInternalStats(storage::ManagedLedger& ml,
                                                  uint64_t entriesAdded);

inline constexpr int64_t kMaxScannedEntries = 10000;

// Milliseconds since the epoch as Pulsar prints connectedSince ("2024-01-02T03:04:05.678Z", UTC);
// "" for epochMs <= 0.
std::string isoTime(int64_t epochMs);

// Pulsar's subscription type names ("Exclusive", "Shared", "Failover", "Key_Shared").
std::string subTypeName(int subType);

}  // namespace magnetar::broker
