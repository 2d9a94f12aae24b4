#include "client/message.h"

#include <fmt/format.h>

#include "client/message_factory.h"

namespace magnetar::client {

std::string MessageId::toString() const {
  return fmt::format("{}:{}:{}:{}", ledgerId, entryId, partition, batchIndex);
}

std::string_view Message::property(std::string_view name) const {
  for (const auto& [k, v] : properties_) {
    if (k == name) return v;
  }
  return {};
}

const std::string& Message::topic() const {
  static const std::string kEmpty;
  return topic_ ? *topic_ : kEmpty;
}

template <class Own>
Message MessageFactory::make(const Buffer& entry, size_t payloadOffset, size_t payloadSize,
                             const proto::MessageMetadata& md, const Own& own, const MessageId& id,
                             uint32_t redeliveryCount,
                             const std::shared_ptr<const std::string>& topic) {
  Message m;
  m.entry_ = entry;
  m.payloadOffset_ = static_cast<uint32_t>(payloadOffset);
  m.payloadSize_ = static_cast<uint32_t>(payloadSize);
  m.id_ = id;
  m.redeliveryCount_ = redeliveryCount;
  m.publishTime_ = md.publish_time();
  m.producerName_ = md.producer_name();
  m.hasKey_ = own.has_partition_key();
  if (m.hasKey_) m.key_ = own.partition_key();
  if (own.has_ordering_key()) m.orderingKey_ = own.ordering_key();
  if (own.properties_size() > 0) {
    m.properties_.reserve(own.properties_size());
    for (const auto& kv : own.properties()) m.properties_.emplace_back(kv.key(), kv.value());
  }
  m.topic_ = topic;
  return m;
}

Message MessageFactory::single(const Buffer& entry, size_t payloadOffset, size_t payloadSize,
                               const proto::MessageMetadata& md, const MessageId& id,
                               uint32_t redeliveryCount,
                               const std::shared_ptr<const std::string>& topic) {
  Message m = make(entry, payloadOffset, payloadSize, md, md, id, redeliveryCount, topic);
  m.eventTime_ = md.event_time();
  m.sequenceId_ = md.sequence_id();
  return m;
}

Message MessageFactory::batched(const Buffer& entry, size_t batchPayloadOffset,
                                const BatchedMessage& bm, const proto::MessageMetadata& md,
                                const MessageId& id, uint32_t redeliveryCount,
                                const std::shared_ptr<const std::string>& topic) {
  const auto& s = bm.metadata;
  Message m = make(entry, batchPayloadOffset + bm.payloadOffset, bm.payloadSize, md, s, id,
                   redeliveryCount, topic);
  m.eventTime_ = s.event_time();
  // Pulsar: a batched message's sequence id is the batch's plus its index unless it carries one.
  m.sequenceId_ = s.has_sequence_id() ? s.sequence_id()
                                      : md.sequence_id() + static_cast<uint64_t>(id.batchIndex);
  return m;
}

}  // namespace magnetar::client
