#include "mqtt/mqtt_connection.h"

#include <algorithm>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "mqtt/mqtt_service.h"
#include "mqtt/mqtt_sink.h"
#include "mqtt/mqtt_state.h"
#include "mqtt/mqtt_stats.h"
#include "mqtt/topic_mapping.h"
#include "protocol/frame.h"

namespace magnetar::mqtt {
namespace {
constexpr uint8_t kDisconnectWithWill = 0x04;  // MQTT 5 DISCONNECT reason code
// How long the PUBLISHes received before a DISCONNECT or a close may take to reach their topics
// (their producer being made, their receipts) before they are given up (logged).
constexpr std::chrono::seconds kDrainTimeout{30};
}  // namespace

MqttConnection::MqttConnection(MqttService& service, net::EventLoop& loop,
                               boost::asio::ip::tcp::socket socket,
                               std::unique_ptr<net::TlsSession> tls)
    : net::Connection(loop, std::move(socket), std::move(tls)),
      service_(service),
      reader_(service.options().maxPacketSize),
      timer_(loop.context()) {}

MqttConnection::~MqttConnection() = default;

void MqttConnection::begin() {
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  sink_ = std::make_shared<MqttSink>(me);
  loop().execute([me] {
    me->lastPacket_ = std::chrono::steady_clock::now();
    me->armTimer(std::chrono::seconds(me->service_.options().connectTimeoutSeconds));
  });
  start();
}

void MqttConnection::send(const Packet& p) {
  std::string bytes;
  uint16_t newAlias = 0;
  const auto* pub = std::get_if<Publish>(&p);
  if (pub && clientTopicAliasMaximum_ > 0 && !pub->topic.empty()) {
    Publish aliased = *pub;
    newAlias = applyOutboundAlias(&aliased);
    encodePacket(aliased, version_, &bytes);
  } else {
    encodePacket(p, version_, &bytes);
  }
  if (bytes.size() > clientMaxPacketSize_) {
    // MQTT 5 3.1.2.11.4: a packet over the client's Maximum Packet Size is not sent.
    MLOG_WARN("[{}] MQTT {} of {} bytes over the client's maximum packet size; not sent", clientId_,
              packetTypeName(typeOf(p)), bytes.size());
    if (newAlias) outboundAliases_.erase(pub->topic);  // the client never saw it bound
    return;
  }
  write([&](net::FrameBatch& b) { b.appendBytes(bytes.data(), bytes.size()); });
}

uint16_t MqttConnection::applyOutboundAlias(Publish* p) {
  auto it = outboundAliases_.find(p->topic);
  if (it != outboundAliases_.end()) {
    p->properties.ints[PropertyId::kTopicAlias] = it->second;
    p->topic.clear();  // the alias alone names it
    return 0;
  }
  if (outboundAliases_.size() >= clientTopicAliasMaximum_) return 0;  // all bound: full name
  const auto alias = static_cast<uint16_t>(outboundAliases_.size() + 1);
  outboundAliases_[p->topic] = alias;
  p->properties.ints[PropertyId::kTopicAlias] = alias;  // binds it, the topic name sent too
  return alias;
}

void MqttConnection::disconnect(uint8_t reasonCode, const std::string& why) {
  if (!loop().inExecutorThread()) {
    auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
    loop().execute([me, reasonCode, why] { me->disconnect(reasonCode, why); });
    return;
  }
  if (closing_) {
    // After DISCONNECT, waiting for its PUBLISHes (a session take-over, the broker stopping):
    // close now; those handed over are published, those waiting for a producer too (onClosed).
    if (disconnecting_ && !isClosed()) {
      MLOG_INFO("[{}] MQTT client {} closed after its DISCONNECT: {}", peerAddress(), clientId_,
                why);
      disconnecting_ = false;
      close(/*graceful=*/true);
    }
    return;
  }
  closing_ = true;  // on the loop: the packets after this one in the read are not handled
  MLOG_INFO("[{}] MQTT client {} disconnected: {}", peerAddress(), clientId_, why);
  if (connected_ && version_ == ProtocolVersion::kV5) {
    Disconnect d{PacketType::kDisconnect, reasonCode, {}};
    d.properties.strings[PropertyId::kReasonString] = why;
    send(d);
  }
  close(/*graceful=*/true);
}

void MqttConnection::fail(const Status& st) {
  const uint8_t rc = reasonCodeOf(st);
  if (!connected_ && st.code() == StatusCode::kUnsupported) {
    // 3.1.1 3.1.2-2: CONNACK 0x01 then close; MQTT 5 answers its own reason code.
    const bool v5 = st.message().find("level 5") != std::string::npos;
    // Logged (WARN) by onData(), where the CONNECT failed to decode.
    version_ = v5 ? ProtocolVersion::kV5 : ProtocolVersion::kV311;
    send(Connack{false, v5 ? rc : reason::kV3UnacceptableProtocolVersion, {}});
    closing_ = true;
    close(true);
    return;
  }
  disconnect(rc, st.message());
}

bool MqttConnection::onData(const uint8_t* data, size_t len) {
  MAGNETAR_DCHECK_ON(loop());
  if (closing_) return false;
  if (len > 0) reader_.append(data, len);
  // Stops at a pause for the PUBLISH window: the rest waits in reader_ (updateReading()).
  while (!closing_ && !isClosed() && !readPausedForPublishes_) {
    auto p = reader_.next();
    if (!p.isOk()) {
      MLOG_WARN("[{}] MQTT client {}: {}", peerAddress(), clientId_, p.status().message());
      fail(p.status());
      return false;
    }
    if (!p->has_value()) break;
    lastPacket_ = std::chrono::steady_clock::now();
    handlePacket(std::move(**p));
  }
  flushSends();
  return !closing_ && !isClosed();
}

void MqttConnection::handlePacket(Packet&& p) {
  const PacketType t = typeOf(p);
  if (!connected_ && t != PacketType::kConnect) {
    return fail(Status::invalidArgument(std::string("protocol error: ") + packetTypeName(t) +
                                        " before CONNECT"));
  }
  switch (t) {
    case PacketType::kConnect:
      if (connected_) return fail(Status::invalidArgument("protocol error: a second CONNECT"));
      return handleConnect(std::move(std::get<Connect>(p)));
    case PacketType::kPublish:
      return handlePublish(std::move(std::get<Publish>(p)));
    case PacketType::kPuback:
      return handlePuback(std::get<PubAck>(p));
    case PacketType::kPubrec:
      return handlePubrec(std::get<PubAck>(p));
    case PacketType::kPubrel:
      return handlePubrel(std::get<PubAck>(p));
    case PacketType::kPubcomp:
      return handlePubcomp(std::get<PubAck>(p));
    case PacketType::kSubscribe:
      return handleSubscribe(std::move(std::get<Subscribe>(p)));
    case PacketType::kUnsubscribe:
      return handleUnsubscribe(std::move(std::get<Unsubscribe>(p)));
    case PacketType::kPingreq:
      return handlePing();
    case PacketType::kDisconnect:
      return handleDisconnect(std::get<Disconnect>(p));
    default:
      // AUTH (no enhanced authentication), and what only a server sends.
      return fail(
          Status::invalidArgument(std::string("protocol error: unexpected ") + packetTypeName(t)));
  }
}

bool MqttConnection::connectAllowed(const Connect& c) {
  const bool v5 = c.version == ProtocolVersion::kV5;
  if (c.clientId.empty() && !c.cleanSession && !v5) {
    // 3.1.1 3.1.3-8: an empty client id needs clean session 1.
    MLOG_WARN("[{}] MQTT CONNECT refused: an empty client id needs clean session 1 (3.1.1)",
              peerAddress());
    send(Connack{false, reason::kV3IdentifierRejected, {}});
    return false;
  }
  return true;
}

// With the broker's authentication on (MoP's mqttAuthenticationEnabled follows it here): the
// password is a token for AuthenticationProviderToken, or user name and password go to
// AuthenticationProviderBasic ("user:password"); without a password, the anonymousUserRole if set.
bool MqttConnection::authenticate(const Connect& c) {
  const broker::AuthenticationService& auth = service_.broker().authentication();
  if (!auth.enabled()) return true;
  std::string why = "no credentials (a password carrying a token, or a TLS client certificate)";
  if (c.password) {
    std::vector<std::pair<const broker::AuthenticationProvider*, std::string>> tries;
    tries.emplace_back(auth.provider("token"), *c.password);
    if (c.username) tries.emplace_back(auth.provider("basic"), *c.username + ":" + *c.password);
    for (const auto& [provider, data] : tries) {
      if (!provider) continue;
      std::string reason;
      broker::AuthenticationData d;
      d.commandData = data;
      auto r = provider->authenticate(d, &reason);
      if (r.isOk()) {
        role_ = r->role;
        return true;
      }
      why = r.status().message();
    }
  } else if (auto cert = certificateRole()) {
    if (cert->isOk()) {
      role_ = **cert;
      return true;
    }
    why = cert->status().message();
  } else if (!auth.anonymousUserRole().empty()) {
    role_ = auth.anonymousUserRole();
    return true;
  }
  MLOG_WARN("[{}] MQTT client {} not authenticated: {}", peerAddress(), c.clientId, why);
  MqttStats::refuse(MqttRefusal::kAuthentication);
  const bool v5 = version_ == ProtocolVersion::kV5;
  send(Connack{false, v5 ? reason::kBadUserNameOrPassword : reason::kV3BadUserNameOrPassword, {}});
  return false;
}

bool MqttConnection::authorized(const broker::TopicName& topic, bool produce,
                                const std::string& subscription) {
  const broker::AuthorizationService& authz = service_.broker().authorization();
  const auto op = produce ? broker::TopicOperation::kProduce : broker::TopicOperation::kConsume;
  const std::string& sub = subscription.empty() ? clientId_ : subscription;
  if (authz.allowTopicOperation(topic, role_, op, produce ? "" : sub)) return true;
  broker::AuthorizationStats::record(op);
  MLOG_WARN("[{}] MQTT client {} (role {}) is not authorized to {} on {}", peerAddress(), clientId_,
            role_, produce ? "produce" : "consume", topic.toString());
  return false;
}

void MqttConnection::handleConnect(Connect&& c) {
  version_ = c.version;
  if (!connectAllowed(c) || !admit() || !authenticate(c) || !willAllowed(c)) {
    closing_ = true;
    close(true);
    return;
  }
  clientId_ = c.clientId;
  assignedId_ = clientId_.empty();
  if (clientId_.empty()) {
    static std::atomic<uint64_t> seq{0};
    clientId_ = "magnetar-mqtt-" + std::to_string(seq.fetch_add(1)) + "-" +
                std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  const uint32_t sessionExpiry = c.properties.num(PropertyId::kSessionExpiryInterval).value_or(0);
  persistentSession_ = version_ == ProtocolVersion::kV5 ? sessionExpiry > 0 : !c.cleanSession;
  sessionExpiry_ = version_ == ProtocolVersion::kV5 ? sessionExpiry
                   : persistentSession_             ? kSessionNeverExpires
                                                    : 0;
  will_ = std::move(c.will);
  clientReceiveMaximum_ = static_cast<uint16_t>(
      c.properties.num(PropertyId::kReceiveMaximum).value_or(service_.options().receiveMaximum));
  if (auto m = c.properties.num(PropertyId::kMaximumPacketSize)) clientMaxPacketSize_ = *m;
  clientTopicAliasMaximum_ =
      static_cast<uint16_t>(c.properties.num(PropertyId::kTopicAliasMaximum).value_or(0));
  keepAlive_ = std::chrono::seconds(c.keepAliveSeconds);
  auto me = std::static_pointer_cast<MqttConnection>(shared_from_this());
  if (auto old = service_.registerClient(clientId_, me)) {
    old->disconnect(reason::kSessionTakenOver, "session taken over by another connection");
  }
  service_.state().cancelWill(clientId_);  // MQTT 5 3.1.3.2.2: back before the will's delay
  std::vector<SubscriptionRequest> restored;
  const bool sessionPresent = takeSession(c, &restored);
  for (const auto& req : restored) filters_[req.filter] = req;
  connected_ = true;
  saveSession();  // stored (connected) from now on, or its new expiry
  timer_.cancel();
  armTimer(keepAlive_);
  sendConnack(sessionPresent);
  if (!restored.empty()) {
    subscribeFilters(
        restored, [](const std::vector<uint8_t>&) {}, storage::InitialPosition::kEarliest);
  }
}

bool MqttConnection::takeSession(const Connect& c, std::vector<SubscriptionRequest>* restored) {
  MqttState& state = service_.state();
  auto stored = state.session(clientId_);
  if (!stored) return false;
  if (c.cleanSession) {
    // A clean start discards the session, and its Pulsar subscriptions with it.
    state.removeSession(clientId_, /*deleteSubscriptions=*/true);
    return false;
  }
  *restored = std::move(stored->filters);
  qos2Received_.insert(stored->qos2Received.begin(), stored->qos2Received.end());
  // MQTT 5 session expiry 0: the session lasts as long as this connection (subscriptions
  // deleted at its close, as a clean session's).
  if (!persistentSession_) state.removeSession(clientId_, /*deleteSubscriptions=*/false);
  return true;
}

bool MqttConnection::willAllowed(const Connect& c) {
  if (!c.will) return true;
  const bool v5 = version_ == ProtocolVersion::kV5;
  const MqttOptions& o = service_.options();
  auto name =
      pulsarTopicName(c.will->topic, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
  auto parsed =
      name.isOk() ? broker::TopicName::parse(*name) : Result<broker::TopicName>(name.status());
  if (!parsed.isOk()) {
    MLOG_WARN("[{}] MQTT client {}: will topic {} is not valid", peerAddress(), c.clientId,
              c.will->topic);
    send(Connack{false, v5 ? reason::kTopicNameInvalid : reason::kV3ServerUnavailable, {}});
    return false;
  }
  clientId_ = c.clientId;  // the subscription name authorized() names (not used to produce)
  if (authorized(*parsed, /*produce=*/true)) return true;
  send(Connack{false, v5 ? reason::kNotAuthorized : reason::kV3NotAuthorized, {}});
  return false;
}

void MqttConnection::sendConnack(bool sessionPresent) {
  Connack a{sessionPresent, reason::kSuccess, {}};
  if (version_ == ProtocolVersion::kV5) {
    const MqttOptions& o = service_.options();
    a.properties.ints[PropertyId::kReceiveMaximum] = o.receiveMaximum;
    // No Maximum QoS: QoS 2 is served (an absent property means 2, MQTT 5 3.2.2.3.4).
    a.properties.ints[PropertyId::kRetainAvailable] = 1;
    a.properties.ints[PropertyId::kMaximumPacketSize] = static_cast<uint32_t>(o.maxPacketSize);
    a.properties.ints[PropertyId::kTopicAliasMaximum] = o.topicAliasMaximum;
    a.properties.ints[PropertyId::kSharedSubscriptionAvailable] = 1;
    a.properties.ints[PropertyId::kSubscriptionIdentifierAvailable] = 0;
    if (assignedId_) a.properties.strings[PropertyId::kAssignedClientIdentifier] = clientId_;
  }
  send(a);
}

StoredSession MqttConnection::sessionRecord() const {
  StoredSession s;
  for (const auto& [f, req] : filters_) s.filters.push_back(req);
  s.expirySeconds = sessionExpiry_;
  s.qos2Received.assign(qos2Received_.begin(), qos2Received_.end());
  return s;
}

void MqttConnection::saveSession() {
  if (!persistentSession_) return;
  service_.state().saveSession(clientId_, sessionRecord());
}

void MqttConnection::handlePing() { send(Ping{PacketType::kPingresp}); }

void MqttConnection::handleDisconnect(const Disconnect& d) {
  MLOG_INFO("[{}] MQTT client {} sent DISCONNECT (reason 0x{:02X})", peerAddress(), clientId_,
            d.reasonCode);
  // 3.1.2.5 / MQTT 5 3.14.2.1: a normal DISCONNECT discards the will; 0x04 asks for it.
  willCleared_ = d.reasonCode != kDisconnectWithWill;
  if (auto e = d.properties.num(PropertyId::kSessionExpiryInterval); e && persistentSession_) {
    sessionExpiry_ = *e;  // MQTT 5 3.14.2.2.2: the session's new expiry
    if (sessionExpiry_ == 0) {
      persistentSession_ = false;  // ends with this connection: subscriptions deleted at close
      service_.state().removeSession(clientId_, /*deleteSubscriptions=*/false);
    } else {
      saveSession();
    }
  }
  // MQTT 4.6: the packets before the DISCONNECT are processed in order, so the PUBLISHes among
  // them still reach their topics (a producer being made, receipts to answer); nothing after it
  // is handled (closing_) or read (the socket stays paused until the close).
  closing_ = true;
  disconnecting_ = true;
  pauseRead();
  timer_.cancel();  // no keep alive after DISCONNECT
  if (publishesLeft()) armDrainDeadline();
  maybeFinishDisconnect();
}

bool MqttConnection::publishesLeft() const {
  if (waitingPublishes_ > 0 || pendingPublishes_ > 0 || !sendBatch_.empty()) return true;
  for (const auto& [producerId, bySeq] : inFlight_) {
    if (!bySeq.empty()) return true;
  }
  return false;
}

void MqttConnection::maybeFinishDisconnect() {
  if (!disconnecting_ || isClosed() || publishesLeft()) return;
  disconnecting_ = false;
  timer_.cancel();
  close(true);
}

void MqttConnection::armDrainDeadline() {
  if (!drainDeadline_) drainDeadline_ = std::chrono::steady_clock::now() + kDrainTimeout;
  timer_.expires_at(*drainDeadline_);
  auto weak = std::weak_ptr<net::Connection>(shared_from_this());
  timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto c = weak.lock()) static_cast<MqttConnection*>(c.get())->onDrainDeadline();
  });
}

