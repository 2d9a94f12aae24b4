// PersistentTopic: one topic's producers, subscriptions and managed ledger. All of its state lives
// on one ml-worker executor (the topic's ordered executor); other threads hand work to it.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/log_rate_limiter.h"
#include "broker/common/broker_options.h"
#include "broker/common/rate_limiters.h"
#include "broker/common/topic_name.h"
#include "broker/compaction/compaction.h"
#include "broker/policies/policies.h"
#include "broker/policies/rate_policies.h"
#include "broker/topic/consumer.h"
#include "broker/topic/message_deduplication.h"
#include "broker/topic/subscription.h"
#include "broker/topic/topic_replicator.h"
#include "broker/topic/transaction_buffer.h"
#include "net/event_loop.h"
#include "net/frame_batch.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// One SEND handed from a connection to the topic.
struct PendingSend {
  std::shared_ptr<Producer> producer;
  uint64_t sequenceId = 0;
  uint64_t highestSequenceId = 0;
  int32_t numMessages = 1;
  Buffer entry;
  std::optional<TxnID> txn;  // CommandSend txnid_most_bits/txnid_least_bits (both set)
  // A non-persistent SEND over maxConcurrentNonPersistentMessagePerConnection: answered with
  // message id -1:-1, neither published nor counted in, counted as the producer's drop.
  bool dropped = false;
};

struct SubscribeRequest {
  std::string subscription;
  SubType subType = proto::CommandSubscribe::Exclusive;
  storage::InitialPosition initialPosition = storage::InitialPosition::kLatest;
  bool createIfMissing = true;
  // CommandSubscribe replicate_subscription_state true: a durable subscription becomes
  // replicated (Subscription::setReplicated); false or unset changes nothing (Pulsar's rule).
  bool replicateSubscriptionState = false;
  // A reader: a subscription that lives only while its consumer does, starting at startPosition
  // (the message id the client gave; earliest/latest are clamped to the log's ends).
  bool durable = true;
  // read_compacted: only on Exclusive/Failover (NotAllowedError otherwise, as Pulsar).
  bool readCompacted = false;
  storage::Position startPosition{-1, -1};
  std::shared_ptr<Consumer> consumer;
};

// A topic's limits from its topic policies, else its namespace's policies (Pulsar's order);
// nullopt: the broker setting applies; 0: no limit, as Pulsar.
struct TopicPolicyLimits {
  std::optional<int> maxProducers;
  std::optional<int> maxConsumers;
  std::optional<int> maxConsumersPerSubscription;
  std::optional<int> maxSubscriptions;
  std::optional<int> maxUnackedOnConsumer;
  std::optional<int> maxUnackedOnSubscription;
  // destination_storage (size) and message_age (time) backlog quotas, each resolved
  // topic > namespace > broker.
  BacklogQuota backlogQuota;
  BacklogQuota backlogQuotaTime;
  // delayedDelivery policy resolved topic > namespace > broker (delayedDelivery* settings).
  DelayedDeliveryPolicies delayedDelivery;
  // Retention, topic > namespace; nullopt: the managed ledger's defaultRetention* settings.
  std::optional<RetentionPolicy> retention;
  // Rate limits, each resolved topic policy > namespace policy > broker default
  // (docs/rate-limits.md).
  PublishRate publishRate;
  DispatchRate dispatchRate;
  DispatchRate subscriptionDispatchRate;
  SubscribeRate subscribeRate;
  // The publish limiter of the namespace's resource group (BrokerService owns it, for the
  // broker's life); nullptr when the namespace has none.
  MessageRateLimiter* resourceGroupPublish = nullptr;
};

// Counters for stats; executor thread.
struct TopicStats {
  uint64_t msgInCounter = 0;
  uint64_t bytesInCounter = 0;
  uint64_t publishErrors = 0;
  uint64_t entriesAddedCounter = 0;  // entries appended since the topic was loaded
  // Of entriesAddedCounter: server-only markers (written here or replicated in); the rest are
  // data (Pulsar's lastDataMessagePublishedTimestamp ignores markers).
  uint64_t markerEntriesAdded = 0;
};

