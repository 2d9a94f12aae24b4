// ServerCnx: the broker side of one client connection (Pulsar's ServerCnx). Decodes frames,
// serves commands, and hands topic work to the topics' ml-worker executors.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <array>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/auth/authorization.h"
#include "broker/service/publish_throttle.h"
#include "broker/service/topic_list.h"
#include "broker/topic/consumer.h"
#include "broker/topic/topic.h"
#include "broker/transaction/transaction_coordinator.h"
#include "net/connection.h"
#include "protocol/frame.h"

namespace magnetar::broker {

class BrokerService;

// Kinds of bad input from clients, each a label value of magnetar_protocol_errors_total{error}.
enum class ProtocolError {
  kBadFrame,          // malformed frame (sizes, unparsable command, bad payload layout); closes
  kFrameTooLarge,     // frame over maxMessageSize + 10 KB (Pulsar's frame decoder); closes
  kTruncated,         // the peer closed in the middle of a frame
  kChecksum,          // SEND whose crc32c does not match (SEND_ERROR ChecksumError)
  kUnknownCommand,    // a command type the broker does not serve (ERROR NotAllowedError)
  kBeforeConnect,     // a command other than CONNECT/PING before CONNECT; closes
  kUnknownId,         // producer/consumer id not open on the connection
  kInvalidName,       // topic or subscription name rejected (InvalidTopicName, MetadataError)
  kHandshakeTimeout,  // no CONNECT within keepAliveIntervalSeconds; closes
  kKeepAliveTimeout,  // no complete frame since the previous tick's PING; closes
  kAuthentication,    // CONNECT / AUTH_RESPONSE credentials refused (ERROR AuthenticationError)
  kAuthRefresh,       // credentials expired and not refreshed in time; closes
  kCount
};

// Process-wide protocol error counters, bumped from any pulsar-io thread, read at scrape time.
struct CnxErrorStats {
  static inline std::array<std::atomic<uint64_t>, static_cast<size_t>(ProtocolError::kCount)>
      counts{};
  static void record(ProtocolError e) {
    counts[static_cast<size_t>(e)].fetch_add(1, std::memory_order_relaxed);
  }
  static uint64_t get(ProtocolError e) { return counts[static_cast<size_t>(e)].load(); }
  // The metric label value ("bad_frame", "frame_too_large", ...).
  static const char* label(ProtocolError e);
};

// Thread: lives on its pulsar-io loop; send()/sendFrame()/publishCompleted() from any thread.
// The topic part reaches it only as its consumers' ConsumerSink and producers' ProducerSink.
class ServerCnx final : public net::Connection,
                        public protocol::FrameHandler,
                        public ConsumerSink,
                        public ProducerSink {
 public:
  // tls: the session of a connection accepted on brokerServicePortTls, else null.
  ServerCnx(net::EventLoop& loop, boost::asio::ip::tcp::socket socket, BrokerService& service,
            PublishBufferThrottle& throttle, std::unique_ptr<net::TlsSession> tls = {});
  ~ServerCnx() override;

  void sendFrame(const Buffer& frame) override { net::Connection::send(frame); }
  using net::Connection::send;
  void send(net::FrameBatch&& frames) override { net::Connection::send(std::move(frames)); }
  // ConsumerSink: the dispatcher bounds what it queues here (net::Connection's watermarks).
  bool limitsOutbound() const override { return true; }
  bool isWritable() override { return net::Connection::isWritable(); }
  void notifyWhenWritable() override { net::Connection::notifyWhenWritable(); }
  const std::string& peerAddress() const override { return net::Connection::peerAddress(); }
  // `n` SENDs of `bytes` entry bytes were answered (topic thread). Resumes reading at half of
  // maxPendingPublishRequestsPerConnection, and releases the bytes from the loop's publish
  // buffer share.
  void publishCompleted(uint32_t n, uint64_t bytes) override;
  // Releases n non-persistent SENDs from maxConcurrentNonPersistentMessagePerConnection's count.
  void nonPersistentCompleted(uint32_t n) override {
    nonPersistentPending_.fetch_sub(n, std::memory_order_relaxed);
  }
  // The loop's publish buffer is over its share (or back under half). Loop thread.
  void setThrottled(bool throttled);
  // The frame that waited at its header was admitted (FrameAdmission, which charged `bytes`
  // already): it is read on. Loop thread.
  void frameAdmitted(int64_t bytes);
  // The broker closed this consumer/producer (topic deleted, seek, ...). Any thread.
  void closeConsumerFromBroker(uint64_t consumerId) override;
  // ACTIVE_CONSUMER_CHANGE for `consumer` of this connection (Failover). Any thread; sent in
  // call order, and for a consumer whose SUBSCRIBE is not answered yet only after its SUCCESS
  // (the latest state; the Go client drops one that comes first). Dropped once it is closed.
  void sendActiveConsumerChange(const Consumer* consumer, bool isActive) override;
  // The broker closed this producer (topic terminated or unloaded): CLOSE_PRODUCER to the client,
  // which reconnects. The topic has already dropped it. Any thread; sent after whatever send()
  // queued before the call. SENDs the client had already sent for that id are then ignored, as
  // Pulsar's recentlyClosedProducers (the client sends them again), not a reason to close.
  void closeProducerFromBroker(uint64_t producerId) override;
  // ProducerSink: a topic pass's answers. Queued here and written on the loop, where the
  // SEND_RECEIPT frames are built (off the topic's thread): the frames, then publishCompleted,
  // then the CLOSE_PRODUCERs, in one task; the first batch queued since the loop last took them
  // hands that task over with EventLoop::executeAfterPass (one lock per loop per topic pass).
  // `batch` is swapped for spare storage. Any thread.
  void sendAnswers(ReceiptBatch& batch) override;

  // Graceful shutdown of this connection: reading stops (SENDs not read yet are not taken; the
  // client sends them again after reconnecting), and once every SEND read has its receipt (or
  // error) queued, each producer gets CLOSE_PRODUCER and each consumer CLOSE_CONSUMER, then the
  // connection closes after flushing. Loop thread.
  void startShutdown();

  int protocolVersion() const { return protocolVersion_; }
  // CONNECT's client_version ("" before CONNECT). Loop thread until CONNECT, then immutable.
  const std::string& clientVersion() const override { return clientVersion_; }
  // The authenticated role ("" with authentication off). Loop thread.
  const std::string& authRole() const { return authRole_; }

  // Starts the keep-alive timer (Pulsar's PulsarHandler): every keepAliveIntervalSeconds the
  // connection is closed when CONNECT has not arrived yet (the handshake timeout is one
  // interval, as Pulsar's), or when the PING of the previous tick got no complete frame back
  // while reads were not paused; otherwise a PING is sent (peers of protocol version >= 1).
  // A peer that goes silent is thus closed one to two intervals later; partial frames do not
  // count, so a peer that never finishes a frame is dropped the same way. Call once, on the
  // loop thread, when the connection starts.
  void startKeepAlive();

 protected:
  bool onData(const uint8_t* data, size_t len) override;
  void onClosed() override;
  void onReadBatchDone() override;
  Status onFrame(const proto::BaseCommand& cmd, Buffer entry) override;
  // ok, or kNotAllowed (the connection closes) while the broker's ownership lease is not
  // confirmed (TopicOwnership::writable()).
  // SEND/ACK gate (cluster mode): OK when the lease holds (TopicOwnership::writable()) and the
  // producer/consumer was created under the current ownershipEpoch(); else kNotAllowed (the
  // connection closes, the client looks the topic up again). Loop only.
  Status checkWritable(uint64_t createdEpoch);
  // The ownershipEpoch of a producer/consumer of this connection; the current one when there is
  // none by that id (the command's own handler reports it). Loop only.
  uint64_t producerEpoch(uint64_t producerId) const;
  uint64_t consumerEpoch(uint64_t consumerId) const;
  uint64_t currentOwnershipEpoch() const;
  // A frame bigger than kMaxUnqueuedFrame whose body is still to be read is admitted against the
  // publish buffer (FrameAdmission) and charged; false when it must wait: reading stops after
  // its header. Smaller frames: true at once, uncharged.
  bool onPartialFrameStart(size_t frameBytes) override;
  // While a limit holds: the rest of a charged frame, else up to the end of the next header.
  size_t maxNextDelivery() const override;
  // The outbound queue fell to pulsarChannelWriteBufferLowWaterMark: each consumer's dispatcher
  // goes on (it held back while the queue was over the high mark).
  void onWritable() override;

 private:
  struct ProducerRef {
    std::shared_ptr<Producer> producer;
    std::shared_ptr<PersistentTopic> topic;
    std::string schemaVersion;  // PRODUCER_SUCCESS.schema_version
  };
  struct ConsumerRef {
    std::shared_ptr<Consumer> consumer;
    std::shared_ptr<PersistentTopic> topic;
    std::string subscription;
    bool ready = false;
    std::vector<std::function<void()>> waiting;  // commands that arrived before ready
    std::optional<bool> pendingActive;           // ACTIVE_CONSUMER_CHANGE held until ready
  };

  // onFrame() without the charge bookkeeping: answers one command.
  Status dispatchFrame(const proto::BaseCommand& cmd, Buffer entry);
  void handleConnect(const proto::CommandConnect& c);
  void handleAuthResponse(const proto::CommandAuthResponse& c);
  // Checks credentials with the provider of authMethod_; true when accepted (role and expiry
  // set). On refusal counts the failure and answers ERROR AuthenticationError, then closes.
  bool authenticate(const std::string& authData);
  void authenticationFailed(const std::string& why);
  void sendConnected();
  void scheduleAuthRefresh();
  void onAuthRefreshTimer();
  // (this->*onTick)() on the loop in `secs` seconds, unless the timer is re-armed or cancelled or
  // the connection closes first; nothing when secs <= 0 or already closed.
  void armTimer(boost::asio::steady_timer& timer, int secs, void (ServerCnx::*onTick)());
  // Authorization of a topic operation for authRole_ (`subscription`: a SUBSCRIBE's, checked
  // against subscription_auth_roles); counts a denial.
  bool allowed(const TopicName& topic, TopicOperation op, const std::string& subscription = {});
  // The ERROR message of a refused PRODUCER/SUBSCRIBE: Pulsar's "Client is not authorized to
  // <what>", or its 404 RestException text when the topic's tenant does not exist.
  std::string notAuthorizedMessage(const TopicName& topic, const char* what) const;
  // Standalone, the topic's namespace missing: answers PRODUCER/SUBSCRIBE `requestId` with
  // ServiceNotReady, as Pulsar (its bundle is served by no broker), and returns true.
  bool refuseMissingNamespace(const TopicName& topic, uint64_t requestId);
  // Cluster mode: true when this broker owns the topic's bundle (always true standalone).
  bool servesTopic(const TopicName& name) const;
  // After servesTopic() said no: the ownership is confirmed through ZooKeeper
  // (TopicOwnership::confirmOwned); `again` runs on this loop if the bundle is ours after all,
  // else ServiceNotReady is answered.
  void confirmOwnership(const TopicName& name, uint64_t requestId,
                        const std::function<void()>& again);
  void handleLookup(const proto::CommandLookupTopic& c);
  void handlePartitionedMetadata(const proto::CommandPartitionedTopicMetadata& c);
  // The answer once the topic's metadata is current (cluster mode: after a read of the
  // configuration store).
  void answerPartitionedMetadata(const proto::CommandPartitionedTopicMetadata& c,
                                 const TopicName& name);
  // The topic list (hash, pattern filter) of a GET_TOPICS_OF_NAMESPACE.
  void answerTopicsOfNamespace(const proto::CommandGetTopicsOfNamespace& c,
                               std::vector<std::string> topics);
  // The partition count (0: not partitioned) once the topic is known to exist or may be created.
  void sendPartitionCount(const proto::CommandPartitionedTopicMetadata& c, const TopicName& name,
                          bool autoCreate);
  // confirmedEpoch: called again by confirmOwnership() (the check is not repeated), with the
  // ownershipEpoch() read before that check.
  void handleProducer(const proto::CommandProducer& c,
                      std::optional<uint64_t> confirmedEpoch = std::nullopt);
  // PRODUCER, once its topic is loaded (on the topic's executor): the schema, the initial
  // subscription, then PersistentTopic::addProducer, answered on the loop.
  void addProducerToTopic(const std::shared_ptr<PersistentTopic>& topic,
                          const std::shared_ptr<Producer>& producer, uint64_t requestId,
                          uint64_t producerId, const std::string& initialSubscription,
                          const proto::Schema* schema);
  // Its second half, once the schema is registered (topic executor).
  void addProducerWithSchema(const std::shared_ptr<PersistentTopic>& topic,
                             const std::shared_ptr<Producer>& producer, uint64_t requestId,
                             uint64_t producerId, const std::string& schemaVersion);
  // Creates the PRODUCER's initial_subscription_name (Earliest) if missing; true when that was
  // refused (allowAutoSubscriptionCreation off, or the create failed) and answered.
  bool refuseInitialSubscription(PersistentTopic& topic, const std::string& initialSubscription,
                                 uint64_t requestId, uint64_t producerId,
                                 const std::shared_ptr<Producer>& producer);
  void handleSend(const proto::CommandSend& c, Buffer entry);
  // A non-persistent SEND counts against maxConcurrentNonPersistentMessagePerConnection: false
  // (the SEND is dropped) when the connection already has more in flight.
  bool takeNonPersistentSlot();
  void handleSubscribe(const proto::CommandSubscribe& c,
                       std::optional<uint64_t> confirmedEpoch = std::nullopt);
  // SUBSCRIBE, in steps (loop thread): validateSubscribe answers a repeated command or a bad
  // topic/subscription name and returns nullopt, else the topic name; newSubscribeRequest creates
  // the consumer (nullopt after answering a bad Key_Shared STICKY meta); onSubscribed is the
  // topic's answer, back on the loop, and completes the command.
  std::optional<TopicName> validateSubscribe(const proto::CommandSubscribe& c);
  std::optional<SubscribeRequest> newSubscribeRequest(const proto::CommandSubscribe& c);
  void onSubscribed(const std::shared_ptr<PersistentTopic>& topic, const SubscribeRequest& req,
                    uint64_t requestId, uint64_t consumerId, const Status& s);
  void handleFlow(const proto::CommandFlow& c);
  void handleAck(const proto::CommandAck& c);
  // ACK with a txnid and END_TXN_ON_SUBSCRIPTION (server_cnx_pending_ack.cc).
  void handleTxnAck(const proto::CommandAck& c);
  void handleEndTxnOnSubscription(const proto::CommandEndTxnOnSubscription& c);
  void handleRedeliver(const proto::CommandRedeliverUnacknowledgedMessages& c);
  void handleCloseProducer(const proto::CommandCloseProducer& c);
  void handleCloseConsumer(const proto::CommandCloseConsumer& c);
  void handleUnsubscribe(const proto::CommandUnsubscribe& c);
  void handleSeek(const proto::CommandSeek& c);
  void handleGetLastMessageId(const proto::CommandGetLastMessageId& c);
  // Transaction buffer (server_cnx_txn_buffer.cc): the coordinator ends a txn on one topic.
  void handleEndTxnOnPartition(const proto::CommandEndTxnOnPartition& c);
  // Cluster mode: then(true) once the slow ownership check finds `name` served here, else
  // then(false); on the loop, not after the connection closed.
  void whenOwned(const TopicName& name, std::function<void(bool)> then);
  // The ServiceNotReady text of a topic this broker does not serve (Pulsar's).
  static std::string notServedMessage(const std::string& topic);
  // END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION are the coordinator's: with authorization on,
  // only a super-user may send them (Pulsar's ServerCnx.isSuperUser check). Ok, or the
  // TransactionNotFound status of Pulsar's failedFutureTxnTcNotAllowed. Loop thread.
  Status checkTcSuperUser(const TxnID& txn) const;
  void handleGetTopicsOfNamespace(const proto::CommandGetTopicsOfNamespace& c);
  void handleConsumerStats(const proto::CommandConsumerStats& c);
  void handleWatchTopicList(const proto::CommandWatchTopicList& c);
  void handleWatchTopicListClose(const proto::CommandWatchTopicListClose& c);
  // A topic of a watched namespace was created or deleted. Loop thread.
  void onTopicEvent(uint64_t watcherId, const std::string& topic, bool created);
  // A command of a known type this broker does not serve: its own error answer, with its
  // request id when it has one (so the client's pending request fails at once), and the
  // connection stays open.
  void answerUnsupported(const proto::BaseCommand& cmd);
  // Transactions (server_cnx_txn.cc): refused with NotAllowedError "Transactions are not
  // enabled." unless transactionCoordinatorEnabled, as Pulsar.
  bool checkTransactionsEnabled(uint64_t requestId);
  void handleTcClientConnect(const proto::CommandTcClientConnectRequest& c);
  // TC_CLIENT_CONNECT's load of the coordinator (once this broker may serve it); answers.
  void loadCoordinator(const proto::CommandTcClientConnectRequest& c);
  void handleNewTxn(const proto::CommandNewTxn& c);
  void handleAddPartitionToTxn(const proto::CommandAddPartitionToTxn& c);
  void handleAddSubscriptionToTxn(const proto::CommandAddSubscriptionToTxn& c);
  void handleEndTxn(const proto::CommandEndTxn& c);
  using TxnOp = std::function<void(TransactionCoordinator&, std::function<void(Status)>)>;
  // Runs op on the coordinator of txn (its executor) once Pulsar's ownership check passed;
  // answer gets op's status, or the coordinator's absence (kClosed) or a foreign owner
  // (kNotFound). answer runs on that executor (or here when the coordinator is absent).
  void withOwnedTxn(const TxnID& txn, const std::function<void(Status)>& answer, TxnOp op);
  void handleGetSchema(const proto::CommandGetSchema& c);
  void handleGetOrCreateSchema(const proto::CommandGetOrCreateSchema& c);

  // Runs fn with the consumer once it is ready (or answers an error when unknown).
  void withConsumer(uint64_t consumerId, const std::function<void(ConsumerRef&)>& fn);
  // The ready consumer `consumerId` for a request; null, with `requestId` answered with `error`
  // "Consumer not found", when it is unknown or still subscribing (Pulsar's code differs by
  // command). Loop thread.
  ConsumerRef* readyConsumer(uint64_t consumerId, uint64_t requestId, proto::ServerError error);
  void sendError(uint64_t requestId, proto::ServerError e, const std::string& msg);
  void onKeepAliveTimer();
  // The last step of startShutdown(), once no SEND is pending. Loop thread.
  void maybeFinishShutdown();
  void flushSends();
  // Reads stop while either limit holds (per-connection pending sends, the loop's buffer, a
  // publish rate limit).
  void updateReadState();
  // Publish rate limits (publish_rate.cc, docs/rate-limits.md): a SEND takes its messages and
  // bytes from the topic's and the broker's enabled limiters; when one ran out, reading pauses
  // (Pulsar's producer throttling: sends are delayed, never failed) until publishRateTimer_
  // finds tokens in each limiter that paused it. Loop thread.
  void checkPublishRate(const std::shared_ptr<PersistentTopic>& topic, int64_t msgs, int64_t bytes);
  void onPublishRateTimer();
  void armPublishRateTimer(int64_t nowNs);
  // Loop thread: writes the answers sendAnswers() queued, in order.
  void writeAnswers();
  // CLOSE_PRODUCER for a producer the broker closed, behind what is queued. Loop thread.
  void closeProducerOnLoop(uint64_t producerId);
  std::shared_ptr<ServerCnx> self() {
    return std::static_pointer_cast<ServerCnx>(shared_from_this());
  }

  BrokerService& service_;
  // Frames up to this size (one socket read) are read without FrameAdmission; bigger ones are
  // admitted at their header (onPartialFrameStart). Magnetar's.
  static constexpr size_t kMaxUnqueuedFrame = net::EventLoop::kReadBufferSize;
  // Bound on a frame before CONNECT was answered (CONNECT and AUTH_RESPONSE are small; 64 KiB
  // leaves room for big tokens): a connection that has not said who it is holds at most one
  // read and never waits for admission (docs/memory-limits.md). Magnetar's; Pulsar's decoder
  // takes maxMessageSize from the start.
  static constexpr size_t kMaxFrameBeforeConnect = kMaxUnqueuedFrame;
  protocol::FrameDecoder decoder_;
  bool connected_ = false;
  int protocolVersion_ = 0;
  std::string clientVersion_;
  // Authentication state (loop thread).
  std::string authMethod_;
  std::string authRole_;
  // The last accepted credentials when authMethod_ is "token" (the JWT), passed on as a Bearer
  // Authorization when this broker asks the others for a namespace's topics; "" otherwise.
  std::string authToken_;
  std::optional<int64_t> authExpiresAtMs_;
  bool supportsAuthRefresh_ = false;
  bool pendingAuthChallenge_ = false;
  std::unordered_map<uint64_t, ProducerRef> producers_;
  // Producer ids the broker closed lately, oldest first (at most kRecentlyClosedProducers).
  std::deque<uint64_t> recentlyClosedProducers_;
  // PRODUCERs not answered yet. A CLOSE_PRODUCER for one of them removes it here: once the topic
  // adds it, it is removed again and not answered (Pulsar's "closed while being created").
  std::unordered_map<uint64_t, std::shared_ptr<Producer>> creatingProducers_;
  // Ends `producer`'s creation: true when it was still being created (not closed meanwhile).
  // Thread: the connection's loop.
  bool creationDone(uint64_t producerId, const std::shared_ptr<Producer>& producer);
  std::unordered_map<uint64_t, ConsumerRef> consumers_;
  struct TopicListWatcher {
    TopicPattern pattern;
    std::set<std::string> topics;  // matching now, full names with "-partition-N"
    uint64_t listenerId = 0;       // in BrokerService::topicListeners()
  };
  std::unordered_map<uint64_t, TopicListWatcher> watchers_;  // loop thread
  // SENDs read in this read batch, grouped by topic, handed over in onReadBatchDone.
  std::vector<std::pair<std::shared_ptr<PersistentTopic>, std::vector<PendingSend>>> sendBatch_;
  std::atomic<int64_t> pendingPublishes_{0};
  // Non-persistent SENDs handed to topics and not answered (dropped ones not counted): Pulsar's
  // nonPersistentPendingMessages. Incremented on the loop, released by topic executors.
  std::atomic<int64_t> nonPersistentPending_{0};
  std::atomic<bool> publishPaused_{false};
  // Topic passes' answers not written yet, spare batch storage coming back from the loop, and
  // whether writeAnswers() is queued (sendAnswers). answering_: the loop's batches being written.
  Mutex answersMu_;
  std::vector<ReceiptBatch> answers_ GUARDED_BY(answersMu_);
  std::vector<ReceiptBatch> spareAnswers_ GUARDED_BY(answersMu_);
  bool answersQueued_ GUARDED_BY(answersMu_) = false;
  std::vector<ReceiptBatch> answering_;  // loop thread
  net::FrameBatch answerFrames_;         // loop thread
  bool throttled_ = false;               // loop thread
  // Bytes of the frame being read charged to throttle_ at its header (0 when none). Loop thread.
  int64_t frameCharge_ = 0;
  // Bytes of the frame waiting for admission at its header (0 when none; reading is paused),
  // and what came after its header in the same read (its body's first bytes). Loop thread.
  int64_t frameWaiting_ = 0;
  std::string heldBytes_;
  std::atomic<bool> shuttingDown_{false};  // set on the loop thread, read by publishCompleted
  bool shutdownClosed_ = false;            // loop thread: CLOSE_* sent
  PublishBufferThrottle& throttle_;
  boost::asio::steady_timer keepAliveTimer_;
  boost::asio::steady_timer authRefreshTimer_;  // every authenticationRefreshCheckSeconds
  bool waitingForPong_ = false;
  // The limiters that paused reading (a topic's, held with its topic; the broker's with none).
  std::vector<std::pair<std::shared_ptr<PersistentTopic>, MessageRateLimiter*>> rateThrottledBy_;
  bool rateThrottled_ = false;  // loop thread
  boost::asio::steady_timer publishRateTimer_;
  bool closedByKeepAlive_ = false;  // not counted as truncated then
};

}  // namespace magnetar::broker
