// MqttConnection's subscriptions (MoP's model): each Pulsar topic an MQTT filter selects gets one
// Shared consumer on the subscription named by the client id, so a client that comes back
// resumes where its cursor stands; a shared subscription ($share/{group}/{filter}) consumes from
// the Shared subscription named by the group, which Pulsar's dispatcher splits across the
// group's members (a leaving member's unacknowledged messages go to the others). A wildcard filter
// selects the default namespace's topics whose URL-decoded local name matches, and the ones created
// later. Delivery is bounded by the in-flight window (permits given back as the client
// acknowledges); PUBACK acknowledges the entry.
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/common/topic_name.h"
#include "broker/common/wall_clock.h"
#include "broker/service/broker_service.h"
#include "mqtt/message_mapping.h"
#include "mqtt/mqtt_connection.h"
#include "mqtt/mqtt_service.h"
#include "mqtt/mqtt_sink.h"
#include "mqtt/mqtt_state.h"
#include "mqtt/mqtt_stats.h"
#include "mqtt/topic_mapping.h"

namespace magnetar::mqtt {

namespace {
// A filter's SUBACK failure code in either version.
uint8_t subscribeFailure(ProtocolVersion v, uint8_t v5Reason) {
  return v == ProtocolVersion::kV5 ? v5Reason : reason::kV3SubscribeFailure;
}
// consumerByTopic_'s key: one consumer per (Pulsar subscription, topic).
std::string consumerKey(const std::string& subscription, const std::string& pulsarTopic) {
  return subscription + '\n' + pulsarTopic;
}
}  // namespace

void MqttConnection::handleSubscribe(Subscribe&& s) {
  const uint16_t packetId = s.packetId;
  std::vector<bool> retained;  // per request: its retained messages go out after the SUBACK
  for (const auto& req : s.subscriptions) {
    auto shared = parseSharedFilter(req.filter);
    if (shared.isOk() && *shared && req.noLocal && version_ == ProtocolVersion::kV5) {
      return fail(Status::invalidArgument("protocol error: No Local on the shared subscription " +
                                          req.filter + " (MQTT-3.8.3-4)"));
    }
    const bool existed = filters_.count(req.filter) > 0;
    // MQTT 5 4.8.2: a shared subscription gets no retained messages when it is made.
    retained.push_back(
        !(shared.isOk() && *shared) &&
        sendsRetained(version_ == ProtocolVersion::kV5 ? req.retainHandling : 0, existed));
    if (shared.isOk() && validTopicFilter(selectingFilter(req.filter))) {
      SubscriptionRequest granted = req;
      granted.qos = std::min<uint8_t>(req.qos, 2);
      filters_[req.filter] = granted;
      MqttStats::subscriptions.fetch_add(1, std::memory_order_relaxed);
    }
  }
  saveSession();
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  subscribeFilters(s.subscriptions,
                   [me, packetId, retained, subs = s.subscriptions](std::vector<uint8_t> codes) {
                     if (me->closing_) return;
                     std::vector<uint8_t> granted = codes;
                     me->send(SubAck{PacketType::kSuback, packetId, {}, std::move(codes)});
                     for (size_t i = 0; i < subs.size(); i++) {
                       if (granted[i] < 0x80 && retained[i]) me->sendRetained(subs[i], granted[i]);
                     }
                     me->sendQueued();
                   });
}

// MQTT 3.3.1.3: the retained messages a new subscription matches go out with the retain flag,
// at most at the granted QoS; a topic this role may not consume from is left out.
void MqttConnection::sendRetained(const SubscriptionRequest& req, uint8_t granted) {
  const MqttOptions& o = service_.options();
  const int64_t now = broker::wallClockMs() / 1000;
  for (RetainedMessage& r : service_.state().retainedMatching(req.filter)) {
    auto name = pulsarTopicName(r.topic, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
    auto parsed =
        name.isOk() ? broker::TopicName::parse(*name) : Result<broker::TopicName>(name.status());
    if (!parsed.isOk() || !authorized(*parsed, /*produce=*/false)) continue;
    Publish p;
    p.topic = std::move(r.topic);
    p.payload = std::move(r.payload);
    p.retain = true;
    p.qos = std::min(r.qos, granted);
    Properties props;
    if (!propertiesFromPulsar(r.pulsarProperties, now, &props)) continue;  // expired meanwhile
    if (version_ == ProtocolVersion::kV5) p.properties = std::move(props);
    if (p.qos == 0) {
      send(p);
      continue;
    }
    queued_.push_back(Queued{std::move(p), kRetainedDelivery, {}});
  }
}

void MqttConnection::subscribeFilters(const std::vector<SubscriptionRequest>& subs,
                                      std::function<void(std::vector<uint8_t>)> done,
                                      storage::InitialPosition initial) {
  struct Pending {
    std::vector<uint8_t> codes;
    size_t left = 1;  // one for this function's own pass
    std::function<void(std::vector<uint8_t>)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->codes.resize(subs.size());
  pending->done = std::move(done);
  auto finishOne = [pending] {
    if (--pending->left == 0) pending->done(std::move(pending->codes));
  };
  const MqttOptions& o = service_.options();
  for (size_t i = 0; i < subs.size(); i++) {
    const SubscriptionRequest& req = subs[i];
    const uint8_t granted = std::min<uint8_t>(req.qos, 2);
    pending->codes[i] = granted;
    auto shared = parseSharedFilter(req.filter);
    if (!shared.isOk() || !validTopicFilter(selectingFilter(req.filter))) {
      if (!shared.isOk()) {
        MLOG_WARN("[{}] MQTT client {}: {}", peerAddress(), clientId_, shared.status().message());
      }
      pending->codes[i] = subscribeFailure(version_, reason::kTopicFilterInvalid);
      continue;
    }
    const std::string subscription = *shared ? (*shared)->group : clientId_;
    const std::string filter = *shared ? (*shared)->filter : req.filter;
    auto record = [pending, i, finishOne](uint8_t code) {
      if (code >= 0x80) pending->codes[i] = code;
      finishOne();
    };
    if (!isWildcardFilter(filter)) {
      auto name =
          pulsarTopicName(filter, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
      if (!name.isOk()) {
        pending->codes[i] = subscribeFailure(version_, reason::kTopicFilterInvalid);
        continue;
      }
      pending->left++;
      subscribeTopic(*name, filter, req, subscription, initial, record);
      continue;
    }
    watchNamespace();
    const auto domain = o.defaultTopicDomain == "non-persistent"
                            ? broker::TopicDomain::kNonPersistent
                            : broker::TopicDomain::kPersistent;
    for (const std::string& t :
         service_.broker().topicsOfNamespace(o.defaultTenant + "/" + o.defaultNamespace, domain)) {
      auto parsed = broker::TopicName::parse(t);
      if (!parsed.isOk()) continue;
      auto decoded = urlDecode(parsed->localName());
      if (!decoded.isOk() || !topicMatches(filter, *decoded)) continue;
      pending->left++;
      subscribeTopic(t, *decoded, req, subscription, initial, record);
    }
  }
  finishOne();
}

void MqttConnection::subscribeTopic(const std::string& pulsarTopic, const std::string& mqttTopic,
                                    const SubscriptionRequest& req, const std::string& subscription,
                                    storage::InitialPosition initial,
                                    const std::function<void(uint8_t)>& done) {
  const uint8_t granted = std::min<uint8_t>(req.qos, 2);
  const std::string key = consumerKey(subscription, pulsarTopic);
  auto existing = consumerByTopic_.find(key);
  if (existing != consumerByTopic_.end()) {
    ConsumerState& cs = consumers_[existing->second];
    cs.filters.insert(req.filter);
    cs.qos = std::max(cs.qos, granted);
    return done(granted);
  }
  broker::BrokerService& broker = service_.broker();
  auto name = broker::TopicName::parse(pulsarTopic);
  if (!name.isOk() ||
      (!broker.topicOwnership() && !broker.namespaceExists(name->namespaceName()))) {
    return done(subscribeFailure(version_, reason::kTopicFilterInvalid));
  }
  if (!authorized(*name, /*produce=*/false, subscription)) {
    return done(subscribeFailure(version_, reason::kNotAuthorized));
  }
  const uint64_t id = nextConsumerId_++;
  auto consumer =
      std::make_shared<broker::Consumer>(id, clientId_, sink_, proto::CommandSubscribe::Shared, 0);
  consumers_[id] = ConsumerState{consumer, nullptr, mqttTopic, {req.filter}, granted, subscription};
  consumerByTopic_[key] = id;
  const uint32_t window =
      version_ == ProtocolVersion::kV5 ? clientReceiveMaximum_ : service_.options().receiveMaximum;
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  auto answer = [me, id, pulsarTopic, key, done, granted, consumer, subscription](
                    const Status& st, const std::shared_ptr<broker::PersistentTopic>& topic) {
    me->loop().execute(
        [me, id, pulsarTopic, key, done, granted, consumer, subscription, st, topic] {
          auto it = me->consumers_.find(id);
          if (st.isOk() && (it == me->consumers_.end() || me->closing_)) {
            // Unsubscribed or closed meanwhile: the consumer leaves again.
            topic->executor().execute([topic, consumer, subscription] {
              topic->removeConsumer(consumer.get(), subscription);
            });
            return done(granted);
          }
          if (!st.isOk()) {
            MLOG_WARN("[{}] MQTT client {} cannot subscribe to {}: {}", me->peerAddress(),
                      me->clientId_, pulsarTopic, st.message());
            if (it != me->consumers_.end()) me->consumers_.erase(it);
            me->consumerByTopic_.erase(key);
            return done(subscribeFailure(me->version_, reason::kUnspecifiedError));
          }
          it->second.topic = topic;
          done(granted);
        });
  };
  broker.getOrCreateTopic(*name, broker.allowAutoTopicCreation(*name),
                          [consumer, initial, window, answer,
                           subscription](Result<std::shared_ptr<broker::PersistentTopic>> r) {
                            if (!r.isOk()) return answer(r.status(), nullptr);
                            auto topic = *r;
                            broker::SubscribeRequest sr;
                            sr.subscription = subscription;
                            sr.subType = proto::CommandSubscribe::Shared;  // MoP's MQTTConsumer
                            sr.initialPosition = initial;
                            sr.consumer = consumer;
                            topic->subscribe(sr, [topic, consumer, window, answer,
                                                  sub = subscription](const Status& st) {
                              // The answer reaches the loop before any MESSAGE the permits release
                              // (one inbox).
                              answer(st, topic);
                              if (!st.isOk()) return;
                              consumer->subscribeAnswered.store(true, std::memory_order_release);
                              auto* s = topic->subscription(sub);
                              if (s && s->dispatcher())
                                s->dispatcher()->flow(consumer.get(), window);
                            });
                          });
}

void MqttConnection::watchNamespace() {
  if (topicWatch_) return;
  const MqttOptions& o = service_.options();
  std::weak_ptr<net::Connection> weak = shared_from_this();
  topicWatch_ = service_.broker().topicListeners().add(
      o.defaultTenant + "/" + o.defaultNamespace, [weak](const std::string& topic, bool created) {
        if (!created) return;
        auto c = weak.lock();
        if (!c) return;
        auto* me = static_cast<MqttConnection*>(c.get());
        c->loop().execute([c, me, topic] { me->onTopicCreated(topic); });
      });
}

void MqttConnection::onTopicCreated(const std::string& pulsarTopic) {
  if (closing_) return;
  auto parsed = broker::TopicName::parse(pulsarTopic);
  if (!parsed.isOk()) return;
  auto decoded = urlDecode(parsed->localName());
  if (!decoded.isOk()) return;
  for (const auto& [full, req] : filters_) {
    auto shared = parseSharedFilter(full);
    if (!shared.isOk()) continue;
    const std::string filter = *shared ? (*shared)->filter : full;
    const std::string subscription = *shared ? (*shared)->group : clientId_;
    if (!isWildcardFilter(filter) || !topicMatches(filter, *decoded)) continue;
    if (consumerByTopic_.count(consumerKey(subscription, pulsarTopic))) continue;
    // MoP subscribes a topic created after the filter from its start.
    subscribeTopic(pulsarTopic, *decoded, req, subscription, storage::InitialPosition::kEarliest,
                   [](uint8_t) {});
  }
}

uint16_t MqttConnection::nextPacketId() {
  for (int i = 0; i < 65535; i++) {
    lastPacketId_ = static_cast<uint16_t>(lastPacketId_ % 65535 + 1);
    if (!outstanding_.count(lastPacketId_)) return lastPacketId_;
  }
  return 0;  // every id in use: not reachable, the window is at most 65535
}

void MqttConnection::onMessage(uint64_t consumerId, storage::Position pos, const Buffer& entry) {
  auto it = consumers_.find(consumerId);
  if (it == consumers_.end() || closing_) return;  // unsubscribed: redelivered to the next one
  ConsumerState& cs = it->second;
  auto msgs = messagesOfEntry(entry, broker::wallClockMs() / 1000);
  if (!msgs.isOk()) {
    MLOG_WARN("[{}] MQTT client {}: entry {}:{} of {} skipped: {}", peerAddress(), clientId_,
              pos.ledgerId, pos.entryId, cs.mqttTopic, msgs.status().message());
    return ackEntry(consumerId, pos, 1);
  }
  const uint32_t total = static_cast<uint32_t>(msgs->size());
  uint32_t waiting = 0;
  // MQTT 5 Retain As Published on a filter that selected the topic keeps the retain flag;
  // otherwise a message to an existing subscription goes with retain 0 (3.3.1.3).
  bool asPublished = false;
  for (const std::string& f : cs.filters) {
    auto fit = filters_.find(f);
    asPublished |= fit != filters_.end() && fit->second.retainAsPublished;
  }
  asPublished &= version_ == ProtocolVersion::kV5;
  for (DeliveredMessage& m : *msgs) {
    if (m.expired) continue;
    Publish p;
    p.retain = asPublished && m.retained;
    p.qos = cs.qos;
    p.topic = cs.mqttTopic;
    p.payload = std::move(m.payload);
    if (version_ == ProtocolVersion::kV5) p.properties = std::move(m.properties);
    MqttStats::delivered(p.payload.size());
    if (p.qos == 0) {
      send(p);
      continue;
    }
    waiting++;
    queued_.push_back(Queued{std::move(p), consumerId, pos});
  }
  sendQueued();
  if (waiting == 0) return ackEntry(consumerId, pos, total);
  entryLeft_[EntryKey{consumerId, pos}] = {waiting, total};
}

// QoS 1 messages go out while fewer than the in-flight window are unacknowledged on the
// connection (MQTT 5: the client's Receive Maximum; 3.1.1: receiveMaximum); the rest wait here,
// bounded by the consumers' permits.
void MqttConnection::sendQueued() {
  const size_t window =
      version_ == ProtocolVersion::kV5 ? clientReceiveMaximum_ : service_.options().receiveMaximum;
  while (!queued_.empty() && outstanding_.size() < window) {
    Queued q = std::move(queued_.front());
    queued_.pop_front();
    if (q.consumerId != kRetainedDelivery && !consumers_.count(q.consumerId)) {
      continue;  // unsubscribed meanwhile
    }
    q.publish.packetId = nextPacketId();
    outstanding_[q.publish.packetId] = Outstanding{q.consumerId, q.position};
    send(q.publish);
  }
}

void MqttConnection::handlePuback(const PubAck& a) {
  auto it = outstanding_.find(a.packetId);
  if (it == outstanding_.end()) return;  // MQTT 4.3.2: an unknown id is ignored
  if (it->second.released) return;       // a QoS 2 delivery: PUBCOMP ends it
  const Outstanding o = it->second;
  outstanding_.erase(it);
  sendQueued();
  deliveryAcked(o);
}

// MQTT 4.3.3, sender side: PUBREC means the client has the message (the entry is acknowledged
// now and the PUBLISH never sent again); PUBREL follows, PUBCOMP frees the packet id.
void MqttConnection::handlePubrec(const PubAck& a) {
  const bool v5 = version_ == ProtocolVersion::kV5;
  auto it = outstanding_.find(a.packetId);
  if (it == outstanding_.end()) {
    PubAck rel{PacketType::kPubrel, a.packetId, reason::kSuccess, {}};
    if (v5) rel.reasonCode = reason::kPacketIdentifierNotFound;
    return send(rel);
  }
  const Outstanding o = it->second;
  if (v5 && a.reasonCode >= 0x80) {
    // MQTT 5 4.3.3: a failing PUBREC ends the exchange; the message is not sent again.
    outstanding_.erase(it);
    sendQueued();
  } else {
    it->second.released = true;
    send(PubAck{PacketType::kPubrel, a.packetId, reason::kSuccess, {}});
  }
  if (!o.released) deliveryAcked(o);
}

void MqttConnection::handlePubcomp(const PubAck& a) {
  auto it = outstanding_.find(a.packetId);
  if (it == outstanding_.end() || !it->second.released) return;  // unknown: ignored
  outstanding_.erase(it);
  sendQueued();
}

void MqttConnection::deliveryAcked(const Outstanding& o) {
  const EntryKey key{o.consumerId, o.position};
  auto e = entryLeft_.find(key);
  if (e == entryLeft_.end()) return;
  if (--e->second.first > 0) return;
  const uint32_t total = e->second.second;
  entryLeft_.erase(e);
  ackEntry(key.consumerId, key.position, total);
}

void MqttConnection::ackEntry(uint64_t consumerId, storage::Position pos, uint32_t messages) {
  auto it = consumers_.find(consumerId);
  if (it == consumers_.end() || !it->second.topic) return;
  auto topic = it->second.topic;
  auto consumer = it->second.consumer;
  topic->executor().execute([topic, consumer, pos, messages, sub = it->second.subscription] {
    if (consumer->closed) return;
    auto* s = topic->subscription(sub);
    if (!s) return;
    s->acknowledge(consumer.get(), {pos}, nullptr);
    if (s->dispatcher()) s->dispatcher()->flow(consumer.get(), messages);
  });
}

void MqttConnection::handleUnsubscribe(Unsubscribe&& u) {
  std::vector<uint8_t> codes;
  for (const std::string& f : u.filters) {
    const bool existed = filters_.erase(f) > 0;
    codes.push_back(existed ? reason::kSuccess : reason::kNoSubscriptionExisted);
    for (auto it = consumers_.begin(); it != consumers_.end();) {
      ConsumerState& cs = it->second;
      cs.filters.erase(f);
      if (!cs.filters.empty() || !cs.topic) {
        ++it;
        continue;
      }
      // MoP unsubscribes: the Pulsar subscription goes with the last filter on its topic (a
      // shared subscription's group stays for its other members).
      auto topic = cs.topic;
      auto consumer = cs.consumer;
      const bool own = cs.subscription == clientId_;
      topic->executor().execute([topic, consumer, own, sub = cs.subscription] {
        topic->removeConsumer(consumer.get(), sub);
        if (own) topic->unsubscribe(sub, nullptr);
      });
      consumerByTopic_.erase(consumerKey(cs.subscription, topic->name().toString()));
      it = consumers_.erase(it);
    }
  }
  saveSession();
  send(SubAck{PacketType::kUnsuback, u.packetId, {}, std::move(codes)});
}

void MqttConnection::dropConsumers(bool deleteSubscriptions) {
  for (auto& [id, cs] : consumers_) {
    if (!cs.topic) continue;
    auto topic = cs.topic;
    auto consumer = cs.consumer;
    const bool remove = deleteSubscriptions && cs.subscription == clientId_;  // not a group's
    topic->executor().execute([topic, consumer, remove, sub = cs.subscription] {
      topic->removeConsumer(consumer.get(), sub);
      if (remove) topic->unsubscribe(sub, nullptr);
    });
  }
  consumers_.clear();
  consumerByTopic_.clear();
  outstanding_.clear();
  queued_.clear();
  entryLeft_.clear();
}

}  // namespace magnetar::mqtt
