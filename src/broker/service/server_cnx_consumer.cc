// ServerCnx's consumer-side commands: SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES,
// CLOSE_CONSUMER, UNSUBSCRIBE, SEEK and GET_LAST_MESSAGE_ID (the class is in server_cnx.h).
#include <algorithm>
#include <optional>
#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "broker/service/internal/topic_schema.h"
#include "broker/service/server_cnx.h"
#include "protocol/commands.h"
#include "protocol/server_error.h"

namespace magnetar::broker {

using protocol::Commands;
using protocol::ErrorContext;
using protocol::toServerError;

void ServerCnx::handleSubscribe(const proto::CommandSubscribe& c,
                                std::optional<uint64_t> confirmedEpoch) {
  MAGNETAR_DCHECK_ON(loop());
  std::optional<TopicName> name = validateSubscribe(c);
  if (!name) return;
  if (!allowed(*name, TopicOperation::kConsume, c.subscription())) {
    // subscription_auth_mode Prefix: Pulsar's exception text instead of the plain refusal.
    auto prefix =
        service_.authorization().subscriptionPrefixError(*name, authRole_, c.subscription());
    sendError(c.request_id(), proto::AuthorizationError,
              prefix ? *prefix : notAuthorizedMessage(*name, "subscribe"));
    return;
  }
  if (refuseMissingNamespace(*name, c.request_id())) return;
  // Read before the ownership check.
  const uint64_t ownershipEpoch = confirmedEpoch.value_or(currentOwnershipEpoch());
  if (!confirmedEpoch && !servesTopic(*name)) {
    return confirmOwnership(*name, c.request_id(), [me = self(), c, ownershipEpoch] {
      me->handleSubscribe(c, ownershipEpoch);
    });
  }
  std::optional<SubscribeRequest> req = newSubscribeRequest(c);
  if (!req) return;
  req->consumer->ownershipEpoch = ownershipEpoch;
  uint64_t consumerId = c.consumer_id();
  uint64_t requestId = c.request_id();
  consumers_[consumerId] = ConsumerRef{req->consumer, nullptr, c.subscription(), false, {}, {}};
  bool createTopic = service_.allowAutoTopicCreation(*name) &&
                     (!c.has_force_topic_creation() || c.force_topic_creation());
  std::optional<proto::Schema> schema;
  if (c.has_schema()) schema = c.schema();
  auto me = self();
  service_.getOrCreateTopic(
      *name, createTopic,
      [me, req = std::move(*req), requestId, consumerId,
       schema](Result<std::shared_ptr<PersistentTopic>> r) {
        if (!r.isOk()) {
          Status st = r.status();
          me->loop().execute([me, st, requestId, consumerId] {
            me->consumers_.erase(consumerId);
            me->sendError(requestId, toServerError(st, ErrorContext::kConsumer), st.message());
          });
          return;
        }
        auto topic = *r;
        auto subscribe = [me, topic, req, requestId, consumerId] {
          topic->subscribe(req, [me, topic, req, requestId, consumerId](const Status& s) {
            me->loop().execute([me, topic, req, requestId, consumerId, s] {
              me->onSubscribed(topic, req, requestId, consumerId, s);
            });
          });
        };
        if (!schema) return subscribe();
        checkConsumerSchema(me->service_, *topic, *schema,
                            [me, requestId, consumerId, subscribe](const SchemaAnswer& sa) {
                              if (sa.ok) return subscribe();
                              me->loop().execute([me, sa, requestId, consumerId] {
                                me->consumers_.erase(consumerId);
                                me->sendError(requestId, sa.error, sa.message);
                              });
                            });
      });
}

std::optional<TopicName> ServerCnx::validateSubscribe(const proto::CommandSubscribe& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t requestId = c.request_id();
  auto existing = consumers_.find(c.consumer_id());
  if (existing != consumers_.end()) {
    if (existing->second.ready) {
      send(Commands::newSuccess(requestId));
    } else {
      sendError(requestId, proto::ServiceNotReady, "Consumer is already being created");
    }
    return std::nullopt;
  }
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) {
    CnxErrorStats::record(ProtocolError::kInvalidName);
    sendError(requestId, proto::InvalidTopicName, name.status().message());
    return std::nullopt;
  }
  if (c.subscription().empty()) {
    CnxErrorStats::record(ProtocolError::kInvalidName);
    // Pulsar's code for its NamingException here is ProducerBusy, which clients do not retry
    // (MetadataError made them retry for their whole operation timeout).
    sendError(requestId, proto::ProducerBusy, "Empty subscription name");
    return std::nullopt;
  }
  if (c.read_compacted() && !name->isPersistent()) {  // Pulsar's NonPersistentTopic::subscribe
    sendError(requestId, proto::NotAllowedError, "readCompacted only valid on persistent topics");
    return std::nullopt;
  }
  return std::move(name.value());
}

