#include "protocol/commands.h"

#include <cassert>
#include <cstring>

#include "protocol/byte_order.h"

namespace magnetar::protocol {

using wire::kLengthDelimited;
using wire::kVarint;
using wire::putVarint;
using wire::tag;
using wire::varintSize;
using wire::writeBE32;

using Type = proto::BaseCommand::Type;

void fillMessageId(const WireMessageId& id, proto::MessageIdData* out) {
  out->set_ledgerid(id.ledgerId);
  out->set_entryid(id.entryId);
  if (id.partition >= 0) out->set_partition(id.partition);
  if (id.batchIndex >= 0) out->set_batch_index(id.batchIndex);
}

WireMessageId toWireMessageId(const proto::MessageIdData& id) {
  return WireMessageId{id.ledgerid(), id.entryid(), id.partition(), id.batch_index()};
}

namespace {

proto::BaseCommand make(Type type) {
  proto::BaseCommand cmd;
  cmd.set_type(type);
  return cmd;
}

// request_id, response Failed, error and message of a failed lookup or partition-metadata response.
template <typename Response>
void fillFailed(Response* r, uint64_t requestId, proto::ServerError error,
                std::string_view message) {
  r->set_request_id(requestId);
  r->set_response(Response::Failed);
  r->set_error(error);
  r->set_message(std::string(message));
}

// request_id, error_code and error_message of a failed schema or consumer-stats response.
template <typename Response>
void fillErrorCode(Response* r, uint64_t requestId, proto::ServerError error,
                   std::string_view message) {
  r->set_request_id(requestId);
  r->set_error_code(error);
  r->set_error_message(std::string(message));
}

// Writes [totalSize][cmdSize][cmd] at p (cmd's sizes cached); returns the end.
uint8_t* writeCommand(uint8_t* p, const proto::BaseCommand& cmd, size_t cmdSize, size_t rest) {
  p = writeBE32(p, static_cast<uint32_t>(kSizeFieldLen + cmdSize + rest));
  p = writeBE32(p, static_cast<uint32_t>(cmdSize));
  return cmd.SerializeWithCachedSizesToArray(p);
}

}  // namespace

// ---- Generic --------------------------------------------------------------------------------

Buffer Commands::serialize(const proto::BaseCommand& cmd) {
  assert(cmd.IsInitialized());
  size_t cmdSize = cmd.ByteSizeLong();
  Buffer b = Buffer::allocate(kFrameHeaderLen + cmdSize);
  writeCommand(b.mutableData(), cmd, cmdSize, 0);
  return b;
}

void Commands::appendFrame(const proto::BaseCommand& cmd, std::string* out) {
  assert(cmd.IsInitialized());
  size_t cmdSize = cmd.ByteSizeLong();
  size_t off = out->size();
  out->resize(off + kFrameHeaderLen + cmdSize);
  writeCommand(reinterpret_cast<uint8_t*>(out->data() + off), cmd, cmdSize, 0);
}

// ---- Hot broker frames ----------------------------------------------------------------------

size_t Commands::writeMessageHeader(uint8_t* dst, uint64_t consumerId, uint64_t ledgerId,
                                    uint64_t entryId, uint32_t redeliveryCount, size_t entryLen,
                                    std::span<const int64_t> ackSet,
                                    std::optional<uint64_t> consumerEpoch, int32_t partition) {
  // CommandMessage fields in field-number order, exactly as protobuf would serialize them.
  size_t idLen = 1 + varintSize(ledgerId) + 1 + varintSize(entryId);
  if (partition >= 0) idLen += 1 + varintSize(static_cast<uint64_t>(partition));
  size_t msgLen = 1 + varintSize(consumerId) + 1 + varintSize(idLen) + idLen;
  if (redeliveryCount > 0) msgLen += 1 + varintSize(redeliveryCount);
  for (int64_t word : ackSet) msgLen += 1 + varintSize(static_cast<uint64_t>(word));
  if (consumerEpoch) msgLen += 1 + varintSize(*consumerEpoch);
  const size_t cmdSize = 2 + 1 + varintSize(msgLen) + msgLen;
  assert(kSizeFieldLen + cmdSize + entryLen <= UINT32_MAX);

  uint8_t* p = writeBE32(dst, static_cast<uint32_t>(kSizeFieldLen + cmdSize + entryLen));
  p = writeBE32(p, static_cast<uint32_t>(cmdSize));
  *p++ = tag(1, kVarint);  // BaseCommand.type
  *p++ = static_cast<uint8_t>(proto::BaseCommand::MESSAGE);
  *p++ = tag(9, kLengthDelimited);  // BaseCommand.message
  p = putVarint(p, msgLen);
  *p++ = tag(1, kVarint);  // consumer_id
  p = putVarint(p, consumerId);
  *p++ = tag(2, kLengthDelimited);  // message_id
  p = putVarint(p, idLen);
  *p++ = tag(1, kVarint);  // ledgerId
  p = putVarint(p, ledgerId);
  *p++ = tag(2, kVarint);  // entryId
  p = putVarint(p, entryId);
  if (partition >= 0) {
    *p++ = tag(3, kVarint);  // partition
    p = putVarint(p, static_cast<uint64_t>(partition));
  }
  if (redeliveryCount > 0) {
    *p++ = tag(3, kVarint);  // redelivery_count
    p = putVarint(p, redeliveryCount);
  }
  for (int64_t word : ackSet) {
    *p++ = tag(4, kVarint);  // ack_set (not packed in PulsarApi.proto)
    p = putVarint(p, static_cast<uint64_t>(word));
  }
  if (consumerEpoch) {
    *p++ = tag(5, kVarint);  // consumer_epoch
    p = putVarint(p, *consumerEpoch);
  }
  return static_cast<size_t>(p - dst);
}

size_t Commands::newMessageHeader(std::string* out, uint64_t consumerId, uint64_t ledgerId,
                                  uint64_t entryId, uint32_t redeliveryCount, size_t entryLen,
                                  std::span<const int64_t> ackSet,
                                  std::optional<uint64_t> consumerEpoch, int32_t partition) {
  size_t off = out->size();
  out->resize(off + maxMessageHeaderSize(ackSet.size()));
  size_t n = writeMessageHeader(reinterpret_cast<uint8_t*>(out->data() + off), consumerId,
                                ledgerId, entryId, redeliveryCount, entryLen, ackSet,
                                consumerEpoch, partition);
  out->resize(off + n);
  return n;
}

size_t Commands::writeSendReceipt(uint8_t* dst, uint64_t producerId, uint64_t sequenceId,
                                  uint64_t ledgerId, uint64_t entryId,
                                  std::optional<uint64_t> highestSequenceId) {
  const size_t idLen = 1 + varintSize(ledgerId) + 1 + varintSize(entryId);
  size_t rcptLen = 1 + varintSize(producerId) + 1 + varintSize(sequenceId) + 1 + 1 + idLen;
  if (highestSequenceId) rcptLen += 1 + varintSize(*highestSequenceId);
  const size_t cmdSize = 2 + 1 + varintSize(rcptLen) + rcptLen;

  uint8_t* p = writeBE32(dst, static_cast<uint32_t>(kSizeFieldLen + cmdSize));
  p = writeBE32(p, static_cast<uint32_t>(cmdSize));
  *p++ = tag(1, kVarint);  // BaseCommand.type
  *p++ = static_cast<uint8_t>(proto::BaseCommand::SEND_RECEIPT);
  *p++ = tag(7, kLengthDelimited);  // BaseCommand.send_receipt
  p = putVarint(p, rcptLen);
  *p++ = tag(1, kVarint);  // producer_id
  p = putVarint(p, producerId);
  *p++ = tag(2, kVarint);  // sequence_id
  p = putVarint(p, sequenceId);
  *p++ = tag(3, kLengthDelimited);  // message_id (idLen <= 22 fits one byte)
  *p++ = static_cast<uint8_t>(idLen);
  *p++ = tag(1, kVarint);
  p = putVarint(p, ledgerId);
  *p++ = tag(2, kVarint);
  p = putVarint(p, entryId);
  if (highestSequenceId) {
    *p++ = tag(4, kVarint);  // highest_sequence_id
    p = putVarint(p, *highestSequenceId);
  }
  return static_cast<size_t>(p - dst);
}

size_t Commands::appendSendReceipt(std::string* out, uint64_t producerId, uint64_t sequenceId,
                                   uint64_t ledgerId, uint64_t entryId,
                                   std::optional<uint64_t> highestSequenceId) {
  size_t off = out->size();
  out->resize(off + kMaxSendReceiptSize);
  size_t n = writeSendReceipt(reinterpret_cast<uint8_t*>(out->data() + off), producerId,
                              sequenceId, ledgerId, entryId, highestSequenceId);
  out->resize(off + n);
  return n;
}

Buffer Commands::newSendReceipt(uint64_t producerId, uint64_t sequenceId, uint64_t ledgerId,
                                uint64_t entryId, std::optional<uint64_t> highestSequenceId) {
  uint8_t tmp[kMaxSendReceiptSize];
  size_t n = writeSendReceipt(tmp, producerId, sequenceId, ledgerId, entryId, highestSequenceId);
  return Buffer::copyOf(tmp, n);
}

// ---- Broker -> client -----------------------------------------------------------------------

Buffer Commands::newConnected(std::string_view serverVersion, int32_t protocolVersion,
                              int32_t maxMessageSize, const proto::FeatureFlags* featureFlags) {
  auto cmd = make(proto::BaseCommand::CONNECTED);
  auto* c = cmd.mutable_connected();
  c->set_server_version(std::string(serverVersion));
  c->set_protocol_version(protocolVersion);
  c->set_max_message_size(maxMessageSize);
  if (featureFlags) *c->mutable_feature_flags() = *featureFlags;
  return serialize(cmd);
}

Buffer Commands::newPing() {
  auto cmd = make(proto::BaseCommand::PING);
  cmd.mutable_ping();
  return serialize(cmd);
}

Buffer Commands::newPong() {
  auto cmd = make(proto::BaseCommand::PONG);
  cmd.mutable_pong();
  return serialize(cmd);
}

Buffer Commands::newAuthChallenge(std::string_view serverVersion, std::string_view authMethod,
                                  std::string_view authData, int32_t protocolVersion) {
  auto cmd = make(proto::BaseCommand::AUTH_CHALLENGE);
  auto* c = cmd.mutable_authchallenge();
  c->set_server_version(std::string(serverVersion));
  c->set_protocol_version(protocolVersion);
  c->mutable_challenge()->set_auth_method_name(std::string(authMethod));
  c->mutable_challenge()->set_auth_data(std::string(authData));
  return serialize(cmd);
}

Buffer Commands::newSuccess(uint64_t requestId) {
  auto cmd = make(proto::BaseCommand::SUCCESS);
  cmd.mutable_success()->set_request_id(requestId);
  return serialize(cmd);
}

Buffer Commands::newError(uint64_t requestId, proto::ServerError error, std::string_view message) {
  auto cmd = make(proto::BaseCommand::ERROR);
  auto* e = cmd.mutable_error();
  e->set_request_id(requestId);
  e->set_error(error);
  e->set_message(std::string(message));
  return serialize(cmd);
}

Buffer Commands::newProducerSuccess(uint64_t requestId, std::string_view producerName,
                                    int64_t lastSequenceId,
                                    std::string_view schemaVersion, bool producerReady,
                                    std::optional<uint64_t> topicEpoch) {
  auto cmd = make(proto::BaseCommand::PRODUCER_SUCCESS);
  auto* s = cmd.mutable_producer_success();
  s->set_request_id(requestId);
  s->set_producer_name(std::string(producerName));
  s->set_last_sequence_id(lastSequenceId);
  // Always present, empty without a schema: Pulsar sends it so, and its Java client reads it
  // unconditionally (a missing field fails the producer).
  s->set_schema_version(std::string(schemaVersion));
  if (topicEpoch) s->set_topic_epoch(*topicEpoch);
  s->set_producer_ready(producerReady);
  return serialize(cmd);
}

Buffer Commands::newSendError(uint64_t producerId, uint64_t sequenceId, proto::ServerError error,
                              std::string_view message) {
  auto cmd = make(proto::BaseCommand::SEND_ERROR);
  auto* e = cmd.mutable_send_error();
  e->set_producer_id(producerId);
  e->set_sequence_id(sequenceId);
  e->set_error(error);
  e->set_message(std::string(message));
  return serialize(cmd);
}

Buffer Commands::newEndTxnOnPartitionResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                              uint64_t txnidMostBits,
                                              std::optional<proto::ServerError> error,
                                              std::string_view message) {
  auto cmd = make(proto::BaseCommand::END_TXN_ON_PARTITION_RESPONSE);
  auto* r = cmd.mutable_endtxnonpartitionresponse();
  r->set_request_id(requestId);
  r->set_txnid_least_bits(txnidLeastBits);
  r->set_txnid_most_bits(txnidMostBits);
  if (error) {
    r->set_error(*error);
    r->set_message(std::string(message));
  }
  return serialize(cmd);
}

