#include "broker/service/server_cnx.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/auth/authentication_provider_tls.h"
#include "broker/service/broker_service.h"
#include "broker/service/internal/topic_schema.h"
#include "protocol/commands.h"
#include "protocol/server_error.h"

namespace magnetar::broker {
namespace {

// SENDs of one connection to one topic in one read pass that fit before the vector grows.
constexpr size_t kSendBatchReserve = 32;

// Pulsar's namespace operation GET_TOPICS (PulsarAuthorizationProvider): authorization off, a
// tenant admin, or produce or consume granted on the namespace "tenant/ns" (grants on its
// topics do not count). A denial is counted.
bool allowGetTopics(BrokerService& service, const std::string& ns, const std::string& role) {
  AuthorizationService& authz = service.authorization();
  if (!authz.enabled() || authz.isTenantAdmin(ns.substr(0, ns.find('/')), role)) return true;
  NamespacePolicies p = service.policies().namespacePolicies(ns);
  auto it = p.permissions.find(role);
  if (it != p.permissions.end() && (it->second.count("produce") || it->second.count("consume"))) {
    return true;
  }
  AuthorizationStats::record(TopicOperation::kCount);
  return false;
}

}  // namespace

using protocol::Commands;
using protocol::ErrorContext;
using protocol::toServerError;

ServerCnx::ServerCnx(net::EventLoop& loop, boost::asio::ip::tcp::socket socket,
                     BrokerService& service, PublishBufferThrottle& throttle,
                     std::unique_ptr<net::TlsSession> tls)
    : net::Connection(loop, std::move(socket), std::move(tls)),
      service_(service),
      decoder_(kMaxFrameBeforeConnect),
      throttle_(throttle),
      keepAliveTimer_(loop.context()),
      authRefreshTimer_(loop.context()),
      publishRateTimer_(loop.context()) {
  setWriteWatermarks(static_cast<size_t>(service.options().pulsarChannelWriteBufferLowWaterMark),
                     static_cast<size_t>(service.options().pulsarChannelWriteBufferHighWaterMark));
}

ServerCnx::~ServerCnx() = default;

const char* CnxErrorStats::label(ProtocolError e) {
  // Indexed by ProtocolError, as `counts`.
  static constexpr std::array<const char*, static_cast<size_t>(ProtocolError::kCount)> kLabels = {
      "bad_frame",         "frame_too_large",   "truncated",      "checksum",
      "unknown_command",   "before_connect",    "unknown_id",     "invalid_name",
      "handshake_timeout", "keepalive_timeout", "authentication", "auth_refresh"};
  static_assert(kLabels.back() != nullptr, "a ProtocolError without a label");
  auto i = static_cast<size_t>(e);
  return i < kLabels.size() ? kLabels[i] : "other";
}

bool ServerCnx::onData(const uint8_t* data, size_t len) {
  MAGNETAR_DCHECK_ON(loop());
  Status s = decoder_.feed(data, len, static_cast<protocol::FrameHandler&>(*this));
  if (s.isOk() && decoder_.lastFeedConsumed() < len) {
    // A frame waits for admission at its header: keep the rest of this read for then.
    const size_t used = decoder_.lastFeedConsumed();
    heldBytes_.assign(reinterpret_cast<const char*>(data) + used, len - used);
  }
  if (!s.isOk()) {
    // Commands before CONNECT are counted where they are refused (onFrame).
    if (s.code() == StatusCode::kTooLarge) {
      CnxErrorStats::record(ProtocolError::kFrameTooLarge);
    } else if (s.code() != StatusCode::kNotAllowed) {
      CnxErrorStats::record(ProtocolError::kBadFrame);
    }
    MLOG_WARN("[{}] closing connection: {}", peerAddress(), s.toString());
    close();
    return false;
  }
  return !isClosed();
}

void ServerCnx::onReadBatchDone() {
  MAGNETAR_DCHECK_ON(loop());
  flushSends();
}

void ServerCnx::flushSends() {
  throttle_.flushAdmission();
  for (auto& [topic, sends] : sendBatch_) {
    topic->executor().execute([topic = topic, batch = std::move(sends)]() mutable {
      topic->publish(batch);
    });
  }
  sendBatch_.clear();
}

void ServerCnx::publishCompleted(uint32_t n, uint64_t bytes) {
  throttle_.release(static_cast<int64_t>(bytes));
  int64_t left = pendingPublishes_.fetch_sub(n, std::memory_order_relaxed) - n;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with startShutdown()
  if (left <= 0 && shuttingDown_.load(std::memory_order_seq_cst)) {
    auto me = self();
    loop().execute([me] { me->maybeFinishShutdown(); });
    return;
  }
  int max = service_.options().maxPendingPublishRequestsPerConnection;
  if (max > 0 && left <= max / 2 && publishPaused_.load(std::memory_order_relaxed)) {
    auto me = self();
    loop().execute([me] {
      if (me->publishPaused_.exchange(false)) me->updateReadState();
    });
  }
}

void ServerCnx::setThrottled(bool throttled) {
  MAGNETAR_DCHECK_ON(loop());
  throttled_ = throttled;
  updateReadState();
}

void ServerCnx::frameAdmitted(int64_t bytes) {
  MAGNETAR_DCHECK_ON(loop());
  if (isClosed() || frameWaiting_ != bytes) {
    throttle_.admission().release(bytes);  // it left the queue in between
    return;
  }
  frameWaiting_ = 0;
  frameCharge_ = bytes;
  throttle_.addAdmitted(bytes);
  if (!heldBytes_.empty()) {
    std::string held;
    held.swap(heldBytes_);
    // Part of the admitted frame only (the rest of it was not in that read): no new header.
    if (!onData(reinterpret_cast<const uint8_t*>(held.data()), held.size())) return;
  }
  updateReadState();
}

void ServerCnx::updateReadState() {
  if (frameWaiting_ > 0) {  // until frameAdmitted()
    pauseRead();
    return;
  }
  // A frame charged at its header is exempt from the two limits: it completes (reads are cut
  // at its end), then reading pauses. Pausing inside charged frames could leave every
  // connection paused with charges that never complete.
  // The publish buffer pauses only connections with producers, as Pulsar pauses the ones that
  // publish: a new connection's CONNECT, lookups and consumers' acks and permits still get read
  // (else a client connecting while its loop is paused can time out).
  const bool limited = (throttled_ && !producers_.empty()) || rateThrottled_ ||
                       publishPaused_.load(std::memory_order_relaxed);
  if ((limited && frameCharge_ == 0) || shuttingDown_.load(std::memory_order_relaxed)) {
    pauseRead();
  } else {
    resumeRead();
  }
}

void ServerCnx::startShutdown() {
  MAGNETAR_DCHECK_ON(loop());
  if (isClosed() || shuttingDown_.exchange(true, std::memory_order_seq_cst)) return;
  updateReadState();
  maybeFinishShutdown();
}

void ServerCnx::maybeFinishShutdown() {
  MAGNETAR_DCHECK_ON(loop());
  if (shutdownClosed_ || isClosed()) return;
  // Else publishCompleted() calls again when the count reaches 0.
  if (pendingPublishes_.load(std::memory_order_seq_cst) > 0) return;
  shutdownClosed_ = true;
  // Receipts were queued before the count fell, so they go out ahead of these.
  for (const auto& [id, ref] : producers_) send(Commands::newCloseProducer(id, 0));
  for (const auto& [id, ref] : consumers_) {
    if (ref.ready) send(Commands::newCloseConsumer(id, 0));
  }
  close(/*graceful=*/true);
}

void ServerCnx::onClosed() {
  MAGNETAR_DCHECK_ON(loop());
  keepAliveTimer_.cancel();
  publishRateTimer_.cancel();
  rateThrottledBy_.clear();
  authRefreshTimer_.cancel();
  if (!decoder_.idle() && decoder_.error().isOk() && !closedByKeepAlive_) {
    CnxErrorStats::record(ProtocolError::kTruncated);
  }
  throttle_.unregisterConnection(this);
  throttle_.flushAdmission();
  if (std::exchange(frameWaiting_, 0) > 0) throttle_.admission().cancel(this);
  heldBytes_.clear();
  if (int64_t charge = std::exchange(frameCharge_, 0); charge > 0) throttle_.release(charge);
  for (auto& [topic, sends] : sendBatch_) {
    for (auto& ps : sends) throttle_.release(static_cast<int64_t>(ps.entry.size()));
  }
  sendBatch_.clear();
  for (auto& [id, ref] : producers_) {
    auto topic = ref.topic;
    auto p = ref.producer;
    topic->executor().execute([topic, p] { topic->removeProducer(p.get()); });
  }
  producers_.clear();
  for (auto& [id, ref] : consumers_) {
    if (!ref.ready) continue;
    auto topic = ref.topic;
    auto c = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([topic, c, sub] { topic->removeConsumer(c.get(), sub); });
  }
  consumers_.clear();
  for (auto& [id, w] : watchers_) service_.topicListeners().remove(w.listenerId);
  watchers_.clear();
  service_.connectionClosed();
}

void ServerCnx::sendError(uint64_t requestId, proto::ServerError e, const std::string& msg) {
  send(Commands::newError(requestId, e, msg));
}

bool ServerCnx::onPartialFrameStart(size_t frameBytes) {
  MAGNETAR_DCHECK_ON(loop());
  MAGNETAR_DCHECK(frameCharge_ == 0 && frameWaiting_ == 0);
  // Admitted before its body is read and charged whole, so a connection receiving a large frame
  // counts what it will hold; over the broker's whole limit it waits here, holding its header.
  // A frame of at most one read is not queued: small commands (CONNECT, PING, FLOW, ACK,
  // lookups, small SENDs) are read whatever waits, as Pulsar reads every connection but the
  // publishing ones; what such a frame holds is at most one read, in the base
  // (docs/memory-limits.md). Before CONNECT no frame is bigger (kMaxFrameBeforeConnect), so a
  // connection that has not said who it is cannot hold a claim that makes others wait.
  if (frameBytes <= kMaxUnqueuedFrame) return true;
  const auto bytes = static_cast<int64_t>(frameBytes);
  throttle_.flushAdmission();  // this loop's SENDs so far count in the decision
  if (!throttle_.admission().admitOrQueue(self(), bytes)) {
    frameWaiting_ = bytes;
    pauseRead();
    return false;
  }
  frameCharge_ = bytes;
  // Over the loop's share, its other connections with producers pause at their frame
  // boundaries; this one finishes the frame (see maxNextDelivery()).
  throttle_.addAdmitted(bytes);
  // A limit may have paused reading earlier in this chunk: the frame is exempt from it.
  if (readPaused()) updateReadState();
  return true;
}

size_t ServerCnx::maxNextDelivery() const {
  MAGNETAR_DCHECK_ON(loop());
  const bool tight = throttle_.admission().tight();
  if (frameCharge_ > 0 && (tight || throttled_ || publishPaused_.load(std::memory_order_relaxed))) {
    return decoder_.remainingInFrame();  // > 0: the charged frame is not complete yet
  }
  if (!tight) return SIZE_MAX;
  // Frames wait for admission: read up to the end of the next header and no further, so a frame
  // that must wait holds its header only (a small one that is not queued reads its rest next).
  if (size_t rest = decoder_.remainingInFrame(); rest > 0) return rest;
  return protocol::kFrameHeaderLen - decoder_.bufferedBytes();
}

Status ServerCnx::onFrame(const proto::BaseCommand& cmd, Buffer entry) {
  MAGNETAR_DCHECK_ON(loop());
  const bool admitted = frameCharge_ > 0;
  Status s = dispatchFrame(cmd, std::move(entry));
  // What handleSend() did not turn into the entry's charge (other commands, refused SENDs).
  if (int64_t left = std::exchange(frameCharge_, 0); left > 0) throttle_.release(left);
  // The frame was exempt from a pause, or it may have added the connection's first producer.
  if ((admitted || throttled_) && !isClosed()) updateReadState();
  return s;
}

uint64_t ServerCnx::producerEpoch(uint64_t producerId) const {
  auto it = producers_.find(producerId);
  return it == producers_.end() ? currentOwnershipEpoch() : it->second.producer->ownershipEpoch;
}

uint64_t ServerCnx::consumerEpoch(uint64_t consumerId) const {
  auto it = consumers_.find(consumerId);
  return it == consumers_.end() || !it->second.consumer ? currentOwnershipEpoch()
                                                        : it->second.consumer->ownershipEpoch;
}

uint64_t ServerCnx::currentOwnershipEpoch() const {
  auto* ownership = service_.topicOwnership();
  return ownership ? ownership->ownershipEpoch() : 0;
}

Status ServerCnx::checkWritable(uint64_t createdEpoch) {
  auto* ownership = service_.topicOwnership();
  if (ownership == nullptr) return Status::ok();
  if (createdEpoch != ownership->ownershipEpoch()) {
    // Created before a lost session: the bundle was released (its clients are being closed)
    // and may be another broker's, even though a new session made this broker writable again.
    return Status::notAllowed(
        "the producer or consumer was created before the ZooKeeper session was lost: refusing "
        "its writes (the bundle may have moved)");
  }
  if (ownership->writable()) return Status::ok();
  // Its bundles may be another broker's by now (a pause past the ZooKeeper session): nothing is
  // written or acknowledged; the client reconnects, looks up and sends again.
  return Status::notAllowed(
      "no confirmed ZooKeeper contact within the session timeout: refusing writes until there "
      "is (the bundles may have moved)");
}

Status ServerCnx::dispatchFrame(const proto::BaseCommand& cmd, Buffer entry) {
  using T = proto::BaseCommand;
  // Liveness counts complete frames only (Pulsar's messageReceived()), not bytes.
  waitingForPong_ = false;
  if (!connected_ && cmd.type() != T::CONNECT) {
    if (cmd.type() == T::PING) {
      send(Commands::newPong());
      return Status::ok();
    }
    CnxErrorStats::record(ProtocolError::kBeforeConnect);
    return Status::notAllowed("received " + T::Type_Name(cmd.type()) + " before CONNECT");
  }
  switch (cmd.type()) {
    case T::CONNECT: handleConnect(cmd.connect()); break;
    case T::PING: send(Commands::newPong()); break;
    case T::PONG: break;
    case T::AUTH_RESPONSE:
      handleAuthResponse(cmd.authresponse());
      break;
    case T::LOOKUP: handleLookup(cmd.lookuptopic()); break;
    case T::PARTITIONED_METADATA: handlePartitionedMetadata(cmd.partitionmetadata()); break;
    case T::PRODUCER: handleProducer(cmd.producer()); break;
    case T::SEND:
      if (Status w = checkWritable(producerEpoch(cmd.send().producer_id())); !w.isOk()) return w;
      handleSend(cmd.send(), std::move(entry));
      break;
    case T::SUBSCRIBE: handleSubscribe(cmd.subscribe()); break;
    case T::FLOW: handleFlow(cmd.flow()); break;
    case T::ACK:
      if (Status w = checkWritable(consumerEpoch(cmd.ack().consumer_id())); !w.isOk()) return w;
      handleAck(cmd.ack());
      break;
    case T::END_TXN_ON_SUBSCRIPTION:
      handleEndTxnOnSubscription(cmd.endtxnonsubscription());
      break;
    case T::REDELIVER_UNACKNOWLEDGED_MESSAGES: handleRedeliver(cmd.redeliverunacknowledgedmessages()); break;
    case T::CLOSE_PRODUCER: handleCloseProducer(cmd.close_producer()); break;
    case T::CLOSE_CONSUMER: handleCloseConsumer(cmd.close_consumer()); break;
    case T::UNSUBSCRIBE: handleUnsubscribe(cmd.unsubscribe()); break;
    case T::SEEK: handleSeek(cmd.seek()); break;
    case T::GET_LAST_MESSAGE_ID: handleGetLastMessageId(cmd.getlastmessageid()); break;
    case T::END_TXN_ON_PARTITION:
      handleEndTxnOnPartition(cmd.endtxnonpartition());
      break;
    case T::GET_TOPICS_OF_NAMESPACE: handleGetTopicsOfNamespace(cmd.gettopicsofnamespace()); break;
    case T::GET_SCHEMA: handleGetSchema(cmd.getschema()); break;
    case T::GET_OR_CREATE_SCHEMA: handleGetOrCreateSchema(cmd.getorcreateschema()); break;
    case T::CONSUMER_STATS: handleConsumerStats(cmd.consumerstats()); break;
    case T::WATCH_TOPIC_LIST: handleWatchTopicList(cmd.watchtopiclist()); break;
    case T::WATCH_TOPIC_LIST_CLOSE: handleWatchTopicListClose(cmd.watchtopiclistclose()); break;
    case T::TC_CLIENT_CONNECT_REQUEST:
      handleTcClientConnect(cmd.tcclientconnectrequest());
      break;
    case T::NEW_TXN:
      handleNewTxn(cmd.newtxn());
      break;
    case T::ADD_PARTITION_TO_TXN:
      handleAddPartitionToTxn(cmd.addpartitiontotxn());
      break;
    case T::ADD_SUBSCRIPTION_TO_TXN:
      handleAddSubscriptionToTxn(cmd.addsubscriptiontotxn());
      break;
    case T::END_TXN:
      handleEndTxn(cmd.endtxn());
      break;
    default: answerUnsupported(cmd); break;
  }
  return Status::ok();
}

void ServerCnx::handleConnect(const proto::CommandConnect& c) {
  MAGNETAR_DCHECK_ON(loop());
  if (connected_) {
    sendError(0, proto::NotAllowedError, "Already connected");
    return;
  }
  connected_ = true;
  clientVersion_ = c.client_version();
  protocolVersion_ = std::min<int>(c.protocol_version(), protocol::kMaxProtocolVersion);
  supportsAuthRefresh_ = c.has_feature_flags() && c.feature_flags().supports_auth_refresh();
  const AuthenticationService& authn = service_.authentication();
  if (!authn.enabled()) {
    sendConnected();
    return;
  }
  if (c.has_auth_method_name()) {
    authMethod_ = c.auth_method_name();
  } else if (c.has_auth_method()) {
    // The legacy enum: AuthMethodNone / AuthMethodYcaV1 / AuthMethodAthens, as Pulsar maps it.
    std::string n = proto::AuthMethod_Name(c.auth_method());
    authMethod_ = n.size() > 10 ? n.substr(10) : n;
    std::transform(authMethod_.begin(), authMethod_.end(), authMethod_.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  } else {
    authMethod_ = "none";
  }
  if (!authn.provider(authMethod_)) {
    if (authn.anonymousUserRole().empty()) {
      authenticationFailed("No anonymous role, and no authentication provider configured");
      return;
    }
    authRole_ = authn.anonymousUserRole();
    sendConnected();
    return;
  }
  if (!authenticate(c.auth_data())) return;
  sendConnected();
  scheduleAuthRefresh();
}

void ServerCnx::sendConnected() {
  decoder_.setMaxFrameSize(service_.options().maxMessageSize + protocol::kFrameSizePadding);
  // Features this broker serves, as Pulsar advertises them in CONNECTED.
  proto::FeatureFlags features;
  features.set_supports_topic_watchers(service_.options().enableBrokerTopicListWatcher &&
                                       service_.options().enableBrokerSideSubscriptionPatternEvaluation);
  features.set_supports_get_partitioned_metadata_without_auto_creation(true);
  send(Commands::newConnected(service_.options().serverVersion, protocolVersion_,
                              static_cast<int32_t>(service_.options().maxMessageSize), &features));
}

bool ServerCnx::authenticate(const std::string& authData) {
  const AuthenticationProvider* p = service_.authentication().provider(authMethod_);
  if (!p) {
    authenticationFailed("No authentication provider for " + authMethod_);
    return false;
  }
  AuthenticationData data;
  data.commandData = authData;
  std::string reason;
  // The TLS provider tells a TLS connection without a certificate from a certificate without CN.
  const auto* tls = dynamic_cast<const AuthenticationProviderTls*>(p);
  auto r = tls ? tls->authenticateConnection(isTls(), peerCommonName(), &reason)
               : p->authenticate(data, &reason);
  if (!r) {
    AuthenticationMetrics::failure(p->providerName(), p->authMethodName(), reason);
    authenticationFailed(r.status().message());
    return false;
  }
  AuthenticationMetrics::success(p->providerName(), p->authMethodName());
  if (!authRole_.empty() && r->role != authRole_) {
    // Pulsar: the principal cannot change during an authentication refresh.
    MLOG_WARN("[{}] closing connection: role changed from {} to {} on refresh", peerAddress(),
              authRole_, r->role);
    close();
    return false;
  }
  authRole_ = r->role;
  authExpiresAtMs_ = r->expiresAtMs;
  authToken_ = authMethod_ == "token" ? authData : "";
  return true;
}

void ServerCnx::authenticationFailed(const std::string& why) {
  CnxErrorStats::record(ProtocolError::kAuthentication);
  MLOG_WARN("[{}] authentication failed (method {}): {}", peerAddress(), authMethod_, why);
  // Pulsar answers request id -1 with this fixed message and closes once it is written.
  send(Commands::newError(static_cast<uint64_t>(-1), proto::AuthenticationError,
                          "Failed to authenticate"));
  close(true);
}

void ServerCnx::scheduleAuthRefresh() {
  armTimer(authRefreshTimer_, service_.options().authenticationRefreshCheckSeconds,
           &ServerCnx::onAuthRefreshTimer);
}

void ServerCnx::armTimer(boost::asio::steady_timer& timer, int secs, void (ServerCnx::*onTick)()) {
  if (secs <= 0 || isClosed()) return;
  timer.expires_after(std::chrono::seconds(secs));
  auto me = self();
  timer.async_wait([me, onTick](const boost::system::error_code& ec) {
    if (ec || me->isClosed()) return;
    ((*me).*onTick)();
  });
}

void ServerCnx::onAuthRefreshTimer() {
  MAGNETAR_DCHECK_ON(loop());
  bool expired = authExpiresAtMs_ && *authExpiresAtMs_ < nowMillis();
  if (expired) {
    if (!supportsAuthRefresh_ || pendingAuthChallenge_) {
      CnxErrorStats::record(ProtocolError::kAuthRefresh);
      MLOG_WARN("[{}] closing connection: credentials of {} expired{}", peerAddress(), authRole_,
                pendingAuthChallenge_ ? " and were not refreshed" : " (no refresh support)");
      close();
      return;
    }
    pendingAuthChallenge_ = true;
    send(Commands::newAuthChallenge(service_.options().serverVersion, authMethod_,
                                    "PulsarAuthRefresh", protocolVersion_));
  }
  scheduleAuthRefresh();
}

void ServerCnx::handleAuthResponse(const proto::CommandAuthResponse& c) {
  MAGNETAR_DCHECK_ON(loop());
  pendingAuthChallenge_ = false;
  if (!service_.authentication().enabled() || !c.has_response()) return;
  if (c.response().has_auth_method_name() && c.response().auth_method_name() != authMethod_) {
    authenticationFailed("auth method changed to " + c.response().auth_method_name());
    return;
  }
  if (authenticate(c.response().auth_data())) {
    MLOG_INFO("[{}] refreshed authentication credentials for role {}", peerAddress(), authRole_);
  }
}

bool ServerCnx::refuseMissingNamespace(const TopicName& topic, uint64_t requestId) {
  if (service_.topicOwnership() || service_.namespaceExists(topic.namespaceName())) return false;
  // Pulsar: no broker owns a bundle of a namespace that does not exist (the whole range).
  sendError(requestId, proto::ServiceNotReady,
            "Namespace bundle (" + topic.namespaceName() + "/0x00000000_0xffffffff) for topic (" +
                topic.toString() + ") not served by this instance. Please redo the lookup.");
  return true;
}

std::string ServerCnx::notAuthorizedMessage(const TopicName& topic, const char* what) const {
  // Pulsar's validateTenantAdminAccess throws a 404 RestException for a missing tenant.
  if (!service_.authorization().tenantExists(topic.tenant())) {
    return "org.apache.pulsar.common.util.RestException: HTTP 404 Not Found";
  }
  return std::string("Client is not authorized to ") + what;
}

bool ServerCnx::allowed(const TopicName& topic, TopicOperation op,
                        const std::string& subscription) {
  if (service_.authorization().allowTopicOperation(topic, authRole_, op, subscription)) return true;
  AuthorizationStats::record(op);
  MLOG_WARN("[{}] role {} is not authorized on {}", peerAddress(), authRole_, topic.toString());
  return false;
}

void ServerCnx::startKeepAlive() {
  MAGNETAR_DCHECK_ON(loop());
  armTimer(keepAliveTimer_, service_.options().keepAliveIntervalSeconds,
           &ServerCnx::onKeepAliveTimer);
}

void ServerCnx::onKeepAliveTimer() {
  MAGNETAR_DCHECK_ON(loop());
  if (!connected_) {
    CnxErrorStats::record(ProtocolError::kHandshakeTimeout);
    closedByKeepAlive_ = true;
    MLOG_WARN("[{}] closing connection: no CONNECT within keepAliveIntervalSeconds",
              peerAddress());
    close();
    return;
  }
  // While reads are paused the answer may sit unread: wait (as Pulsar with auto-read off).
  if (waitingForPong_ && !readPaused()) {
    CnxErrorStats::record(ProtocolError::kKeepAliveTimeout);
    closedByKeepAlive_ = true;
    MLOG_WARN("[{}] closing connection: no keep-alive answer", peerAddress());
    close();
    return;
  }
  // Every tick probes, busy or idle, so a silent peer is closed at the second tick after it
  // went quiet. PING/PONG came with protocol version 1.
  if (protocolVersion_ >= 1) {
    waitingForPong_ = true;
    send(Commands::newPing());
  }
  startKeepAlive();
}

bool ServerCnx::servesTopic(const TopicName& name) const {
  auto* ownership = service_.topicOwnership();
  return !ownership || ownership->owns(name);
}

void ServerCnx::confirmOwnership(const TopicName& name, uint64_t requestId,
                                 const std::function<void()>& again) {
  auto me = self();
  service_.topicOwnership()->confirmOwned(name, &loop(), [me, name, requestId, again](bool owned) {
    MAGNETAR_DCHECK_ON(me->loop());
    if (me->isClosed()) return;
    if (owned) return again();
    MLOG_DEBUG("[{}] {} is not served here: ServiceNotReady", me->peerAddress(), name.toString());
    // Pulsar's answer: the client looks the topic up again and goes to the owner.
    me->sendError(requestId, proto::ServiceNotReady,
                  "Namespace bundle for topic (" + name.toString() +
                      ") not served by this instance. Please redo the lookup.");
  });
}

void ServerCnx::handleLookup(const proto::CommandLookupTopic& c) {
  MAGNETAR_DCHECK_ON(loop());
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) {
    CnxErrorStats::record(ProtocolError::kInvalidName);
    send(Commands::newLookupErrorResponse(c.request_id(), proto::InvalidTopicName,
                                          name.status().message()));
    return;
  }
  if (!allowed(*name, TopicOperation::kLookup)) {
    // Pulsar: a role that is refused on a missing tenant fails in validateTenantAdminAccess.
    send(Commands::newLookupErrorResponse(
        c.request_id(), proto::AuthorizationError,
        service_.authorization().tenantExists(name->tenant())
            ? "Client is not authorized to Lookup"
            : "Exception occurred while trying to authorize lookup"));
    return;
  }
  // Standalone: a namespace that does not exist (Pulsar's lookup finds no policies). Cluster
  // mode places the bundle of any namespace, as before.
  if (!service_.topicOwnership() && !service_.namespaceExists(name->namespaceName())) {
    send(Commands::newLookupErrorResponse(c.request_id(), proto::TopicNotFound,
                                          "Namespace not found"));
    return;
  }
  // Cluster mode: the owner of the topic's bundle (Connect), or a broker to ask (Redirect); with
  // advertised_listener_name, that broker's address on that listener.
  if (auto* ownership = service_.topicOwnership()) {
    // Pulsar's lookupTopicAsync step (3): a namespace not replicated to this cluster.
    if (Status s = service_.checkLocalCluster(name->namespaceName()); !s.isOk()) {
      send(Commands::newLookupErrorResponse(c.request_id(), proto::MetadataError, s.message()));
      return;
    }
    auto me = self();
    uint64_t requestId = c.request_id();
    std::string listener = c.has_advertised_listener_name() ? c.advertised_listener_name() : "";
    ownership->lookup(
        *name, c.authoritative(), listener, &loop(), [me, requestId](const LookupAnswer& a) {
          if (!a.error.isOk()) {
            me->send(Commands::newLookupErrorResponse(requestId, proto::ServiceNotReady,
                                                      a.error.message()));
            return;
          }
          me->send(Commands::newLookupResponse(requestId, a.url, a.urlTls, a.authoritative,
                                               a.redirect
                                                   ? proto::CommandLookupTopicResponse::Redirect
                                                   : proto::CommandLookupTopicResponse::Connect));
        });
    return;
  }
  // advertised_listener_name picks one of advertisedListeners (Pulsar's answer to an unknown
  // one: ServiceNotReady "the broker do not have <name> listener").
  const auto& listeners = service_.options().advertisedListeners;
  if (c.has_advertised_listener_name() && !c.advertised_listener_name().empty()) {
    auto it = listeners.byName.find(c.advertised_listener_name());
    if (it == listeners.byName.end()) {
      send(Commands::newLookupErrorResponse(
          c.request_id(), proto::ServiceNotReady,
          "the broker do not have " + c.advertised_listener_name() + " listener"));
      return;
    }
    send(Commands::newLookupResponse(c.request_id(), it->second.brokerServiceUrl,
                                     it->second.brokerServiceUrlTls, true));
    return;
  }
  // Both URLs, as Pulsar's lookup data: a client on pulsar+ssl:// takes the TLS one.
  send(Commands::newLookupResponse(c.request_id(), service_.brokerServiceUrl(),
                                   service_.brokerServiceUrlTls(), true));
}

void ServerCnx::handlePartitionedMetadata(const proto::CommandPartitionedTopicMetadata& c) {
  MAGNETAR_DCHECK_ON(loop());
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) {
    CnxErrorStats::record(ProtocolError::kInvalidName);
    send(Commands::newPartitionMetadataErrorResponse(c.request_id(), proto::InvalidTopicName,
                                                     name.status().message()));
    return;
  }
  if (!allowed(*name, TopicOperation::kLookup)) {
    // Pulsar: a missing tenant is TopicNotFound here for any role (clients ask this first).
    if (!service_.authorization().tenantExists(name->tenant())) {
      send(Commands::newPartitionMetadataErrorResponse(
          c.request_id(), proto::TopicNotFound,
          "Tenant or namespace or topic does not exist: " + name->namespaceName()));
      return;
    }
    send(Commands::newPartitionMetadataErrorResponse(
        c.request_id(), proto::AuthorizationError,
        "Client is not authorized to Get Partition Metadata"));
    return;
  }
  // Cluster mode: a partitioned topic (or namespace) created through another broker a moment
  // ago is read from the configuration store first, so it is never mistaken for a new
  // non-partitioned topic.
  if (SharedConfig* shared = service_.sharedConfig()) {
    auto me = self();
    shared->refresh(*name, &loop(), [me, c, n = *name](const Status& s) {
      // Not known here and ZooKeeper unreachable: retryable, not "does not exist".
      if (!s.isOk() && !me->service_.namespaceExists(n.namespaceName())) {
        me->send(Commands::newPartitionMetadataErrorResponse(
            c.request_id(), proto::ServiceNotReady,
            "Cannot read the metadata of " + n.toString() + ": " + s.message()));
        return;
      }
      // Pulsar's checkLocalOrGetPeerReplicationCluster: a namespace not replicated here (412
      // there, MetadataError on the binary protocol).
      if (Status local = me->service_.checkLocalCluster(n.namespaceName()); !local.isOk()) {
        me->send(Commands::newPartitionMetadataErrorResponse(c.request_id(), proto::MetadataError,
                                                             local.message()));
        return;
      }
      me->answerPartitionedMetadata(c, n);
    });
    return;
  }
  answerPartitionedMetadata(c, *name);
}

