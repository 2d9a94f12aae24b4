// Commands: the client -> broker builders and payload frames (SEND, entries).
#include <cassert>
#include <cstring>

#include "base/crc32c.h"
#include "protocol/byte_order.h"
#include "protocol/commands.h"

namespace magnetar::protocol {

using wire::writeBE16;
using wire::writeBE32;

namespace {

proto::BaseCommand make(proto::BaseCommand::Type type) {
  proto::BaseCommand cmd;
  cmd.set_type(type);
  return cmd;
}

// Writes [0x0e01][crc32c][metadataSize][metadata][payload] at p; returns the end.
uint8_t* writeEntry(uint8_t* p, const proto::MessageMetadata& md, size_t mdSize,
                    std::string_view payload) {
  p = writeBE16(p, kMagicCrc32c);
  uint8_t* crcAt = p;
  p += kChecksumLen;
  uint8_t* covered = p;
  p = writeBE32(p, static_cast<uint32_t>(mdSize));
  p = md.SerializeWithCachedSizesToArray(p);
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  p += payload.size();
  writeBE32(crcAt, crc32c(covered, static_cast<size_t>(p - covered)));
  return p;
}

// The SEND BaseCommand, reused per thread so building a SEND does not allocate.
proto::BaseCommand& sendCommand(const proto::CommandSend& send) {
  thread_local proto::BaseCommand cmd;
  cmd.set_type(proto::BaseCommand::SEND);
  *cmd.mutable_send() = send;
  return cmd;
}

// Writes the whole SEND frame at p (size computed by the caller via sendFrameSize).
void writeSend(uint8_t* p, const proto::BaseCommand& cmd, size_t cmdSize,
               const proto::MessageMetadata& md, size_t mdSize, std::string_view payload) {
  size_t entryLen = kEntryPrefixLen + mdSize + payload.size();
  p = writeBE32(p, static_cast<uint32_t>(kSizeFieldLen + cmdSize + entryLen));
  p = writeBE32(p, static_cast<uint32_t>(cmdSize));
  p = cmd.SerializeWithCachedSizesToArray(p);
  writeEntry(p, md, mdSize, payload);
}

}  // namespace

// ---- Client -> broker -----------------------------------------------------------------------

Buffer Commands::newConnect(std::string_view clientVersion, std::string_view authMethodName,
                            std::string_view authData, int32_t protocolVersion,
                            const proto::FeatureFlags* featureFlags,
                            std::string_view proxyToBrokerUrl) {
  auto cmd = make(proto::BaseCommand::CONNECT);
  auto* c = cmd.mutable_connect();
  c->set_client_version(std::string(clientVersion));
  c->set_protocol_version(protocolVersion);
  if (!authMethodName.empty()) {
    c->set_auth_method_name(std::string(authMethodName));
    c->set_auth_data(std::string(authData));
  }
  if (!proxyToBrokerUrl.empty()) c->set_proxy_to_broker_url(std::string(proxyToBrokerUrl));
  if (featureFlags) *c->mutable_feature_flags() = *featureFlags;
  return serialize(cmd);
}

Buffer Commands::newProducer(std::string_view topic, uint64_t producerId, uint64_t requestId,
                             std::string_view producerName, proto::ProducerAccessMode accessMode,
                             uint64_t epoch) {
  proto::CommandProducer p;
  p.set_topic(std::string(topic));
  p.set_producer_id(producerId);
  p.set_request_id(requestId);
  if (!producerName.empty()) p.set_producer_name(std::string(producerName));
  p.set_user_provided_producer_name(!producerName.empty());
  p.set_producer_access_mode(accessMode);
  p.set_epoch(epoch);
  return newProducer(p);
}

Buffer Commands::newProducer(const proto::CommandProducer& producer) {
  auto cmd = make(proto::BaseCommand::PRODUCER);
  *cmd.mutable_producer() = producer;
  return serialize(cmd);
}

Buffer Commands::newSubscribe(std::string_view topic, std::string_view subscription,
                              uint64_t consumerId, uint64_t requestId,
                              proto::CommandSubscribe::SubType subType,
                              std::string_view consumerName,
                              proto::CommandSubscribe::InitialPosition initialPosition,
                              bool durable, std::optional<WireMessageId> startMessageId) {
  proto::CommandSubscribe s;
  s.set_topic(std::string(topic));
  s.set_subscription(std::string(subscription));
  s.set_subtype(subType);
  s.set_consumer_id(consumerId);
  s.set_request_id(requestId);
  if (!consumerName.empty()) s.set_consumer_name(std::string(consumerName));
  s.set_durable(durable);
  s.set_initialposition(initialPosition);
  if (startMessageId) fillMessageId(*startMessageId, s.mutable_start_message_id());
  return newSubscribe(s);
}

Buffer Commands::newSubscribe(const proto::CommandSubscribe& subscribe) {
  auto cmd = make(proto::BaseCommand::SUBSCRIBE);
  *cmd.mutable_subscribe() = subscribe;
  return serialize(cmd);
}

Buffer Commands::newFlow(uint64_t consumerId, uint32_t messagePermits) {
  auto cmd = make(proto::BaseCommand::FLOW);
  auto* f = cmd.mutable_flow();
  f->set_consumer_id(consumerId);
  f->set_messagepermits(messagePermits);
  return serialize(cmd);
}

Buffer Commands::newAck(uint64_t consumerId, proto::CommandAck::AckType ackType,
                        std::span<const WireMessageId> messageIds,
                        std::optional<uint64_t> requestId) {
  // Reused per thread: Clear() keeps the message id objects of earlier acks for the next one, so
  // an ack group costs no allocation per message id (a consumer acks every message).
  thread_local proto::BaseCommand cmd;
  cmd.Clear();
  cmd.set_type(proto::BaseCommand::ACK);
  auto* a = cmd.mutable_ack();
  a->set_consumer_id(consumerId);
  a->set_ack_type(ackType);
  for (const auto& id : messageIds) fillMessageId(id, a->add_message_id());
  if (requestId) a->set_request_id(*requestId);
  return serialize(cmd);
}

Buffer Commands::newRedeliverUnacknowledgedMessages(uint64_t consumerId,
                                                    std::span<const WireMessageId> messageIds,
                                                    std::optional<uint64_t> consumerEpoch) {
  auto cmd = make(proto::BaseCommand::REDELIVER_UNACKNOWLEDGED_MESSAGES);
  auto* r = cmd.mutable_redeliverunacknowledgedmessages();
  r->set_consumer_id(consumerId);
  for (const auto& id : messageIds) fillMessageId(id, r->add_message_ids());
  if (consumerEpoch) r->set_consumer_epoch(*consumerEpoch);
  return serialize(cmd);
}

Buffer Commands::newSeek(uint64_t consumerId, uint64_t requestId, const WireMessageId& messageId) {
  auto cmd = make(proto::BaseCommand::SEEK);
  auto* s = cmd.mutable_seek();
  s->set_consumer_id(consumerId);
  s->set_request_id(requestId);
  fillMessageId(messageId, s->mutable_message_id());
  return serialize(cmd);
}

Buffer Commands::newSeekByTimestamp(uint64_t consumerId, uint64_t requestId, uint64_t publishTime) {
  auto cmd = make(proto::BaseCommand::SEEK);
  auto* s = cmd.mutable_seek();
  s->set_consumer_id(consumerId);
  s->set_request_id(requestId);
  s->set_message_publish_time(publishTime);
  return serialize(cmd);
}

Buffer Commands::newUnsubscribe(uint64_t consumerId, uint64_t requestId, bool force) {
  auto cmd = make(proto::BaseCommand::UNSUBSCRIBE);
  auto* u = cmd.mutable_unsubscribe();
  u->set_consumer_id(consumerId);
  u->set_request_id(requestId);
  if (force) u->set_force(true);
  return serialize(cmd);
}

Buffer Commands::newLookup(std::string_view topic, uint64_t requestId, bool authoritative,
                           std::string_view advertisedListenerName) {
  auto cmd = make(proto::BaseCommand::LOOKUP);
  auto* l = cmd.mutable_lookuptopic();
  l->set_topic(std::string(topic));
  l->set_request_id(requestId);
  l->set_authoritative(authoritative);
  if (!advertisedListenerName.empty()) {
    l->set_advertised_listener_name(std::string(advertisedListenerName));
  }
  return serialize(cmd);
}

Buffer Commands::newPartitionedMetadata(std::string_view topic, uint64_t requestId,
                                        bool metadataAutoCreationEnabled) {
  auto cmd = make(proto::BaseCommand::PARTITIONED_METADATA);
  auto* m = cmd.mutable_partitionmetadata();
  m->set_topic(std::string(topic));
  m->set_request_id(requestId);
  if (!metadataAutoCreationEnabled) m->set_metadata_auto_creation_enabled(false);
  return serialize(cmd);
}

Buffer Commands::newGetLastMessageId(uint64_t consumerId, uint64_t requestId) {
  auto cmd = make(proto::BaseCommand::GET_LAST_MESSAGE_ID);
  auto* g = cmd.mutable_getlastmessageid();
  g->set_consumer_id(consumerId);
  g->set_request_id(requestId);
  return serialize(cmd);
}

Buffer Commands::newConsumerStats(uint64_t consumerId, uint64_t requestId) {
  auto cmd = make(proto::BaseCommand::CONSUMER_STATS);
  auto* s = cmd.mutable_consumerstats();
  s->set_consumer_id(consumerId);
  s->set_request_id(requestId);
  return serialize(cmd);
}

Buffer Commands::newGetTopicsOfNamespace(std::string_view ns, uint64_t requestId,
                                         proto::CommandGetTopicsOfNamespace::Mode mode) {
  auto cmd = make(proto::BaseCommand::GET_TOPICS_OF_NAMESPACE);
  auto* g = cmd.mutable_gettopicsofnamespace();
  g->set_namespace_(std::string(ns));
  g->set_request_id(requestId);
  g->set_mode(mode);
  return serialize(cmd);
}

Buffer Commands::newGetSchema(std::string_view topic, uint64_t requestId,
                              std::string_view schemaVersion) {
  auto cmd = make(proto::BaseCommand::GET_SCHEMA);
  auto* g = cmd.mutable_getschema();
  g->set_topic(std::string(topic));
  g->set_request_id(requestId);
  if (!schemaVersion.empty()) g->set_schema_version(std::string(schemaVersion));
  return serialize(cmd);
}
// ---- Transactions (client side) -------------------------------------------------------------

Buffer Commands::newTcClientConnectRequest(uint64_t tcId, uint64_t requestId) {
  auto cmd = make(proto::BaseCommand::TC_CLIENT_CONNECT_REQUEST);
  auto* c = cmd.mutable_tcclientconnectrequest();
  c->set_request_id(requestId);
  c->set_tc_id(tcId);
  return serialize(cmd);
}

Buffer Commands::newNewTxn(uint64_t tcId, uint64_t requestId, uint64_t txnTtlMs) {
  auto cmd = make(proto::BaseCommand::NEW_TXN);
  auto* n = cmd.mutable_newtxn();
  n->set_request_id(requestId);
  n->set_txn_ttl_seconds(txnTtlMs);
  n->set_tc_id(tcId);
  return serialize(cmd);
}

Buffer Commands::newAddPartitionToTxn(uint64_t requestId, uint64_t txnMostBits,
                                      uint64_t txnLeastBits, std::string_view partition) {
  auto cmd = make(proto::BaseCommand::ADD_PARTITION_TO_TXN);
  auto* a = cmd.mutable_addpartitiontotxn();
  a->set_request_id(requestId);
  a->set_txnid_most_bits(txnMostBits);
  a->set_txnid_least_bits(txnLeastBits);
  a->add_partitions(std::string(partition));
  return serialize(cmd);
}

Buffer Commands::newAddSubscriptionToTxn(uint64_t requestId, uint64_t txnMostBits,
                                         uint64_t txnLeastBits, std::string_view topic,
                                         std::string_view subscription) {
  auto cmd = make(proto::BaseCommand::ADD_SUBSCRIPTION_TO_TXN);
  auto* a = cmd.mutable_addsubscriptiontotxn();
  a->set_request_id(requestId);
  a->set_txnid_most_bits(txnMostBits);
  a->set_txnid_least_bits(txnLeastBits);
  auto* s = a->add_subscription();
  s->set_topic(std::string(topic));
  s->set_subscription(std::string(subscription));
  return serialize(cmd);
}

Buffer Commands::newEndTxn(uint64_t requestId, uint64_t txnMostBits, uint64_t txnLeastBits,
                           proto::TxnAction action) {
  auto cmd = make(proto::BaseCommand::END_TXN);
  auto* e = cmd.mutable_endtxn();
  e->set_request_id(requestId);
  e->set_txnid_most_bits(txnMostBits);
  e->set_txnid_least_bits(txnLeastBits);
  e->set_txn_action(action);
  return serialize(cmd);
}

Buffer Commands::newEndTxnOnPartition(uint64_t requestId, std::string_view topic,
                                      uint64_t txnMostBits, uint64_t txnLeastBits,
                                      proto::TxnAction action, uint64_t lowWaterMark) {
  auto cmd = make(proto::BaseCommand::END_TXN_ON_PARTITION);
  auto* e = cmd.mutable_endtxnonpartition();
  e->set_request_id(requestId);
  e->set_topic(std::string(topic));
  e->set_txnid_most_bits(txnMostBits);
  e->set_txnid_least_bits(txnLeastBits);
  e->set_txn_action(action);
  e->set_txnid_least_bits_of_low_watermark(lowWaterMark);
  return serialize(cmd);
}

Buffer Commands::newEndTxnOnSubscription(uint64_t requestId, uint64_t txnMostBits,
                                         uint64_t txnLeastBits, std::string_view topic,
                                         std::string_view subscription, proto::TxnAction action,
                                         uint64_t lowWaterMark) {
  auto cmd = make(proto::BaseCommand::END_TXN_ON_SUBSCRIPTION);
  auto* e = cmd.mutable_endtxnonsubscription();
  e->set_request_id(requestId);
  e->set_txnid_most_bits(txnMostBits);
  e->set_txnid_least_bits(txnLeastBits);
  e->mutable_subscription()->set_topic(std::string(topic));
  e->mutable_subscription()->set_subscription(std::string(subscription));
  e->set_txn_action(action);
  e->set_txnid_least_bits_of_low_watermark(lowWaterMark);
  return serialize(cmd);
}

Buffer Commands::newAckWithTxn(uint64_t consumerId, proto::CommandAck::AckType ackType,
                               const WireMessageId& id, std::span<const int64_t> ackSet,
                               int32_t batchSize, uint64_t txnMostBits, uint64_t txnLeastBits,
                               uint64_t requestId) {
  auto cmd = make(proto::BaseCommand::ACK);
  auto* a = cmd.mutable_ack();
  a->set_consumer_id(consumerId);
  a->set_ack_type(ackType);
  auto* mid = a->add_message_id();
  fillMessageId(WireMessageId{id.ledgerId, id.entryId, id.partition, -1}, mid);
  for (int64_t w : ackSet) mid->add_ack_set(w);
  if (batchSize > 0) mid->set_batch_size(batchSize);
  a->set_txnid_most_bits(txnMostBits);
  a->set_txnid_least_bits(txnLeastBits);
  a->set_request_id(requestId);
  return serialize(cmd);
}

// ---- Payload frames -------------------------------------------------------------------------

Buffer Commands::newSend(uint64_t producerId, uint64_t sequenceId, int32_t numMessages,
                         const proto::MessageMetadata& metadata, std::string_view payload) {
  thread_local proto::CommandSend send;
  send.Clear();
  send.set_producer_id(producerId);
  send.set_sequence_id(sequenceId);
  send.set_num_messages(numMessages);
  return newSend(send, metadata, payload);
}

Buffer Commands::newSend(const proto::CommandSend& send, const proto::MessageMetadata& metadata,
                         std::string_view payload) {
  const proto::BaseCommand& cmd = sendCommand(send);
  size_t cmdSize = cmd.ByteSizeLong();
  size_t mdSize = metadata.ByteSizeLong();
  Buffer b =
      Buffer::allocate(kFrameHeaderLen + cmdSize + kEntryPrefixLen + mdSize + payload.size());
  writeSend(b.mutableData(), cmd, cmdSize, metadata, mdSize, payload);
  return b;
}

void Commands::appendSend(const proto::CommandSend& send, const proto::MessageMetadata& metadata,
                          std::string_view payload, std::string* out) {
  const proto::BaseCommand& cmd = sendCommand(send);
  size_t cmdSize = cmd.ByteSizeLong();
  size_t mdSize = metadata.ByteSizeLong();
  size_t off = out->size();
  out->resize(off + kFrameHeaderLen + cmdSize + kEntryPrefixLen + mdSize + payload.size());
  writeSend(reinterpret_cast<uint8_t*>(out->data() + off), cmd, cmdSize, metadata, mdSize, payload);
}

Buffer Commands::newEntry(const proto::MessageMetadata& metadata, std::string_view payload) {
  size_t mdSize = metadata.ByteSizeLong();
  Buffer b = Buffer::allocate(kEntryPrefixLen + mdSize + payload.size());
  writeEntry(b.mutableData(), metadata, mdSize, payload);
  return b;
}

void Commands::appendBrokerEntryMetadata(const proto::BrokerEntryMetadata& bem, std::string* out) {
  size_t size = bem.ByteSizeLong();
  size_t off = out->size();
  out->resize(off + kMagicLen + kSizeFieldLen + size);
  auto* p = reinterpret_cast<uint8_t*>(out->data() + off);
  p = writeBE16(p, kMagicBrokerEntryMetadata);
  p = writeBE32(p, static_cast<uint32_t>(size));
  bem.SerializeWithCachedSizesToArray(p);
}

}  // namespace magnetar::protocol
