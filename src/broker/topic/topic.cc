#include "broker/topic/topic.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/topic/entry_metadata.h"
#include "protocol/commands.h"
#include "protocol/server_error.h"

namespace magnetar::broker {

namespace {

DedupOptions dedupOptions(const BrokerOptions& o) {
  DedupOptions d;
  d.maxProducers = o.brokerDeduplicationMaxNumberOfProducers;
  d.entriesInterval = std::max(1, o.brokerDeduplicationEntriesInterval);
  const double rate = o.managedLedgerDefaultMarkDeleteRateLimit;
  d.minSnapshotIntervalMs = rate > 0 ? static_cast<int64_t>(1000.0 / rate) : 0;
  d.snapshotIntervalSeconds = o.brokerDeduplicationSnapshotIntervalSeconds;
  d.producerInactivityTimeoutMinutes = o.brokerDeduplicationProducerInactivityTimeoutMinutes;
  return d;
}

}  // namespace

PersistentTopic::PersistentTopic(TopicName name, std::shared_ptr<storage::ManagedLedger> ledger,
                                 net::EventLoop& executor, const BrokerOptions& options,
                                 std::optional<bool> dedupPolicy)
    : name_(std::move(name)),
      ledger_(std::move(ledger)),
      executor_(executor),
      options_(options),
      dedup_(dedupPolicy.value_or(options.brokerDeduplicationEnabled), dedupOptions(options)),
      txnBuffer_(*ledger_, options.transactionCoordinatorEnabled, name_.toString(),
                 options.transactionBufferSnapshotMaxTransactionCount),
      compactor_(std::make_shared<TopicCompactor>(ledger_, nullptr)) {
  markActive();
  // A commit/abort moved the max read position: the held entries can go out.
  txnBuffer_.setMaxReadMovedHandler([this] {
    for (auto& [n, sub] : subscriptions_) {
      if (sub->dispatcher()) sub->dispatcher()->onNewEntries();
    }
  });
  compactor_->setTxnFilter([this] { return txnBuffer_.maxReadPosition(); },
                           [this](const storage::Entry& e) {
                             EntryMetadataPeek md;
                             return peekEntryMetadata(e.data.view(), &md).isOk() &&
                                    txnBuffer_.hides(md);
                           });
}

void PersistentTopic::initialize(std::function<void(Status)> done) {
  MAGNETAR_DCHECK_ON(executor_);
  terminated_ = ledger_->isTerminated();  // as stored by an earlier terminate
  loadSubscriptions();
  auto self = shared_from_this();
  txnBuffer_.recover([self, done = std::move(done)](const Status& ts) mutable {
    if (!ts.isOk()) return done(ts);
    self->recoverDedup(std::move(done));
  });
}

void PersistentTopic::recoverDedup(std::function<void(Status)> done) {
  auto self = shared_from_this();
  dedup_.recover(*ledger_, [self, done = std::move(done)](const Status& s) {
    if (self->dedup_.enabled()) {
      MLOG_INFO("{}: deduplication state of {} producers recovered, {} entries replayed",
                self->name_.toString(), self->dedup_.producerCount(),
                self->dedup_.entriesReplayed());
      self->scheduleDedupCheck();
    }
    self->compactor_->initialize(self->compactedSeqs_, [self, s, done](const Status& cs) {
      if (!cs.isOk()) {
        MLOG_WARN("{}: compacted view not loaded: {}", self->name_.toString(), cs.toString());
      }
      done(s);
    });
  });
}

void PersistentTopic::setDeduplicationEnabled(bool enabled) {
  MAGNETAR_DCHECK_ON(executor_);
  if (enabled == dedup_.enabled()) return;
  auto self = shared_from_this();
  dedup_.setEnabled(enabled, *ledger_, [self](const Status& s) {
    if (!s.isOk()) {
      MLOG_WARN("{}: deduplication recovery failed: {}", self->name_.toString(), s.toString());
    }
    if (self->dedup_.enabled()) self->scheduleDedupCheck();
  });
}

void PersistentTopic::scheduleDedupCheck() {
  // Pulsar checks snapshots every brokerDeduplicationSnapshotFrequencyInSeconds and inactive
  // producers every third of brokerDeduplicationProducerInactivityTimeoutMinutes.
  int freq = options_.brokerDeduplicationSnapshotFrequencyInSeconds;
  int purgeSeconds = std::max(1, options_.brokerDeduplicationProducerInactivityTimeoutMinutes * 20);
  int every = freq > 0 ? std::min(freq, purgeSeconds) : purgeSeconds;
  if (!dedupTimer_) dedupTimer_ = std::make_unique<boost::asio::steady_timer>(executor_.context());
  dedupTimer_->expires_after(std::chrono::seconds(every));
  std::weak_ptr<PersistentTopic> weak = weak_from_this();
  dedupTimer_->async_wait([weak, purgeSeconds](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || !self->dedup_.enabled()) return;
    auto now = MessageDeduplication::Clock::now();
    self->dedup_.checkSnapshot(now);
    if (now >= self->nextPurge_) {
      self->dedup_.purgeInactiveProducers(now);
      self->nextPurge_ = now + std::chrono::seconds(purgeSeconds);
    }
    self->scheduleDedupCheck();
  });
}