void ServerCnx::answerPartitionedMetadata(const proto::CommandPartitionedTopicMetadata& c,
                                          const TopicName& topic) {
  MAGNETAR_DCHECK_ON(loop());
  if (isClosed()) return;
  const TopicName* name = &topic;
  // Pulsar's answer for a role that may look the topic up in a namespace that does not exist.
  if (!service_.namespaceExists(name->namespaceName())) {
    send(Commands::newPartitionMetadataErrorResponse(c.request_id(), proto::TopicNotFound,
                                                     "Namespace not found"));
    return;
  }
  // Pulsar 4: without auto-creation (asked by the client, or refused by the broker) a topic
  // that does not exist is TopicNotFound, not 0 partitions. Clients rely on it, e.g. to name
  // retry and dead-letter topics "<topic>-<sub>-RETRY" rather than the legacy "<ns>/<sub>-RETRY".
  bool autoCreate = (!c.has_metadata_auto_creation_enabled() || c.metadata_auto_creation_enabled()) &&
                    service_.allowAutoTopicCreation(*name);
  // Shared storage: a topic not loaded here is the storage's to say (created or deleted through
  // another broker since this one last looked).
  const bool known = service_.storageShared() ? service_.topicLoadedOrPartitioned(*name)
                                              : service_.topicExists(*name);
  if (!autoCreate && !known) {
    if (!service_.storageShared()) {
      send(Commands::newPartitionMetadataErrorResponse(c.request_id(), proto::TopicNotFound, ""));
      return;
    }
    // Shared storage (BookKeeper): a topic another broker created since this one started exists
    // too; the storage says (Pulsar reads the metadata store).
    auto me = self();
    service_.checkStoredTopic(*name, &loop(), [me, c, n = *name](const Result<bool>& exists) {
      if (me->isClosed()) return;
      if (!exists.isOk()) {
        me->send(Commands::newPartitionMetadataErrorResponse(
            c.request_id(), proto::ServiceNotReady,
            "Cannot read the metadata of " + n.toString() + ": " + exists.status().message()));
      } else if (!*exists) {
        me->send(
            Commands::newPartitionMetadataErrorResponse(c.request_id(), proto::TopicNotFound, ""));
      } else {
        me->sendPartitionCount(c, n, false);
      }
    });
    return;
  }
  sendPartitionCount(c, *name, autoCreate);
}