void MqttConnection::dropWaitingQos2() {
  MAGNETAR_DCHECK_ON(loop());
  // Not stored yet and never PUBRECed: the client sends them again (DUP) on its next
  // connection, whose session does not know the id; stored now, they would be stored twice.
  size_t dropped = 0;
  for (auto& [topic, ps] : producers_) {
    auto& w = ps.waiting;
    for (const Publish& p : w) {
      if (p.qos == 2) qos2InFlight_.erase(p.packetId);
    }
    const auto n = w.size();
    w.erase(std::remove_if(w.begin(), w.end(), [](const Publish& p) { return p.qos == 2; }),
            w.end());
    dropped += n - w.size();
  }
  waitingPublishes_ -= std::min(waitingPublishes_, dropped);
  if (dropped > 0) {
    MLOG_INFO(
        "[{}] MQTT client {}: {} QoS 2 PUBLISHes not stored at the close (no PUBREC sent: "
        "the client sends them again)",
        peerAddress(), clientId_, dropped);
  }
}

void MqttConnection::onDrainDeadline() {
  MAGNETAR_DCHECK_ON(loop());
  if (!isClosed()) {
    MLOG_WARN(
        "[{}] MQTT client {}: {} PUBLISHes before the DISCONNECT still wait for their "
        "producer and {} for their receipt after {} s; closing",
        peerAddress(), clientId_, waitingPublishes_, pendingPublishes_, kDrainTimeout.count());
    disconnecting_ = false;
    close(true);  // onClosed() gives up those still waiting for their producer
    return;
  }
  size_t dropped = 0;
  for (auto it = producers_.begin(); it != producers_.end();) {
    if (it->second.producer) {
      ++it;
      continue;
    }
    dropped += it->second.waiting.size();
    it = producers_.erase(it);
  }
  waitingPublishes_ = 0;
  if (dropped > 0) {
    MLOG_WARN(
        "[{}] MQTT client {}: {} PUBLISHes received before the close dropped: their "
        "producer was not ready ({})",
        peerAddress(), clientId_, dropped,
        service_.state().stopping() ? std::string("the broker is stopping")
                                    : fmt::format("after {} s", kDrainTimeout.count()));
  }
}