void PersistentTopic::armDeferredDedupSnapshot() {
  MAGNETAR_DCHECK_ON(executor_);
  dedupSnapshotArmed_ = true;
  if (!dedupSnapshotTimer_) {
    dedupSnapshotTimer_ = std::make_unique<boost::asio::steady_timer>(executor_.context());
  }
  dedupSnapshotTimer_->expires_at(dedup_.deferredSnapshotAt());
  std::weak_ptr<PersistentTopic> weak = weak_from_this();
  dedupSnapshotTimer_->async_wait([weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    self->dedupSnapshotArmed_ = false;
    self->dedup_.takeDeferredSnapshot();
  });
}

PersistentTopic::~PersistentTopic() { *alive_ = false; }

void PersistentTopic::answeredAfterTopic(Producer& p, size_t bytes) {
  // Not stored; the client sends it again after the CLOSE_PRODUCER it gets here if it was the
  // last one that close waited for (the topic that would have queued it is gone).
  if (!p.sink()) return;
  // Through sendAnswers(), as the topic's own answers: behind those still on their way.
  ReceiptBatch b;
  b.completed = 1;
  b.completedBytes = bytes;
  if (--p.inFlight == 0 && p.successWhenAnswered) {
    b.addFrame(protocol::Commands::newSuccess(*std::exchange(p.successWhenAnswered, {})));
  }
  if (p.inFlight == 0 && p.closeWhenAnswered) {
    p.closeWhenAnswered = false;
    b.closeAfter.push_back(p.id());
  }
  p.sink()->sendAnswers(b);
}

void PersistentTopic::loadSubscriptions() {
  MAGNETAR_DCHECK_ON(executor_);
  for (auto* cursor : ledger_->cursors()) {
    // Not subscriptions: deduplication's, compaction's and the replicators' cursors.
    if (cursor->name() == kDedupCursorName || cursor->name() == kCompactionCursorName ||
        cursor->name() == kTxnBufferCursorName || isReplicatorName(cursor->name())) {
      continue;
    }
    auto sub = std::make_unique<Subscription>(cursor->name(), *ledger_, *cursor, options_,
                                              name_.toString(), name_.partitionIndex());
    sub->setUnackedLimits(limits_.maxUnackedOnConsumer, limits_.maxUnackedOnSubscription);
    sub->setDelayedDelivery(limits_.delayedDelivery);
    sub->setCompactor(compactor_.get());
    attachTxnBuffer(*sub);
    attachRateLimits(*sub);
    attachPendingAck(*sub, /*recover=*/true);
    subscriptions_.emplace(cursor->name(), std::move(sub));
  }
}

bool PersistentTopic::refuseProducer(const Producer& p, const ProducerAdded& added) {
  if (terminated_) {
    added(Status::notAllowed("Topic was already terminated"), proto::TopicTerminatedError, {});
    return true;
  }
  if (publishFenced_) {
    // Pulsar: TopicFencedException, ServiceNotReady; the client retries.
    added(Status::busy("Topic is temporarily unavailable"), proto::ServiceNotReady, {});
    return true;
  }
  if (producers_.count(p.name())) {
    added(Status::busy("Producer with name '" + p.name() + "' is already connected to topic"),
          proto::ProducerBusy, {});
    return true;
  }
  if (auto blocking = producerBlockingPolicy()) {
    // Pulsar's codes: the client holds its sends on ...Error, fails them on ...Exception.
    added(Status::notAllowed("Cannot create producer on topic with backlog quota exceeded"),
          *blocking == "producer_exception" ? proto::ProducerBlockedQuotaExceededException
                                            : proto::ProducerBlockedQuotaExceededError,
          {});
    return true;
  }
  if (Status refused = ledger_->writeRefusal(); !refused) {
    // A producer created (or re-created after the SEND_ERROR that closed its connection) on a
    // full disk would only resend into the refusal. For a full disk the answer is the backlog
    // quota's ProducerBlockedQuotaExceededException: the Java and C++ clients fail their pending
    // sends on it at once (the application sees the error, also with send timeout 0) and keep
    // retrying the producer with backoff. Other refusals (closed, fenced) are PersistenceError,
    // which the clients retry while their send timer runs.
    added(refused,
          refused.code() == StatusCode::kNoSpace ? proto::ProducerBlockedQuotaExceededException
                                                 : proto::PersistenceError,
          {});
    return true;
  }
  int maxProducers = limits_.maxProducers.value_or(options_.maxProducersPerTopic);
  if (maxProducers > 0 && producers_.size() >= static_cast<size_t>(maxProducers)) {
    added(Status::busy("Topic reached max producers limit"), proto::ProducerBusy, {});
    return true;
  }
  return false;
}