void ServerCnx::sendPartitionCount(const proto::CommandPartitionedTopicMetadata& c,
                                   const TopicName& topic, bool autoCreate) {
  MAGNETAR_DCHECK_ON(loop());
  const TopicName* name = &topic;
  auto n = service_.partitionsOf(*name, autoCreate);
  if (!n.isOk()) {
    send(Commands::newPartitionMetadataErrorResponse(
        c.request_id(), toServerError(n.status(), ErrorContext::kLookup), n.status().message()));
    return;
  }
  send(Commands::newPartitionMetadataResponse(c.request_id(), static_cast<uint32_t>(*n)));
}

void ServerCnx::handleProducer(const proto::CommandProducer& c,
                               std::optional<uint64_t> confirmedEpoch) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t producerId = c.producer_id();
  uint64_t requestId = c.request_id();
  std::erase(recentlyClosedProducers_, producerId);  // the id is in use again
  auto existing = producers_.find(producerId);
  if (existing != producers_.end()) {
    // A retry of a create that already succeeded: answer the same way again.
    send(Commands::newProducerSuccess(requestId, existing->second.producer->name(), -1,
                                      existing->second.schemaVersion));
    return;
  }
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) {
    CnxErrorStats::record(ProtocolError::kInvalidName);
    sendError(requestId, proto::InvalidTopicName, name.status().message());
    return;
  }
  if (!allowed(*name, TopicOperation::kProduce)) {
    sendError(requestId, proto::AuthorizationError, notAuthorizedMessage(*name, "Produce"));
    return;
  }
  if (refuseMissingNamespace(*name, requestId)) return;
  // Read before the ownership check.
  const uint64_t ownershipEpoch = confirmedEpoch.value_or(currentOwnershipEpoch());
  if (!confirmedEpoch && !servesTopic(*name)) {
    return confirmOwnership(*name, requestId, [me = self(), c, ownershipEpoch] {
      me->handleProducer(c, ownershipEpoch);
    });
  }
  std::string producerName =
      c.has_producer_name() && !c.producer_name().empty() ? c.producer_name()
                                                          : service_.generateProducerName();
  proto::ProducerAccessMode mode =
      c.has_producer_access_mode() ? c.producer_access_mode() : proto::Shared;
  std::optional<uint64_t> epoch;
  if (c.has_topic_epoch()) epoch = c.topic_epoch();
  auto producer = std::make_shared<Producer>(producerId, producerName, self(), mode, epoch);
  producer->ownershipEpoch = ownershipEpoch;
  for (const auto& kv : c.metadata()) producer->metadata[kv.key()] = kv.value();
  creatingProducers_[producerId] = producer;
  const std::string& initialSubscription = c.initial_subscription_name();
  std::optional<proto::Schema> schema;
  if (c.has_schema()) schema = c.schema();
  auto me = self();
  service_.getOrCreateTopic(
      *name, service_.allowAutoTopicCreation(*name),
      [me, producer, requestId, producerId, initialSubscription,
       schema](Result<std::shared_ptr<PersistentTopic>> r) {
        if (!r.isOk()) {
          me->loop().execute(
              [me, producerId, producer] { me->creationDone(producerId, producer); });
          me->sendError(requestId, toServerError(r.status(), ErrorContext::kProducer),
                        r.status().message());
          return;
        }
        me->addProducerToTopic(*r, producer, requestId, producerId, initialSubscription,
                               schema ? &*schema : nullptr);
      });
}

