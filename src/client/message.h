// Messages of the client API: MessageId, the received Message and the OutgoingMessage a producer
// sends.
#pragma once

#include <compare>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"

namespace magnetar::client {

class Transaction;

// Position of a message: {ledgerId, entryId} of the stored entry, the partition it came from (-1
// for a non-partitioned topic) and its index inside a batch entry (-1 when not batched).
// batchSize is carried for acknowledgement bookkeeping (0 when not batched) and is not part of
// the identity. Ordering is Pulsar's MessageIdImpl.compareTo: ledger, entry, batch index, then
// partition. Thread: value type.
struct MessageId {
  int64_t ledgerId = -1;
  int64_t entryId = -1;
  int32_t partition = -1;
  int32_t batchIndex = -1;
  int32_t batchSize = 0;

  // Pulsar's MessageId.earliest {-1,-1} and latest {INT64_MAX, INT64_MAX}.
  static MessageId earliest() { return MessageId{-1, -1, -1, -1, 0}; }
  static MessageId latest() { return MessageId{INT64_MAX, INT64_MAX, -1, -1, 0}; }

  bool operator==(const MessageId& o) const {
    return ledgerId == o.ledgerId && entryId == o.entryId && partition == o.partition &&
           batchIndex == o.batchIndex;
  }
  std::strong_ordering operator<=>(const MessageId& o) const {
    if (auto c = ledgerId <=> o.ledgerId; c != 0) return c;
    if (auto c = entryId <=> o.entryId; c != 0) return c;
    if (auto c = batchIndex <=> o.batchIndex; c != 0) return c;
    return partition <=> o.partition;
  }
  // "ledger:entry:partition:batchIndex", as Pulsar prints message ids.
  std::string toString() const;
};

using Property = std::pair<std::string, std::string>;

// Result of one send: OK and the message id, or the error. Called once per message, on a client
// I/O thread (or on the caller's thread when the send fails before it is queued).
using SendCallback = std::function<void(const Status&, const MessageId&)>;
// Completion of an asynchronous operation; runs on a client I/O thread.
using StatusCallback = std::function<void(const Status&)>;

// A message to publish. The views must stay valid only for the duration of the send call: the
// bytes are encoded into the producer's frame buffer before sendAsync() returns.
struct OutgoingMessage {
  std::string_view payload{};
  // partition_key: routes among partitions and picks the Key_Shared consumer; empty = none.
  std::string_view key{};
  // ordering_key: when set, Key_Shared uses it instead of key.
  std::string_view orderingKey{};
  std::vector<Property> properties{};
  uint64_t eventTime = 0;  // ms since epoch, 0 = unset
  // Explicit sequence id (for broker-side deduplication); unset = the producer's next one.
  std::optional<uint64_t> sequenceId{};
  // Sends within this transaction (Pulsar's newMessage(txn)): the partition is registered with
  // the coordinator before the first such send, the message is invisible to consumers until the
  // commit, and the commit waits for its result. Must stay valid for the call only.
  const Transaction* txn = nullptr;
};

// A received message. Cheap to copy: the payload is a view into the frame's entry Buffer, shared by
// reference (never copied). Thread: value type; copies may be used on any thread.
class Message {
 public:
  Message() = default;

  std::string_view payload() const {
    return {reinterpret_cast<const char*>(entry_.data()) + payloadOffset_, payloadSize_};
  }
  std::string payloadString() const { return std::string(payload()); }
  const std::string& key() const { return key_; }
  bool hasKey() const { return hasKey_; }
  const std::string& orderingKey() const { return orderingKey_; }
  const std::vector<Property>& properties() const { return properties_; }
  // Value of property `name`, or empty when absent.
  std::string_view property(std::string_view name) const;
  uint64_t publishTime() const { return publishTime_; }  // ms since epoch, set by the producer
  uint64_t eventTime() const { return eventTime_; }      // ms since epoch, 0 = unset
  const std::string& producerName() const { return producerName_; }
  uint64_t sequenceId() const { return sequenceId_; }
  uint32_t redeliveryCount() const { return redeliveryCount_; }
  const MessageId& messageId() const { return id_; }
  // The topic (partition) name the message was received from.
  const std::string& topic() const;

 private:
  friend class MessageFactory;
  Buffer entry_;
  uint32_t payloadOffset_ = 0;
  uint32_t payloadSize_ = 0;
  bool hasKey_ = false;
  uint32_t redeliveryCount_ = 0;
  MessageId id_;
  uint64_t publishTime_ = 0;
  uint64_t eventTime_ = 0;
  uint64_t sequenceId_ = 0;
  std::string key_;
  std::string orderingKey_;
  std::string producerName_;
  std::vector<Property> properties_;
  std::shared_ptr<const std::string> topic_;
};

}  // namespace magnetar::client