void PersistentTopic::addProducer(const std::shared_ptr<Producer>& p, ProducerAdded added,
                                  const std::function<void()>& queued) {
  MAGNETAR_DCHECK_ON(executor_);
  if (refuseProducer(*p, added)) return;
  const std::string existingExclusive =
      "Topic has an existing exclusive producer: " + exclusiveProducerName_;
  auto epochMoved = [&]() -> std::optional<std::string> {
    if (p->topicEpoch() && topicEpoch_ && *p->topicEpoch() < *topicEpoch_) {
      return fmt::format("Topic epoch has already moved. Current epoch: {}, Producer epoch: {}",
                         *topicEpoch_, *p->topicEpoch());
    }
    return std::nullopt;
  };
  switch (p->accessMode()) {
    case proto::Shared:
      if (hasExclusiveProducer_ || !waitingExclusive_.empty()) {
        added(Status::busy(existingExclusive), proto::ProducerBusy, {});
        return;
      }
      admitProducer(p);
      added(Status::ok(), proto::UnknownError, topicEpoch_);
      return;
    case proto::Exclusive:
      if (hasExclusiveProducer_ || !waitingExclusive_.empty()) {
        added(Status::busy(existingExclusive), proto::ProducerFenced, {});
        return;
      }
      if (!producers_.empty()) {
        added(Status::busy("Topic has existing shared producers"), proto::ProducerFenced, {});
        return;
      }
      break;
    case proto::ExclusiveWithFencing:
      if (hasExclusiveProducer_ || !producers_.empty()) fenceOtherProducers();
      break;
    case proto::WaitForExclusive:
      if (hasExclusiveProducer_ || !producers_.empty()) {
        waitingExclusive_.emplace_back(p, std::move(added));
        queued();
        return;
      }
      break;
  }
  if (auto moved = epochMoved()) {
    added(Status::busy(*moved), proto::ProducerFenced, {});
    return;
  }
  uint64_t epoch = takeExclusive(*p);
  admitProducer(p);
  added(Status::ok(), proto::UnknownError, epoch);
}

uint64_t PersistentTopic::takeExclusive(const Producer& p) {
  hasExclusiveProducer_ = true;
  exclusiveProducerName_ = p.name();
  topicEpoch_ = p.topicEpoch() ? *p.topicEpoch() : (topicEpoch_ ? *topicEpoch_ + 1 : 0);
  return *topicEpoch_;
}

void PersistentTopic::admitProducer(const std::shared_ptr<Producer>& p) {
  producers_.emplace(p->name(), p);
  dedup_.producerAdded(p->name());
}

void PersistentTopic::fenceOtherProducers() {
  auto waiting = std::move(waitingExclusive_);
  waitingExclusive_.clear();
  for (auto& [w, added] : waiting) {
    w->closed = true;
    added(Status::busy("Fenced out"), proto::ProducerFenced, {});
  }
  // Pulsar removes the current producers without telling their clients (no CLOSE_PRODUCER);
  // a fenced producer's next SEND closes its connection (ServerCnx::handleSend).
  for (auto& [n, p] : producers_) {
    dedup_.producerRemoved(n);
    p->closed = true;
    p->fenced.store(true, std::memory_order_release);
  }
  producers_.clear();
  hasExclusiveProducer_ = false;
  exclusiveProducerName_.clear();
}

void PersistentTopic::closeAllProducers() {
  auto waiting = std::move(waitingExclusive_);
  waitingExclusive_.clear();
  for (auto& [w, added] : waiting) {
    w->closed = true;
    if (w->sink()) w->sink()->closeProducerFromBroker(w->id());
  }
  auto current = std::move(producers_);
  producers_.clear();
  for (auto& [n, p] : current) {
    dedup_.producerRemoved(n);
    p->closed = true;
    queueCloseProducer(p);
  }
  hasExclusiveProducer_ = false;
  exclusiveProducerName_.clear();
}

void PersistentTopic::removeProducer(Producer* p) {
  MAGNETAR_DCHECK_ON(executor_);
  p->closed = true;
  for (auto it = waitingExclusive_.begin(); it != waitingExclusive_.end(); ++it) {
    if (it->first.get() == p) {
      waitingExclusive_.erase(it);
      return;
    }
  }
  auto it = producers_.find(p->name());
  if (it == producers_.end() || it->second.get() != p) return;
  producers_.erase(it);
  markActive();
  dedup_.producerRemoved(p->name());
  if (hasExclusiveProducer_) {
    hasExclusiveProducer_ = false;
    exclusiveProducerName_.clear();
  }
  // The next waiting producer takes the topic once no producer holds it (Pulsar's
  // handleProducerRemoved, which also admits it when the last shared producer leaves).
  while (!waitingExclusive_.empty() && producers_.empty()) {
    auto [next, added] = std::move(waitingExclusive_.front());
    waitingExclusive_.pop_front();
    if (next->closed) continue;
    uint64_t epoch = takeExclusive(*next);
    admitProducer(next);
    added(Status::ok(), proto::UnknownError, epoch);
    break;
  }
}

