// MqttConnection's publishing: a PUBLISH becomes one entry appended to the mapped Pulsar topic
// by this client's producer on it; QoS 1 is acknowledged (PUBACK) only when the topic's receipt
// says the entry is durable, the same path that answers a Pulsar producer's SEND.
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
#include "protocol/commands.h"

namespace magnetar::mqtt {

namespace {
// Producer creation refused with ProducerBusy (the client's previous connection still holds the
// name while it closes, after a session take-over) is tried again this many times, this far apart.
constexpr int kProducerBusyRetries = 10;
constexpr std::chrono::milliseconds kProducerBusyDelay{100};
}  // namespace

void MqttConnection::handlePublish(Publish&& p) {
  const bool v5 = version_ == ProtocolVersion::kV5;
  if (v5) {
    std::string why;
    const uint8_t rc =
        resolveTopicAlias(&p, service_.options().topicAliasMaximum, &topicAliases_, &why);
    if (rc != reason::kSuccess) return disconnect(rc, why);
  }
  if (p.qos == 2 && qos2Received_.count(p.packetId)) {
    // MQTT 4.3.3: the id is stored and not released yet, so this is the same message sent
    // again (DUP, or after a reconnect): PUBREC again, not stored twice.
    MLOG_DEBUG("[{}] MQTT client {}: QoS 2 packet id {} again; not stored twice", peerAddress(),
               clientId_, p.packetId);
    return send(PubAck{PacketType::kPubrec, p.packetId, reason::kSuccess, {}});
  }
  if (p.qos == 2 && qos2InFlight_.count(p.packetId)) return;  // the first copy's PUBREC answers
  if (p.qos > 0 && v5 && pendingQos1_ >= service_.options().receiveMaximum) {
    return disconnect(reason::kReceiveMaximumExceeded,
                      fmt::format("more than Receive Maximum ({}) QoS 1/2 PUBLISHes unacknowledged",
                                  service_.options().receiveMaximum));
  }
  const PacketType ackType = p.qos == 2 ? PacketType::kPubrec : PacketType::kPuback;
  const MqttOptions& o = service_.options();
  auto name = pulsarTopicName(p.topic, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
  std::optional<broker::TopicName> parsed;
  if (name.isOk()) {
    auto t = broker::TopicName::parse(*name);
    if (t.isOk()) parsed = std::move(*t);
  }
  if (!parsed) {
    if (p.qos > 0 && v5) {
      PubAck a{ackType, p.packetId, reason::kTopicNameInvalid, {}};
      a.properties.strings[PropertyId::kReasonString] = "invalid topic name " + p.topic;
      return send(a);
    }
    return disconnect(reason::kTopicNameInvalid, "invalid topic name " + p.topic);
  }
  if (!authorized(*parsed, /*produce=*/true)) {
    if (p.qos > 0 && v5) return send(PubAck{ackType, p.packetId, reason::kNotAuthorized, {}});
    return disconnect(reason::kNotAuthorized, "not authorized to publish to " + p.topic);
  }
  auto it = producers_.find(parsed->toString());
  const bool create = it == producers_.end();
  if (create) it = producers_.emplace(parsed->toString(), ProducerState{}).first;
  if (!it->second.producer) {
    // Held until the producer is ready; they count in the window (updateReading), so a burst
    // pipelined behind the first PUBLISH to a topic pauses reading instead of piling up here.
    if (p.qos == 2) qos2InFlight_.insert(p.packetId);  // a DUP meanwhile is not stored twice
    it->second.waiting.push_back(std::move(p));
    waitingPublishes_++;
    if (create) createProducer(parsed->toString(), 0);
    updateReading();
    return;
  }
  publishTo(it->second, std::move(p));
}

void MqttConnection::publishTo(ProducerState& ps, Publish&& p) {
  MqttStats::published(p.payload.size());
  proto::MessageMetadata md;
  md.set_producer_name(clientId_);
  md.set_sequence_id(ps.nextSequenceId);
  md.set_publish_time(static_cast<uint64_t>(broker::wallClockMs()));
  toPulsarProperties(p, broker::wallClockMs() / 1000, &md);
  broker::PendingSend send;
  send.producer = ps.producer;
  send.sequenceId = ps.nextSequenceId;
  send.highestSequenceId = ps.nextSequenceId;
  send.entry = protocol::Commands::newEntry(md, p.payload);
  const uint64_t producerId = ps.producer->id();
  const uint64_t seq = ps.nextSequenceId;
  inFlight_[producerId][seq] =
      InFlight{p.qos > 0 ? p.packetId : uint16_t{0}, uint8_t(p.retain ? 2 : 1), p.qos, {}, {}};
  if (p.qos == 2) qos2InFlight_.insert(p.packetId);
  ps.nextSequenceId++;
  if (p.retain) {
    // The topic's retained message (empty payload: deleted), written beside the entry; the
    // PUBACK waits for both.
    auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
    service_.state().setRetained(p, &loop(), [me, producerId, seq](const Status& st) {
      me->completeInFlight(producerId, seq, /*receipt=*/false, st);
    });
  }
  pendingPublishes_++;
  if (p.qos > 0) pendingQos1_++;
  for (auto& [topic, sends] : sendBatch_) {
    if (topic == ps.topic) {
      sends.push_back(std::move(send));
      updateReading();
      return;
    }
  }
  sendBatch_.emplace_back(ps.topic, std::vector<broker::PendingSend>{});
  sendBatch_.back().second.push_back(std::move(send));
  updateReading();
}

void MqttConnection::flushSends() {
  for (auto& [topic, sends] : sendBatch_) {
    topic->executor().execute(
        [topic = topic, batch = std::move(sends)]() mutable { topic->publish(batch); });
  }
  sendBatch_.clear();
}

void MqttConnection::createProducer(const std::string& pulsarTopic, int attempt) {
  broker::BrokerService& broker = service_.broker();
  auto name = *broker::TopicName::parse(pulsarTopic);
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  if (!broker.topicOwnership() && !broker.namespaceExists(name.namespaceName())) {
    return producerReady(pulsarTopic,
                         Status::notFound("namespace " + name.namespaceName() + " does not exist"),
                         nullptr, nullptr, attempt);
  }
  auto producer = std::make_shared<broker::Producer>(nextProducerId_++, clientId_, sink_);
  producer->metadata["mqtt-client-id"] = clientId_;
  broker.getOrCreateTopic(
      name, broker.allowAutoTopicCreation(name),
      [me, pulsarTopic, producer, attempt](Result<std::shared_ptr<broker::PersistentTopic>> r) {
        if (!r.isOk()) {
          me->loop().execute([me, pulsarTopic, st = r.status(), attempt] {
            me->producerReady(pulsarTopic, st, nullptr, nullptr, attempt);
          });
          return;
        }
        auto topic = *r;
        topic->addProducer(
            producer,
            [me, pulsarTopic, topic, producer, attempt](const Status& s, proto::ServerError,
                                                        std::optional<uint64_t>) {
              // MoP: the sequence ids go on from the topic's last one for this producer name.
              const int64_t last = s.isOk() ? topic->lastSequenceId(producer->name()) : -1;
              me->loop().execute([me, pulsarTopic, topic, producer, s, last, attempt] {
                me->producerReady(pulsarTopic, s, topic, producer, attempt, last + 1);
              });
            },
            [] {});
      });
}

void MqttConnection::producerReady(const std::string& pulsarTopic, const Status& st,
                                   const std::shared_ptr<broker::PersistentTopic>& topic,
                                   const std::shared_ptr<broker::Producer>& producer, int attempt,
                                   int64_t nextSequenceId) {
  MAGNETAR_DCHECK_ON(loop());
  // Closing (DISCONNECT, or closed): the entry is still there while PUBLISHes received before
  // the close wait for this producer; they are published, then the producer leaves.
  auto it = producers_.find(pulsarTopic);
  if (it == producers_.end()) {
    if (st.isOk()) {
      topic->executor().execute([topic, producer] { topic->removeProducer(producer.get()); });
    }
    return;
  }
  if (!st.isOk() && st.code() == StatusCode::kBusy && attempt < kProducerBusyRetries) {
    auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
    auto t = std::make_shared<boost::asio::steady_timer>(loop().context(), kProducerBusyDelay);
    t->async_wait([me, t, pulsarTopic, attempt](const boost::system::error_code&) {
      if (me->producers_.count(pulsarTopic)) me->createProducer(pulsarTopic, attempt + 1);
    });
    return;
  }
  if (!st.isOk()) {
    MLOG_WARN("[{}] MQTT client {} cannot publish to {}: {}", peerAddress(), clientId_, pulsarTopic,
              st.message());
    waitingPublishes_ -= std::min(waitingPublishes_, it->second.waiting.size());
    for (const Publish& p : it->second.waiting) {
      if (p.qos == 2) qos2InFlight_.erase(p.packetId);
    }
    const bool v5 = version_ == ProtocolVersion::kV5;
    if (v5) {
      for (const Publish& p : it->second.waiting) {
        if (p.qos == 0) continue;
        PubAck a{p.qos == 2 ? PacketType::kPubrec : PacketType::kPuback,
                 p.packetId,
                 reason::kUnspecifiedError,
                 {}};
        a.properties.strings[PropertyId::kReasonString] = st.message();
        send(a);
      }
      producers_.erase(it);
      updateReading();
      return;
    }
    // 3.1.1 has no negative PUBACK: closing is the only answer (the client sends again).
    producers_.erase(it);
    if (closing_) return maybeFinishDisconnect();
    return disconnect(reason::kUnspecifiedError,
                      "cannot publish to " + pulsarTopic + ": " + st.message());
  }
  ProducerState& ps = it->second;
  ps.producer = producer;
  ps.topic = topic;
  ps.nextSequenceId = static_cast<uint64_t>(std::max<int64_t>(nextSequenceId, 0));
  producerTopics_[producer->id()] = pulsarTopic;
  std::vector<Publish> waiting = std::move(ps.waiting);
  ps.waiting.clear();
  for (Publish& p : waiting) {
    waitingPublishes_--;  // moves to pendingPublishes_ in publishTo()
    publishTo(ps, std::move(p));
  }
  flushSends();
  if (isClosed()) {
    // onClosed() removed the other producers; this one goes after its publishes (same executor).
    topic->executor().execute([topic, producer] { topic->removeProducer(producer.get()); });
    producers_.erase(it);
  }
}

void MqttConnection::onReceipt(uint64_t producerId, uint64_t sequenceId, bool ok,
                               const std::string& error) {
  completeInFlight(producerId, sequenceId, /*receipt=*/true,
                   ok ? Status::ok() : Status::ioError(error));
}

void MqttConnection::completeInFlight(uint64_t producerId, uint64_t sequenceId, bool receipt,
                                      const Status& st) {
  MAGNETAR_DCHECK_ON(loop());
  auto pit = inFlight_.find(producerId);
  if (pit == inFlight_.end()) return;
  auto it = pit->second.find(sequenceId);
  if (it == pit->second.end()) return;
  InFlight& f = it->second;
  if (!st.isOk()) (receipt ? f.error : f.retainedError) = st.message();
  if (--f.waits > 0) return;
  const InFlight done = std::move(f);
  pit->second.erase(it);
  if (done.packetId) pendingQos1_--;
  answerInFlight(done);
  maybeFinishDisconnect();
}

void MqttConnection::answerInFlight(const InFlight& f) {
  if (!f.retainedError.empty()) {
    MLOG_WARN("[{}] MQTT client {}: retained message not stored: {}", peerAddress(), clientId_,
              f.retainedError);
  }
  const bool v5 = version_ == ProtocolVersion::kV5;
  const PacketType ackType = f.qos == 2 ? PacketType::kPubrec : PacketType::kPuback;
  if (f.qos == 2) qos2InFlight_.erase(f.packetId);
  if (f.error.empty()) {
    if (!f.packetId) return;
    // MQTT 5: the message is in the topic but not retained: PUBACK 0x97 with why; 3.1.1 has
    // no negative PUBACK, and sending again would only repeat the message.
    PubAck a{ackType, f.packetId, reason::kSuccess, {}};
    if (v5 && !f.retainedError.empty()) {
      a.reasonCode = reason::kQuotaExceeded;
      a.properties.strings[PropertyId::kReasonString] = "not retained: " + f.retainedError;
    }
    if (f.qos == 2) return recordQos2(a);
    send(a);
    return;
  }
  MLOG_WARN("[{}] MQTT client {}: publish failed: {}", peerAddress(), clientId_, f.error);
  if (!f.packetId) return;  // QoS 0: at most once
  if (v5) {
    // A PUBREC >= 0x80 ends the QoS 2 exchange (MQTT 5 4.3.3): the id is not kept.
    PubAck a{ackType, f.packetId, reason::kUnspecifiedError, {}};
    a.properties.strings[PropertyId::kReasonString] = f.error;
    send(a);
    return;
  }
  disconnect(reason::kUnspecifiedError, "publish failed: " + f.error);
}

void MqttConnection::recordQos2(const PubAck& rec) {
  // After the close the session record is the service's (sessionDisconnected): the id goes
  // into it there, so the client's resend on its next connection is not stored again.
  if (isClosed()) {
    if (persistentSession_) service_.state().addQos2Received(clientId_, rec.packetId);
    return;
  }
  qos2Received_.insert(rec.packetId);
  if (!persistentSession_) return send(rec);
  // The id goes into the session record before the PUBREC, so a client that sends the PUBLISH
  // again after a broker restart is still answered without a second copy.
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  service_.state().saveSession(clientId_, sessionRecord(), &loop(), [me, rec](const Status&) {
    if (!me->isClosed()) me->send(rec);  // also after DISCONNECT, before the close
  });
}

void MqttConnection::handlePubrel(const PubAck& a) {
  if (qos2InFlight_.count(a.packetId)) {
    return fail(Status::invalidArgument(
        fmt::format("protocol error: PUBREL {} before its PUBREC", a.packetId)));
  }
  PubAck comp{PacketType::kPubcomp, a.packetId, reason::kSuccess, {}};
  if (!qos2Received_.erase(a.packetId)) {
    // MQTT 5 3.7.2.1: an id not in the session is answered 0x92, not a disconnect.
    if (version_ == ProtocolVersion::kV5) {
      comp.reasonCode = reason::kPacketIdentifierNotFound;
      comp.properties.strings[PropertyId::kReasonString] =
          fmt::format("no QoS 2 PUBLISH with packet id {} waits for PUBREL", a.packetId);
    }
    return send(comp);
  }
  if (!persistentSession_) return send(comp);
  // PUBCOMP after the record has lost the id: the client may use it again for a new message.
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  service_.state().saveSession(clientId_, sessionRecord(), &loop(), [me, comp](const Status&) {
    if (!me->isClosed()) me->send(comp);
  });
}

void MqttConnection::onPublishCompleted(uint32_t n) {
  pendingPublishes_ -= std::min<size_t>(pendingPublishes_, n);
  updateReading();
}

// Reading stops while more PUBLISHes than the window are in the topics' hands or wait for their
// producer (the limit of maxPendingPublishRequestsPerConnection, and receiveMaximum) and resumes
// below it. Packets already read stay in reader_ while paused (onData() stops at the pause) and
// are handled first when reading resumes.
void MqttConnection::updateReading() {
  MAGNETAR_DCHECK_ON(loop());
  size_t limit = service_.options().receiveMaximum;
  const int brokerLimit = service_.broker().options().maxPendingPublishRequestsPerConnection;
  if (brokerLimit > 0) limit = std::min<size_t>(limit, static_cast<size_t>(brokerLimit));
  const size_t held = pendingPublishes_ + waitingPublishes_;
  if (held >= limit && !readPausedForPublishes_) {
    readPausedForPublishes_ = true;
    pauseRead();
  } else if (held < limit && readPausedForPublishes_) {
    readPausedForPublishes_ = false;
    // Keep alive: the client was not idle while the broker did not read (onTimer()).
    lastPacket_ = std::chrono::steady_clock::now();
    if (closing_) return;  // after DISCONNECT nothing more is read
    if (reader_.buffered() == 0) return resumeRead();
    auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
    loop().execute([me] { me->resumeAfterBuffered(); });
  }
  maybeFinishDisconnect();
}

void MqttConnection::resumeAfterBuffered() {
  MAGNETAR_DCHECK_ON(loop());
  if (readPausedForPublishes_ || closing_ || isClosed()) return;
  onData(nullptr, 0);
  if (!readPausedForPublishes_ && !closing_ && !isClosed()) resumeRead();
}

}  // namespace magnetar::mqtt