void MqttConnection::armTimer(std::chrono::seconds after) {
  if (after.count() == 0) return;  // keep alive 0: no timeout (MQTT 3.1.2.10)
  // MQTT 3.1.2-24: one and a half keep-alive periods without a packet close the connection.
  std::chrono::milliseconds wait = after;
  if (connected_) wait = wait * 3 / 2;
  timer_.expires_after(wait);
  auto weak = std::weak_ptr<net::Connection>(shared_from_this());
  timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto c = weak.lock()) static_cast<MqttConnection*>(c.get())->onTimer();
  });
}

void MqttConnection::onTimer() {
  MAGNETAR_DCHECK_ON(loop());
  if (closing_ || isClosed()) return;
  if (!connected_) {
    closing_ = true;
    MLOG_INFO("[{}] MQTT connection without CONNECT for {} s; closing", peerAddress(),
              service_.options().connectTimeoutSeconds);
    close();
    return;
  }
  const auto limit = std::chrono::milliseconds(keepAlive_) * 3 / 2;
  // MQTT 3.1.2.10 counts packets the server receives: while the broker itself does not read
  // (the PUBLISH window is full), the client is not idle; the clock restarts at the resume.
  if (readPausedForPublishes_) lastPacket_ = std::chrono::steady_clock::now();
  const auto idle = std::chrono::steady_clock::now() - lastPacket_;
  if (idle >= limit) {
    disconnect(reason::kKeepAliveTimeout,
               fmt::format("no packet for 1.5 x keep alive ({} s)", keepAlive_.count()));
    return;
  }
  timer_.expires_after(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit - idle));
  auto weak = std::weak_ptr<net::Connection>(shared_from_this());
  timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto c = weak.lock()) static_cast<MqttConnection*>(c.get())->onTimer();
  });
}