void PersistentTopic::publish(std::vector<PendingSend>& sends) {
  MAGNETAR_DCHECK_ON(executor_);
  if (!name_.isPersistent()) return publishNonPersistent(sends);
  for (auto& s : sends) {
    size_t bytes = s.entry.size();
    auto producer = std::move(s.producer);
    uint64_t seq = s.sequenceId;
    uint64_t highest = s.highestSequenceId;
    int32_t n = s.numMessages;
    if (producer->closed && !producer->fenced.load(std::memory_order_relaxed)) {
      // Closed by the broker (or by its client) while this SEND was on its way. (A fenced-out
      // producer's SENDs already here are still taken: its next one closes its connection.)
      queueUnanswered(producer, bytes);
      continue;
    }
    producer->inFlight++;
    if (refuseSend(producer, s, bytes)) continue;
    if (dedup_.enabled() && isReplicatorName(producer->name())) {
      publishReplicated(producer, s, bytes);
      continue;
    }
    if (dedup_.enabled()) {
      auto verdict = dedup_.check(producer->name(), static_cast<int64_t>(seq),
                                  static_cast<int64_t>(highest), &producer->dedupSlot);
      if (verdict == MessageDeduplication::Verdict::kDuplicate) {
        // Pulsar answers a duplicate with a receipt for message id -1:-1 and stores nothing.
        queueReceipt(producer, {}, seq, {-1, -1}, highest, bytes);
        continue;
      }
      if (verdict == MessageDeduplication::Verdict::kInFlight) {
        dedup_.waitFor(
            producer->name(),
            {static_cast<int64_t>(seq), [this, producer, seq, highest, bytes](const Status& st) {
               if (st.isOk()) {
                 queueReceipt(producer, {}, seq, {-1, -1}, highest, bytes);
               } else {
                 queueReceipt(producer,
                              protocol::Commands::newSendError(
                                  producer->id(), seq, proto::PersistenceError, st.message()),
                              seq, {}, highest, bytes);
               }
             }});
        continue;
      }
    }
    if (s.txn && refuseTxnSend(producer, s, bytes)) continue;
    // A refused add completes in a task of its own, which may run after the connection dropped
    // the last other reference to an unloaded topic: the alive token says so (holding the topic
    // here instead cost 4 % broker CPU at max rate: its count is shared with the I/O loops).
    pendingWrites_++;
    ledger_->asyncAddEntry(std::move(s.entry), [this, alive = alive_, producer, seq, highest, n,
                                                bytes, txn = s.txn](const Status& st,
                                                                    storage::Position pos) {
      if (!*alive) {
        answeredAfterTopic(*producer, bytes);
        return;
      }
      pendingWrites_--;
      dedup_.completed(producer->name(), static_cast<int64_t>(highest), st, pos,
                       &producer->dedupSlot);
      if (dedup_.snapshotDeferred() && !dedupSnapshotArmed_) armDeferredDedupSnapshot();
      if (st.isOk()) {
        stats_.msgInCounter += n;
        stats_.bytesInCounter += bytes;
        stats_.entriesAddedCounter++;
        producer->msgInCounter += n;
        producer->bytesInCounter += bytes;
        newEntries_ = true;
        if (txn) txnBuffer_.appended(*txn, pos);
        queueReceipt(producer, {}, seq, pos, highest, bytes);
      } else {
        writeFailed(producer, seq, pos, highest, bytes, st);
      }
      if (pendingWrites_ == 0) unfenceWhenDrained();
    });
  }
}

void PersistentTopic::publishNonPersistent(std::vector<PendingSend>& sends) {
  std::vector<Buffer> entries;
  entries.reserve(sends.size());
  for (auto& s : sends) {
    size_t bytes = s.entry.size();
    auto producer = std::move(s.producer);
    if (!s.dropped) cnxOut(producer->sink()).answers.nonPersistentCompleted++;
    if (producer->closed && !producer->fenced.load(std::memory_order_relaxed)) {
      queueUnanswered(producer, bytes);
      continue;
    }
    producer->inFlight++;
    if (s.dropped) {
      // Pulsar's ServerCnx.handleSend over maxConcurrentNonPersistentMessagePerConnection: a
      // receipt for message id -1:-1, the messages counted as the producer's drops.
      producer->msgDropCounter += s.numMessages;
      queueReceipt(producer, {}, s.sequenceId, {-1, -1}, s.highestSequenceId, bytes);
      continue;
    }
    stats_.msgInCounter += s.numMessages;
    stats_.bytesInCounter += bytes;
    stats_.entriesAddedCounter++;
    producer->msgInCounter += s.numMessages;
    producer->bytesInCounter += bytes;
    // Pulsar's NonPersistentTopic.publishMessage: the receipt at once, for message id 0:0.
    queueReceipt(producer, {}, s.sequenceId, {0, 0}, s.highestSequenceId, bytes);
    entries.push_back(std::move(s.entry));
  }
  if (entries.empty()) return;
  for (auto& [subName, sub] : subscriptions_) {
    // A subscription that never had a consumer has no dispatcher: nothing sent, nothing counted.
    if (sub->hasDispatcher()) sub->dispatcher()->sendNonPersistent(entries);
  }
}

bool PersistentTopic::refuseSend(const std::shared_ptr<Producer>& producer, const PendingSend& s,
                                 size_t bytes) {
  const uint64_t seq = s.sequenceId;
  const uint64_t highest = s.highestSequenceId;
  if (terminated_) {
    queueReceipt(producer,
                 protocol::Commands::newSendError(producer->id(), seq, proto::TopicTerminatedError,
                                                  "Topic was already terminated"),
                 seq, {}, highest, bytes);
    return true;
  }
  if (publishFenced_) {
    queueReceipt(
        producer,
        protocol::Commands::newSendError(producer->id(), seq, proto::ServiceNotReady, "fenced"),
        seq, {}, highest, bytes);
    return true;
  }
  if (exceedsMaxDeliveryDelay(s.entry)) {
    // Pulsar's PersistentTopic.publishMessage (isExceedMaximumDeliveryDelay).
    queueReceipt(producer,
                 protocol::Commands::newSendError(
                     producer->id(), seq, proto::NotAllowedError,
                     fmt::format("Exceeds max allowed delivery delay of {} milliseconds",
                                 limits_.delayedDelivery.maxDeliveryDelayInMillis)),
                 seq, {}, highest, bytes);
    return true;
  }
  if (Status refused = ledger_->writeRefusal(); refused.code() == StatusCode::kNoSpace) {
    // The disk is full or above diskUsageThreshold: answered at once, nothing written. The
    // Java client fails that send with NotAllowedException; the C++ client closes its
    // connection and, re-creating the producer, gets ProducerBlockedQuotaExceededException
    // (addProducer), on which it fails its pending sends.
    stats_.publishErrors++;
    logPublishFailure(refused);
    queueReceipt(producer,
                 protocol::Commands::newSendError(producer->id(), seq, proto::NotAllowedError,
                                                  refused.message()),
                 seq, {}, highest, bytes);
    return true;
  }
  return false;
}