// Thread: the executor passed at construction, for every method unless noted.
class PersistentTopic : public std::enable_shared_from_this<PersistentTopic> {
 public:
  // dedupPolicy: the namespace's deduplicationEnabled policy; unset means the broker's
  // brokerDeduplicationEnabled.
  PersistentTopic(TopicName name, std::shared_ptr<storage::ManagedLedger> ledger,
                  net::EventLoop& executor, const BrokerOptions& options,
                  std::optional<bool> dedupPolicy = std::nullopt);
  ~PersistentTopic();

  const TopicName& name() const { return name_; }         // any thread
  net::EventLoop& executor() const { return executor_; }  // any thread
  storage::ManagedLedger& ledger() { return *ledger_; }

  // Compaction storage: how to open managed ledgers, the storage's own compacted-ledger store
  // (null: compacted managed ledgers), and the seqs of this topic's compacted managed ledgers
  // found at start-up (all but the current one are deleted). Before initialize.
  void setCompaction(LedgerOpener opener, std::vector<int64_t> storedSeqs,
                     std::shared_ptr<storage::CompactedLedgerStore> store = nullptr) {
    compactor_->setOpener(std::move(opener));
    if (store) compactor_->setStore(std::move(store));
    compactedSeqs_ = std::move(storedSeqs);
  }
  TopicCompactor& compactor() { return *compactor_; }
  // Transactions: how the subscriptions reach their pending-ack logs (the broker's factory).
  // Before initialize. Without it acks in transactions are held in memory only.
  void setPendingAckStore(PendingAckStoreOpener opener) { pendingAckOpener_ = std::move(opener); }
  // END_TXN_ON_SUBSCRIPTION from the coordinator (Pulsar's PersistentSubscription.endTxn):
  // commit acks the txn's held acks in the cursor, abort redelivers them; done(status) on this
  // executor, idempotent. Errors: kNotFound "Topic T subscription S is not exist." (Pulsar's
  // text), the pending-ack log's write errors (the acks stay held; retry).
  void endTxnOnSubscription(const std::string& subscription, const TxnID& txn,
                            proto::TxnAction action, int64_t lowWaterMark,
                            std::function<void(Status)> done);
  // Restores subscriptions from the ledger's durable cursors (after open).
  void loadSubscriptions();
  // Loads the subscriptions and rebuilds the deduplication state (snapshot + tail replay);
  // done(status) when the topic can serve.
  void initialize(std::function<void(Status)> done);
  // A namespace policy change: turns deduplication on (recovering its state) or off.
  void setDeduplicationEnabled(bool enabled);
  const MessageDeduplication& deduplication() const { return dedup_; }
  // PRODUCER_SUCCESS.last_sequence_id for a producer name: the highest persisted id, or -1.
  int64_t lastSequenceId(const std::string& producerName) const {
    return dedup_.lastSequenceId(producerName);
  }

  // Admits a producer by its access mode, as Pulsar's AbstractTopic: Shared is refused
  // (ProducerBusy) while an exclusive producer holds or waits for the topic; Exclusive is fenced
  // (ProducerFenced) while any other producer is there; ExclusiveWithFencing removes every other
  // producer (their next SEND closes their connection, as Pulsar) and fails the waiting ones
  // ("Fenced out"); WaitForExclusive
  // queues behind the current producers: `queued` runs, and `added` runs once it is admitted
  // (when the exclusive producer leaves) or fenced. An exclusive producer reconnecting with an
  // older topic epoch than the topic's is fenced. `added` gets the topic epoch for exclusive
  // producers (0, 1, ... per topic load; not persisted). Other errors: TopicTerminatedError,
  // ProducerBusy (name taken, maxProducersPerTopic). Both callbacks run on this executor.
  using ProducerAdded =
      std::function<void(Status, proto::ServerError, std::optional<uint64_t> topicEpoch)>;
  void addProducer(const std::shared_ptr<Producer>& p, ProducerAdded added,
                   const std::function<void()>& queued);
  // Removes a connected or waiting producer; an exclusive one leaving admits the next waiting
  // producer.
  void removeProducer(Producer* p);
  // A client's CLOSE_PRODUCER (request_id `requestId`): removes p and answers SUCCESS after the
  // answers to p's publishes in flight, behind every answer queued for its connection (Pulsar's
  // ServerCnx.handleCloseProducer answers once Producer.close has waited for the pending publish
  // acks). This executor; p must have a connection.
  void closeProducerByClient(const std::shared_ptr<Producer>& p, uint64_t requestId);