void MqttConnection::onClosed() {
  MAGNETAR_DCHECK_ON(loop());
  if (!closing_) {
    // Not closed by this class (each of its close paths logs why): the peer, the network, TLS
    // (net::Connection), or the broker stopping.
    const char* why = service_.state().stopping() ? "the broker is stopping"
                      : connected_ ? "closed by the client or the network without DISCONNECT"
                                   : "closed before CONNECT";
    MLOG_INFO("[{}] MQTT client {} connection closed: {}", peerAddress(), clientId_, why);
  }
  closing_ = true;
  timer_.cancel();
  if (topicWatch_) {
    service_.broker().topicListeners().remove(topicWatch_);
    topicWatch_ = 0;
  }
  // The PUBLISHes received before the close are published (as a Pulsar producer's SENDs read
  // before its connection closed): those handled go to their topics before the producers leave,
  // those waiting for their producer go when it is ready (producerReady), for kDrainTimeout.
  flushSends();
  dropWaitingQos2();
  for (auto it = producers_.begin(); it != producers_.end();) {
    ProducerState& ps = it->second;
    if (ps.producer) {
      auto topic = ps.topic;
      auto producer = ps.producer;
      topic->executor().execute([topic, producer] { topic->removeProducer(producer.get()); });
    } else if (!ps.waiting.empty()) {
      ++it;
      continue;
    }
    it = producers_.erase(it);
  }
  disconnecting_ = false;
  if (waitingPublishes_ > 0 && service_.state().stopping()) {
    drainDeadline_ = std::chrono::steady_clock::now();  // the broker stops: no wait
    onDrainDeadline();
  } else if (waitingPublishes_ > 0) {
    MLOG_INFO("[{}] MQTT client {}: {} PUBLISHes received before the close wait for their producer",
              peerAddress(), clientId_, waitingPublishes_);
    armDrainDeadline();
  }
  dropConsumers(/*deleteSubscriptions=*/connected_ && !persistentSession_);
  if (connected_) endSession(service_.unregisterClient(clientId_, this));
  releaseAdmission();
}