std::optional<SubscribeRequest> ServerCnx::newSubscribeRequest(const proto::CommandSubscribe& c) {
  MAGNETAR_DCHECK_ON(loop());
  std::string consumerName = c.has_consumer_name() && !c.consumer_name().empty()
                                 ? c.consumer_name()
                                 : service_.generateProducerName();
  auto consumer = std::make_shared<Consumer>(c.consumer_id(), consumerName, self(), c.subtype(),
                                             c.has_priority_level() ? c.priority_level() : 0);
  for (const auto& kv : c.metadata()) consumer->metadata[kv.key()] = kv.value();
  if (c.has_keysharedmeta()) {
    const auto& ks = c.keysharedmeta();
    if (ks.keysharedmode() == proto::STICKY) {
      for (const auto& r : ks.hashranges()) consumer->stickyRanges.push_back({r.start(), r.end()});
      if (consumer->stickyRanges.empty()) {
        sendError(c.request_id(), proto::ConsumerAssignError, "STICKY mode needs hash ranges");
        return std::nullopt;
      }
    }
    consumer->allowOutOfOrderDelivery = ks.allowoutoforderdelivery();
  }
  SubscribeRequest req;
  req.subscription = c.subscription();
  req.subType = c.subtype();
  req.initialPosition = c.initialposition() == proto::CommandSubscribe::Earliest
                            ? storage::InitialPosition::kEarliest
                            : storage::InitialPosition::kLatest;
  req.createIfMissing = service_.options().dynamic.allowAutoSubscriptionCreation.load();
  req.durable = !c.has_durable() || c.durable();
  if (!req.durable) {
    req.createIfMissing = true;
    if (c.has_start_message_id()) {
      req.startPosition = {static_cast<int64_t>(c.start_message_id().ledgerid()),
                           static_cast<int64_t>(c.start_message_id().entryid())};
    } else {
      req.startPosition = {INT64_MAX, INT64_MAX};
      if (c.initialposition() == proto::CommandSubscribe::Earliest) req.startPosition = {-1, -1};
    }
  }
  req.readCompacted = c.read_compacted();
  req.replicateSubscriptionState = c.replicate_subscription_state();
  consumer->readCompacted = c.read_compacted();
  req.consumer = consumer;
  if (c.has_schema()) {
    consumer->autoConsumeSchema =
        schemaTypeFromProto(c.schema().type()) == SchemaType::AUTO_CONSUME;
  }
  return req;
}

void ServerCnx::onSubscribed(const std::shared_ptr<PersistentTopic>& topic,
                             const SubscribeRequest& req, uint64_t requestId, uint64_t consumerId,
                             const Status& s) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = consumers_.find(consumerId);
  // The entry may be a later SUBSCRIBE's with the same id (this one was closed meanwhile and the
  // id reused): then it is not this consumer's to answer or remove.
  if (it != consumers_.end() && it->second.consumer != req.consumer) it = consumers_.end();
  if (!s.isOk()) {
    if (it != consumers_.end()) consumers_.erase(it);
    proto::ServerError e = toServerError(s, ErrorContext::kConsumer);
    if (s.code() == StatusCode::kInvalidArgument) e = proto::ConsumerAssignError;
    // The topic exists: what is missing is the subscription (auto creation off), as Pulsar
    // answers.
    if (s.code() == StatusCode::kNotFound) e = proto::SubscriptionNotFound;
    sendError(requestId, e, s.message());
    return;
  }
  if (it == consumers_.end() || isClosed()) {
    // Closed meanwhile: undo.
    auto c = req.consumer;
    auto sub = req.subscription;
    topic->executor().execute([topic, c, sub] { topic->removeConsumer(c.get(), sub); });
    return;
  }
  it->second.topic = topic;
  it->second.ready = true;
  send(Commands::newSuccess(requestId));
  if (auto active = std::exchange(it->second.pendingActive, std::nullopt)) {
    send(Commands::newActiveConsumerChange(consumerId, *active));
  }
  it->second.consumer->subscribeAnswered.store(true, std::memory_order_release);
  auto waiting = std::move(it->second.waiting);
  for (auto& w : waiting) w();
}

