// Producer: publishes messages to one topic (all partitions of a partitioned one).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "client/message.h"

namespace magnetar::client {

class ProducerBase;

// A handle to a producer created by Client::createProducer; cheap to copy, all copies drive the
// same producer. Thread: any. The synchronous calls must not be made on a client I/O thread
// (e.g. from a send callback or a message listener): they would wait for that thread.
class Producer {
 public:
  Producer() = default;
  explicit Producer(std::shared_ptr<ProducerBase> impl) : impl_(std::move(impl)) {}

  // Queues m and returns; cb(OK, id) once the broker stored it, cb(error) otherwise:
  // kBusy "ProducerQueueIsFull" when maxPendingMessages are pending (blockIfQueueFull=false),
  // kTooLarge over maxMessageSize, kTimeout after sendTimeout, kClosed after close(), or the
  // broker's SEND_ERROR. The views in m are copied before this returns. Messages are sent, stored
  // and acknowledged in call order; after a reconnect the unacknowledged ones are re-sent in
  // order. Sequence ids: m.sequenceId when set, else the producer's next one.
  void sendAsync(const OutgoingMessage& m, SendCallback cb);
  // Sends and waits for the result.
  Result<MessageId> send(const OutgoingMessage& m);
  // Sends what is batched and waits until every message sent before has a result.
  Status flush();
  void flushAsync(StatusCallback cb);
  // Waits for pending messages (flush), then closes the producer on the broker. Idempotent.
  Status close();
  void closeAsync(StatusCallback cb);

  const std::string& topic() const;
  // The producer's name (assigned by the broker unless configured).
  std::string producerName() const;
  // Highest sequence id the broker acknowledged, -1 when none.
  int64_t lastSequenceId() const;
  bool isConnected() const;
  // Messages queued or sent and not yet acknowledged by the broker.
  size_t pendingMessages() const;
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<ProducerBase> impl_;
};

}  // namespace magnetar::client