// The dead-letter producer's subscription exists before its first message (Pulsar creates it at
// Earliest, when auto subscription creation is allowed).
bool ServerCnx::refuseInitialSubscription(PersistentTopic& topic,
                                          const std::string& initialSubscription,
                                          uint64_t requestId, uint64_t producerId,
                                          const std::shared_ptr<Producer>& producer) {
  if (initialSubscription.empty() || topic.subscription(initialSubscription)) return false;
  auto me = self();
  if (!service_.options().dynamic.allowAutoSubscriptionCreation.load()) {
    loop().execute([me, producerId, producer] { me->creationDone(producerId, producer); });
    sendError(requestId, proto::NotAllowedError,
              "Could not create the initial subscription due to the auto "
              "subscription creation is not allowed.");
    return true;
  }
  Status s = topic.createSubscription(initialSubscription, storage::InitialPosition::kEarliest);
  if (!s.isOk() && s.code() != StatusCode::kAlreadyExists) {
    loop().execute([me, producerId, producer] { me->creationDone(producerId, producer); });
    sendError(requestId, toServerError(s, ErrorContext::kProducer),
              "Failed to create the initial subscription: " + s.message());
    return true;
  }
  return false;
}

void ServerCnx::addProducerToTopic(const std::shared_ptr<PersistentTopic>& topic,
                                   const std::shared_ptr<Producer>& producer, uint64_t requestId,
                                   uint64_t producerId, const std::string& initialSubscription,
                                   const proto::Schema* schema) {
  auto me = self();
  addProducerSchema(
      service_, *topic, schema,
      [me, topic, producer, requestId, producerId, initialSubscription](const SchemaAnswer& sa) {
        if (!sa.ok) {
          me->loop().execute(
              [me, producerId, producer] { me->creationDone(producerId, producer); });
          return me->sendError(requestId, sa.error, sa.message);
        }
        if (me->refuseInitialSubscription(*topic, initialSubscription, requestId, producerId,
                                          producer)) {
          return;
        }
        me->addProducerWithSchema(topic, producer, requestId, producerId, sa.version);
      });
}

