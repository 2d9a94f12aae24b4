// Producers and consumers of partitioned topics: one ProducerImpl / ConsumerImpl per partition
// `<topic>-partition-<i>` behind the ProducerBase / ConsumerBase interfaces (internal).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/consumer_impl.h"
#include "client/producer_impl.h"
#include "client/routing.h"

namespace magnetar::client {

// A producer on a partitioned topic: one ProducerImpl per partition, messages routed by key
// (PartitionRouter). Thread: any.
class PartitionedProducer final : public ProducerBase {
 public:
  PartitionedProducer(std::string topic, std::vector<std::shared_ptr<ProducerImpl>> partitions,
                      RoutingMode mode);
  void sendAsync(const OutgoingMessage& m, SendCallback cb) override;
  void flushAsync(StatusCallback cb) override;
  void closeAsync(StatusCallback cb) override;
  const std::string& topic() const override { return topic_; }
  std::string producerName() const override;
  int64_t lastSequenceId() const override;
  bool isConnected() const override;
  size_t pendingMessages() const override;

 private:
  // Runs op on every partition and calls cb once all finished (first error wins).
  void forAll(const std::function<void(ProducerImpl&, StatusCallback)>& op, StatusCallback cb);

  const std::string topic_;
  std::vector<std::shared_ptr<ProducerImpl>> partitions_;
  PartitionRouter router_;
};

// A consumer on a partitioned topic: one ConsumerImpl per partition sharing one ReceiveQueue; acks
// and nacks go to the partition of the message id. Thread: any.
class PartitionedConsumer final : public ConsumerBase,
                                  public std::enable_shared_from_this<PartitionedConsumer> {
 public:
  PartitionedConsumer(std::string topic, std::string subscription,
                      std::shared_ptr<ReceiveQueue> queue);
  // Adds the partition consumers (index = partition); before any use.
  void setPartitions(std::vector<std::shared_ptr<ConsumerImpl>> partitions);

  Result<Message> receive(std::chrono::milliseconds timeout) override;
  void receiveAsync(std::function<void(Result<Message>)> cb) override {
    receiveFromQueue(*queue_, std::move(cb));
  }
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
  const std::string& consumerName() const override;
  bool isConnected() const override;
  size_t numMessagesInQueue() const override { return queue_->size(); }
  // Every partition got REACHED_END_OF_TOPIC.
  bool hasReachedEndOfTopic() const override {
    for (const auto& p : partitions_) {
      if (!p->hasReachedEndOfTopic()) return false;
    }
    return !partitions_.empty();
  }
  ConsumerStats stats() const override;

 private:
  ConsumerImpl* partitionOf(const MessageId& id);
  void forAll(const std::function<void(ConsumerImpl&, StatusCallback)>& op, StatusCallback cb);

  const std::string topic_;
  const std::string subscription_;
  const std::shared_ptr<ReceiveQueue> queue_;
  std::vector<std::shared_ptr<ConsumerImpl>> partitions_;
};

}  // namespace magnetar::client
