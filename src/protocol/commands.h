// Commands: every frame Magnetar sends is built here (pulsar-client-cpp's Commands::newXxx style).
// Simple commands come back as a Buffer holding the whole frame
// `[totalSize][cmdSize][BaseCommand]`; payload frames (SEND) add the entry with its checksum.
// The two hot broker frames (MESSAGE header, SEND_RECEIPT) are hand-encoded into caller memory
// without allocating. Thread: all functions are stateless and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "protocol/constants.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::protocol {

// A message id as the builders take it (MessageIdData without the batch/chunk extras).
struct WireMessageId {
  uint64_t ledgerId = 0;
  uint64_t entryId = 0;
  int32_t partition = -1;   // -1: not set on the wire
  int32_t batchIndex = -1;  // -1: not set on the wire
};

// Fills a MessageIdData from a WireMessageId (partition/batch_index only when >= 0).
void fillMessageId(const WireMessageId& id, proto::MessageIdData* out);
WireMessageId toWireMessageId(const proto::MessageIdData& id);

// Upper bound of a MESSAGE header with ackSetLen ack_set words (Commands::writeMessageHeader):
// type 2 + tag 1 + length 5 + CommandMessage (consumer_id 11, message_id 30 with the partition,
// redelivery_count 6, consumer_epoch 11, 11 per ack_set word).
constexpr size_t maxMessageHeaderSize(size_t ackSetLen) {
  return kFrameHeaderLen + 2 + 1 + 5 + 58 + 11 * ackSetLen;
}
inline constexpr size_t kMaxMessageHeaderSize = maxMessageHeaderSize(0);
// Upper bound of a SEND_RECEIPT frame (Commands::writeSendReceipt).
inline constexpr size_t kMaxSendReceiptSize = kFrameHeaderLen + 2 + 1 + 1 + 57;

class Commands {
 public:
  // ---- Generic ---------------------------------------------------------------------------
  // Frame for any command (no payload). Requires cmd.IsInitialized() (checked in debug builds).
  static Buffer serialize(const proto::BaseCommand& cmd);
  // Appends the same bytes to *out.
  static void appendFrame(const proto::BaseCommand& cmd, std::string* out);

  // ---- Hot broker frames, no allocation ---------------------------------------------------
  // MESSAGE header `[totalSize][cmdSize][BaseCommand{MESSAGE}]` with totalSize = 4 + cmdSize +
  // entryLen: write it, then the stored entry bytes (entryLen of them) unchanged. Writes at most
  // maxMessageHeaderSize(ackSet.size()) bytes at dst and returns the count written. Fields as
  // Pulsar's broker sets them: redelivery_count only when > 0, ack_set when non-empty,
  // consumer_epoch when given, the message id's partition when >= 0 (the topic is partition N
  // of a partitioned topic; clients compare received ids with sent and last ids by it).
  static size_t writeMessageHeader(uint8_t* dst, uint64_t consumerId, uint64_t ledgerId,
                                   uint64_t entryId, uint32_t redeliveryCount, size_t entryLen,
                                   std::span<const int64_t> ackSet = {},
                                   std::optional<uint64_t> consumerEpoch = std::nullopt,
                                   int32_t partition = -1);
  // Same, appended to *out; returns the bytes appended.
  static size_t newMessageHeader(std::string* out, uint64_t consumerId, uint64_t ledgerId,
                                 uint64_t entryId, uint32_t redeliveryCount, size_t entryLen,
                                 std::span<const int64_t> ackSet = {},
                                 std::optional<uint64_t> consumerEpoch = std::nullopt,
                                 int32_t partition = -1);

