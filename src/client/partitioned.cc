#include "client/partitioned.h"

#include <random>

#include "client/join.h"

namespace magnetar::client {

// ---- PartitionedProducer --------------------------------------------------------------------

PartitionedProducer::PartitionedProducer(std::string topic,
                                         std::vector<std::shared_ptr<ProducerImpl>> partitions,
                                         RoutingMode mode)
    : topic_(std::move(topic)),
      partitions_(std::move(partitions)),
      router_(mode, static_cast<int>(partitions_.size()),
              static_cast<uint32_t>(std::random_device{}())) {}

void PartitionedProducer::sendAsync(const OutgoingMessage& m, SendCallback cb) {
  partitions_[router_.route(m.key)]->sendAsync(m, std::move(cb));
}

void PartitionedProducer::forAll(const std::function<void(ProducerImpl&, StatusCallback)>& op,
                                 StatusCallback cb) {
  auto join = joinStatuses(partitions_.size(), std::move(cb));
  for (auto& p : partitions_) op(*p, join);
}

void PartitionedProducer::flushAsync(StatusCallback cb) {
  forAll([](ProducerImpl& p, StatusCallback c) { p.flushAsync(std::move(c)); }, std::move(cb));
}

void PartitionedProducer::closeAsync(StatusCallback cb) {
  forAll([](ProducerImpl& p, StatusCallback c) { p.closeAsync(std::move(c)); }, std::move(cb));
}

std::string PartitionedProducer::producerName() const { return partitions_[0]->producerName(); }

int64_t PartitionedProducer::lastSequenceId() const {
  int64_t m = -1;
  for (const auto& p : partitions_) m = std::max(m, p->lastSequenceId());
  return m;
}

bool PartitionedProducer::isConnected() const {
  for (const auto& p : partitions_) {
    if (!p->isConnected()) return false;
  }
  return true;
}

size_t PartitionedProducer::pendingMessages() const {
  size_t n = 0;
  for (const auto& p : partitions_) n += p->pendingMessages();
  return n;
}

// ---- PartitionedConsumer --------------------------------------------------------------------

PartitionedConsumer::PartitionedConsumer(std::string topic, std::string subscription,
                                         std::shared_ptr<ReceiveQueue> queue)
    : topic_(std::move(topic)), subscription_(std::move(subscription)), queue_(std::move(queue)) {}

void PartitionedConsumer::setPartitions(std::vector<std::shared_ptr<ConsumerImpl>> partitions) {
  partitions_ = std::move(partitions);
}

ConsumerImpl* PartitionedConsumer::partitionOf(const MessageId& id) {
  if (id.partition < 0 || id.partition >= static_cast<int>(partitions_.size())) return nullptr;
  return partitions_[id.partition].get();
}

Result<Message> PartitionedConsumer::receive(std::chrono::milliseconds timeout) {
  auto item = queue_->pop(timeout);
  if (!item) return Status::error(StatusCode::kTimeout, "no message received within the timeout");
  item->from->messageProcessed(item->epoch, 1);
  return std::move(item->msg);
}

Status PartitionedConsumer::acknowledge(const MessageId& id) {
  auto* p = partitionOf(id);
  if (!p) return Status::invalidArgument("message id of no partition: " + id.toString());
  return p->acknowledge(id);
}

Status PartitionedConsumer::acknowledgeCumulative(const MessageId& id) {
  auto* p = partitionOf(id);
  if (!p) return Status::invalidArgument("message id of no partition: " + id.toString());
  return p->acknowledgeCumulative(id);
}

void PartitionedConsumer::acknowledgeAsync(const MessageId& id,
                                           const std::shared_ptr<TransactionImpl>& txn,
                                           StatusCallback cb) {
  auto* p = partitionOf(id);
  if (!p) return cb(Status::invalidArgument("message id of no partition: " + id.toString()));
  p->acknowledgeAsync(id, txn, std::move(cb));
}

void PartitionedConsumer::negativeAcknowledge(const MessageId& id) {
  if (auto* p = partitionOf(id)) p->negativeAcknowledge(id);
}

void PartitionedConsumer::redeliverUnacknowledgedMessages() {
  for (auto& p : partitions_) p->redeliverUnacknowledgedMessages();
}

void PartitionedConsumer::forAll(const std::function<void(ConsumerImpl&, StatusCallback)>& op,
                                 StatusCallback cb) {
  auto join = joinStatuses(partitions_.size(), std::move(cb));
  for (auto& p : partitions_) op(*p, join);
}

void PartitionedConsumer::seekAsync(const MessageId& id, StatusCallback cb) {
  if (id == MessageId::earliest() || id == MessageId::latest()) {
    forAll([id](ConsumerImpl& p, StatusCallback c) { p.seekAsync(id, std::move(c)); },
           std::move(cb));
    return;
  }
  auto* p = partitionOf(id);
  if (!p) {
    cb(Status::invalidArgument("seek on a partitioned topic needs a partition's message id"));
    return;
  }
  p->seekAsync(id, std::move(cb));
}

void PartitionedConsumer::seekAsync(uint64_t publishTimeMs, StatusCallback cb) {
  forAll([publishTimeMs](ConsumerImpl& p, StatusCallback c) {
    p.seekAsync(publishTimeMs, std::move(c));
  }, std::move(cb));
}

void PartitionedConsumer::getLastMessageIdAsync(std::function<void(Result<MessageId>)> cb) {
  cb(Status::unsupported("getLastMessageId on a partitioned topic: ask each partition"));
}

void PartitionedConsumer::unsubscribeAsync(StatusCallback cb) {
  auto queue = queue_;
  forAll([](ConsumerImpl& p, StatusCallback c) { p.unsubscribeAsync(std::move(c)); },
         [queue, cb = std::move(cb)](const Status& s) {
           if (s.isOk()) queue->close();
           cb(s);
         });
}

void PartitionedConsumer::closeAsync(StatusCallback cb) {
  auto queue = queue_;
  forAll([](ConsumerImpl& p, StatusCallback c) { p.closeAsync(std::move(c)); },
         [queue, cb = std::move(cb)](const Status& s) {
           queue->close();
           cb(s);
         });
}

const std::string& PartitionedConsumer::consumerName() const {
  return partitions_.front()->consumerName();
}

bool PartitionedConsumer::isConnected() const {
  for (const auto& p : partitions_) {
    if (!p->isConnected()) return false;
  }
  return true;
}

ConsumerStats PartitionedConsumer::stats() const {
  ConsumerStats s;
  for (const auto& p : partitions_) {
    auto ps = p->stats();
    s.messagesReceived += ps.messagesReceived;
    s.permitsSent += ps.permitsSent;
    s.permitViolations += ps.permitViolations;
    s.reconnects += ps.reconnects;
  }
  return s;
}

}  // namespace magnetar::client
