// Dispatcher: moves a subscription's entries to its consumers within their permits.
// One class for every subscription type; the type decides which consumer gets an entry:
// Exclusive/Failover: the single active consumer; Shared: round-robin over consumers with permits;
// Key_Shared: the consumer owning the entry's sticky-key hash (its state: KeySharedState).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "base/token_bucket.h"
#include "broker/common/broker_options.h"
#include "broker/compaction/compaction.h"
#include "broker/policies/policies.h"
#include "broker/topic/consumer.h"
#include "broker/topic/delayed_delivery_tracker.h"
#include "broker/topic/replay_set.h"
#include "net/frame_batch.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

class KeySharedSelector;
class PendingAckHandle;
class KeySharedState;
struct DrainingHashInfo;
struct EntryMetadataPeek;
class TransactionBuffer;

struct DispatcherStats {
  uint64_t msgOutCounter = 0;
  uint64_t bytesOutCounter = 0;
  uint64_t msgRedeliverCounter = 0;
  uint64_t blockedByDraining = 0;  // Key_Shared entries held back because their hash drains
  // Replay-set entries the reads visited (each taken once it is visited: the work of replay
  // reads grows with what they dispatch, not with what waits; tests and benchmarks count it).
  uint64_t replayEntriesVisited = 0;
  // Non-persistent topics: messages dropped because no consumer could take them (Pulsar's
  // msgDropRate counts the same).
  uint64_t msgDropCounter = 0;
};

// Thread: the topic's executor only.
class Dispatcher {
 public:
  // Read batches served by the entry cache that one dispatch pass sends before the next read goes
  // through the executor (so publishes and acks queued meanwhile get their turn).
  static constexpr int kInlineReadRounds = 8;

  // topicName: the full name (Failover's active-consumer ring hashes it); partitionIndex -1 for
  // a non-partitioned topic.
  Dispatcher(SubType type, storage::ManagedLedger& ledger, storage::ManagedCursor& cursor,
             const BrokerOptions& options, std::string topicName, int partitionIndex);
  ~Dispatcher();

  SubType type() const { return type_; }
  // The topic's compactor (outlives the dispatcher): an Exclusive/Failover active consumer that
  // subscribed with read_compacted reads its compacted view up to the horizon, then the tail.
  void setCompactor(const TopicCompactor* compactor) { compactor_ = compactor; }
  // The topic's transaction buffer (outlives the dispatcher; null: no transactions): reads stop
  // at its max read position, and commit/abort markers and aborted txns' entries are acked
  // through without dispatch (Pulsar's filterEntriesForConsumer).
  void setTransactionBuffer(const TransactionBuffer* tb) { txnBuffer_ = tb; }
  // Every marker (marker_type set, Pulsar's Markers.isServerOnlyMarker) is acked through and
  // never dispatched; a replicated subscription snapshot's (12) entry goes to `hook` first.
  void setSnapshotMarkerHook(std::function<void(const storage::Entry&)> hook) {
    snapshotMarkerHook_ = std::move(hook);
  }
  // Overrides maxUnackedMessagesPerConsumer / ...PerSubscription (topic policies
  // maxUnackedMessagesOnConsumer / OnSubscription; 0: no limit). nullopt: the broker's value.
  void setUnackedLimits(std::optional<int> perConsumer, std::optional<int> perSubscription) {
    maxUnackedPerConsumer_ = perConsumer.value_or(options_.maxUnackedMessagesPerConsumer);
    maxUnackedPerSubscription_ =
        perSubscription.value_or(options_.maxUnackedMessagesPerSubscription);
  }
  // Delayed delivery (Pulsar's rule: Shared and Key_Shared only): while p.active, entries whose
  // deliver_at_time is later than now (plus one tick unless isDelayedDeliveryDeliverAtTimeStrict)
  // go to the DelayedDeliveryTracker instead of a consumer and come back through the replay set
  // when due; the entries behind them are not held up. The tracker's bucket width comes from the
  // broker's delayedDeliveryTickTimeMillis, its tick from p (Pulsar's resetTickTime at each
  // add). Default: the broker's delayedDelivery* settings.
  void setDelayedDelivery(const DelayedDeliveryPolicies& p) { delayed_ = p; }
  // Entries held back now (stats msgDelayed, metric pulsar_subscription_delayed).
  int64_t delayedMessages() const { return tracker_ ? tracker_->getNumberOfDelayedMessages() : 0; }
  // Bytes the delayed-delivery tracker holds (0 when it has none).
  size_t delayedTrackerBytes() const { return tracker_ ? tracker_->memoryBytes() : 0; }
  // Forgets the held entries (clear-backlog: they are acked anyway).
  void clearDelayedMessages() {
    if (tracker_) tracker_->clear();
  }