// The producer's schema is registered (schemaVersion: the PRODUCER_SUCCESS field): adds it to
// the topic. Topic executor.
void ServerCnx::addProducerWithSchema(const std::shared_ptr<PersistentTopic>& topic,
                                      const std::shared_ptr<Producer>& producer, uint64_t requestId,
                                      uint64_t producerId, const std::string& schemaVersion) {
  auto me = self();
  auto queued = [me, topic, producer, requestId, producerId, schemaVersion] {
    // WaitForExclusive behind other producers: "created, not ready" (Pulsar sends
    // PRODUCER_SUCCESS with producer_ready=false, then again once admitted).
    me->loop().execute([me, topic, producer, requestId, producerId, schemaVersion] {
      if (me->isClosed() || !me->creationDone(producerId, producer)) {
        topic->executor().execute([topic, producer] { topic->removeProducer(producer.get()); });
        return;
      }
      me->creatingProducers_[producerId] = producer;  // still waiting for its turn
      me->producers_[producerId] = ProducerRef{producer, topic, schemaVersion};
      if (me->throttled_) me->updateReadState();  // now subject to the buffer
      me->send(Commands::newProducerSuccess(requestId, producer->name(), -1, schemaVersion, false));
    });
  };
  auto added = [me, topic, producer, requestId, producerId, schemaVersion](
                   const Status& s, proto::ServerError err, std::optional<uint64_t> topicEpoch) {
    int64_t lastSequenceId = s.isOk() ? topic->lastSequenceId(producer->name()) : -1;
    me->loop().execute([me, topic, producer, requestId, producerId, s, err, lastSequenceId,
                        topicEpoch, schemaVersion] {
      const bool closedWhileCreated =
          !me->creationDone(producerId, producer) && !me->producers_.count(producerId);
      if (!s.isOk()) {
        auto it = me->producers_.find(producerId);
        if (it != me->producers_.end() && it->second.producer == producer) {
          me->producers_.erase(it);
        }
        me->sendError(requestId, err, s.message());
        return;
      }
      auto it = me->producers_.find(producerId);
      bool otherWithSameId = it != me->producers_.end() && it->second.producer != producer;
      if (me->isClosed() || otherWithSameId || closedWhileCreated) {
        topic->executor().execute([topic, producer] { topic->removeProducer(producer.get()); });
        return;
      }
      me->producers_[producerId] = ProducerRef{producer, topic, schemaVersion};
      if (me->throttled_) me->updateReadState();  // now subject to the buffer
      me->send(Commands::newProducerSuccess(requestId, producer->name(), lastSequenceId,
                                            schemaVersion, true, topicEpoch));
    });
  };
  topic->addProducer(producer, std::move(added), std::move(queued));
}