  // Appends the sends in order and answers each with SEND_RECEIPT/SEND_ERROR; all receipts for
  // one connection produced in one executor pass go out as one hand-over. A non-persistent
  // topic stores nothing: publishNonPersistent.
  void publish(std::vector<PendingSend>& sends);

  // Transactions (the transaction buffer, Pulsar's PersistentTopic.endTxn): writes txn's commit
  // (COMMIT) or abort (ABORT) marker, after which its entries are dispatched (commit) or skipped
  // and acked through (abort), and the dispatchers are woken; lowWaterMark: the coordinator's
  // (txns of it at or below are ended). done on this executor: ok, kNotAllowed "Transaction
  // buffer disable!" when transactionCoordinatorEnabled is off, or the ledger's add error.
  // Retries are idempotent (an abort of an aborted txn writes nothing; a commit marker again is
  // harmless). Called by the coordinator (END_TXN fan-out) and END_TXN_ON_PARTITION.
  void endTxn(const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
              std::function<void(Status)> done);
  const TransactionBuffer& transactionBuffer() const { return txnBuffer_; }
  // The transaction buffer's snapshot if it changed since the last (the broker's
  // transactionBufferSnapshotMinTimeInMillis timer). On the executor.
  void snapshotTransactionBuffer() { txnBuffer_.snapshotIfChanged(); }
  // The last position a reader may see: the ledger's last written entry, or the position before
  // the first entry of the oldest ongoing transaction (Pulsar's getMaxReadPosition).
  storage::Position maxReadPosition() const;
  // GET_LAST_MESSAGE_ID's entry (Pulsar's getLastDispatchablePosition): from maxReadPosition()
  // back over commit/abort markers and aborted txns' entries, within its ledger. cb(position,
  // messages in that entry's batch) on this executor; entryId -1 when none is left.
  void lastDispatchableEntry(std::function<void(storage::Position, int32_t)> cb);

  // Creates the subscription if needed and adds the consumer; cb (on this executor) gets the
  // outcome. Errors as Subscription::addConsumer, kNotFound when the subscription is missing and
  // may not be created.
  void subscribe(const SubscribeRequest& req, const std::function<void(Status)>& cb);
  void removeConsumer(Consumer* c, const std::string& subscription);
  Subscription* subscription(const std::string& name);
  const std::map<std::string, std::unique_ptr<Subscription>>& subscriptions() const {
    return subscriptions_;
  }
  // Errors: kNotFound, kBusy when consumers other than `requester` are connected.
  Status unsubscribe(const std::string& name, Consumer* requester);