  // Errors: kBusy (ConsumerBusy) when an Exclusive subscription already has a consumer;
  // kInvalidArgument (ConsumerAssignError) for overlapping Key_Shared sticky ranges.
  Status addConsumer(const std::shared_ptr<Consumer>& c);
  // Removes c; its unacked messages go back for redelivery (count unchanged, as Pulsar).
  void removeConsumer(Consumer* c);
  const std::vector<std::shared_ptr<Consumer>>& consumers() const { return consumers_; }
  Consumer* activeConsumer() const;

  // Non-persistent topics (Pulsar's NonPersistentDispatcher*): nothing is read, no pending acks,
  // no redelivery; entries come only from the topic's publish, through sendNonPersistent. Set
  // once, before the first consumer.
  void setNonPersistent() { nonPersistent_ = true; }
  // Dispatch rate limits (docs/rate-limits.md): the topic's, this subscription's and the
  // broker's limiters, each may be null or off; they outlive this dispatcher. Reads take at most
  // the messages and bytes every enabled one has tokens for; with none left the next read waits
  // for the tokens (a timer on this executor). What a pass dispatched is taken from each.
  // `onNonBacklog` false: Pulsar's dispatchThrottlingOnNonBacklogConsumerEnabled off, a
  // subscription reading at most managedLedgerCursorBackloggedThreshold-ish entries behind the
  // tail (kNonBacklogEntries) is not throttled.
  void setDispatchRateLimiters(MessageRateLimiter* topic, MessageRateLimiter* subscription,
                               MessageRateLimiter* broker,
                               const DynamicSetting<bool>* onNonBacklog);
  // A limiter changed (policy update): reads again at once.
  void dispatchRateChanged();
  // Passes held back by a dispatch rate limit (Pulsar's dispatchRateLimitedCount-ish). Executor.
  uint64_t dispatchRateLimitedTimes() const { return rateLimitedTimes_; }
  bool nonPersistent() const { return nonPersistent_; }
  // Hands each published entry at once to a consumer that can take it now (permits > 0, not
  // closed, its connection under the high watermark: Pulsar's isConsumerAvailable): Exclusive and
  // Failover the active consumer, Shared the next one round-robin, Key_Shared the owner of the
  // key's hash. Otherwise the entry is dropped and its messages (a batch counts as its messages)
  // are added to stats().msgDropCounter. MESSAGE frames carry message id 0:0, as Pulsar's.
  void sendNonPersistent(const std::vector<Buffer>& entries);

  // FLOW: the client can take `permits` more messages.
  void flow(Consumer* c, uint32_t permits);
  // c's connection drained its outbound queue to the low watermark: dispatch goes on.
  void consumerWritable(Consumer* c);
  // Acks from c (positions individually, or cumulative up to `upTo`). Frees unacked counts.
  void acked(Consumer* c, const std::vector<storage::Position>& positions);
  void ackedCumulative(Consumer* c, storage::Position upTo);
  // Batch-index acks from c were applied to the cursor for these entries: their pending message
  // counts drop to what the cursor still has unacked (the whole entry is freed when none is left).
  void batchIndexesAcked(Consumer* c, const std::vector<storage::Position>& positions);
  // REDELIVER_UNACKNOWLEDGED_MESSAGES: the given positions of c (all of c's when empty).
  void redeliver(Consumer* c, const std::vector<storage::Position>& positions);
  // Transactions: entries its subscription's PendingAckHandle holds wholly are not dispatched
  // (Pulsar keeps a txn-acked entry from other consumers until the txn ends). Null: none.
  void setPendingAck(const PendingAckHandle* h) { pendingAck_ = h; }
  // An aborted txn released these acks: they go out again (Exclusive/Failover rewind, as
  // Pulsar's redeliverUnacknowledgedMessages).
  void redeliverReleased(const std::vector<storage::Position>& positions);
  // New entries were appended to the ledger.
  void onNewEntries();
  // Seek/reset: drop all in-flight state and read from the cursor's position again.
  void rewind();
  // Disconnect every consumer (after seek, as Pulsar does); they reconnect. Marks them closed
  // first, so removing them one by one dispatches nothing to the ones still listed.
  std::vector<std::shared_ptr<Consumer>> takeConsumers();