bool ServerCnx::creationDone(uint64_t producerId, const std::shared_ptr<Producer>& producer) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = creatingProducers_.find(producerId);
  if (it == creatingProducers_.end() || it->second != producer) return false;
  creatingProducers_.erase(it);
  return true;
}

void ServerCnx::handleSend(const proto::CommandSend& c, Buffer entry) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = producers_.find(c.producer_id());
  if (it == producers_.end()) {
    if (std::find(recentlyClosedProducers_.begin(), recentlyClosedProducers_.end(),
                  c.producer_id()) != recentlyClosedProducers_.end()) {
      return;  // sent before the client saw CLOSE_PRODUCER; it sends it again
    }
    CnxErrorStats::record(ProtocolError::kUnknownId);
    MLOG_WARN("[{}] SEND for unknown producer {}; closing connection", peerAddress(),
              c.producer_id());
    close();
    return;
  }
  if (it->second.producer->fenced.load(std::memory_order_acquire)) {
    // Fenced out by an ExclusiveWithFencing producer: Pulsar closes the connection here.
    MLOG_INFO("[{}] SEND from producer {} fenced out of {}; closing connection", peerAddress(),
              it->second.producer->name(), it->second.topic->name().toString());
    close();
    return;
  }
  if (!protocol::verifyChecksum(entry).isOk()) {
    CnxErrorStats::record(ProtocolError::kChecksum);
    send(Commands::newSendError(c.producer_id(), c.sequence_id(), proto::ChecksumError,
                                "Checksum failed on the broker"));
    return;
  }
  if (entry.size() > service_.options().maxMessageSize + protocol::kFrameSizePadding) {
    send(Commands::newSendError(c.producer_id(), c.sequence_id(), proto::NotAllowedError,
                                "Message size is larger than the broker's maxMessageSize"));
    return;
  }
  // The entry stays charged until publishCompleted(); a frame admitted at its header already is
  // (whole, command included), so only the difference moves.
  const int64_t delta = static_cast<int64_t>(entry.size()) - std::exchange(frameCharge_, 0);
  if (delta >= 0) {
    throttle_.add(delta);
  } else {
    throttle_.release(-delta);
  }
  PendingSend ps;
  ps.producer = it->second.producer;
  ps.sequenceId = c.sequence_id();
  ps.highestSequenceId = c.has_highest_sequence_id() && c.highest_sequence_id() > c.sequence_id()
                             ? c.highest_sequence_id()
                             : c.sequence_id();
  ps.numMessages = c.has_num_messages() ? c.num_messages() : 1;
  ps.entry = std::move(entry);
  if (c.has_txnid_most_bits() && c.has_txnid_least_bits()) {
    ps.txn = TxnID{c.txnid_most_bits(), c.txnid_least_bits()};  // Pulsar's publishTxnMessage
  }
  auto& topic = it->second.topic;
  if (!topic->name().isPersistent()) ps.dropped = !takeNonPersistentSlot();
  std::vector<PendingSend>* vec = nullptr;
  for (auto& [t, v] : sendBatch_) {
    if (t == topic) {
      vec = &v;
      break;
    }
  }
  if (!vec) {
    sendBatch_.emplace_back(topic, std::vector<PendingSend>{});
    vec = &sendBatch_.back().second;
    // One allocation for a pass's SENDs instead of one per doubling (the vector goes to the
    // topic's thread with them).
    vec->reserve(kSendBatchReserve);
  }
  const int64_t sendMsgs = ps.numMessages;
  const auto sendBytes = static_cast<int64_t>(ps.entry.size());
  vec->push_back(std::move(ps));
  // Publish rate limits: one relaxed load each when none is configured.
  MessageRateLimiter* group = topic->resourceGroupPublishLimiter();
  if (topic->publishRateLimiter().enabled() || service_.rateLimiters().publish.enabled() ||
      (group && group->enabled())) [[unlikely]] {
    checkPublishRate(topic, sendMsgs, sendBytes);
  }
  int max = service_.options().maxPendingPublishRequestsPerConnection;
  int64_t pending = pendingPublishes_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (max > 0 && pending >= max && !publishPaused_.exchange(true)) updateReadState();
}

