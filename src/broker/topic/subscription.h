// Subscription: a named durable cursor on a topic plus its dispatcher and consumers.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/topic/dispatcher.h"
#include "broker/topic/pending_ack_handle.h"

namespace magnetar::broker {

// Thread: the topic's executor only.
class Subscription {
 public:
  Subscription(std::string name, storage::ManagedLedger& ledger, storage::ManagedCursor& cursor,
               const BrokerOptions& options, std::string topicName, int partitionIndex,
               bool durable = true);
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  // A reader's subscription: removed when its consumer leaves.
  bool durable() const { return durable_; }
  bool nonPersistent() const { return nonPersistent_; }

  const std::string& name() const { return name_; }
  storage::ManagedCursor& cursor() { return cursor_; }
  Dispatcher* dispatcher() { return dispatcher_.get(); }
  // The type of the current dispatcher (none before the first consumer).
  bool hasDispatcher() const { return dispatcher_ != nullptr; }

  // Errors: kBusy (ConsumerBusy) for a second Exclusive consumer or a type mismatch while
  // consumers are connected ("Subscription is of different type"), kInvalidArgument for bad
  // Key_Shared ranges.
  Status addConsumer(const std::shared_ptr<Consumer>& c);
  void removeConsumer(Consumer* c);
  size_t consumerCount() const;

  // Individual ack of whole entries and of batch indexes (entry, ack set with bit i set = index
  // i still unacked; PIP-54). cb (optional) once persisted; the ack is applied in memory before
  // this returns.
  using BatchIndexAcks = std::vector<std::pair<storage::Position, storage::AckSet>>;
  void acknowledge(Consumer* c, const std::vector<storage::Position>& positions,
                   storage::StatusCallback cb, const BatchIndexAcks& batchIndexes = {});
  // Cumulative ack up to pos; with a non-empty ackSet pos itself is a batch acked up to some
  // index (everything before pos is acked, pos keeps the ack set).
  // On Shared/Key_Shared it is ignored and cb gets Ok (Pulsar's Consumer.messageAcked).
  void acknowledgeCumulative(Consumer* c, storage::Position pos, storage::StatusCallback cb,
                             const storage::AckSet& ackSet = {});
  // Seek: moves the cursor so that `pos` is the next entry delivered, rewinds the dispatcher.
  // cb runs even when the subscription was removed meanwhile (then nothing else is touched).
  void resetCursor(storage::Position pos, storage::StatusCallback cb);

  // Transactions (transactionCoordinatorEnabled; Pulsar's PersistentSubscription with its
  // PendingAckHandleImpl). Creates the pending-ack handle with its log `logName`
  // (pendingAckLedgerName) reached through `opener`; with `recover` the log is replayed now
  // (subscription load), acks queue until it is.
  void enablePendingAck(std::string logName, PendingAckStoreOpener opener, bool recover);
  // Null until enablePendingAck.
  PendingAckHandle* pendingAck() { return pendingAck_.get(); }
  // ACK with a txnid (PendingAckHandle::individualAck); the entries held wholly leave c's
  // unacked messages, as Pulsar's Consumer.individualAckWithTransaction. Errors: kNotAllowed
  // without transactions, the handle's.
  void transactionIndividualAcknowledge(Consumer* c, const TxnID& txn,
                                        std::vector<PendingAckHandle::IndividualAck> acks,
                                        storage::StatusCallback cb);
  // ACK Cumulative with a txnid; ignored (Ok) on Shared/Key_Shared, as Pulsar.
  void transactionCumulativeAcknowledge(const TxnID& txn, storage::Position pos,
                                        storage::AckSet ackSet, storage::StatusCallback cb);
  // END_TXN_ON_SUBSCRIPTION: commit acks the held positions in the cursor, abort redelivers them.
  // A subscription without transactions answers Ok (nothing held).
  void endTxn(const TxnID& txn, bool commit, int64_t lowWaterMark, storage::StatusCallback done);

  int64_t msgBacklog() const { return cursor_.numberOfEntriesInBacklog(); }
  // Acks the first n unacked entries after the mark-delete position (Pulsar's skip; also the
  // consumer_backlog_eviction backlog quota). cb once persisted.
  void skipEntries(int64_t n, storage::StatusCallback cb);
  // Acks everything up to the last entry (Pulsar's clear-backlog / skip_all, truncate).
  void clearBacklog(storage::StatusCallback cb);