Buffer Commands::newLookupResponse(uint64_t requestId, std::string_view brokerServiceUrl,
                                   std::string_view brokerServiceUrlTls, bool authoritative,
                                   proto::CommandLookupTopicResponse::LookupType type,
                                   bool proxyThroughServiceUrl) {
  auto cmd = make(proto::BaseCommand::LOOKUP_RESPONSE);
  auto* r = cmd.mutable_lookuptopicresponse();
  r->set_request_id(requestId);
  if (!brokerServiceUrl.empty()) r->set_brokerserviceurl(std::string(brokerServiceUrl));
  if (!brokerServiceUrlTls.empty()) r->set_brokerserviceurltls(std::string(brokerServiceUrlTls));
  r->set_response(type);
  r->set_authoritative(authoritative);
  r->set_proxy_through_service_url(proxyThroughServiceUrl);
  return serialize(cmd);
}

Buffer Commands::newLookupErrorResponse(uint64_t requestId, proto::ServerError error,
                                        std::string_view message) {
  auto cmd = make(proto::BaseCommand::LOOKUP_RESPONSE);
  fillFailed(cmd.mutable_lookuptopicresponse(), requestId, error, message);
  return serialize(cmd);
}

Buffer Commands::newPartitionMetadataResponse(uint64_t requestId, uint32_t partitions) {
  auto cmd = make(proto::BaseCommand::PARTITIONED_METADATA_RESPONSE);
  auto* r = cmd.mutable_partitionmetadataresponse();
  r->set_request_id(requestId);
  r->set_partitions(partitions);
  r->set_response(proto::CommandPartitionedTopicMetadataResponse::Success);
  return serialize(cmd);
}

