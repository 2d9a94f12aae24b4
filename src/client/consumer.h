// Consumer: receives messages of one subscription on one topic (all partitions of a partitioned
// one).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "client/message.h"

namespace magnetar::client {

class ConsumerBase;

// Counters of one consumer (all partitions summed for a partitioned one).
struct ConsumerStats {
  uint64_t messagesReceived = 0;  // individual messages that arrived (batches split)
  uint64_t permitsSent = 0;       // FLOW permits granted, all connections
  // Times the broker pushed a message beyond the permits of the current connection (must be 0).
  uint64_t permitViolations = 0;
  uint64_t reconnects = 0;
};

// A handle to a consumer created by Client::subscribe; cheap to copy. Thread: any. Synchronous
// calls other than acknowledge*/negativeAcknowledge must not be made on a client I/O thread (a
// message listener runs there).
class Consumer {
 public:
  Consumer() = default;
  explicit Consumer(std::shared_ptr<ConsumerBase> impl) : impl_(std::move(impl)) {}

  // Next message, waiting up to timeout (negative: forever). kTimeout when none came, kClosed
  // after close; kNotAllowed when a message listener is configured.
  Result<Message> receive(std::chrono::milliseconds timeout = std::chrono::milliseconds(-1));
  // Pulsar's receiveAsync: cb(the next message), at once (on the caller's thread) when one is
  // queued, else on the client I/O thread it arrives on; cb(kClosed) when the consumer closes,
  // kNotAllowed when a message listener is configured. Waiting calls are served in order.
  void receiveAsync(std::function<void(Result<Message>)> cb);

  // Individual ack; grouped and sent within ackGroupTime. Batched messages: the entry is acked once
  // all its messages are.
  Status acknowledge(const MessageId& id);
  Status acknowledge(const Message& m) { return acknowledge(m.messageId()); }
  // Individual ack within txn (Pulsar's acknowledgeAsync(id, txn)): the subscription is
  // registered with the coordinator first (ADD_SUBSCRIPTION_TO_TXN), then an ACK with the txn id
  // and a request id; cb(OK) on the broker's ACK_RESPONSE, else its error (e.g. kNotAllowed
  // "TransactionConflict: ..." when another transaction holds the message). A batch message is
  // acked alone (ack_set with its bit cleared, as Pulsar's ConsumerImpl). Takes effect on commit.
  void acknowledgeAsync(const MessageId& id, const Transaction& txn, StatusCallback cb);
  Status acknowledge(const MessageId& id, const Transaction& txn);
  // Acks every message up to and including id (Exclusive/Failover; kNotAllowed on Shared and
  // Key_Shared, as Pulsar).
  Status acknowledgeCumulative(const MessageId& id);
  Status acknowledgeCumulative(const Message& m) { return acknowledgeCumulative(m.messageId()); }
  // The message (its whole entry) is redelivered after negativeAckRedeliveryDelay. Exclusive and
  // Failover redeliver everything unacked then, as Pulsar does.
  void negativeAcknowledge(const MessageId& id);
  void negativeAcknowledge(const Message& m) { negativeAcknowledge(m.messageId()); }
  // Drops the local queue and asks the broker to redeliver every unacked message of this
  // consumer (REDELIVER_UNACKNOWLEDGED_MESSAGES without ids).
  void redeliverUnacknowledgedMessages();

  // Resets the subscription to id (MessageId::earliest()/latest() allowed) or to the first
  // message published at or after publishTimeMs. Messages queued locally are dropped.
  Status seek(const MessageId& id);
  Status seek(uint64_t publishTimeMs);
  void seekAsync(const MessageId& id, StatusCallback cb);
  void seekAsync(uint64_t publishTimeMs, StatusCallback cb);
  // Id of the last message stored in the topic (GET_LAST_MESSAGE_ID). Non-partitioned only.
  Result<MessageId> getLastMessageId();
  // Deletes the subscription on the broker and closes this consumer.
  Status unsubscribe();
  // unsubscribe() without waiting: cb on a client I/O thread.
  void unsubscribeAsync(StatusCallback cb);
  // Sends pending acks and closes the consumer. Idempotent.
  Status close();
  void closeAsync(StatusCallback cb);

  const std::string& topic() const;
  const std::string& subscription() const;
  const std::string& consumerName() const;
  bool isConnected() const;
  // Messages waiting for receive().
  size_t numMessagesInQueue() const;
  // The topic was terminated and every message in it delivered (REACHED_END_OF_TOPIC; Pulsar's
  // hasReachedEndOfTopic).
  bool hasReachedEndOfTopic() const;
  ConsumerStats stats() const;
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<ConsumerBase> impl_;
};

}  // namespace magnetar::client
