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

Message MessageFactory::single(const Buffer& entry, size_t payloadOffset, size_t payloadSize,
                               const proto::MessageMetadata& md, const MessageId& id,
                               uint32_t redeliveryCount,
                               const std::shared_ptr<const std::string>& topic) {
  Message m;
  m.entry_ = entry;
  m.payloadOffset_ = static_cast<uint32_t>(payloadOffset);
  m.payloadSize_ = static_cast<uint32_t>(payloadSize);
  m.id_ = id;
  m.redeliveryCount_ = redeliveryCount;
  m.publishTime_ = md.publish_time();
  m.eventTime_ = md.event_time();
  m.sequenceId_ = md.sequence_id();
  m.producerName_ = md.producer_name();
  m.hasKey_ = md.has_partition_key();
  if (m.hasKey_) m.key_ = md.partition_key();
  if (md.has_ordering_key()) m.orderingKey_ = md.ordering_key();
  if (md.properties_size() > 0) {
    m.properties_.reserve(md.properties_size());
    for (const auto& kv : md.properties()) m.properties_.emplace_back(kv.key(), kv.value());
  }
  m.topic_ = topic;
  return m;
}

Message MessageFactory::batched(const Buffer& entry, size_t batchPayloadOffset,
                                const BatchedMessage& bm, const proto::MessageMetadata& md,
                                const MessageId& id, uint32_t redeliveryCount,
                                const std::shared_ptr<const std::string>& topic) {
  const auto& s = bm.metadata;
  Message m;
  m.entry_ = entry;
  m.payloadOffset_ = static_cast<uint32_t>(batchPayloadOffset + bm.payloadOffset);
  m.payloadSize_ = bm.payloadSize;
  m.id_ = id;
  m.redeliveryCount_ = redeliveryCount;
  m.publishTime_ = md.publish_time();
  m.eventTime_ = s.event_time();
  // Pulsar: a batched message's sequence id is the batch's plus its index unless it carries one.
  m.sequenceId_ = s.has_sequence_id() ? s.sequence_id()
                                      : md.sequence_id() + static_cast<uint64_t>(id.batchIndex);
  m.producerName_ = md.producer_name();
  m.hasKey_ = s.has_partition_key();
  if (m.hasKey_) m.key_ = s.partition_key();
  if (s.has_ordering_key()) m.orderingKey_ = s.ordering_key();
  if (s.properties_size() > 0) {
    m.properties_.reserve(s.properties_size());
    for (const auto& kv : s.properties()) m.properties_.emplace_back(kv.key(), kv.value());
  }
  m.topic_ = topic;
  return m;
}

}  // namespace magnetar::client