  const DispatcherStats& stats() const { return stats_; }
  int64_t unackedMessages() const { return unackedMessages_; }
  // Entries waiting for redelivery: the replay set and the Key_Shared entries parked at their
  // owners.
  size_t replayBacklog() const { return replay_.size() + parkedEntries_; }
  const KeySharedSelector* keySharedSelector() const;
  // Key_Shared: the draining hashes now, sorted by hash (empty for other types).
  std::vector<DrainingHashInfo> drainingHashes() const;
  // Key_Shared: draining hashes that finished over the subscription's life.
  uint64_t drainingHashesClearedTotal() const;
  // Key_Shared: entries waiting for redelivery whose hash is in `draining` (from drainingHashes()).
  int64_t entriesBlockedByDraining(const std::vector<DrainingHashInfo>& draining) const;
  // maxUnackedMessagesPerSubscription holds dispatch (set at the limit, cleared at half).
  bool blockedOnUnacked() const { return blockedOnUnacked_; }

 private:
  // Dispatches what the permits allow, then hands the frames over (flushOutput).
  void readMoreEntries(bool allowReplay = true);
  void readRounds(bool allowReplay);
  // Sends the MESSAGE frames collected in outs_, one batch per consumer.
  void flushOutput();
  // Sets each consumer's outboundBlocked from its connection's queue and this pass's batch
  // (arming the connection's onWritable() for those held back).
  void refreshOutbound();
  // Key_Shared: the replay group of `hash`: its owner, or ReplaySet::kHeld when it has none or
  // the hash drains at another consumer (the owner does not allow out-of-order delivery).
  ReplaySet::Group replayGroup(int32_t hash) const;
  // Key_Shared consumers joined or left: the draining hashes from every consumer's pending
  // entries (O(entries pending)), then every waiting entry follows its hash's owner.
  void rescanDraining();
  void regroupReplay();
  // Dispatches up to maxEntries replay positions: the next allowReplay when done at once (all
  // cached), nullopt when reads are in flight or, past the inline rounds, the batch is queued as
  // one task on the ledger's executor (their callback goes on).
  std::optional<bool> readReplay(int64_t maxEntries, bool inlineAllowed);
  // Reads `want` (ascending, taken out of replay_) and dispatches it: as readReplay, for one batch.
  std::optional<bool> readReplayed(const std::vector<storage::Position>& want);
  // Dispatches read replay entries (sorted); whether to replay again next.
  bool replayDispatch(std::vector<storage::Entry>& entries, storage::Position first);

