#include "client/consumer_impl.h"

#include <boost/asio/post.hpp>
#include <random>

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "client/consumer.h"
#include "client/message_factory.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::client {

using protocol::Commands;
using protocol::WireMessageId;

namespace {

std::string randomName() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::minstd_rand rng{std::random_device{}()};
  std::string s(5, '0');
  for (auto& c : s) c = kHex[rng() % 16];
  return s;
}

// Java BitSet layout of CommandMessage.ack_set: bit i = word[i / 64] bit (i % 64); set = unacked.
bool ackSetBit(const proto::CommandMessage& msg, int i) {
  int word = i / 64;
  if (word >= msg.ack_set_size()) return false;
  return (static_cast<uint64_t>(msg.ack_set(word)) >> (i % 64)) & 1u;
}

}  // namespace

// ---- ConsumerImpl: set-up -------------------------------------------------------------------

ConsumerImpl::ConsumerImpl(const std::shared_ptr<ClientImpl>& client, std::string topic,
                           int partition, std::string subscription, ConsumerConfig config,
                           std::shared_ptr<ReceiveQueue> queue, std::weak_ptr<ConsumerBase> owner)
    : HandlerBase(client, std::move(topic), client->newConsumerId(), "consumer"),
      topicName_(std::make_shared<const std::string>(topic_)),
      partition_(partition),
      subscription_(std::move(subscription)),
      config_(std::move(config)),
      consumerName_(config_.consumerName.empty() ? randomName() : config_.consumerName),
      consumerId_(handlerId_),
      queue_(std::move(queue)),
      owner_(std::move(owner)),
      flowThreshold_(static_cast<uint32_t>(std::max(1, config_.receiverQueueSize / 2))),
      ackTimer_(client_->loopForSlot(slot_).context()),
      nackTimer_(client_->loopForSlot(slot_).context()),
      acks_(consumerId_),
      nacks_(config_.negativeAckRedeliveryDelay) {}

ConsumerImpl::~ConsumerImpl() {
  // Dropped without close(): release the consumer on the broker (fire and forget); the broker
  // redelivers what it had not acked.
  if (state_ == State::kReady && cnx_) {
    cnx_->send(Commands::newCloseConsumer(consumerId_, client_->newRequestId()));
  }
}

std::shared_ptr<ConsumerBase> ConsumerImpl::handleOwner() {
  if (auto o = owner_.lock()) return o;
  return shared_from_this();
}

std::shared_ptr<ClientConnection> ConsumerImpl::connection() const {
  MutexLock lock(mu_);
  return state_ == State::kReady || state_ == State::kClosing ? cnx_ : nullptr;
}

bool ConsumerImpl::isConnected() const {
  MutexLock lock(mu_);
  return state_ == State::kReady && cnx_ != nullptr;
}

size_t ConsumerImpl::numMessagesInQueue() const { return queue_->size(); }

ConsumerStats ConsumerImpl::stats() const {
  ConsumerStats s;
  s.messagesReceived = received_.load();
  s.permitsSent = permitsSent_.load();
  s.permitViolations = permitViolations_.load();
  s.reconnects = reconnects_.load();
  return s;
}

void ConsumerImpl::start(StatusCallback cb) { startConnecting(std::move(cb)); }