// `current`: no other connection took the client id over.
void MqttConnection::endSession(bool current) {
  MqttState& state = service_.state();
  if (will_ && !willCleared_ && !state.stopping()) {
    const uint32_t delay = willDelaySeconds(*will_, persistentSession_, sessionExpiry_);
    // Taken over: the session goes on, so a delayed will is not due (MQTT 5 3.1.3.2.2).
    if (current || delay == 0) state.scheduleWill(clientId_, *will_, delay);
  }
  if (current && persistentSession_) state.sessionDisconnected(clientId_);
}

void MqttConnection::onBrokerFrames(const std::string& frames) {
  MAGNETAR_DCHECK_ON(loop());
  protocol::FrameDecoder decoder(frames.size() + 16);
  Status st = decoder.feed(
      reinterpret_cast<const uint8_t*>(frames.data()), frames.size(),
      [this](const proto::BaseCommand& cmd, const Buffer& entry) {
        switch (cmd.type()) {
          case proto::BaseCommand::SEND_RECEIPT:
            onReceipt(cmd.send_receipt().producer_id(), cmd.send_receipt().sequence_id(), true, "");
            break;
          case proto::BaseCommand::SEND_ERROR:
            onReceipt(cmd.send_error().producer_id(), cmd.send_error().sequence_id(), false,
                      cmd.send_error().message());
            break;
          case proto::BaseCommand::MESSAGE: {
            const auto& id = cmd.message().message_id();
            onMessage(cmd.message().consumer_id(),
                      storage::Position{static_cast<int64_t>(id.ledgerid()),
                                        static_cast<int64_t>(id.entryid())},
                      entry);
            break;
          }
          default:
            break;  // SUCCESS of a close, ACTIVE_CONSUMER_CHANGE: nothing to tell MQTT
        }
      });
  if (!st.isOk())
    MLOG_ERROR("[{}] MQTT: broker frames did not decode: {}", clientId_, st.message());
  flushSends();
}

void MqttConnection::onProducerClosedByBroker(uint64_t producerId) {
  // The topic was unloaded, terminated or fenced: PUBLISHes in flight get no answer (as for a
  // Pulsar client). Closing makes the client reconnect and send its unacknowledged QoS 1 again.
  disconnect(reason::kServerUnavailable, "the broker closed the producer of a topic");
  (void)producerId;
}

void MqttConnection::onConsumerClosedByBroker(uint64_t consumerId) {
  disconnect(reason::kServerUnavailable, "the broker closed the consumer of a topic");
  (void)consumerId;
}

}  // namespace magnetar::mqtt