Buffer Commands::newPartitionMetadataErrorResponse(uint64_t requestId, proto::ServerError error,
                                                   std::string_view message) {
  auto cmd = make(proto::BaseCommand::PARTITIONED_METADATA_RESPONSE);
  fillFailed(cmd.mutable_partitionmetadataresponse(), requestId, error, message);
  return serialize(cmd);
}

Buffer Commands::newActiveConsumerChange(uint64_t consumerId, bool isActive) {
  auto cmd = make(proto::BaseCommand::ACTIVE_CONSUMER_CHANGE);
  auto* c = cmd.mutable_active_consumer_change();
  c->set_consumer_id(consumerId);
  c->set_is_active(isActive);
  return serialize(cmd);
}

Buffer Commands::newCloseProducer(uint64_t producerId, uint64_t requestId,
                                  std::string_view assignedBrokerServiceUrl,
                                  std::string_view assignedBrokerServiceUrlTls) {
  auto cmd = make(proto::BaseCommand::CLOSE_PRODUCER);
  auto* c = cmd.mutable_close_producer();
  c->set_producer_id(producerId);
  c->set_request_id(requestId);
  if (!assignedBrokerServiceUrl.empty()) {
    c->set_assignedbrokerserviceurl(std::string(assignedBrokerServiceUrl));
  }
  if (!assignedBrokerServiceUrlTls.empty()) {
    c->set_assignedbrokerserviceurltls(std::string(assignedBrokerServiceUrlTls));
  }
  return serialize(cmd);
}