ServerCnx::ConsumerRef* ServerCnx::readyConsumer(uint64_t consumerId, uint64_t requestId,
                                                 proto::ServerError error) {
  auto it = consumers_.find(consumerId);
  if (it == consumers_.end() || !it->second.ready) {
    CnxErrorStats::record(ProtocolError::kUnknownId);
    sendError(requestId, error, "Consumer not found");
    return nullptr;
  }
  return &it->second;
}

void ServerCnx::withConsumer(uint64_t consumerId, const std::function<void(ConsumerRef&)>& fn) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = consumers_.find(consumerId);
  if (it == consumers_.end()) {  // Pulsar ignores commands for unknown consumers
    CnxErrorStats::record(ProtocolError::kUnknownId);
    return;
  }
  if (!it->second.ready) {
    auto me = self();
    it->second.waiting.push_back([me, consumerId, fn] {
      auto i = me->consumers_.find(consumerId);
      if (i != me->consumers_.end()) fn(i->second);
    });
    return;
  }
  fn(it->second);
}

void ServerCnx::handleFlow(const proto::CommandFlow& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint32_t permits = c.messagepermits();
  withConsumer(c.consumer_id(), [permits](ConsumerRef& ref) {
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([topic, consumer, sub, permits] {
      if (consumer->closed) return;
      auto* s = topic->subscription(sub);
      if (s && s->dispatcher()) s->dispatcher()->flow(consumer.get(), permits);
    });
  });
}

void ServerCnx::onWritable() {
  MAGNETAR_DCHECK_ON(loop());
  for (auto& [id, ref] : consumers_) {
    if (!ref.ready) continue;
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([topic, consumer, sub] {
      if (consumer->closed) return;
      auto* s = topic->subscription(sub);
      if (s && s->dispatcher()) s->dispatcher()->consumerWritable(consumer.get());
    });
  }
}