  const std::unordered_map<std::string, std::shared_ptr<Producer>>& producers() const {
    return producers_;
  }
  const TopicStats& stats() const { return stats_; }
  // Geo-replication (topic_replicator.h): the replicators of remote clusters, by cluster name.
  // addReplicator is refused (false) once the topic is closing; removeReplicator closes it and,
  // with deleteCursor, drops its "pulsar.repl.{cluster}" cursor (cluster removed from the list).
  bool addReplicator(const std::string& cluster, std::shared_ptr<TopicReplicator> r);
  void removeReplicator(const std::string& cluster, bool deleteCursor);
  const std::map<std::string, std::shared_ptr<TopicReplicator>>& replicators() const {
    return replicators_;
  }
  bool closing() const { return closing_; }
  // Replicated subscriptions (topic_replicator.h): the controller while the topic has one (null
  // otherwise); replaced controllers and the last one at close are closed.
  void setReplicatedSubscriptions(std::shared_ptr<TopicReplicatedSubscriptions> c);
  TopicReplicatedSubscriptions* replicatedSubscriptions() const { return replSubs_.get(); }
  // Writes a server-only marker entry (Pulsar's publishMessage with isMarkerMessage): not counted
  // as messages in, never deduplicated; dispatchers and replicators are told of it. done(status,
  // position) on this executor (kClosed when the topic went meanwhile).
  void publishMarker(Buffer entry, std::function<void(Status, storage::Position)> done);
  // Topic policies: replace maxProducersPerTopic, maxConsumersPerTopic, maxSubscriptionsPerTopic
  // and the unacked limits for this topic (checked for the next producer/consumer/subscription).
  void setPolicyLimits(const TopicPolicyLimits& limits);
  // Rate limits (topic_rate_limits.cc, docs/rate-limits.md). The broker's limiters, set once
  // right after construction (before any producer or consumer).
  void setBrokerRateLimiters(BrokerRateLimiters* limiters);
  // The publish limiter of this topic (publishRate policy): consumed by the producers'
  // connections on their I/O loops. Any thread.
  MessageRateLimiter& publishRateLimiter() { return *publishRate_; }
  std::shared_ptr<MessageRateLimiter> publishRateLimiterRef() { return publishRate_; }
  // The resource group's publish limiter, shared with the group's other topics; nullptr when
  // none. Thread: any (the producers' I/O loops read it per SEND).
  MessageRateLimiter* resourceGroupPublishLimiter() const {
    return groupPublishRate_.load(std::memory_order_acquire);
  }
  // The topic's dispatch limiter (dispatchRate policy). Executor.
  MessageRateLimiter& dispatchRateLimiter() { return dispatchRate_; }
  // relativeToPublishRate: the dispatch limits become the configured rate plus the topic's
  // publish rate (msgs/s, bytes/s), refreshed by the broker's stats tick. Executor.
  void updatePublishRateForDispatch(double msgRateIn, double byteRateIn);
  // Pulsar's subscribe rate per consumer (client host, consumer name, consumer id): true when
  // this SUBSCRIBE may go on, false when over subscribeRate in the current period. Executor.
  bool trySubscribePermit(const std::string& peerAddress, const std::string& consumerName,
                          uint64_t consumerId);
  // SEND frames that paused their connection on a publish limit (topic stats'
  // publishRateLimitedTimes). Any thread.
  uint64_t publishRateLimitedTimes() const {
    return publishRateLimitedTimes_.load(std::memory_order_relaxed);
  }
  void countPublishRateLimited() {
    publishRateLimitedTimes_.fetch_add(1, std::memory_order_relaxed);
  }
  // Bytes the slowest durable subscription has not acked (estimated from the average entry
  // size, as the stats' backlogSize).
  int64_t backlogSizeBytes() const;
  // backlogSizeBytes() >= the destination_storage quota's limitSize (Pulsar's
  // isSizeBacklogExceeded).
  bool isSizeBacklogExceeded() const;
  // The oldest unacked message of the durable subscriptions is older than the message_age
  // quota's limitTime, by the age the last checkBacklogQuota() read (Pulsar's
  // preciseTimeBasedBacklogQuotaCheck).
  bool isTimeBacklogExceeded() const;
  // The quota a new producer is refused by: the policy of the first exceeded quota whose policy
  // is producer_request_hold or producer_exception (size first); nullopt when admitted.
  std::optional<std::string> producerBlockingPolicy() const;
  // One backlog quota check (Pulsar's monitorBacklogQuota for this topic): reads the publish time
  // of the oldest unacked message of the durable subscriptions (the backlog age), then handles
  // each exceeded quota (Pulsar's handleExceededBacklogQuota): consumer_backlog_eviction moves
  // the cursors over 90 % of the size limit forward to it, or expires the messages older than
  // 90 % of the time limit; the producer_* policies disconnect the producers (refused again when
  // they reconnect). done() afterwards, on this executor.
  void checkBacklogQuota(const std::function<void()>& done = {});
  // Seconds since the oldest unacked message was published (0: no backlog; -1: not checked yet)
  // and its subscription, as of the last checkBacklogQuota().
  int64_t backlogAgeSeconds() const;
  const std::string& oldestBacklogSubscription() const { return oldestBacklogSubscription_; }
  // Evictions by the consumer_backlog_eviction policy (Pulsar counts one per topic per check).
  uint64_t sizeBacklogEvictions() const { return sizeBacklogEvictions_; }
  uint64_t timeBacklogEvictions() const { return timeBacklogEvictions_; }