  // Entries before ackCheckFrom skip the cursor's acked check (compacted entries of ledgers the
  // log no longer has).
  void dispatchEntries(std::vector<storage::Entry>& entries, bool fromReplay,
                       storage::Position ackCheckFrom = {-1, -1});
  // dispatchEntries' steps per entry, plain calls (no allocation, no virtual call):
  // keySharedTarget picks the owner of a keyed entry's hash (set in `hash`) if it may take it
  // now (not draining elsewhere, no older entry of the hash waiting), else null; deliver hands
  // the entry (n messages of batchSize unacked, ackSet for a partly acked batch) to target:
  // permits, pending acks, counters and its MESSAGE frame in this pass's batch.
  // A new entry whose owner has no permits (or has entries parked already) and that nothing
  // else holds back is parked at the owner instead (set in `parkAt`): kept in memory with its
  // hash, not placed in the replay set and read again (issue 47: 15 % of max-rate entries).
  Consumer* keySharedTarget(const EntryMetadataPeek& md, storage::Position pos, bool fromReplay,
                            int32_t& hash, Consumer** parkAt);
  // Parks e (of `hash`) at owner. Parked entries are dispatched first, in order, at the start
  // of a pass once their consumer can take them (dispatchParked); a parked entry with an older
  // entry of its hash in the replay set goes there instead. On any consumer change they go to
  // the replay set (unparkAll; the selector may give their hashes to others); a rewind drops
  // them. Bounded by keySharedParkedEntriesMaxBytes of entry bytes per subscription (past it,
  // and under a dispatch rate limit: the replay set), since parked entries hold their buffers.
  void park(Consumer* owner, storage::Entry&& e, int32_t hash);
  void dispatchParked();
  void unpark(Consumer* c);
  void unparkAll();
  // The messages of the batch entry at p not acked yet (*n) and its ack set when partly acked
  // (*ackSet, else left null); false when every message is acked (the entry is then deleted).
  bool unackedPart(storage::Position p, int32_t batchSize, int32_t* n,
                   const storage::AckSet** ackSet);
  void deliver(Consumer* target, const storage::Entry& e, int32_t n, int32_t hash,
               int32_t batchSize, const storage::AckSet* ackSet);
  // The frames of this pass for c (outs_), added on first use; handed over by flushOutput.
  net::FrameBatch& batchFor(Consumer* c);
  // read_compacted: reads the compacted view when the read position is at or before its
  // horizon; false when the view does not apply (read the ledger).
  bool readCompacted(int64_t batch);
  // Delayed delivery: true when the entry was handed to the tracker (not dispatched now).
  bool trackDelayedDelivery(const storage::Entry& e, int64_t deliverAtMs);
  // Moves due tracked entries into the replay set, up to `room` replay entries in all.
  void pollDelayed(int64_t room);
  // Arms the timer for the next due bucket (at most one run per tick, as Pulsar).
  void scheduleDelayedTimer();
  int64_t availablePermits() const;
  bool canTake(const Consumer* c) const;
  Consumer* pickShared();
  void putBackForRedelivery(Consumer* c, bool all, const std::vector<storage::Position>& which,
                            bool countRedelivery);
  // Picks the active consumer (single-active types). On Failover, when it changed, every
  // consumer is told its state (Pulsar's notifyActiveConsumerChanged). True when it changed.
  bool updateActiveConsumer();
  // ACTIVE_CONSUMER_CHANGE to c (is_active = c is the active consumer).
  void notifyActiveConsumerChange(Consumer* c);
  void addToReplay(storage::Position p, int32_t keyHash);
  // Key_Shared: an entry of `hash` before p waits in replay_.
  bool olderInReplay(int32_t hash, storage::Position p) const;
  void trackUnacked(Consumer* c, int64_t delta);
  // Forgets one pending entry of c (unacked counts, draining); true when that ended its hash's
  // draining.
  bool releasePending(Consumer* c, const Consumer::PendingAck& p);
  void clearPending(Consumer* c);

  const SubType type_;
  storage::ManagedLedger& ledger_;
  storage::ManagedCursor& cursor_;
  const BrokerOptions& options_;
  const std::string topicName_;
  const int partitionIndex_;
  int maxUnackedPerConsumer_;      // messages, 0: no limit
  int maxUnackedPerSubscription_;  // messages, 0: no limit

  std::vector<std::shared_ptr<Consumer>> consumers_;
  Consumer* active_ = nullptr;                 // Exclusive/Failover
  size_t rrIndex_ = 0;                         // Shared
  std::unique_ptr<KeySharedState> keyShared_;  // Key_Shared only
  DelayedDeliveryPolicies delayed_;
  std::unique_ptr<DelayedDeliveryTracker> tracker_;  // Shared/Key_Shared, created on first use
  // On the ledger's executor when it is an EventLoop (the broker); without one (unit tests) due
  // entries are polled at each dispatch pass only.
  std::unique_ptr<boost::asio::steady_timer> delayedTimer_;
  // Failover: a newly active consumer is told (every consumer is), and read for, only
  // activeConsumerFailoverDelayTimeMillis after the change, as Pulsar's
  // scheduleReadOnActiveConsumer (the official Go client drops a notice that comes right after
  // its SUBSCRIBE's SUCCESS). Held: nothing is dispatched until the timer fires. holdActivation
  // returns false when there is no delay or no event loop (unit tests): tell at once.
  bool holdActivation();
  bool activationHeld_ = false;
  std::unique_ptr<boost::asio::steady_timer> activationTimer_;
  int64_t timerDeadlineMs_ = -1;  // when the armed timer fires, -1: not armed
  int64_t lastTickMs_ = 0;

