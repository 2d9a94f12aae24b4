// ConsumerImpl: one consumer on one (partition) topic; PartitionedConsumer subscribes to every
// partition of a partitioned topic. Internal to src/client.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "client/ack_tracker.h"
#include "client/batch.h"
#include "client/client_config.h"
#include "client/consumer.h"
#include "client/handler_base.h"
#include "client/message.h"
#include "client/receive_queue.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

class ClientImpl;
class ClientConnection;
class ConsumerImpl;
class ConsumerBase;
class TransactionImpl;

// receiveAsync of a consumer whose messages wait in `queue` (one partition or all of them): the
// message's permit is returned as receive() does.
void receiveFromQueue(ReceiveQueue& queue, std::function<void(Result<Message>)> cb);

// What the public Consumer handle drives. Thread: any.
class ConsumerBase {
 public:
  virtual ~ConsumerBase() = default;
  virtual Result<Message> receive(std::chrono::milliseconds timeout) = 0;
  virtual void receiveAsync(std::function<void(Result<Message>)> cb) = 0;
  virtual Status acknowledge(const MessageId& id) = 0;
  virtual Status acknowledgeCumulative(const MessageId& id) = 0;
  virtual void acknowledgeAsync(const MessageId& id, const std::shared_ptr<TransactionImpl>& txn,
                                StatusCallback cb) = 0;
  virtual void negativeAcknowledge(const MessageId& id) = 0;
  virtual void redeliverUnacknowledgedMessages() = 0;
  virtual void seekAsync(const MessageId& id, StatusCallback cb) = 0;
  virtual void seekAsync(uint64_t publishTimeMs, StatusCallback cb) = 0;
  virtual void getLastMessageIdAsync(std::function<void(Result<MessageId>)> cb) = 0;
  virtual void unsubscribeAsync(StatusCallback cb) = 0;
  virtual void closeAsync(StatusCallback cb) = 0;
  virtual const std::string& topic() const = 0;
  virtual const std::string& subscription() const = 0;
  virtual const std::string& consumerName() const = 0;
  virtual bool isConnected() const = 0;
  virtual size_t numMessagesInQueue() const = 0;
  virtual bool hasReachedEndOfTopic() const = 0;
  virtual ConsumerStats stats() const = 0;
};

// Thread: public calls from any thread; frames, reconnects and timers on the loop of its connection
// slot (home loop). Listener calls happen on that loop.
class ConsumerImpl final : public ConsumerBase,
                           public HandlerBase,
                           public std::enable_shared_from_this<ConsumerImpl> {
 public:
  // partition: index for message ids (-1 when not partitioned). queue: where messages go when no
  // listener is set. owner: the handle passed to listeners (a PartitionedConsumer, or null for
  // this consumer itself).
  ConsumerImpl(const std::shared_ptr<ClientImpl>& client, std::string topic, int partition,
               std::string subscription, ConsumerConfig config, std::shared_ptr<ReceiveQueue> queue,
               std::weak_ptr<ConsumerBase> owner);
  ~ConsumerImpl() override;

  // SUBSCRIBE with retries until operationTimeout; cb(OK) once subscribed (and FLOW sent).
  void start(StatusCallback cb);

  Result<Message> receive(std::chrono::milliseconds timeout) override;
  void receiveAsync(std::function<void(Result<Message>)> cb) override;
  Status acknowledge(const MessageId& id) override;
  Status acknowledgeCumulative(const MessageId& id) override;
  void acknowledgeAsync(const MessageId& id, const std::shared_ptr<TransactionImpl>& txn,
                        StatusCallback cb) override;
  void negativeAcknowledge(const MessageId& id) override;
  void redeliverUnacknowledgedMessages() override;
  void seekAsync(const MessageId& id, StatusCallback cb) override;
  void seekAsync(uint64_t publishTimeMs, StatusCallback cb) override;
  void getLastMessageIdAsync(std::function<void(Result<MessageId>)> cb) override;
  void unsubscribeAsync(StatusCallback cb) override;
  void closeAsync(StatusCallback cb) override;
  const std::string& topic() const override { return topic_; }
  const std::string& subscription() const override { return subscription_; }
  const std::string& consumerName() const override { return consumerName_; }
  bool isConnected() const override;
  size_t numMessagesInQueue() const override;
  bool hasReachedEndOfTopic() const override { return reachedEnd_.load(); }
  ConsumerStats stats() const override;

  // A message taken from the queue (or handed to the listener) was processed: returns its permit
  // (FLOW when half the receiver queue was processed). Any thread.
  void messageProcessed(uint64_t epoch, uint32_t n = 1);

  // From the connection, on the home loop.
  void messageReceived(const proto::CommandMessage& msg, const Buffer& entry);
  void activeConsumerChanged(bool active);
  void connectionClosed(ClientConnection* cnx);
  void closedByBroker(ClientConnection* cnx);
  void reachedEndOfTopic();

 private:
  void connectionReady(std::shared_ptr<ClientConnection> cnx) override;
  std::function<void()> gaveUpLocked(const Status& s) override REQUIRES(mu_);
  void unregisterFrom(ClientConnection& cnx, bool closeOnBroker) override;
  std::weak_ptr<HandlerBase> weakHandler() override { return weak_from_this(); }
  void lostConnection(ClientConnection* cnx, bool byBroker);
  void deliver(Message&& m, uint64_t epoch);
  // An ack was grouped: sent now when the group is full or grouping is off (ackGroupTime 0),
  // else with the ack timer (armed on the home loop). Any thread.
  void ackAdded(bool groupFull);
  void flushAcks();
  void armAckTimer();
  void armNackTimer();
  void onNackTimer();
  void sendRedeliver(const std::vector<protocol::WireMessageId>& ids);
  void seek(Buffer frame, uint64_t requestId, StatusCallback cb);
  void sendRequest(const std::function<Buffer(uint64_t requestId)>& build,
                   std::function<void(const Status&, const proto::BaseCommand&)> cb);
  void finishClose(const Status& s, bool unsubscribed);
  std::shared_ptr<ClientConnection> connection() const;
  std::shared_ptr<ConsumerBase> handleOwner();

  const std::shared_ptr<const std::string> topicName_;  // shared by every Message
  const int partition_;
  const std::string subscription_;
  const ConsumerConfig config_;
  const std::string consumerName_;
  const uint64_t consumerId_;
  const std::shared_ptr<ReceiveQueue> queue_;
  const std::weak_ptr<ConsumerBase> owner_;
  const uint32_t flowThreshold_;
  boost::asio::steady_timer ackTimer_;   // home loop
  boost::asio::steady_timer nackTimer_;  // home loop
  AckGroupingTracker acks_;
  NegativeAckTracker nacks_;

  std::vector<StatusCallback> closeCbs_ GUARDED_BY(mu_);

  std::atomic<uint64_t> epoch_{0};          // bumped on each (re)subscribe
  std::atomic<uint32_t> permitsToReturn_{0};
  std::atomic<bool> ackTimerArmed_{false};
  std::atomic<bool> nackTimerArmed_{false};
  // Home loop only.
  bool seeking_ = false;
  std::atomic<bool> reachedEnd_{false};  // REACHED_END_OF_TOPIC came (terminated topic)
  uint64_t epochReceived_ = 0;  // messages received on the current connection
  uint64_t epochPermits_ = 0;   // permits granted on the current connection
  proto::MessageMetadata md_;
  std::vector<BatchedMessage> batchScratch_;
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> permitsSent_{0};
  std::atomic<uint64_t> permitViolations_{0};
  std::atomic<uint64_t> reconnects_{0};
};

}  // namespace magnetar::client