void ServerCnx::handleAck(const proto::CommandAck& c) {
  MAGNETAR_DCHECK_ON(loop());
  if (c.has_txnid_most_bits() && c.has_txnid_least_bits()) return handleTxnAck(c);
  // Whole entries, and batch-index acks (PIP-54: ack_set bit i set = index i not yet acked).
  // With acknowledgmentAtBatchIndexLevelEnabled off, a partial individual ack is ignored and a
  // partial cumulative ack covers the entries before its batch, as in Pulsar.
  const bool batchIndexAck = service_.options().acknowledgmentAtBatchIndexLevelEnabled;
  std::vector<storage::Position> positions;
  std::vector<std::pair<storage::Position, storage::AckSet>> partial;
  positions.reserve(c.message_id_size());
  for (const auto& id : c.message_id()) {
    storage::Position pos{static_cast<int64_t>(id.ledgerid()), static_cast<int64_t>(id.entryid())};
    bool anyLeft = false;
    for (auto w : id.ack_set()) anyLeft |= (w != 0);
    if (!anyLeft) {
      positions.push_back(pos);
    } else if (batchIndexAck) {
      partial.emplace_back(pos, storage::AckSet(id.ack_set().begin(), id.ack_set().end()));
    } else if (c.ack_type() == proto::CommandAck::Cumulative && pos.entryId > 0) {
      positions.push_back({pos.ledgerId, pos.entryId - 1});
    }
  }
  bool cumulative = c.ack_type() == proto::CommandAck::Cumulative;
  // Pulsar's Consumer.messageAcked ignores a cumulative ack of more than one id (and answers Ok).
  if (cumulative && c.message_id_size() != 1) {
    positions.clear();
    partial.clear();
  }
  bool wantResponse = c.has_request_id();
  uint64_t requestId = c.request_id();
  uint64_t consumerId = c.consumer_id();
  auto me = self();
  withConsumer(consumerId, [=](ConsumerRef& ref) {
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([=] {
      auto* s = topic->subscription(sub);
      // The ack is applied here, in memory; its cursor write follows under
      // managedLedgerDefaultMarkDeleteRateLimit. The receipt says "applied", not "persisted":
      // Pulsar's Consumer.messageAcked completes a non-transactional ack at once.
      if (s && !(positions.empty() && partial.empty())) {
        if (cumulative) {
          if (!partial.empty()) {
            s->acknowledgeCumulative(consumer.get(), partial.back().first, nullptr,
                                     partial.back().second);
          } else {
            s->acknowledgeCumulative(consumer.get(), positions.back(), nullptr);
          }
        } else {
          s->acknowledge(consumer.get(), positions, nullptr, partial);
        }
      }
      if (!wantResponse) return;
      if (s) {
        me->send(Commands::newAckResponse(consumerId, requestId));
      } else {
        me->send(Commands::newAckResponse(consumerId, requestId, proto::ServerError::MetadataError,
                                          "Subscription not found"));
      }
    });
  });
}

void ServerCnx::handleRedeliver(const proto::CommandRedeliverUnacknowledgedMessages& c) {
  MAGNETAR_DCHECK_ON(loop());
  std::vector<storage::Position> positions;
  for (const auto& id : c.message_ids()) {
    positions.push_back({static_cast<int64_t>(id.ledgerid()), static_cast<int64_t>(id.entryid())});
  }
  withConsumer(c.consumer_id(), [positions](ConsumerRef& ref) {
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([=] {
      auto* s = topic->subscription(sub);
      if (s && s->dispatcher() && !consumer->closed)
        s->dispatcher()->redeliver(consumer.get(), positions);
    });
  });
}

void ServerCnx::handleCloseConsumer(const proto::CommandCloseConsumer& c) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = consumers_.find(c.consumer_id());
  uint64_t requestId = c.request_id();
  if (it == consumers_.end()) {
    CnxErrorStats::record(ProtocolError::kUnknownId);
    send(Commands::newSuccess(requestId));
    return;
  }
  if (!it->second.ready) {
    consumers_.erase(it);
    send(Commands::newSuccess(requestId));
    return;
  }
  auto topic = it->second.topic;
  auto consumer = it->second.consumer;
  auto sub = it->second.subscription;
  consumer->subscribeAnswered.store(false, std::memory_order_release);  // no more events
  consumers_.erase(it);
  auto me = self();
  topic->executor().execute([=] {
    topic->removeConsumer(consumer.get(), sub);
    me->send(Commands::newSuccess(requestId));
  });
}

void ServerCnx::closeConsumerFromBroker(uint64_t consumerId) {
  auto me = self();
  loop().execute([me, consumerId] {
    auto it = me->consumers_.find(consumerId);
    if (it == me->consumers_.end()) return;
    it->second.consumer->subscribeAnswered.store(false, std::memory_order_release);
    me->consumers_.erase(it);
    me->send(Commands::newCloseConsumer(consumerId, 0));
  });
}

void ServerCnx::sendActiveConsumerChange(const Consumer* consumer, bool isActive) {
  uint64_t id = consumer->id();
  if (consumer->subscribeAnswered.load(std::memory_order_acquire)) {
    // Queued at once, so it goes out before the messages the dispatcher queues next (Pulsar
    // writes the event before the new active consumer's first read completes).
    send(Commands::newActiveConsumerChange(id, isActive));
    return;
  }
  auto me = self();
  // `consumer` only identifies the entry (never dereferenced on the loop).
  loop().execute([me, consumer, id, isActive] {
    auto it = me->consumers_.find(id);
    if (it == me->consumers_.end() || it->second.consumer.get() != consumer) return;  // gone
    if (!it->second.ready) {
      it->second.pendingActive = isActive;  // sent after the SUBSCRIBE's SUCCESS
      return;
    }
    me->send(Commands::newActiveConsumerChange(id, isActive));
  });
}