Buffer Commands::newCloseConsumer(uint64_t consumerId, uint64_t requestId,
                                  std::string_view assignedBrokerServiceUrl,
                                  std::string_view assignedBrokerServiceUrlTls) {
  auto cmd = make(proto::BaseCommand::CLOSE_CONSUMER);
  auto* c = cmd.mutable_close_consumer();
  c->set_consumer_id(consumerId);
  c->set_request_id(requestId);
  if (!assignedBrokerServiceUrl.empty()) {
    c->set_assignedbrokerserviceurl(std::string(assignedBrokerServiceUrl));
  }
  if (!assignedBrokerServiceUrlTls.empty()) {
    c->set_assignedbrokerserviceurltls(std::string(assignedBrokerServiceUrlTls));
  }
  return serialize(cmd);
}

Buffer Commands::newReachedEndOfTopic(uint64_t consumerId) {
  auto cmd = make(proto::BaseCommand::REACHED_END_OF_TOPIC);
  cmd.mutable_reachedendoftopic()->set_consumer_id(consumerId);
  return serialize(cmd);
}

Buffer Commands::newTopicMigrated(proto::CommandTopicMigrated::ResourceType type,
                                  uint64_t resourceId, std::string_view brokerServiceUrl,
                                  std::string_view brokerServiceUrlTls) {
  auto cmd = make(proto::BaseCommand::TOPIC_MIGRATED);
  auto* m = cmd.mutable_topicmigrated();
  m->set_resource_type(type);
  m->set_resource_id(resourceId);
  if (!brokerServiceUrl.empty()) m->set_brokerserviceurl(std::string(brokerServiceUrl));
  if (!brokerServiceUrlTls.empty()) m->set_brokerserviceurltls(std::string(brokerServiceUrlTls));
  return serialize(cmd);
}

