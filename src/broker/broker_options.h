// BrokerOptions: the settings the broker module reads, filled by the app from the config registry
// (src/config). Key names in comments are Pulsar's broker.conf keys.
#pragma once

#include <cstdint>
#include <string>

#include "broker/listeners.h"

namespace magnetar::broker {

struct BrokerOptions {
  std::string bindAddress = "0.0.0.0";           // bindAddress
  std::string advertisedAddress = "localhost";   // advertisedAddress
  std::string clusterName = "standalone";        // clusterName
  AdvertisedListeners advertisedListeners;       // advertisedListeners, internalListenerName
  int brokerServicePort = 6650;                  // brokerServicePort (0: pick a free port)
  int webServicePort = 8080;                     // webServicePort, for lookup answers
  int numIOThreads = 8;                          // numIOThreads, already resolved
  int managedLedgerNumWorkerThreads = 2;         // managedLedgerNumWorkerThreads
  uint32_t maxMessageSize = 5 * 1024 * 1024;     // maxMessageSize, bytes
  int keepAliveIntervalSeconds = 30;             // keepAliveIntervalSeconds
  bool allowAutoTopicCreation = true;            // allowAutoTopicCreation
  std::string allowAutoTopicCreationType = "non-partitioned";  // allowAutoTopicCreationType
  int defaultNumPartitions = 1;                  // defaultNumPartitions
  bool allowAutoSubscriptionCreation = true;     // allowAutoSubscriptionCreation
  bool enableBrokerSideSubscriptionPatternEvaluation = true;  // same name
  int subscriptionPatternMaxLength = 50;         // subscriptionPatternMaxLength, characters
  bool enableBrokerTopicListWatcher = true;      // enableBrokerTopicListWatcher
  int dispatcherMaxReadBatchSize = 100;          // dispatcherMaxReadBatchSize, entries
  int64_t dispatcherMaxReadSizeBytes = 5 * 1024 * 1024;  // dispatcherMaxReadSizeBytes
  int maxUnackedMessagesPerConsumer = 50000;     // maxUnackedMessagesPerConsumer (0: off)
  int maxUnackedMessagesPerSubscription = 200000;  // maxUnackedMessagesPerSubscription (0: off)
  int maxPendingPublishRequestsPerConnection = 1000;  // maxPendingPublishRequestsPerConnection
  int maxMessagePublishBufferSizeInMB = 2048;    // maxMessagePublishBufferSizeInMB (<= 0: off)
  // Topic limits (0: none), as Pulsar: ProducerBusy / ConsumerBusy / NotAllowedError beyond them.
  int maxProducersPerTopic = 0;
  int maxConsumersPerTopic = 0;
  int maxConsumersPerSubscription = 0;
  int maxSubscriptionsPerTopic = 0;
  bool brokerDeduplicationEnabled = false;       // brokerDeduplicationEnabled
  int brokerDeduplicationMaxNumberOfProducers = 10000;  // brokerDeduplicationMaxNumberOfProducers
  int brokerDeduplicationEntriesInterval = 1000;        // brokerDeduplicationEntriesInterval
  int brokerDeduplicationSnapshotIntervalSeconds = 120;  // ...SnapshotIntervalSeconds (0: off)
  int brokerDeduplicationSnapshotFrequencyInSeconds = 120;  // ...SnapshotFrequencyInSeconds
  int brokerDeduplicationProducerInactivityTimeoutMinutes = 360;  // ...InactivityTimeoutMinutes
  bool acknowledgmentAtBatchIndexLevelEnabled = true;  // acknowledgmentAtBatchIndexLevelEnabled
  bool subscriptionKeySharedUseConsistentHashing = true;
  int subscriptionKeySharedConsistentHashingReplicaPoints = 100;
  // Key_Shared look-ahead: new entries are read only while the replay set is below
  // min(perConsumer * consumers, perSubscription), a 0 dropping its term (Pulsar 4's rule).
  int keySharedLookAheadMsgInReplayThresholdPerConsumer = 2000;
  int keySharedLookAheadMsgInReplayThresholdPerSubscription = 20000;
  // Schema registry (Pulsar's names and defaults).
  std::string schemaCompatibilityStrategy = "FULL";  // schemaCompatibilityStrategy
  bool isAllowAutoUpdateSchemaEnabled = true;         // isAllowAutoUpdateSchemaEnabled
  bool isSchemaValidationEnforced = false;            // isSchemaValidationEnforced
  std::string serverVersion = "Magnetar 0.1.0";
};

}  // namespace magnetar::broker