  // SEND_RECEIPT frame (whole frame, no payload) with message_id {ledgerId, entryId}.
  // highest_sequence_id is set when given (Pulsar's broker always sets it, to the batch's
  // highest sequence id or sequenceId). Writes at most kMaxSendReceiptSize bytes.
  static size_t writeSendReceipt(uint8_t* dst, uint64_t producerId, uint64_t sequenceId,
                                 uint64_t ledgerId, uint64_t entryId,
                                 std::optional<uint64_t> highestSequenceId = std::nullopt);
  static size_t appendSendReceipt(std::string* out, uint64_t producerId, uint64_t sequenceId,
                                  uint64_t ledgerId, uint64_t entryId,
                                  std::optional<uint64_t> highestSequenceId = std::nullopt);
  static Buffer newSendReceipt(uint64_t producerId, uint64_t sequenceId, uint64_t ledgerId,
                               uint64_t entryId,
                               std::optional<uint64_t> highestSequenceId = std::nullopt);

  // ---- Broker -> client ------------------------------------------------------------------
  // protocolVersion: the negotiated one, min(client's, kMaxProtocolVersion). maxMessageSize in
  // bytes (clients size their batches by it). featureFlags: what the broker supports, if any.
  static Buffer newConnected(std::string_view serverVersion, int32_t protocolVersion,
                             int32_t maxMessageSize,
                             const proto::FeatureFlags* featureFlags = nullptr);
  static Buffer newPing();
  static Buffer newPong();
  // AUTH_CHALLENGE asking the client for fresh credentials of `authMethod` (Pulsar sends
  // auth_data "PulsarAuthRefresh" to refresh a token).
  static Buffer newAuthChallenge(std::string_view serverVersion, std::string_view authMethod,
                                 std::string_view authData, int32_t protocolVersion);
  static Buffer newSuccess(uint64_t requestId);
  static Buffer newError(uint64_t requestId, proto::ServerError error, std::string_view message);
  // lastSequenceId: -1 when unknown (dedup off). schema_version is always sent, empty when the
  // topic has no schema (as Pulsar; the Java client fails a producer without the field).
  static Buffer newProducerSuccess(uint64_t requestId, std::string_view producerName,
                                   int64_t lastSequenceId = -1,
                                   std::string_view schemaVersion = {},
                                   bool producerReady = true,
                                   std::optional<uint64_t> topicEpoch = std::nullopt);
  static Buffer newSendError(uint64_t producerId, uint64_t sequenceId, proto::ServerError error,
                             std::string_view message);
  // END_TXN_ON_PARTITION_RESPONSE (Pulsar's newEndTxnOnPartitionResponse): success without
  // `error`, else error + message.
  static Buffer newEndTxnOnPartitionResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                             uint64_t txnidMostBits,
                                             std::optional<proto::ServerError> error = std::nullopt,
                                             std::string_view message = {});
  // Successful lookup: `type` Connect (this broker, or the URL given) or Redirect.
  static Buffer newLookupResponse(
      uint64_t requestId, std::string_view brokerServiceUrl, std::string_view brokerServiceUrlTls,
      bool authoritative,
      proto::CommandLookupTopicResponse::LookupType type =
          proto::CommandLookupTopicResponse::Connect,
      bool proxyThroughServiceUrl = false);
  static Buffer newLookupErrorResponse(uint64_t requestId, proto::ServerError error,
                                       std::string_view message);
  // partitions: 0 for a non-partitioned topic.
  static Buffer newPartitionMetadataResponse(uint64_t requestId, uint32_t partitions);
  static Buffer newPartitionMetadataErrorResponse(uint64_t requestId, proto::ServerError error,
                                                  std::string_view message);
  static Buffer newActiveConsumerChange(uint64_t consumerId, bool isActive);
  // Broker-initiated close; the assigned URLs (optional) tell the client where to reconnect.
  static Buffer newCloseProducer(uint64_t producerId, uint64_t requestId,
                                 std::string_view assignedBrokerServiceUrl = {},
                                 std::string_view assignedBrokerServiceUrlTls = {});
  static Buffer newCloseConsumer(uint64_t consumerId, uint64_t requestId,
                                 std::string_view assignedBrokerServiceUrl = {},
                                 std::string_view assignedBrokerServiceUrlTls = {});
  static Buffer newReachedEndOfTopic(uint64_t consumerId);
  static Buffer newTopicMigrated(proto::CommandTopicMigrated::ResourceType type,
                                 uint64_t resourceId, std::string_view brokerServiceUrl,
                                 std::string_view brokerServiceUrlTls);
  static Buffer newGetLastMessageIdResponse(
      uint64_t requestId, const WireMessageId& lastMessageId,
      std::optional<WireMessageId> consumerMarkDeletePosition = std::nullopt);
  // Topic-list watchers (Pulsar 2.11+, feature flag supports_topic_watchers): the answer to
  // WATCH_TOPIC_LIST with the matching topics (empty when the client's hash is current), and
  // the update pushed when matching topics are created or deleted. Hash: TopicList's CRC32C.
  static Buffer newWatchTopicListSuccess(uint64_t requestId, uint64_t watcherId,
                                         const std::vector<std::string>& topics,
                                         std::string_view topicsHash);
  static Buffer newWatchTopicUpdate(uint64_t watcherId, const std::vector<std::string>& newTopics,
                                    const std::vector<std::string>& deletedTopics,
                                    std::string_view topicsHash);
  // Transaction coordinator answers (PIP-31), as Pulsar's Commands: error unset on success.
  // TC_CLIENT_CONNECT_RESPONSE.
  static Buffer newTcClientConnectResponse(uint64_t requestId,
                                           std::optional<proto::ServerError> error = std::nullopt,
                                           std::string_view message = {});
  // NEW_TXN_RESPONSE with the new txn id; the error form carries the coordinator id as
  // txnid_most_bits (Pulsar's newTxnResponse(requestId, tcId, error, message)).
  static Buffer newNewTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                  uint64_t txnidMostBits);
  static Buffer newNewTxnErrorResponse(uint64_t requestId, uint64_t tcId, proto::ServerError error,
                                       std::string_view message);
  // ADD_PARTITION_TO_TXN_RESPONSE, ADD_SUBSCRIPTION_TO_TXN_RESPONSE and END_TXN_RESPONSE: the
  // txn id always, error and message on failure.
  static Buffer newAddPartitionToTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                             uint64_t txnidMostBits,
                                             std::optional<proto::ServerError> error = std::nullopt,
                                             std::string_view message = {});
  static Buffer newAddSubscriptionToTxnResponse(
      uint64_t requestId, uint64_t txnidLeastBits, uint64_t txnidMostBits,
      std::optional<proto::ServerError> error = std::nullopt, std::string_view message = {});
  static Buffer newEndTxnResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                  uint64_t txnidMostBits,
                                  std::optional<proto::ServerError> error = std::nullopt,
                                  std::string_view message = {});
  // CONSUMER_STATS answer: `stats` filled by the broker (request_id included); the error form
  // carries only request_id, error_code and error_message.
  static Buffer newConsumerStatsResponse(const proto::CommandConsumerStatsResponse& stats);
  static Buffer newGetTopicsOfNamespaceResponse(uint64_t requestId,
                                                const std::vector<std::string>& topics,
                                                bool filtered = false,
                                                std::string_view topicsHash = {},
                                                bool changed = true);
  static Buffer newGetSchemaResponse(uint64_t requestId, const proto::Schema& schema,
                                     std::string_view schemaVersion);
  static Buffer newGetSchemaErrorResponse(uint64_t requestId, proto::ServerError error,
                                          std::string_view message);
  static Buffer newGetOrCreateSchemaResponse(uint64_t requestId, std::string_view schemaVersion);
  static Buffer newGetOrCreateSchemaErrorResponse(uint64_t requestId, proto::ServerError error,
                                                  std::string_view message);
  // Ack receipt (v17+, sent when the ACK carried a request_id). error unset on success.
  static Buffer newAckResponse(uint64_t consumerId, uint64_t requestId,
                               std::optional<proto::ServerError> error = std::nullopt,
                               std::string_view message = {}, uint64_t txnidLeastBits = 0,
                               uint64_t txnidMostBits = 0);
  // END_TXN_ON_SUBSCRIPTION_RESPONSE (transaction pending acks, Pulsar's
  // Commands.newEndTxnOnSubscriptionResponse): the txnid echoed; error unset on success.
  static Buffer newEndTxnOnSubscriptionResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                                uint64_t txnidMostBits,
                                                std::optional<proto::ServerError> error = {},
                                                std::string_view message = {});
  static Buffer newConsumerStatsErrorResponse(uint64_t requestId, proto::ServerError error,
                                              std::string_view message);

  // ---- Client -> broker ------------------------------------------------------------------
  // authMethodName/authData empty: no authentication. featureFlags: what the client supports.
  static Buffer newConnect(std::string_view clientVersion, std::string_view authMethodName = {},
                           std::string_view authData = {},
                           int32_t protocolVersion = kMaxProtocolVersion,
                           const proto::FeatureFlags* featureFlags = nullptr,
                           std::string_view proxyToBrokerUrl = {});
  // producerName empty: the broker picks one (user_provided_producer_name=false).
  static Buffer newProducer(std::string_view topic, uint64_t producerId, uint64_t requestId,
                            std::string_view producerName = {},
                            proto::ProducerAccessMode accessMode = proto::Shared,
                            uint64_t epoch = 0);
  static Buffer newProducer(const proto::CommandProducer& producer);
  static Buffer newSubscribe(
      std::string_view topic, std::string_view subscription, uint64_t consumerId,
      uint64_t requestId, proto::CommandSubscribe::SubType subType,
      std::string_view consumerName = {},
      proto::CommandSubscribe::InitialPosition initialPosition = proto::CommandSubscribe::Latest,
      bool durable = true, std::optional<WireMessageId> startMessageId = std::nullopt);
  static Buffer newSubscribe(const proto::CommandSubscribe& subscribe);
  static Buffer newFlow(uint64_t consumerId, uint32_t messagePermits);
  // requestId set: the broker answers with ACK_RESPONSE (ack receipts).
  static Buffer newAck(uint64_t consumerId, proto::CommandAck::AckType ackType,
                       std::span<const WireMessageId> messageIds,
                       std::optional<uint64_t> requestId = std::nullopt);
  static Buffer newRedeliverUnacknowledgedMessages(
      uint64_t consumerId, std::span<const WireMessageId> messageIds = {},
      std::optional<uint64_t> consumerEpoch = std::nullopt);
  static Buffer newSeek(uint64_t consumerId, uint64_t requestId, const WireMessageId& messageId);
  // publishTime in ms since epoch.
  static Buffer newSeekByTimestamp(uint64_t consumerId, uint64_t requestId, uint64_t publishTime);
  static Buffer newUnsubscribe(uint64_t consumerId, uint64_t requestId, bool force = false);
  // Client-initiated close: newCloseProducer / newCloseConsumer above (same command).
  static Buffer newLookup(std::string_view topic, uint64_t requestId, bool authoritative = false,
                          std::string_view advertisedListenerName = {});
  static Buffer newPartitionedMetadata(std::string_view topic, uint64_t requestId,
                                       bool metadataAutoCreationEnabled = true);
  static Buffer newGetLastMessageId(uint64_t consumerId, uint64_t requestId);
  static Buffer newConsumerStats(uint64_t consumerId, uint64_t requestId);
  static Buffer newGetTopicsOfNamespace(
      std::string_view ns, uint64_t requestId,
      proto::CommandGetTopicsOfNamespace::Mode mode =
          proto::CommandGetTopicsOfNamespace::PERSISTENT);
  static Buffer newGetSchema(std::string_view topic, uint64_t requestId,
                             std::string_view schemaVersion = {});
  // Transactions (client side, as Pulsar's Commands.newTcClientConnectRequest, newTxn,
  // newAddPartitionToTxn, newAddSubscriptionToTxn, newEndTxn). txnTtlMs goes in NEW_TXN's
  // txn_ttl_seconds field, which Pulsar's clients and broker read as milliseconds.
  static Buffer newTcClientConnectRequest(uint64_t tcId, uint64_t requestId);
  static Buffer newNewTxn(uint64_t tcId, uint64_t requestId, uint64_t txnTtlMs);
  static Buffer newAddPartitionToTxn(uint64_t requestId, uint64_t txnMostBits,
                                     uint64_t txnLeastBits, std::string_view partition);
  static Buffer newAddSubscriptionToTxn(uint64_t requestId, uint64_t txnMostBits,
                                        uint64_t txnLeastBits, std::string_view topic,
                                        std::string_view subscription);
  static Buffer newEndTxn(uint64_t requestId, uint64_t txnMostBits, uint64_t txnLeastBits,
                          proto::TxnAction action);
  // Broker to broker (Pulsar's Commands.newEndTxnOnPartition / newEndTxnOnSubscription, sent
  // by TransactionBufferClientImpl to a topic's owner): ends `txn` on one topic or one
  // subscription; lowWaterMark goes in txnid_least_bits_of_low_watermark.
  static Buffer newEndTxnOnPartition(uint64_t requestId, std::string_view topic,
                                     uint64_t txnMostBits, uint64_t txnLeastBits,
                                     proto::TxnAction action, uint64_t lowWaterMark);
  static Buffer newEndTxnOnSubscription(uint64_t requestId, uint64_t txnMostBits,
                                        uint64_t txnLeastBits, std::string_view topic,
                                        std::string_view subscription, proto::TxnAction action,
                                        uint64_t lowWaterMark);
  // ACK of one message within a transaction (txnid and request_id set: the broker answers with
  // ACK_RESPONSE). ackSet/batchSize: a batch message, as Pulsar's ConsumerImpl sends it (the bits
  // of the batch's messages still unacked; empty for a whole entry).
  static Buffer newAckWithTxn(uint64_t consumerId, proto::CommandAck::AckType ackType,
                              const WireMessageId& id, std::span<const int64_t> ackSet,
                              int32_t batchSize, uint64_t txnMostBits, uint64_t txnLeastBits,
                              uint64_t requestId);

  // ---- Payload frames ---------------------------------------------------------------------
  // SEND frame: [totalSize][cmdSize][BaseCommand{SEND}][0x0e01][crc32c][metadataSize]
  // [metadata][payload], checksum computed here. numMessages > 1 for a batch.
  static Buffer newSend(uint64_t producerId, uint64_t sequenceId, int32_t numMessages,
                        const proto::MessageMetadata& metadata, std::string_view payload);
  // Same with a caller-filled CommandSend (txn ids, highest_sequence_id, chunks, marker).
  static Buffer newSend(const proto::CommandSend& send, const proto::MessageMetadata& metadata,
                        std::string_view payload);
  // Appends the SEND frame to *out (client hot path: one reusable string per flush).
  static void appendSend(const proto::CommandSend& send, const proto::MessageMetadata& metadata,
                         std::string_view payload, std::string* out);
  // An entry alone, `[0x0e01][crc32c][metadataSize][metadata][payload]`: the bytes a SEND frame
  // carries after its command (what storage keeps and MESSAGE frames repeat).
  static Buffer newEntry(const proto::MessageMetadata& metadata, std::string_view payload);
  // `[0x0e02][size][BrokerEntryMetadata]`, to put in front of an entry (v16+ consumers that
  // announced supports_broker_entry_metadata).
  static void appendBrokerEntryMetadata(const proto::BrokerEntryMetadata& bem, std::string* out);
};

}  // namespace magnetar::protocol