bool ServerCnx::takeNonPersistentSlot() {
  MAGNETAR_DCHECK_ON(loop());
  // Pulsar's ServerCnx.handleSend: over the limit the SEND is dropped (the topic still answers
  // it, in order with the producer's other receipts).
  const int64_t max = service_.options().maxConcurrentNonPersistentMessagePerConnection;
  if (nonPersistentPending_.load(std::memory_order_relaxed) > max) return false;
  nonPersistentPending_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ServerCnx::handleCloseProducer(const proto::CommandCloseProducer& c) {
  MAGNETAR_DCHECK_ON(loop());
  // The SENDs read before it go to their topics first: they are stored and answered, then the
  // SUCCESS (Pulsar's Producer.close waits for the pending publish acks).
  flushSends();
  auto it = producers_.find(c.producer_id());
  if (it == producers_.end()) {
    if (creatingProducers_.erase(c.producer_id())) {
      // Closed while being created: the creation's completion takes it off the topic again.
      send(Commands::newSuccess(c.request_id()));
      return;
    }
    // Pulsar answers success for an unknown producer id (already closed).
    CnxErrorStats::record(ProtocolError::kUnknownId);
    send(Commands::newSuccess(c.request_id()));
    return;
  }
  auto topic = it->second.topic;
  auto p = it->second.producer;
  producers_.erase(it);
  if (auto w = creatingProducers_.find(c.producer_id());
      w != creatingProducers_.end() && w->second == p) {
    creatingProducers_.erase(w);  // waiting for an exclusive turn: not admitted later
  }
  uint64_t requestId = c.request_id();
  topic->executor().execute([topic, p, requestId] { topic->closeProducerByClient(p, requestId); });
}

void ServerCnx::closeProducerFromBroker(uint64_t producerId) {
  auto me = self();
  loop().execute([me, producerId] { me->closeProducerOnLoop(producerId); });
}

void ServerCnx::closeProducerOnLoop(uint64_t producerId) {
  MAGNETAR_DCHECK_ON(loop());
  if (!producers_.erase(producerId)) return;
  // Pulsar keeps them for a while (recentlyClosedProducers); a bounded list does here.
  constexpr size_t kRecentlyClosedProducers = 1024;
  if (recentlyClosedProducers_.size() >= kRecentlyClosedProducers) {
    recentlyClosedProducers_.pop_front();
  }
  recentlyClosedProducers_.push_back(producerId);
  send(Commands::newCloseProducer(producerId, 0));
}

void ServerCnx::sendAnswers(ReceiptBatch& batch) {
  bool queue = false;
  {
    MutexLock lock(answersMu_);
    answers_.emplace_back();
    std::swap(answers_.back(), batch);  // batch is left empty
    if (!spareAnswers_.empty()) {
      batch = std::move(spareAnswers_.back());
      spareAnswers_.pop_back();
    }
    queue = !std::exchange(answersQueued_, true);
  }
  if (queue) {
    auto me = self();
    loop().executeAfterPass([me] { me->writeAnswers(); });
  }
}

void ServerCnx::writeAnswers() {
  MAGNETAR_DCHECK_ON(loop());
  {
    MutexLock lock(answersMu_);
    answersQueued_ = false;
    answering_.swap(answers_);
  }
  // The frames of every batch first (one write), then each batch's releases and closes in
  // order: a close follows the answers it waited for, whichever batch carried them.
  for (const ReceiptBatch& b : answering_) b.encode(answerFrames_);
  if (!answerFrames_.empty()) send(std::move(answerFrames_));
  answerFrames_.clear();
  for (ReceiptBatch& b : answering_) {
    if (b.completed > 0) publishCompleted(b.completed, b.completedBytes);
    if (b.nonPersistentCompleted > 0) nonPersistentCompleted(b.nonPersistentCompleted);
    for (uint64_t id : b.closeAfter) closeProducerOnLoop(id);
    b.clear();
  }
  constexpr size_t kMaxSpare = 4;
  MutexLock lock(answersMu_);
  for (ReceiptBatch& b : answering_) {
    if (spareAnswers_.size() < kMaxSpare) spareAnswers_.push_back(std::move(b));
  }
  answering_.clear();
}

void ServerCnx::handleGetTopicsOfNamespace(const proto::CommandGetTopicsOfNamespace& c) {
  MAGNETAR_DCHECK_ON(loop());
  TopicDomain domain =
      c.mode() == proto::CommandGetTopicsOfNamespace::NON_PERSISTENT ? TopicDomain::kNonPersistent
      : c.mode() == proto::CommandGetTopicsOfNamespace::ALL          ? TopicDomain::kAll
                                                                     : TopicDomain::kPersistent;
  if (!allowGetTopics(service_, c.namespace_(), authRole_)) {
    MLOG_WARN("[{}] role {} may not list the topics of {}", peerAddress(), authRole_,
              c.namespace_());
    sendError(c.request_id(), proto::AuthorizationError,
              "Client is not authorized to GetTopicsOfNamespace");
    return;
  }
  std::vector<std::string> topics = service_.topicsOfNamespace(c.namespace_(), domain);
  if (service_.storageShared()) {
    // Cluster mode on BookKeeper: the storage's list (every broker's topics, loaded or not), as
    // Pulsar's getListOfUserTopics reads the metadata store, plus this broker's own view.
    auto me = self();
    service_.sharedStoredTopicsOf(
        c.namespace_(), domain, &loop(),
        [me, c, topics = std::move(topics)](Result<std::vector<std::string>> stored) mutable {
          if (me->isClosed()) return;
          if (!stored.isOk()) {
            me->sendError(
                c.request_id(), proto::MetadataError,
                "Cannot list the topics of " + c.namespace_() + ": " + stored.status().message());
            return;
          }
          std::set<std::string> all(topics.begin(), topics.end());
          all.insert(stored->begin(), stored->end());
          me->answerTopicsOfNamespace(c, {all.begin(), all.end()});
        });
    return;
  }
  if (const auto& lister = service_.clusterTopicLister()) {
    // Cluster mode on local storage: every broker's topics, as the admin list (each broker
    // asked over HTTP).
    auto me = self();
    std::optional<std::string> authorization;
    if (!authToken_.empty()) authorization = "Bearer " + authToken_;
    auto answer = [me, c](Result<std::vector<std::string>> all) {
      me->loop().execute([me, c, all = std::move(all)]() mutable {
        if (me->isClosed()) return;
        if (!all.isOk()) {
          me->sendError(
              c.request_id(), proto::MetadataError,
              "Cannot list the topics of " + c.namespace_() + ": " + all.status().message());
          return;
        }
        me->answerTopicsOfNamespace(c, std::move(*all));
      });
    };
    lister(service_, c.namespace_(), domain, authorization, std::move(answer));
    return;
  }
  answerTopicsOfNamespace(c, std::move(topics));
}

void ServerCnx::answerTopicsOfNamespace(const proto::CommandGetTopicsOfNamespace& c,
                                        std::vector<std::string> topics) {
  MAGNETAR_DCHECK_ON(loop());
  // Pulsar's broker-side pattern evaluation: filter when the pattern is short enough, answer
  // the hash of what is sent, and nothing but "unchanged" when the client's hash is current.
  const auto& o = service_.options();
  bool filtered = false;
  if (o.enableBrokerSideSubscriptionPatternEvaluation && c.has_topics_pattern() &&
      static_cast<int>(c.topics_pattern().size()) <= o.subscriptionPatternMaxLength) {
    auto pattern = TopicPattern::compile(c.topics_pattern());
    if (!pattern.isOk()) {
      sendError(c.request_id(), proto::InvalidTopicName, pattern.status().message());
      return;
    }
    topics = pattern->filter(topics);
    filtered = true;
  }
  std::string hash = topicListHash(topics);
  bool unchanged = c.has_topics_hash() && c.topics_hash() == hash;
  if (unchanged) topics.clear();
  send(Commands::newGetTopicsOfNamespaceResponse(c.request_id(), topics, filtered, hash,
                                                 !unchanged));
}

void ServerCnx::handleConsumerStats(const proto::CommandConsumerStats& c) {
  MAGNETAR_DCHECK_ON(loop());
  uint64_t requestId = c.request_id();
  uint64_t consumerId = c.consumer_id();
  if (!consumers_.count(consumerId)) {
    send(Commands::newConsumerStatsErrorResponse(
        requestId, proto::ConsumerNotFound,
        "Consumer " + std::to_string(consumerId) + " not found"));
    return;
  }
  auto me = self();
  withConsumer(consumerId, [me, requestId, consumerId](ConsumerRef& ref) {
    auto topic = ref.topic;
    auto consumer = ref.consumer;
    auto sub = ref.subscription;
    topic->executor().execute([me, topic, consumer, sub, requestId, consumerId] {
      auto rates = me->service_.rates().find(topic->name().toString());
      auto snap = snapshotConsumerStats(*topic, sub, consumer.get(), rates.get());
      proto::CommandConsumerStatsResponse r;
      r.set_request_id(requestId);
      if (!snap) {
        r.set_error_code(proto::ConsumerNotFound);
        r.set_error_message("Consumer " + std::to_string(consumerId) + " not found");
      } else {
        const auto& cs = snap->consumer;
        r.set_msgrateout(cs.rateOut.msgRate);
        r.set_msgthroughputout(cs.rateOut.byteRate);
        r.set_consumername(cs.consumerName);
        r.set_availablepermits(static_cast<uint64_t>(std::max<int64_t>(0, cs.availablePermits)));
        r.set_unackedmessages(static_cast<uint64_t>(std::max<int64_t>(0, cs.unackedMessages)));
        r.set_blockedconsumeronunackedmsgs(cs.blockedConsumerOnUnackedMsgs);
        r.set_address(cs.address);
        r.set_connectedsince(isoTime(cs.connectedSinceMs));
        r.set_type(snap->type);
        r.set_msgbacklog(static_cast<uint64_t>(std::max<int64_t>(0, snap->msgBacklog)));
      }
      me->send(Commands::newConsumerStatsResponse(r));
    });
  });
}

void ServerCnx::handleWatchTopicList(const proto::CommandWatchTopicList& c) {
  MAGNETAR_DCHECK_ON(loop());
  const auto& o = service_.options();
  if (!o.enableBrokerTopicListWatcher || !o.enableBrokerSideSubscriptionPatternEvaluation ||
      static_cast<int>(c.topics_pattern().size()) > o.subscriptionPatternMaxLength) {
    std::string msg = "Unable to create topic list watcher: ";
    msg += !o.enableBrokerSideSubscriptionPatternEvaluation || !o.enableBrokerTopicListWatcher
               ? "Evaluating subscription patterns is disabled."
               : "Pattern longer than maximum: " + std::to_string(o.subscriptionPatternMaxLength);
    sendError(c.request_id(), proto::NotAllowedError, msg);
    return;
  }
  if (!allowGetTopics(service_, c.namespace_(), authRole_)) {
    MLOG_WARN("[{}] role {} may not watch the topics of {}", peerAddress(), authRole_,
              c.namespace_());
    sendError(c.request_id(), proto::AuthorizationError,
              "Proxy Client is not authorized to watchTopicList");
    return;
  }
  if (watchers_.count(c.watcher_id())) {
    // A retry of a watcher this connection already has: answer it again.
    auto& w = watchers_[c.watcher_id()];
    std::vector<std::string> topics(w.topics.begin(), w.topics.end());
    std::string hash = topicListHash(topics);
    if (c.has_topics_hash() && c.topics_hash() == hash) topics.clear();
    send(Commands::newWatchTopicListSuccess(c.request_id(), c.watcher_id(), topics, hash));
    return;
  }
  auto pattern = TopicPattern::compile(c.topics_pattern());
  if (!pattern.isOk()) {
    sendError(c.request_id(), proto::InvalidTopicName, pattern.status().message());
    return;
  }
  if (!service_.namespaceExists(c.namespace_())) {
    sendError(c.request_id(), proto::MetadataError,
              "Namespace " + c.namespace_() + " does not exist");
    return;
  }
  // Listen first, then list: an event racing the listing arrives after it on this loop.
  std::weak_ptr<ServerCnx> weak = self();
  uint64_t watcherId = c.watcher_id();
  TopicListWatcher w{*pattern, {}, 0};
  w.listenerId = service_.topicListeners().add(
      c.namespace_(), [weak, watcherId](const std::string& topic, bool created) {
        auto me = weak.lock();
        if (!me) return;
        me->loop().execute(
            [me, watcherId, topic, created] { me->onTopicEvent(watcherId, topic, created); });
      });
  for (auto& t : pattern->filter(service_.topicsOfNamespace(c.namespace_()))) w.topics.insert(t);
  std::vector<std::string> topics(w.topics.begin(), w.topics.end());
  std::string hash = topicListHash(topics);
  if (c.has_topics_hash() && c.topics_hash() == hash) topics.clear();
  watchers_.emplace(watcherId, std::move(w));
  send(Commands::newWatchTopicListSuccess(c.request_id(), watcherId, topics, hash));
}

void ServerCnx::handleWatchTopicListClose(const proto::CommandWatchTopicListClose& c) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = watchers_.find(c.watcher_id());
  if (it != watchers_.end()) {
    service_.topicListeners().remove(it->second.listenerId);
    watchers_.erase(it);
  }
  send(Commands::newSuccess(c.request_id()));
}