bool PersistentTopic::refuseTxnSend(const std::shared_ptr<Producer>& producer, const PendingSend& s,
                                    size_t bytes) {
  // Pulsar's publishTxnMessage: after the dedup check, the transaction buffer may refuse
  // (NotAllowedException -> SEND_ERROR NotAllowedError); nothing is stored.
  std::optional<Status> refused = txnBuffer_.appendRefusal(*s.txn);
  if (!refused) return false;
  if (dedup_.enabled()) {
    dedup_.completed(producer->name(), static_cast<int64_t>(s.highestSequenceId), *refused, {},
                     &producer->dedupSlot);
  }
  stats_.publishErrors++;
  queueReceipt(producer,
               protocol::Commands::newSendError(producer->id(), s.sequenceId,
                                                proto::NotAllowedError, refused->message()),
               s.sequenceId, {}, s.highestSequenceId, bytes);
  return true;
}

void PersistentTopic::endTxn(const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
                             std::function<void(Status)> done) {
  MAGNETAR_DCHECK_ON(executor_);
  auto self = shared_from_this();
  txnBuffer_.endTxn(txn, action, lowWaterMark,
                    [self, done = std::move(done)](const Status& s) { done(s); });
}

storage::Position PersistentTopic::maxReadPosition() const {
  storage::Position last = ledger_->lastWrittenEntry();
  std::optional<storage::Position> limit = txnBuffer_.maxReadPosition();
  return limit && *limit < last ? *limit : last;
}

namespace {

// lastDispatchableEntry's backward scan, one entry per read (markers are few in a row): every
// marker is skipped, as Pulsar's getLastDispatchablePosition skips server-only markers.
void scanBack(const std::shared_ptr<PersistentTopic>& topic, storage::Position p,
              std::function<void(storage::Position, int32_t)> cb) {
  if (p.entryId < 0) return cb(p, 1);
  topic->ledger().asyncReadEntries(
      p, 1, 1, [topic, p, cb = std::move(cb)](const Status& s, std::vector<storage::Entry> es) {
        EntryMetadataPeek md;
        if (!s.isOk() || es.empty() || !peekEntryMetadata(es.front().data.view(), &md).isOk()) {
          return cb(p, 1);
        }
        if (md.hasMarkerType || topic->transactionBuffer().hides(md)) {
          return scanBack(topic, storage::Position{p.ledgerId, p.entryId - 1}, cb);
        }
        cb(p, std::max(1, md.numMessagesInBatch));
      });
}

}  // namespace

void PersistentTopic::lastDispatchableEntry(std::function<void(storage::Position, int32_t)> cb) {
  MAGNETAR_DCHECK_ON(executor_);
  scanBack(shared_from_this(), maxReadPosition(), std::move(cb));
}

void PersistentTopic::writeFailed(const std::shared_ptr<Producer>& producer, uint64_t seq,
                                  storage::Position pos, uint64_t highest, size_t bytes,
                                  const Status& st) {
  if (producer->closed && !producer->fenced.load(std::memory_order_relaxed) && !publishFenced_) {
    // Not stored, and its client resends it after CLOSE_PRODUCER (an unload, a release).
    // (The writes that fail behind a failed write get their SEND_ERROR, as on Pulsar.)
    queueReceipt(producer, {}, seq, pos, highest, bytes, /*silent=*/true);
    if (st.code() != StatusCode::kFenced) fenceAfterFailedWrite(st);
  } else {
    stats_.publishErrors++;
    logPublishFailure(st);
    queueReceipt(producer,
                 protocol::Commands::newSendError(producer->id(), seq, proto::PersistenceError,
                                                  st.message()),
                 seq, pos, highest, bytes);
    if (st.code() == StatusCode::kFenced) {
      if (onFenced_) std::exchange(onFenced_, nullptr)();
    } else {
      fenceAfterFailedWrite(st);
    }
  }
}

void PersistentTopic::fenceAfterFailedWrite(const Status& st) {
  MAGNETAR_DCHECK_ON(executor_);
  // A closed ledger takes no later write either (the topic is closing): nothing to fence.
  if (publishFenced_ || st.code() == StatusCode::kClosed) return;
  publishFenced_ = true;
  MLOG_WARN(
      "{}: a write failed ({}): producers closed, publishing fenced until the {} writes in "
      "flight complete",
      name_.toString(), st.toString(), pendingWrites_);
  closeAllProducers();
}