void ConsumerImpl::connectionReady(std::shared_ptr<ClientConnection> cnx) {
  {
    MutexLock lock(mu_);
    if (state_ != State::kConnecting) return;
  }
  uint64_t requestId = client_->newRequestId();
  proto::CommandSubscribe s;
  s.set_topic(topic_);
  s.set_subscription(subscription_);
  s.set_subtype(static_cast<proto::CommandSubscribe::SubType>(config_.subscriptionType));
  s.set_consumer_id(consumerId_);
  s.set_request_id(requestId);
  s.set_consumer_name(consumerName_);
  if (config_.priorityLevel > 0) s.set_priority_level(config_.priorityLevel);
  s.set_durable(config_.durable);
  if (!config_.durable && config_.startMessageId) {
    auto* start = s.mutable_start_message_id();
    start->set_ledgerid(static_cast<uint64_t>(config_.startMessageId->ledgerId));
    start->set_entryid(static_cast<uint64_t>(config_.startMessageId->entryId));
    if (config_.startMessageId->batchIndex >= 0) {
      start->set_batch_index(config_.startMessageId->batchIndex);
    }
  }
  s.set_initialposition(static_cast<proto::CommandSubscribe::InitialPosition>(
      config_.initialPosition));
  if (config_.subscriptionType == SubscriptionType::kKeyShared) {
    auto* ks = s.mutable_keysharedmeta();
    ks->set_keysharedmode(static_cast<proto::KeySharedMode>(config_.keySharedMode));
    if (config_.keySharedMode == KeySharedMode::kSticky) {
      for (const auto& [start, end] : config_.stickyRanges) {
        auto* r = ks->add_hashranges();
        r->set_start(start);
        r->set_end(end);
      }
    }
    ks->set_allowoutoforderdelivery(config_.allowOutOfOrderDelivery);
  }
  cnx->addConsumer(consumerId_, weak_from_this());
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  cnx->sendRequest(requestId, Commands::newSubscribe(s), [weak, cnx](const Status& st,
                                                                     const proto::BaseCommand&) {
    auto self = weak.lock();
    if (!self || self->registrationFailed(*cnx, st)) return;
    StatusCallback createCb;
    {
      MutexLock lock(self->mu_);
      bool reconnected = self->everConnected_;
      if (!self->readyLocked(cnx, &createCb)) return;
      if (reconnected) self->reconnects_.fetch_add(1);
    }
    // A new connection epoch: what was queued from the old one is dropped (the broker redelivers
    // it), permits start from the full receiver queue, as Pulsar clients do.
    uint64_t epoch = self->epoch_.fetch_add(1) + 1;
    (void)epoch;
    self->permitsToReturn_.store(0);
    self->queue_->removeFrom(self.get());
    self->seeking_ = false;
    self->epochReceived_ = 0;
    uint32_t permits = static_cast<uint32_t>(std::max(1, self->config_.receiverQueueSize));
    self->epochPermits_ = permits;
    self->permitsSent_.fetch_add(permits);
    cnx->send(Commands::newFlow(self->consumerId_, permits));
    self->resetBackoff();
    MLOG_DEBUG("consumer {} subscribed to {} / {} on {}", self->consumerName_, self->topic_,
               self->subscription_, cnx->address());
    if (createCb) createCb(Status::ok());
  });
}

void ConsumerImpl::unregisterFrom(ClientConnection& cnx, bool closeOnBroker) {
  cnx.removeConsumer(consumerId_);
  if (closeOnBroker) cnx.send(Commands::newCloseConsumer(consumerId_, client_->newRequestId()));
}

std::function<void()> ConsumerImpl::gaveUpLocked(const Status& s) {
  MLOG_ERROR("consumer {} on {}: giving up reconnecting: {}", consumerName_, topic_, s.toString());
  return nullptr;
}

void ConsumerImpl::connectionClosed(ClientConnection* cnx) { lostConnection(cnx, false); }

void ConsumerImpl::lostConnection(ClientConnection* cnx, bool byBroker) {
  bool reconnect = false;
  {
    MutexLock lock(mu_);
    if (!dropConnectionLocked(cnx, &reconnect)) return;
  }
  if (reconnect) {
    MLOG_INFO("consumer {} on {}: {}, resubscribing", consumerName_, topic_,
              byBroker ? "closed by the broker" : "connection lost");
    scheduleReconnect();
  }
}

void ConsumerImpl::closedByBroker(ClientConnection* cnx) { lostConnection(cnx, true); }

void ConsumerImpl::reachedEndOfTopic() {
  reachedEnd_ = true;
  MLOG_INFO("consumer {} on {}: reached the end of the topic", consumerName_, topic_);
}

void ConsumerImpl::activeConsumerChanged(bool active) {
  if (!config_.activeConsumerListener) return;
  Consumer handle(handleOwner());
  config_.activeConsumerListener(handle, active);
}

// ---- Receiving ------------------------------------------------------------------------------

void ConsumerImpl::messageReceived(const proto::CommandMessage& msg, const Buffer& entry) {
  const uint64_t epoch = epoch_.load(std::memory_order_relaxed);
  auto layout = protocol::parseEntryLayout(entry.view());
  Status st = layout ? protocol::verifyChecksum(entry) : layout.status();
  if (st.isOk() && !md_.ParseFromArray(entry.data() + layout->metadataOffset,
                                       static_cast<int>(layout->metadataSize))) {
    st = Status::corruption("bad MessageMetadata");
  }
  MessageId id;
  id.ledgerId = static_cast<int64_t>(msg.message_id().ledgerid());
  id.entryId = static_cast<int64_t>(msg.message_id().entryid());
  id.partition = partition_;
  if (!st.isOk()) {
    // Pulsar discards a corrupt message: ack it so the broker drops it, and return its permit.
    MLOG_ERROR("consumer {} on {}: discarding corrupt message {}: {}", consumerName_, topic_,
               id.toString(), st.toString());
    acks_.addIndividual(id);
    flushAcks();
    ++epochReceived_;
    messageProcessed(epoch, 1);
    return;
  }
  const bool batch = md_.has_num_messages_in_batch();
  const int n = batch ? std::max(1, md_.num_messages_in_batch()) : 1;
  received_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  epochReceived_ += static_cast<uint64_t>(n);
  if (epochReceived_ > epochPermits_) permitViolations_.fetch_add(1);
  if (seeking_ || md_.compression() != proto::NONE) {
    if (md_.compression() != proto::NONE) {
      MLOG_ERROR("consumer {} on {}: compressed messages are not supported, dropping {}",
                 consumerName_, topic_, id.toString());
    }
    messageProcessed(epoch, static_cast<uint32_t>(n));
    return;
  }
  const uint32_t redelivery = msg.redelivery_count();
  if (!batch) {
    deliver(MessageFactory::single(entry, layout->payloadOffset, layout->payloadSize, md_, id,
                                   redelivery, topicName_),
            epoch);
    return;
  }
  std::string_view payload = entry.view().substr(layout->payloadOffset, layout->payloadSize);
  Status split = splitBatch(payload, n, &batchScratch_);
  if (!split.isOk()) {
    MLOG_ERROR("consumer {} on {}: bad batch {}: {}", consumerName_, topic_, id.toString(),
               split.toString());
    messageProcessed(epoch, static_cast<uint32_t>(n));
    return;
  }
  acks_.onBatchReceived(id.ledgerId, id.entryId, n);
  const bool hasAckSet = msg.ack_set_size() > 0;
  id.batchSize = n;
  for (int i = 0; i < n; ++i) {
    if (hasAckSet && !ackSetBit(msg, i)) {  // already acknowledged (batch index ack)
      messageProcessed(epoch, 1);
      continue;
    }
    id.batchIndex = i;
    deliver(MessageFactory::batched(entry, layout->payloadOffset, batchScratch_[i], md_, id,
                                    redelivery, topicName_),
            epoch);
  }
}