  // Inactive-topic deletion (Pulsar's isActive / checkGC): whether the topic is in use for
  // `deleteMode` (delete_when_no_subscriptions: has subscriptions; *_caught_up: a subscription
  // has a backlog; either: producers or consumers connected). Updates the last-active time when
  // it is, and returns the nanoseconds of inactivity (steady clock; 0 when active).
  int64_t checkInactivity(const std::string& deleteMode);
  // Subscriptions without consumers whose last activity (consumer added or removed, ack) is
  // older than expirationMs, the compaction cursor aside (Pulsar's checkInactiveSubscriptions).
  std::vector<std::string> expiredSubscriptions(int64_t expirationMs) const;
  const TopicPolicyLimits& policyLimits() const { return limits_; }
  const BrokerOptions& options() const { return options_; }

  // Admin terminate: later publishes fail with TopicTerminatedError, new producers are refused
  // with TopicTerminatedError, and the connected producers are closed (Pulsar closes them too).
  // The managed ledger stores the termination (ManagedLedger::asyncTerminate), so the topic
  // stays terminated across unload, restart and a new owner. done(status, the last entry's
  // position: ManagedLedger::lastWrittenEntry) on this executor once it is stored. Idempotent.
  void terminate(std::function<void(Status, storage::Position)> done);
  bool isTerminated() const { return terminated_; }
  // Admin unload: closes every producer and consumer (CLOSE_PRODUCER / CLOSE_CONSUMER), so the
  // clients reconnect; the topic itself stays loaded.
  void disconnectClients();
  // Admin: a durable subscription without consumers at `initial` (Pulsar's create-subscription).
  // Errors: kAlreadyExists, and openCursor's.
  Status createSubscription(const std::string& name, storage::InitialPosition initial);
  // Admin delete: closes every client, drops the subscriptions and deletes the ledger's data.
  // cb on this executor. The topic is unusable afterwards (the broker has forgotten it).
  void deleteLedger(storage::StatusCallback cb);
  // Unload: closes every client, drops the subscriptions and closes the managed ledger (its data
  // stays for the next owner); with `release` the ledger is given up without further writes
  // (ManagedLedger::asyncRelease: ownership lost). cb on this executor. The topic is unusable
  // afterwards (the broker has forgotten it).
  void closeLedger(storage::StatusCallback cb, bool release = false);
  // Called once, on this executor, when an add fails with kFenced: another broker took the
  // managed ledger over (BookKeeper storage), so this topic must be unloaded (Pulsar closes it).
  void setFencedHandler(std::function<void()> fn) { onFenced_ = std::move(fn); }

 private:
  // Queues the answer to one SEND of `bytes` entry bytes (released from the publish buffer) that
  // publish() counted in p->inFlight: `frame` (SEND_ERROR), else a SEND_RECEIPT for `pos`; with
  // `silent`, no answer (the client sends it again after CLOSE_PRODUCER). The producer's last one
  // after the broker closed it queues its CLOSE_PRODUCER behind it.
  void queueReceipt(const std::shared_ptr<Producer>& p, Buffer frame, uint64_t seq,
                    storage::Position pos, uint64_t highestSeq, size_t bytes, bool silent = false);
  // An add's completion that found the topic gone (its alive token false): releases the SEND
  // from the connection's counts and sends the CLOSE_PRODUCER that waited for it. The topic's
  // executor, with no topic.
  static void answeredAfterTopic(Producer& p, size_t bytes);
  // Releases a SEND that was neither stored nor counted in p->inFlight, answering nothing.
  void queueUnanswered(const std::shared_ptr<Producer>& p, size_t bytes);
  // CLOSE_PRODUCER for p, sent after every answer queued so far for its connection.
  void queueCloseProducer(const std::shared_ptr<Producer>& p);
  struct CnxOut;
  CnxOut& cnxOut(const std::shared_ptr<ProducerSink>& cnx);
  void flushPass();
  // deliver_at_time - publish_time is over the delayedDelivery policy's maxDeliveryDelayInMillis.
  bool exceedsMaxDeliveryDelay(const Buffer& entry) const;
  // initialize's second step, after the transaction buffer recovered.
  void recoverDedup(std::function<void(Status)> done);
  // Periodic dedup work (time-based snapshots, inactive producers) on the topic's loop.
  void scheduleDedupCheck();
  // Takes a count-based dedup snapshot that minSnapshotIntervalMs deferred, once it is allowed.
  void armDeferredDedupSnapshot();