void PersistentTopic::unfenceWhenDrained() {
  MAGNETAR_DCHECK_ON(executor_);
  if (!publishFenced_ || pendingWrites_ > 0) return;
  dedup_.resetPushed();
  publishFenced_ = false;
  MLOG_INFO("{}: publishing unfenced", name_.toString());
}

void PersistentTopic::logPublishFailure(const Status& st) {
  if (int64_t suppressed = 0; publishErrorLog_.allow(&suppressed)) {
    if (suppressed == 0) {
      MLOG_WARN("publish to {} failed: {}", name_.toString(), st.toString());
    } else {
      MLOG_WARN("publish to {} failed: {} ({} more failed since the previous line)",
                name_.toString(), st.toString(), suppressed);
    }
  }
}

namespace {

// Spare ReceiptBatch storage of the calling thread (the topics of an ml-worker share it): the
// batch a connection gives back from sendAnswers() serves a later pass, so a pass allocates
// nothing.
std::vector<ReceiptBatch>& spareReceiptBatches() {
  thread_local std::vector<ReceiptBatch> spare;
  return spare;
}

ReceiptBatch takeReceiptBatch() {
  auto& spare = spareReceiptBatches();
  if (spare.empty()) return {};
  ReceiptBatch b = std::move(spare.back());
  spare.pop_back();
  return b;
}

void giveReceiptBatch(ReceiptBatch&& b) {
  constexpr size_t kMaxSpare = 1024;
  constexpr size_t kMaxItems = 1 << 16;  // a batch larger than this is not kept
  auto& spare = spareReceiptBatches();
  if (spare.size() >= kMaxSpare || b.items.capacity() == 0 || b.items.capacity() > kMaxItems) {
    return;
  }
  b.clear();
  spare.push_back(std::move(b));
}

}  // namespace

PersistentTopic::CnxOut& PersistentTopic::cnxOut(const std::shared_ptr<ProducerSink>& cnx) {
  CnxOut* out = nullptr;
  for (auto& o : receipts_) {
    if (o.cnx == cnx) {
      out = &o;
      break;
    }
  }
  if (!out) {
    receipts_.push_back(CnxOut{cnx, takeReceiptBatch()});
    out = &receipts_.back();
  }
  if (!flushQueued_) {
    flushQueued_ = true;
    auto self = shared_from_this();
    executor_.execute([self] { self->flushPass(); });
  }
  return *out;
}

void PersistentTopic::queueReceipt(const std::shared_ptr<Producer>& p, Buffer frame, uint64_t seq,
                                   storage::Position pos, uint64_t highestSeq, size_t bytes,
                                   bool silent) {
  ReceiptBatch& out = cnxOut(p->sink()).answers;
  if (!silent && frame) {
    out.addFrame(std::move(frame));
  } else if (!silent) {
    out.addReceipt(p->id(), seq, highestSeq, pos);  // the frame is built on the connection's loop
  }
  out.completed++;
  out.completedBytes += bytes;
  MAGNETAR_DCHECK(p->inFlight > 0);
  if (--p->inFlight == 0 && p->successWhenAnswered) {
    out.addFrame(protocol::Commands::newSuccess(*std::exchange(p->successWhenAnswered, {})));
  }
  if (p->inFlight == 0 && p->closeWhenAnswered) {
    p->closeWhenAnswered = false;
    out.closeAfter.push_back(p->id());
  }
}

void PersistentTopic::queueUnanswered(const std::shared_ptr<Producer>& p, size_t bytes) {
  ReceiptBatch& out = cnxOut(p->sink()).answers;
  out.completed++;
  out.completedBytes += bytes;
}

void PersistentTopic::closeProducerByClient(const std::shared_ptr<Producer>& p,
                                            uint64_t requestId) {
  MAGNETAR_DCHECK_ON(executor_);
  removeProducer(p.get());
  if (p->inFlight > 0) {
    p->successWhenAnswered = requestId;  // queueReceipt adds it behind the last answer
    return;
  }
  // Behind the answers of this pass already queued for the connection.
  cnxOut(p->sink()).answers.addFrame(protocol::Commands::newSuccess(requestId));
}

void PersistentTopic::queueCloseProducer(const std::shared_ptr<Producer>& p) {
  if (p->inFlight > 0) {
    p->closeWhenAnswered = true;  // queueReceipt adds it behind the last answer
    return;
  }
  cnxOut(p->sink()).answers.closeAfter.push_back(p->id());
}

void PersistentTopic::flushPass() {
  flushQueued_ = false;
  for (auto& o : receipts_) {
    if (!o.cnx) continue;  // a producer without a connection (unit tests)
    // One hand-over per connection: the frames, then the release of the answered SENDs, then
    // the CLOSE_PRODUCERs that waited for them, in that order on the connection's loop.
    o.cnx->sendAnswers(o.answers);
    giveReceiptBatch(std::move(o.answers));  // its grown storage serves a later pass
  }
  receipts_.clear();
  if (newEntries_) {
    newEntries_ = false;
    for (auto& [n, sub] : subscriptions_) {
      if (sub->dispatcher()) sub->dispatcher()->onNewEntries();
    }
    for (auto& [cluster, r] : replicators_) r->entriesAdded();
  }
}