Buffer Commands::newGetLastMessageIdResponse(uint64_t requestId,
                                             const WireMessageId& lastMessageId,
                                             std::optional<WireMessageId> markDelete) {
  auto cmd = make(proto::BaseCommand::GET_LAST_MESSAGE_ID_RESPONSE);
  auto* r = cmd.mutable_getlastmessageidresponse();
  r->set_request_id(requestId);
  fillMessageId(lastMessageId, r->mutable_last_message_id());
  if (markDelete) fillMessageId(*markDelete, r->mutable_consumer_mark_delete_position());
  return serialize(cmd);
}

Buffer Commands::newGetTopicsOfNamespaceResponse(uint64_t requestId,
                                                 const std::vector<std::string>& topics,
                                                 bool filtered, std::string_view topicsHash,
                                                 bool changed) {
  auto cmd = make(proto::BaseCommand::GET_TOPICS_OF_NAMESPACE_RESPONSE);
  auto* r = cmd.mutable_gettopicsofnamespaceresponse();
  r->set_request_id(requestId);
  for (const auto& t : topics) r->add_topics(t);
  r->set_filtered(filtered);
  if (!topicsHash.empty()) r->set_topics_hash(std::string(topicsHash));
  r->set_changed(changed);
  return serialize(cmd);
}

Buffer Commands::newConsumerStatsResponse(const proto::CommandConsumerStatsResponse& stats) {
  auto cmd = make(proto::BaseCommand::CONSUMER_STATS_RESPONSE);
  *cmd.mutable_consumerstatsresponse() = stats;
  return serialize(cmd);
}

Buffer Commands::newWatchTopicListSuccess(uint64_t requestId, uint64_t watcherId,
                                          const std::vector<std::string>& topics,
                                          std::string_view topicsHash) {
  auto cmd = make(proto::BaseCommand::WATCH_TOPIC_LIST_SUCCESS);
  auto* r = cmd.mutable_watchtopiclistsuccess();
  r->set_request_id(requestId);
  r->set_watcher_id(watcherId);
  for (const auto& t : topics) r->add_topic(t);
  r->set_topics_hash(std::string(topicsHash));
  return serialize(cmd);
}