  storage::Position readPosition_;
  const TopicCompactor* compactor_ = nullptr;
  const TransactionBuffer* txnBuffer_ = nullptr;
  std::function<void(const storage::Entry&)> snapshotMarkerHook_;
  // dispatchEntries' transaction step: true when e must not go out now (past the max read
  // position: read again later; hidden: acked through).
  // A marker entry (marker_type set): handed to the snapshot hook when it is one, acked;
  // true (skipped).
  bool skipMarker(const storage::Entry& e, const EntryMetadataPeek& md);
  bool heldByTxn(const storage::Entry& e, const EntryMetadataPeek& md, bool fromReplay, bool* stop);
  const PendingAckHandle* pendingAck_ = nullptr;
  bool compactedStarted_ = false;  // a compacted read was issued since the last rewind
  bool readPending_ = false;
  // The last read of new entries handed some to the tracker: the next one reads a full
  // dispatcherMaxReadBatchSize whatever the permits (entries no consumer can take wait in replay_).
  bool readAhead_ = false;
  uint64_t epoch_ = 0;  // bumped by rewind: reads issued before it are dropped
  // False once this dispatcher is gone (its subscription removed, e.g. an unsubscribe, with a read
  // or replay task still queued): their completions check it before touching the dispatcher.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Positions to deliver again, in order, before new reads; with the entry's key hash (-1: none),
  // grouped by the consumer that may take them (Key_Shared).
  ReplaySet replay_;
  size_t parkedEntries_ = 0;  // over all consumers' `parked`
  size_t parkedBytes_ = 0;
  std::unordered_map<int64_t, int32_t> redeliveryCount_;  // packed position -> count
  int64_t unackedMessages_ = 0;
  bool blockedOnUnacked_ = false;
  DispatcherStats stats_;
  bool nonPersistent_ = false;
  // Whether c may take a non-persistent entry now (sendNonPersistent).
  bool availableNow(Consumer* c) const;
  // MESSAGE frames dispatched in this pass and not yet handed over, per consumer. Always empty
  // between tasks: every pass ends in flushOutput, before any consumer can leave.
  struct Out {
    Consumer* consumer;
    net::FrameBatch batch;
  };
  std::vector<Out> outs_;

  // Dispatch rate limits (dispatch_rate.cc). Each may be null.
  MessageRateLimiter* topicRate_ = nullptr;
  MessageRateLimiter* subRate_ = nullptr;
  MessageRateLimiter* brokerRate_ = nullptr;
  const DynamicSetting<bool>* rateOnNonBacklog_ = nullptr;
  std::unique_ptr<boost::asio::steady_timer> rateTimer_;
  bool rateTimerArmed_ = false;
  uint64_t rateLimitedTimes_ = 0;
  // Pulsar's managedLedgerCursorBackloggedThreshold default: a cursor further behind is
  // "backlogged" (inactive) and throttled even with dispatchThrottlingOnNonBacklogConsumerEnabled
  // off.
  static constexpr int64_t kNonBacklogEntries = 1000;
  // One relaxed load per limiter: false when no dispatch limit is configured.
  bool rateLimited() const {
    return (topicRate_ && topicRate_->enabled()) || (subRate_ && subRate_->enabled()) ||
           (brokerRate_ && brokerRate_->enabled());
  }
  // Caps a read at the tokens left (*maxMsgs, *maxBytes); false when a limiter has none: the
  // read waits for rateTimer_.
  bool takeDispatchAllowance(int64_t* maxMsgs, int64_t* maxBytes);
  // Charges what a dispatchEntries pass sent (the counters before it, the entries it sent).
  void chargeDispatchRate(uint64_t msgsBefore, uint64_t bytesBefore, int64_t entries);
  // Takes what a pass dispatched from every enabled limiter.
  void consumeDispatchQuota(int64_t msgs, int64_t bytes);
};

}  // namespace magnetar::broker