  // Handles the exceeded quotas after checkBacklogQuota() read the backlog age.
  void enforceBacklogQuota();
  // The topic was in use now (a producer or consumer left, or checkInactivity found it active).
  void markActive();

  TopicName name_;
  std::shared_ptr<storage::ManagedLedger> ledger_;
  // Backlog quota state: publish time of the oldest unacked message (epoch ms; 0: no backlog,
  // -1: not read yet), its subscription, and the eviction counts.
  int64_t oldestBacklogPublishTimeMs_ = -1;
  std::string oldestBacklogSubscription_;
  uint64_t sizeBacklogEvictions_ = 0;
  uint64_t timeBacklogEvictions_ = 0;
  int64_t lastActiveNs_ = 0;  // steady clock; set at load
  net::EventLoop& executor_;
  const BrokerOptions& options_;
  std::unordered_map<std::string, std::shared_ptr<Producer>> producers_;  // by name
  // Exclusive access (Pulsar's hasExclusiveProducer, exclusiveProducerName, topicEpoch and
  // waitingExclusiveProducers).
  bool hasExclusiveProducer_ = false;
  std::string exclusiveProducerName_;
  std::optional<uint64_t> topicEpoch_;
  std::deque<std::pair<std::shared_ptr<Producer>, ProducerAdded>> waitingExclusive_;
  // Makes p the exclusive producer and returns the new topic epoch.
  uint64_t takeExclusive(const Producer& p);
  void admitProducer(const std::shared_ptr<Producer>& p);
  // addProducer's checks before the access mode (terminated, fenced, name taken, backlog quota,
  // storage refusal, maxProducersPerTopic): true when one refused p and `added` was called.
  bool refuseProducer(const Producer& p, const ProducerAdded& added);
  // Fails the waiting producers (ProducerFenced "Fenced out") and fences the others out:
  // ExclusiveWithFencing.
  void fenceOtherProducers();
  // Closes every producer, waiting ones included (CLOSE_PRODUCER): terminate, unload, backlog
  // quota. A producer's CLOSE_PRODUCER goes after the answers to all of its publishes in flight
  // (as Pulsar's Producer.close waits for pendingPublishAcks), so its client does not send again
  // what was stored; SENDs reaching the topic after this are not stored and get no answer (Pulsar's
  // TopicClosedException path): the client sends them again after reconnecting.
  void closeAllProducers();
  // A failed write (not a fenced ledger) fences publishing, as Pulsar's PersistentTopic.addFailed:
  // every producer is closed (its client resends what was not stored), new producers and
  // publishes get ServiceNotReady, and once the writes in flight have completed the dedup pushed
  // ids go back to the persisted ones and publishing resumes. Without it a later send could be
  // stored before the failed ones were resent, and dedup would take those resends for
  // duplicates (lost), or, without dedup, store them out of order.
  void fenceAfterFailedWrite(const Status& st);
  void unfenceWhenDrained();
  // publish's refusals before dedup and the write (terminated, publishing fenced, delivery delay
  // over the limit, a full disk): true when one answered the SEND with its SEND_ERROR. A plain
  // call per SEND: no allocation on the accepted path.
  bool refuseSend(const std::shared_ptr<Producer>& producer, const PendingSend& s, size_t bytes);
  // A non-persistent topic's publish (Pulsar's NonPersistentTopic.publishMessage): each SEND is
  // answered at once with message id 0:0 and its entry handed to every subscription's dispatcher
  // (Dispatcher::sendNonPersistent: sent to a consumer that can take it, else dropped and
  // counted). Nothing is written; no dedup, no transactions.
  void publishNonPersistent(std::vector<PendingSend>& sends);
  // A write of publish failed: answered silently for a producer the broker closed (its client
  // resends), else SEND_ERROR PersistenceError; a fenced ledger calls onFenced_, another
  // failure fences publishing (fenceAfterFailedWrite).
  void writeFailed(const std::shared_ptr<Producer>& producer, uint64_t seq, storage::Position pos,
                   uint64_t highest, size_t bytes, const Status& st);
  bool publishFenced_ = false;
  int64_t pendingWrites_ = 0;  // adds given to the ledger and not completed
  // subscribe's reader path: moves the new non-durable `sub`'s cursor to req.startPosition
  // (clamped to the log), then adds the consumer; on failure the subscription goes again.
  void startReader(Subscription& sub, const SubscribeRequest& req,
                   const std::function<void(Status)>& cb);
  std::map<std::string, std::unique_ptr<Subscription>> subscriptions_;
  // With transactionCoordinatorEnabled, gives sub its pending-ack handle (durable ones a log,
  // replayed now with `recover`). topic_pending_ack.cc.
  void attachPendingAck(Subscription& sub, bool recover);
  PendingAckStoreOpener pendingAckOpener_;
  TopicStats stats_;
  // Failed publishes log one line per topic per 10 s (a full disk fails every add).
  LogRateLimiter publishErrorLog_{std::chrono::seconds(10)};
  // "publish to ... failed" at most once per 10 s per topic, with the count suppressed since.
  void logPublishFailure(const Status& st);
  TopicPolicyLimits limits_;
  // Rate limits (topic_rate_limits.cc).
  void applyRateLimits(const TopicPolicyLimits& before);
  void configureDispatchRate(MessageRateLimiter& l, const DispatchRate& r);
  void attachRateLimits(Subscription& sub);
  std::shared_ptr<MessageRateLimiter> publishRate_ = std::make_shared<MessageRateLimiter>();
  std::atomic<MessageRateLimiter*> groupPublishRate_{nullptr};  // limits_.resourceGroupPublish
  MessageRateLimiter dispatchRate_;
  BrokerRateLimiters* brokerRates_ = nullptr;
  std::atomic<uint64_t> publishRateLimitedTimes_{0};
  double publishMsgRate_ = 0;   // msgs/s, for relativeToPublishRate
  double publishByteRate_ = 0;  // bytes/s
  // Subscribe rate: (peer host, consumer name, consumer id) -> SUBSCRIBEs in the window.
  struct SubscribeWindow {
    int64_t startNs = 0;
    int32_t count = 0;
  };
  std::map<std::tuple<std::string, std::string, uint64_t>, SubscribeWindow> subscribeWindows_;
  bool terminated_ = false;
  MessageDeduplication dedup_;
  TransactionBuffer txnBuffer_;
  // Wires the transaction buffer into a new subscription's dispatcher (hook for transactions).
  // Also gives it the hook that hands snapshot markers to the replicated subscriptions.
  void attachTxnBuffer(Subscription& sub) {
    sub.setTransactionBuffer(&txnBuffer_);
    sub.setSnapshotMarkerHook([this, name = sub.name()](const storage::Entry& e) {
      if (replSubs_) replSubs_->snapshotMarkerRead(name, e.position, e.data);
    });
  }
  // A transactional SEND refused by the transaction buffer (answered with its SEND_ERROR).
  bool refuseTxnSend(const std::shared_ptr<Producer>& producer, const PendingSend& s, size_t bytes);
  std::shared_ptr<TopicCompactor> compactor_;
  std::vector<int64_t> compactedSeqs_;
  std::function<void()> onFenced_;  // setFencedHandler; cleared once called
  std::unique_ptr<boost::asio::steady_timer> dedupTimer_;
  std::unique_ptr<boost::asio::steady_timer> dedupSnapshotTimer_;
  bool dedupSnapshotArmed_ = false;
  MessageDeduplication::Clock::time_point nextPurge_{};

  // The answers of this pass, per connection, and whether a flush task is queued: compact
  // records the connection turns into frames on its own loop (ProducerSink::answer).
  struct CnxOut {
    std::shared_ptr<ProducerSink> cnx;
    ReceiptBatch answers;
  };
  std::vector<CnxOut> receipts_;
  bool flushQueued_ = false;
  // False once destroyed: add callbacks check it (publish()).
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool newEntries_ = false;
  std::map<std::string, std::shared_ptr<TopicReplicator>> replicators_;
  std::shared_ptr<TopicReplicatedSubscriptions> replSubs_;
  bool closing_ = false;  // closeLedger/deleteLedger began: no replicator is added any more
  void closeReplicators();
  // publish() of a replicator's SEND (Pulsar's isRemote producer): dedup by the producer name and
  // sequence ids of the entry's metadata, the original producer's (topic_replication.cc).
  void publishReplicated(const std::shared_ptr<Producer>& producer, PendingSend& s, size_t bytes);
};

}  // namespace magnetar::broker