// Whether a reader that started at `start` (a message's id, not earliest/latest) must drop `id`:
// both brokers deliver from the start entry and Pulsar's clients drop what is not after it
// (startMessageIdInclusive false); a start without a batch index covers its whole entry.
static bool atOrBeforeStart(const MessageId& id, const MessageId& start) {
  if (start.ledgerId < 0 || start.ledgerId == INT64_MAX) return false;
  if (id.ledgerId != start.ledgerId) return id.ledgerId < start.ledgerId;
  if (id.entryId != start.entryId) return id.entryId < start.entryId;
  return start.batchIndex < 0 || id.batchIndex <= start.batchIndex;
}

void ConsumerImpl::deliver(Message&& m, uint64_t epoch) {
  if (!config_.durable && config_.startMessageId &&
      atOrBeforeStart(m.messageId(), *config_.startMessageId)) {
    messageProcessed(epoch, 1);
    return;
  }
  if (config_.messageListener) {
    Consumer handle(handleOwner());
    config_.messageListener(handle, m);
    messageProcessed(epoch, 1);
  } else {
    queue_->push(ReceiveQueue::Item{std::move(m), this, epoch});
  }
}

void ConsumerImpl::messageProcessed(uint64_t epoch, uint32_t n) {
  if (epoch != epoch_.load(std::memory_order_relaxed)) return;
  uint32_t v = permitsToReturn_.fetch_add(n, std::memory_order_relaxed) + n;
  if (v < flowThreshold_) return;
  uint32_t take = permitsToReturn_.exchange(0);
  if (take == 0) return;
  std::weak_ptr<ConsumerImpl> weak = weak_from_this();
  auto sendFlow = [weak, epoch, take] {
    auto self = weak.lock();
    if (!self || epoch != self->epoch_.load()) return;
    auto cnx = self->connection();
    if (!cnx) return;
    self->epochPermits_ += take;
    self->permitsSent_.fetch_add(take);
    cnx->send(Commands::newFlow(self->consumerId_, take));
  };
  auto& loop = client_->loopForSlot(slot_);
  loop.dispatch(std::move(sendFlow));
}

Result<Message> ConsumerImpl::receive(std::chrono::milliseconds timeout) {
  if (config_.messageListener) {
    return Status::notAllowed("receive() is not allowed on a consumer with a message listener");
  }
  auto item = queue_->pop(timeout);
  if (!item) {
    MutexLock lock(mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) {
      return Status::closed("consumer closed");
    }
    return Status::error(StatusCode::kTimeout, "no message received within the timeout");
  }
  item->from->messageProcessed(item->epoch, 1);
  return std::move(item->msg);
}

void ConsumerImpl::receiveAsync(std::function<void(Result<Message>)> cb) {
  if (config_.messageListener) {
    cb(Status::notAllowed("receiveAsync() is not allowed on a consumer with a message listener"));
    return;
  }
  receiveFromQueue(*queue_, std::move(cb));
}

void receiveFromQueue(ReceiveQueue& queue, std::function<void(Result<Message>)> cb) {
  queue.popAsync([cb = std::move(cb)](std::optional<ReceiveQueue::Item> item) {
    if (!item) {
      cb(Status::closed("consumer closed"));
      return;
    }
    item->from->messageProcessed(item->epoch, 1);
    cb(std::move(item->msg));
  });
}

}  // namespace magnetar::client
