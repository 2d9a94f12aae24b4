// Configuration of the client, its producers and its consumers. The defaults are Pulsar's client
// defaults, not broker settings (src/config/settings.def has no client keys): pulsar-client-cpp's
// ClientConfigurationImpl, ProducerConfigurationImpl and ConsumerConfigurationImpl (the Java
// client's ClientConfigurationData, ProducerConfigurationData and ConsumerConfigurationData where
// they agree), each field naming its Pulsar key; fields marked "Magnetar" have no Pulsar default.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/message.h"

namespace magnetar::client {

class Consumer;

using std::chrono::milliseconds;

struct ClientConfig {
  // I/O threads (event loops) named `<ioThreadPrefix>-<i>` (Pulsar's ioThreads: 1; the prefix:
  // Magnetar).
  int ioThreads = 1;
  std::string ioThreadPrefix = "client-io";
  // Connections per broker address; 0 = one per I/O thread (Magnetar; Pulsar's
  // connectionsPerBroker is 1). Producer/consumer i uses connection i % count, which lives on loop
  // (i % count) % ioThreads.
  int connectionsPerBroker = 0;
  // Timeout of each request (LOOKUP, PRODUCER, SUBSCRIBE, SEEK, ...) and of a whole
  // create/subscribe including retries. Pulsar's operationTimeoutSeconds: 30 s.
  milliseconds operationTimeout{30000};
  // TCP connect + CONNECT/CONNECTED handshake. Pulsar's connectionTimeoutMs: 10 s.
  milliseconds connectionTimeout{10000};
  // Reconnect back-off: initial, doubled per failure up to max, reset on success (Pulsar's
  // Backoff, 100 ms .. 60 s).
  milliseconds initialBackoff{100};
  milliseconds maxBackoff{60000};
  // PING when nothing was received for this long; the connection is closed when a PING stays
  // unanswered for another interval. Pulsar's keepAliveIntervalSeconds: 30 s.
  milliseconds keepAliveInterval{30000};
  std::string clientVersion = "magnetar-client-cpp-0.1.0";  // CONNECT's client_version (Magnetar)
  // pulsar+ssl:// service URLs (Pulsar's tlsTrustCertsFilePath, tlsAllowInsecureConnection,
  // and AuthenticationTls's certificate and key for mTLS; none by default, insecure off). Host
  // names are not validated.
  std::string tlsTrustCertsFilePath;
  bool tlsAllowInsecureConnection = false;
  std::string tlsCertificateFilePath;
  std::string tlsKeyFilePath;
  // Transactions (Pulsar's enableTransaction, default false): Client::newTransaction fails with
  // kNotAllowed unless set. The coordinator client starts with the first transaction.
  bool enableTransaction = false;
  // CONNECT's credentials, as Pulsar's client Authentication plugins send them: the method name
  // ("token") and its data (the JWT); empty: none (the broker's anonymous role, if any).
  std::string authMethodName;
  std::string authData;
};

enum class ProducerAccessMode { kShared = 0, kExclusive = 1, kWaitForExclusive = 2,
                                kExclusiveWithFencing = 3 };

// Partition choice for messages without a key on a partitioned topic.
enum class RoutingMode { kRoundRobin, kSinglePartition };

struct ProducerConfig {
  // Empty: the broker assigns one (returned by Producer::producerName()).
  std::string producerName;
  // First sequence id; unset: the broker's last_sequence_id + 1 (0 for a new producer).
  std::optional<uint64_t> initialSequenceId;
  ProducerAccessMode accessMode = ProducerAccessMode::kShared;
  // Bound on messages sent and not yet receipted (batched ones count singly). Pulsar's
  // maxPendingMessages (C++ client default 1000). 0 = unbounded.
  int maxPendingMessages = 1000;
  // When full: block the caller of sendAsync (never on an I/O thread) or fail with kBusy
  // ("ProducerQueueIsFull").
  bool blockIfQueueFull = false;
  // Batching: each batch entry holds messages of one key (so Key_Shared can route it); a batch is
  // sent when it holds batchingMaxMessages or batchingMaxBytes, or within batchingMaxPublishDelay
  // of its first message. Pulsar's defaults: on, 1000, 128 KiB, 10 ms.
  bool batchingEnabled = true;
  int batchingMaxMessages = 1000;
  size_t batchingMaxBytes = 128 * 1024;
  std::chrono::microseconds batchingMaxPublishDelay{10000};
  // false: a message whose key differs from the open batch's closes that batch, so the producer's
  // order is kept across keys (and broker deduplication works). true: Pulsar's KEY_BASED
  // container, one open batch per key flushed together: fuller batches with many interleaved keys,
  // but messages of different keys are reordered relative to each other.
  bool batchingGroupByKey = false;
  // A message not receipted within this time fails with kTimeout (with every message pending
  // behind it, as Pulsar does). 0 = never. Pulsar's sendTimeoutMs: 30 s.
  milliseconds sendTimeout{30000};
  RoutingMode routingMode = RoutingMode::kRoundRobin;
};

enum class SubscriptionType { kExclusive = 0, kShared = 1, kFailover = 2, kKeyShared = 3 };
enum class InitialPosition { kLatest = 0, kEarliest = 1 };
enum class KeySharedMode { kAutoSplit = 0, kSticky = 1 };

// Called for each message on the consumer's client I/O thread; the next message of that consumer
// is delivered after it returns.
using MessageListener = std::function<void(Consumer&, const Message&)>;
// Failover/Exclusive: the broker made this consumer active (true) or inactive (false).
using ActiveConsumerListener = std::function<void(Consumer&, bool active)>;

struct ConsumerConfig {
  SubscriptionType subscriptionType = SubscriptionType::kExclusive;
  std::string consumerName;  // empty: a random one, as Pulsar clients do
  // Messages the broker may push ahead of processing (FLOW permits): initial FLOW of this many,
  // then FLOW again when half were processed. Pulsar's receiverQueueSize: 1000.
  int receiverQueueSize = 1000;
  InitialPosition initialPosition = InitialPosition::kLatest;
  // false: a non-durable subscription (what Pulsar's Reader uses): no cursor is stored and it
  // goes with its last consumer.
  bool durable = true;
  // Non-durable only: where reading starts (MessageId::earliest(), latest() or a message's
  // id: the messages after it are delivered, as Pulsar's Reader). Unset: initialPosition.
  std::optional<MessageId> startMessageId;
  // Key_Shared only.
  KeySharedMode keySharedMode = KeySharedMode::kAutoSplit;
  std::vector<std::pair<int32_t, int32_t>> stickyRanges;  // inclusive, within [0, 65535]
  bool allowOutOfOrderDelivery = false;
  int32_t priorityLevel = 0;
  // Acks are sent in groups every ackGroupTime (Pulsar's acknowledgementsGroupTimeMicros: 100 ms);
  // 0 sends each ack at once. A group is also sent when it reaches 1000 ids.
  milliseconds ackGroupTime{100};
  // Negatively acknowledged messages are redelivered after this delay (Pulsar: 1 min).
  milliseconds negativeAckRedeliveryDelay{60000};
  // When set, messages go to the listener instead of receive().
  MessageListener messageListener;
  ActiveConsumerListener activeConsumerListener;
};

}  // namespace magnetar::client