  // Admin expire-messages: entries the cursor moved past because they were older than asked
  // (Pulsar's totalMsgExpired / msgRateExpired count entries the same way), and when that last
  // happened (epoch ms, 0: never; Pulsar's lastExpireTimestamp).
  uint64_t expiredCounter() const { return expiredCounter_; }
  int64_t lastExpireTimestampMs() const { return lastExpireTimestampMs_; }
  void addExpired(uint64_t entries, int64_t nowMs) {
    expiredCounter_ += entries;
    lastExpireTimestampMs_ = nowMs;
  }

  // When a consumer was last added or removed or an ack came (epoch ms; Pulsar's cursor
  // lastActive), for subscriptionExpirationTimeMinutes.
  int64_t lastActiveMs() const { return lastActiveMs_; }
  void markActive();

  // The topic's compactor, for read_compacted consumers (kept for dispatchers created later).
  void setCompactor(const TopicCompactor* compactor) {
    compactor_ = compactor;
    if (dispatcher_) dispatcher_->setCompactor(compactor);
  }

  // The topic's transaction buffer (max read position, hidden entries), kept for dispatchers
  // created later.
  void setTransactionBuffer(const TransactionBuffer* tb) {
    txnBuffer_ = tb;
    if (dispatcher_) dispatcher_->setTransactionBuffer(tb);
  }

  // Replicated subscription (Pulsar's cursor property "pulsar.replicated.subscription" = 1, kept
  // with the mark-delete position, so across restarts; a reset clears it as Pulsar's does).
  bool isReplicated() const;
  // Stores the property (a mark-delete at the current position carrying it); cb once persisted.
  void setReplicated(bool replicated, storage::StatusCallback cb);
  // Called with each snapshot marker (marker_type 12) the dispatcher reads and acks through
  // (Pulsar's processReplicatedSubscriptionSnapshot); kept for dispatchers created later.
  void setSnapshotMarkerHook(std::function<void(const storage::Entry&)> hook);

  // Topic-policy overrides of the unacked limits, kept for dispatchers created later
  // (Dispatcher::setUnackedLimits).
  void setUnackedLimits(std::optional<int> perConsumer, std::optional<int> perSubscription);
  // The topic's resolved delayedDelivery policy, kept for dispatchers created later.
  void setDelayedDelivery(const DelayedDeliveryPolicies& p);
  // The topic's and the broker's dispatch limiters (outlive this) and
  // dispatchThrottlingOnNonBacklogConsumerEnabled, for this subscription's dispatchers.
  void setDispatchRateLimiters(MessageRateLimiter* topic, MessageRateLimiter* broker,
                               const DynamicSetting<bool>* onNonBacklog);
  // This subscription's own dispatch limiter (subscriptionDispatchRate policy): configured by
  // the topic on its executor; dispatchRateChanged() after a change.
  MessageRateLimiter& dispatchRateLimiter() { return subDispatchRate_; }
  // A dispatch limit changed: the dispatcher reads again at once.
  void dispatchRateChanged();
  // Entries its dispatcher holds back for delayed delivery (0 without a dispatcher).
  int64_t msgDelayed() const;

 private:
  std::string name_;
  storage::ManagedLedger& ledger_;
  storage::ManagedCursor& cursor_;
  const BrokerOptions& options_;
  std::string topicName_;
  int partitionIndex_;
  bool durable_;
  // A non-persistent topic's (topicName "non-persistent://..."): acks are no-ops and the
  // dispatcher only forwards what is published (Dispatcher::sendNonPersistent).
  bool nonPersistent_;
  std::unique_ptr<Dispatcher> dispatcher_;
  const TransactionBuffer* txnBuffer_ = nullptr;
  std::function<void(const storage::Entry&)> snapshotMarkerHook_;
  std::unique_ptr<PendingAckHandle> pendingAck_;
  // What a commit and an abort do with the acks they release.
  // A committed txn's acks into the cursor; durable(status) once the cursor wrote them.
  void commitReleased(PendingAckHandle::Ended ended, storage::StatusCallback durable);
  void abortReleased(const PendingAckHandle::Ended& ended);
  const TopicCompactor* compactor_ = nullptr;
  uint64_t expiredCounter_ = 0;
  int64_t lastExpireTimestampMs_ = 0;
  int64_t lastActiveMs_ = 0;
  std::optional<int> maxUnackedPerConsumer_;
  std::optional<int> maxUnackedPerSubscription_;
  std::optional<DelayedDeliveryPolicies> delayedDelivery_;
  MessageRateLimiter subDispatchRate_;
  MessageRateLimiter* topicDispatchRate_ = nullptr;
  MessageRateLimiter* brokerDispatchRate_ = nullptr;
  const DynamicSetting<bool>* rateOnNonBacklog_ = nullptr;
  // False once destroyed: a cursor completion queued before then (a reset) checks it first.
  // Topic executor only.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