Buffer Commands::newWatchTopicUpdate(uint64_t watcherId, const std::vector<std::string>& newTopics,
                                     const std::vector<std::string>& deletedTopics,
                                     std::string_view topicsHash) {
  auto cmd = make(proto::BaseCommand::WATCH_TOPIC_UPDATE);
  auto* r = cmd.mutable_watchtopicupdate();
  r->set_watcher_id(watcherId);
  for (const auto& t : newTopics) r->add_new_topics(t);
  for (const auto& t : deletedTopics) r->add_deleted_topics(t);
  r->set_topics_hash(std::string(topicsHash));
  return serialize(cmd);
}

Buffer Commands::newGetSchemaResponse(uint64_t requestId, const proto::Schema& schema,
                                      std::string_view schemaVersion) {
  auto cmd = make(proto::BaseCommand::GET_SCHEMA_RESPONSE);
  auto* r = cmd.mutable_getschemaresponse();
  r->set_request_id(requestId);
  *r->mutable_schema() = schema;
  r->set_schema_version(std::string(schemaVersion));
  return serialize(cmd);
}

Buffer Commands::newGetSchemaErrorResponse(uint64_t requestId, proto::ServerError error,
                                           std::string_view message) {
  auto cmd = make(proto::BaseCommand::GET_SCHEMA_RESPONSE);
  fillErrorCode(cmd.mutable_getschemaresponse(), requestId, error, message);
  return serialize(cmd);
}

Buffer Commands::newGetOrCreateSchemaResponse(uint64_t requestId, std::string_view schemaVersion) {
  auto cmd = make(proto::BaseCommand::GET_OR_CREATE_SCHEMA_RESPONSE);
  auto* r = cmd.mutable_getorcreateschemaresponse();
  r->set_request_id(requestId);
  r->set_schema_version(std::string(schemaVersion));
  return serialize(cmd);
}

Buffer Commands::newGetOrCreateSchemaErrorResponse(uint64_t requestId, proto::ServerError error,
                                                   std::string_view message) {
  auto cmd = make(proto::BaseCommand::GET_OR_CREATE_SCHEMA_RESPONSE);
  fillErrorCode(cmd.mutable_getorcreateschemaresponse(), requestId, error, message);
  return serialize(cmd);
}

Buffer Commands::newAckResponse(uint64_t consumerId, uint64_t requestId,
                                std::optional<proto::ServerError> error, std::string_view message,
                                uint64_t txnidLeastBits, uint64_t txnidMostBits) {
  auto cmd = make(proto::BaseCommand::ACK_RESPONSE);
  auto* r = cmd.mutable_ackresponse();
  r->set_consumer_id(consumerId);
  r->set_request_id(requestId);
  if (txnidLeastBits || txnidMostBits) {
    r->set_txnid_least_bits(txnidLeastBits);
    r->set_txnid_most_bits(txnidMostBits);
  }
  if (error) {
    r->set_error(*error);
    r->set_message(std::string(message));
  }
  return serialize(cmd);
}

Buffer Commands::newEndTxnOnSubscriptionResponse(uint64_t requestId, uint64_t txnidLeastBits,
                                                 uint64_t txnidMostBits,
                                                 std::optional<proto::ServerError> error,
                                                 std::string_view message) {
  auto cmd = make(proto::BaseCommand::END_TXN_ON_SUBSCRIPTION_RESPONSE);
  auto* r = cmd.mutable_endtxnonsubscriptionresponse();
  r->set_request_id(requestId);
  r->set_txnid_least_bits(txnidLeastBits);
  r->set_txnid_most_bits(txnidMostBits);
  if (error) {
    r->set_error(*error);
    r->set_message(std::string(message));
  }
  return serialize(cmd);
}

Buffer Commands::newConsumerStatsErrorResponse(uint64_t requestId, proto::ServerError error,
                                               std::string_view message) {
  auto cmd = make(proto::BaseCommand::CONSUMER_STATS_RESPONSE);
  fillErrorCode(cmd.mutable_consumerstatsresponse(), requestId, error, message);
  return serialize(cmd);
}

}  // namespace magnetar::protocol