void PersistentTopic::subscribe(const SubscribeRequest& req,
                                const std::function<void(Status)>& cb) {
  MAGNETAR_DCHECK_ON(executor_);
  if (req.readCompacted && req.subType != proto::CommandSubscribe::Exclusive &&
      req.subType != proto::CommandSubscribe::Failover) {
    cb(Status::notAllowed("readCompacted only allowed on failover or exclusive subscriptions"));
    return;
  }
  if (limits_.subscribeRate.perConsumer > 0 &&
      !trySubscribePermit(req.consumer->sink()->peerAddress(), req.consumer->name(),
                          req.consumer->id())) {
    cb(Status::notAllowed("Subscribe limited by subscribe rate limit per consumer."));
    return;
  }
  int maxConsumers = limits_.maxConsumers.value_or(options_.maxConsumersPerTopic);
  if (maxConsumers > 0) {
    size_t consumers = 0;
    for (auto& [_, s] : subscriptions_) consumers += s->consumerCount();
    if (consumers >= static_cast<size_t>(maxConsumers)) {
      cb(Status::busy("Topic reached max consumers limit"));
      return;
    }
  }
  auto it = subscriptions_.find(req.subscription);
  if (it != subscriptions_.end()) {
    int perSub = limits_.maxConsumersPerSubscription.value_or(options_.maxConsumersPerSubscription);
    if (perSub > 0 && it->second->consumerCount() >= static_cast<size_t>(perSub)) {
      cb(Status::busy("Subscription reached max consumers limit"));
      return;
    }
    if (req.replicateSubscriptionState) it->second->setReplicated(true, nullptr);
    cb(it->second->addConsumer(req.consumer));
    return;
  }
  int maxSubscriptions = limits_.maxSubscriptions.value_or(options_.maxSubscriptionsPerTopic);
  if (maxSubscriptions > 0 && subscriptions_.size() >= static_cast<size_t>(maxSubscriptions)) {
    cb(Status::notAllowed("Exceed the maximum number of subscriptions of the topic: " +
                          name_.toString()));
    return;
  }
  if (!req.createIfMissing) {
    cb(Status::notFound("Subscription does not exist: " + req.subscription));
    return;
  }
  auto cursor = ledger_->openCursor(req.subscription, req.initialPosition);
  if (!cursor.isOk()) {
    cb(cursor.status());
    return;
  }
  auto* sub =
      subscriptions_
          .emplace(req.subscription, std::make_unique<Subscription>(
                                         req.subscription, *ledger_, **cursor, options_,
                                         name_.toString(), name_.partitionIndex(), req.durable))
          .first->second.get();
  sub->setUnackedLimits(limits_.maxUnackedOnConsumer, limits_.maxUnackedOnSubscription);
  sub->setDelayedDelivery(limits_.delayedDelivery);
  sub->setCompactor(compactor_.get());
  attachTxnBuffer(*sub);
  attachPendingAck(*sub, /*recover=*/false);
  attachRateLimits(*sub);
  if (req.durable) {
    if (req.replicateSubscriptionState) sub->setReplicated(true, nullptr);
    cb(sub->addConsumer(req.consumer));
    return;
  }
  startReader(*sub, req, cb);
}

void PersistentTopic::startReader(Subscription& sub, const SubscribeRequest& req,
                                  const std::function<void(Status)>& cb) {
  // A reader starts at the message id it gave (inclusive; the client drops it when it asked
  // for exclusive). Earliest (-1) and latest (Long.MAX) fall outside the log and are clamped.
  storage::Position start = req.startPosition;
  storage::Position lac = ledger_->lastConfirmedEntry();
  if (start.ledgerId < 0 || start.entryId < 0) {
    start = ledger_->firstPosition();
  } else if (start > lac) {
    start = ledger_->nextValidPosition(lac);
  }
  auto self = shared_from_this();
  std::string name = req.subscription;
  auto consumer = req.consumer;
  sub.resetCursor(start, [self, name, consumer, cb](Status s) {
    auto* sub2 = self->subscription(name);
    if (!sub2) {
      cb(Status::closed("Subscription removed"));
      return;
    }
    if (s.isOk()) s = sub2->addConsumer(consumer);
    if (!s.isOk()) {
      self->ledger_->deleteCursor(name);
      self->subscriptions_.erase(name);
    }
    cb(s);
  });
}

void PersistentTopic::removeConsumer(Consumer* c, const std::string& subscription) {
  MAGNETAR_DCHECK_ON(executor_);
  auto it = subscriptions_.find(subscription);
  if (it == subscriptions_.end()) return;
  it->second->removeConsumer(c);
  markActive();
  if (!it->second->durable() && it->second->consumerCount() == 0) {
    ledger_->deleteCursor(subscription);
    subscriptions_.erase(it);
  }
}

Subscription* PersistentTopic::subscription(const std::string& name) {
  MAGNETAR_DCHECK_ON(executor_);
  auto it = subscriptions_.find(name);
  return it == subscriptions_.end() ? nullptr : it->second.get();
}