void ServerCnx::handleUnsubscribe(const proto::CommandUnsubscribe& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t requestId = c.request_id();
  uint64_t consumerId = c.consumer_id();
  ConsumerRef* ref = readyConsumer(consumerId, requestId, proto::MetadataError);
  if (!ref) return;
  auto topic = ref->topic;
  auto consumer = ref->consumer;
  auto sub = ref->subscription;
  auto me = self();
  topic->executor().execute([=] {
    Status s = topic->unsubscribe(sub, consumer.get());
    me->loop().execute([=] {
      if (!s.isOk()) {
        // Pulsar answers MetadataError when other consumers are still connected.
        proto::ServerError e = s.code() == StatusCode::kBusy
                                   ? proto::MetadataError
                                   : toServerError(s, ErrorContext::kSubscription);
        me->sendError(requestId, e, s.message());
        return;
      }
      me->consumers_.erase(consumerId);
      me->send(Commands::newSuccess(requestId));
    });
  });
}

void ServerCnx::handleSeek(const proto::CommandSeek& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t requestId = c.request_id();
  ConsumerRef* ref = readyConsumer(c.consumer_id(), requestId, proto::MetadataError);
  if (!ref) return;
  if (!c.has_message_id() && !c.has_message_publish_time()) {
    sendError(requestId, proto::MetadataError,
              "Message id and message publish time were not present");
    return;
  }
  auto topic = ref->topic;
  auto sub = ref->subscription;
  bool byTime = !c.has_message_id();
  storage::Position pos{static_cast<int64_t>(c.message_id().ledgerid()),
                        static_cast<int64_t>(c.message_id().entryid())};
  uint64_t publishTime = c.message_publish_time();
  auto me = self();
  topic->executor().execute([=, this] {
    auto finish = [=](storage::Position target) {
      auto* s = topic->subscription(sub);
      if (!s) {
        me->sendError(requestId, proto::SubscriptionNotFound, "Subscription not found");
        return;
      }
      // As Pulsar: first disconnect every consumer of the subscription (CLOSE_CONSUMER; acks
      // still in flight from them are then dropped), then reset the cursor, then answer. The
      // clients reconnect and read from the new position.
      if (s->dispatcher()) {
        for (auto& c2 : s->dispatcher()->takeConsumers()) {
          s->removeConsumer(c2.get());
          c2->sink()->closeConsumerFromBroker(c2->id());
        }
      }
      s->resetCursor(target, [=](const Status& st) {
        me->loop().execute([=] {
          if (!st.isOk()) {
            me->sendError(requestId, toServerError(st, ErrorContext::kSubscription), st.message());
          } else {
            me->send(Commands::newSuccess(requestId));
          }
        });
      });
    };
    if (byTime) {
      service_.findPositionByPublishTime(topic, publishTime, finish);
    } else {
      finish(service_.clampSeekPosition(*topic, pos));
    }
  });
}

void ServerCnx::handleGetLastMessageId(const proto::CommandGetLastMessageId& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t requestId = c.request_id();
  ConsumerRef* ref = readyConsumer(c.consumer_id(), requestId, proto::ConsumerNotFound);
  if (!ref) return;
  auto topic = ref->topic;
  auto sub = ref->subscription;
  bool readCompacted = ref->consumer && ref->consumer->readCompacted;
  auto me = self();
  topic->executor().execute([=, this] {
    service_.lastMessageId(
        topic, sub, readCompacted,
        [=](protocol::WireMessageId last, std::optional<protocol::WireMessageId> markDelete) {
          me->send(Commands::newGetLastMessageIdResponse(requestId, last, markDelete));
        });
  });
}

}  // namespace magnetar::broker