void ServerCnx::onTopicEvent(uint64_t watcherId, const std::string& topic, bool created) {
  MAGNETAR_DCHECK_ON(loop());
  auto it = watchers_.find(watcherId);
  if (it == watchers_.end() || isClosed()) return;
  auto& w = it->second;
  if (!w.pattern.matches(topic)) return;
  bool changed = created ? w.topics.insert(topic).second : w.topics.erase(topic) > 0;
  if (!changed) return;
  std::vector<std::string> all(w.topics.begin(), w.topics.end());
  std::vector<std::string> one{topic};
  send(Commands::newWatchTopicUpdate(watcherId, created ? one : std::vector<std::string>{},
                                     created ? std::vector<std::string>{} : one,
                                     topicListHash(all)));
}

void ServerCnx::answerUnsupported(const proto::BaseCommand& cmd) {
  MAGNETAR_DCHECK_ON(loop());
  using T = proto::BaseCommand;
  CnxErrorStats::record(ProtocolError::kUnknownCommand);
  MLOG_WARN("[{}] unsupported command {}", peerAddress(), T::Type_Name(cmd.type()));
  // The command's body is the one sub-message set besides `type`; its request_id, if any, lets
  // the client fail that request instead of waiting for its operation timeout.
  uint64_t requestId = 0;
  const auto* refl = cmd.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(cmd, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const auto& body = refl->GetMessage(cmd, f);
    const auto* idField = body.GetDescriptor()->FindFieldByName("request_id");
    if (idField && idField->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
      requestId = body.GetReflection()->GetUInt64(body, idField);
    }
    break;
  }
  send(Commands::newError(requestId, proto::NotAllowedError,
                          "Command not supported by this broker: " + T::Type_Name(cmd.type())));
}

void ServerCnx::handleGetSchema(const proto::CommandGetSchema& c) {
  MAGNETAR_DCHECK_ON(loop());
  send(getSchemaResponse(service_, c));
}

void ServerCnx::handleGetOrCreateSchema(const proto::CommandGetOrCreateSchema& c) {
  MAGNETAR_DCHECK_ON(loop());
  auto me = self();
  getOrCreateSchema(service_, c, [me](const Buffer& frame) { me->send(frame); });
}

}  // namespace magnetar::broker