Status PersistentTopic::unsubscribe(const std::string& name, Consumer* requester) {
  MAGNETAR_DCHECK_ON(executor_);
  auto it = subscriptions_.find(name);
  if (it == subscriptions_.end()) return Status::notFound("Subscription not found: " + name);
  auto* d = it->second->dispatcher();
  if (d) {
    for (auto& c : d->consumers()) {
      if (c.get() != requester) {
        return Status::busy("Unconnected or shared consumer attempting to unsubscribe");
      }
    }
    if (requester) d->removeConsumer(requester);
  }
  if (auto* pa = it->second->pendingAck()) pa->deleteLog(nullptr);
  Status s = ledger_->deleteCursor(name);
  subscriptions_.erase(it);
  return s;
}

void PersistentTopic::terminate(std::function<void(Status, storage::Position)> done) {
  MAGNETAR_DCHECK_ON(executor_);
  if (!terminated_) {
    terminated_ = true;
    closeAllProducers();
  }
  auto self = shared_from_this();
  ledger_->asyncTerminate([self, done = std::move(done)](const Status& s, storage::Position) {
    if (done) done(s, self->ledger_->lastWrittenEntry());
  });
}

void PersistentTopic::disconnectClients() {
  MAGNETAR_DCHECK_ON(executor_);
  closeAllProducers();
  std::vector<std::pair<std::string, std::shared_ptr<Consumer>>> consumers;
  for (auto& [name, sub] : subscriptions_) {
    if (!sub->dispatcher()) continue;
    for (auto& c : sub->dispatcher()->takeConsumers()) consumers.emplace_back(name, c);
  }
  for (auto& [sub, c] : consumers) {
    removeConsumer(c.get(), sub);
    c->sink()->closeConsumerFromBroker(c->id());
  }
}

Status PersistentTopic::createSubscription(const std::string& name,
                                           storage::InitialPosition initial) {
  MAGNETAR_DCHECK_ON(executor_);
  if (subscriptions_.count(name)) return Status::alreadyExists("Subscription already exists");
  auto cursor = ledger_->openCursor(name, initial);
  if (!cursor.isOk()) return cursor.status();
  auto it =
      subscriptions_
          .emplace(name, std::make_unique<Subscription>(name, *ledger_, **cursor, options_,
                                                        name_.toString(), name_.partitionIndex()))
          .first;
  it->second->setUnackedLimits(limits_.maxUnackedOnConsumer, limits_.maxUnackedOnSubscription);
  it->second->setDelayedDelivery(limits_.delayedDelivery);
  attachTxnBuffer(*it->second);
  attachPendingAck(*it->second, /*recover=*/false);
  attachRateLimits(*it->second);
  return Status::ok();
}

bool PersistentTopic::exceedsMaxDeliveryDelay(const Buffer& entry) const {
  const DelayedDeliveryPolicies& d = limits_.delayedDelivery;
  if (!d.active || d.maxDeliveryDelayInMillis <= 0) return false;
  EntryMetadataPeek md;
  if (!peekEntryMetadata(entry.view(), &md).isOk() || !md.hasDeliverAtTime) return false;
  return md.deliverAtTime - static_cast<int64_t>(md.publishTime) > d.maxDeliveryDelayInMillis;
}

void PersistentTopic::setPolicyLimits(const TopicPolicyLimits& limits) {
  MAGNETAR_DCHECK_ON(executor_);
  const TopicPolicyLimits before = std::exchange(limits_, limits);
  if (limits_.retention) {
    ledger_->setRetention(limits_.retention->retentionTimeInMinutes,
                          limits_.retention->retentionSizeInMB);
  } else {
    ledger_->setRetention(options_.defaultRetentionTimeInMinutes,
                          options_.defaultRetentionSizeInMB);
  }
  for (auto& [n, sub] : subscriptions_) {
    sub->setUnackedLimits(limits_.maxUnackedOnConsumer, limits_.maxUnackedOnSubscription);
    sub->setDelayedDelivery(limits_.delayedDelivery);
    sub->setCompactor(compactor_.get());
  }
  applyRateLimits(before);
}

void PersistentTopic::closeLedger(storage::StatusCallback cb, bool release) {
  MAGNETAR_DCHECK_ON(executor_);
  if (dedupSnapshotTimer_) dedupSnapshotTimer_->cancel();
  // A clean close writes the cursors, a deferred dedup snapshot with them.
  if (!release) dedup_.takeDeferredSnapshot();
  if (!release) txnBuffer_.snapshotIfChanged();
  txnBuffer_.stop();
  closeReplicators();
  disconnectClients();
  subscriptions_.clear();  // before the ledger closes the cursors they point to
  if (!name_.isPersistent()) {
    // Its in-memory ledger holds only the cursors: a non-persistent topic forgets its
    // subscriptions when it is unloaded, as Pulsar's.
    ledger_->asyncDelete(std::move(cb));
  } else if (release) {
    ledger_->asyncRelease(std::move(cb));
  } else {
    ledger_->asyncClose(std::move(cb));
  }
}

void PersistentTopic::deleteLedger(storage::StatusCallback cb) {
  MAGNETAR_DCHECK_ON(executor_);
  if (dedupSnapshotTimer_) dedupSnapshotTimer_->cancel();
  txnBuffer_.stop();
  closeReplicators();
  disconnectClients();
  for (auto& [n, sub] : subscriptions_) {
    if (auto* pa = sub->pendingAck()) pa->deleteLog(nullptr);
  }
  subscriptions_.clear();  // before the ledger drops the cursors they point to
  compactor_->deleteView();
  ledger_->asyncDelete(std::move(cb));
}

}  // namespace magnetar::broker
