#include "broker/transaction/transaction_coordinator.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar::broker {

namespace {

using Op = proto::TransactionMetadataEntry;

std::string statusName(proto::TxnStatus s) { return proto::TxnStatus_Name(s); }

// Pulsar's TransactionNotFoundException text (its typo included).
Status txnNotFound(const TxnID& txn) {
  return Status::notFound("The transaction with this txdID `" + txn.toString() + "`not found ");
}

// Pulsar's InvalidTxnStatusException(txnId, expected, actual) text.
Status invalidStatus(const TxnID& txn, proto::TxnStatus expected, proto::TxnStatus actual) {
  return Status::notAllowed("Expect Txn `" + txn.toString() + "` to be in " + statusName(expected) +
                            " status but it is in " + statusName(actual) + " status");
}

// Pulsar's TransactionUtil.canTransitionTo.
bool canTransition(proto::TxnStatus from, proto::TxnStatus to) {
  switch (from) {
    case proto::OPEN:
      return to != proto::COMMITTED && to != proto::ABORTED;
    case proto::COMMITTING:
      return to == proto::COMMITTING || to == proto::COMMITTED;
    case proto::ABORTING:
      return to == proto::ABORTING || to == proto::ABORTED;
    default:
      return to == from;
  }
}

Op baseEntry(const TxnID& txn, Op::TransactionMetadataOp op, int64_t now) {
  Op e;
  e.set_metadata_op(op);
  e.set_txnid_most_bits(txn.mostBits);
  e.set_txnid_least_bits(txn.leastBits);
  e.set_last_modification_time(static_cast<uint64_t>(now));
  return e;
}

// Waits for n completions; the first error wins. Thread: any (the counter is atomic).
struct Join {
  std::atomic<int> left;
  std::mutex mu;
  Status first;
  std::function<void(Status)> done;
  void complete(const Status& s) {
    {
      std::lock_guard lock(mu);
      if (!s.isOk() && first.isOk()) first = s;
    }
    if (left.fetch_sub(1) == 1) done(first);
  }
};

}  // namespace

proto::ServerError txnServerError(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return proto::TransactionNotFound;
    case StatusCode::kNotAllowed:
      return proto::InvalidTxnStatus;
    case StatusCode::kClosed:
      return proto::TransactionCoordinatorNotFound;
    default:
      return proto::UnknownError;
  }
}

std::string coordinatorNotFoundMessage(uint64_t tcId) {
  return "Transaction coordinator with id " + std::to_string(tcId) + " not found!";
}

TransactionCoordinator::TransactionCoordinator(uint64_t tcId, std::unique_ptr<TransactionLog> log,
                                               TransactionBufferClient* tb, Clock clock,
                                               int64_t maxActive)
    : tcId_(tcId), log_(std::move(log)), tb_(tb), clock_(std::move(clock)), maxActive_(maxActive) {}

void TransactionCoordinator::open(uint64_t tcId, storage::ManagedLedgerFactory& factory,
                                  net::Executor* executor, TransactionBufferClient* tb, Clock clock,
                                  int64_t maxActive, OpenCallback cb) {
  TransactionLog::open(factory, tcId, executor,
                       [tcId, tb, clock = std::move(clock), maxActive,
                        cb = std::move(cb)](Result<std::unique_ptr<TransactionLog>> r) mutable {
                         if (!r.isOk()) return cb(r.status());
                         std::shared_ptr<TransactionCoordinator> tc(new TransactionCoordinator(
                             tcId, std::move(r).value(), tb, std::move(clock), maxActive));
                         tc->sequence_ = tc->log_->storedMaxLocalTxnId();
                         tc->recoverStartMs_ = tc->clock_();
                         tc->log_->replay(
                             [tc](storage::Position p, const Op& e) { tc->replayEntry(p, e); },
                             [tc, cb = std::move(cb)](const Status& s) {
                               if (!s.isOk()) {
                                 tc->state_ = State::kClosed;
                                 return tc->log_->close([cb, s](const Status&) { cb(s); });
                               }
                               tc->finishRecovery();
                               cb(tc);
                             });
                       });
}

void TransactionCoordinator::replayEntry(storage::Position pos, const Op& e) {
  TxnID id{e.txnid_most_bits(), e.txnid_least_bits()};
  if (e.has_max_local_txn_id()) {
    sequence_ = std::max(sequence_, static_cast<int64_t>(e.max_local_txn_id()));
  }
  if (e.metadata_op() == Op::NEW) {
    sequence_ = std::max(sequence_, static_cast<int64_t>(id.leastBits));
    TxnMeta& m = txns_[id];
    m.id = id;
    m.timeoutMs = e.timeout_ms();
    m.startTimeMs = e.start_time();
    m.lastModificationTimeMs = e.last_modification_time();
    m.owner = e.owner();
    m.positions.push_back(pos);
    return;
  }
  auto it = txns_.find(id);
  if (it == txns_.end()) {
    log_->deletePositions({pos}, sequence_);  // a txn that ended: its leftover entry
    return;
  }
  TxnMeta& m = it->second;
  m.positions.push_back(pos);
  m.lastModificationTimeMs = e.last_modification_time();
  if (e.metadata_op() == Op::ADD_PARTITION) {
    m.producedPartitions.insert(e.partitions().begin(), e.partitions().end());
  } else if (e.metadata_op() == Op::ADD_SUBSCRIPTION) {
    for (const auto& s : e.subscriptions()) m.ackedPartitions.insert({s.topic(), s.subscription()});
  } else if (e.new_status() == proto::COMMITTED || e.new_status() == proto::ABORTED) {
    log_->deletePositions(m.positions, sequence_);
    txns_.erase(it);
  } else {
    m.status = e.new_status();
  }
}

void TransactionCoordinator::finishRecovery() {
  MAGNETAR_DCHECK_ON(*executor());
  state_ = State::kReady;
  recoverEndMs_ = clock_();
  seqStat_ = sequence_;
  active_ = static_cast<int64_t>(txns_.size());
  lowWaterMarkStat_ = lowWaterMark();
  MLOG_INFO("Transaction coordinator {} recovered: {} ongoing transactions, sequence {}", tcId_,
            txns_.size(), sequence_);
  for (auto& [id, m] : txns_) {
    if (m.status == proto::COMMITTING || m.status == proto::ABORTING) retry_.insert(id);
  }
  tick();
}

Status TransactionCoordinator::checkReady() const {
  if (state_ == State::kReady) return Status::ok();
  return Status::closed(coordinatorNotFoundMessage(tcId_));
}

void TransactionCoordinator::recordLatency(int64_t ms) {
  size_t i = 0;
  while (i < CoordinatorStats::kLatencyBucketsMs.size() &&
         ms > CoordinatorStats::kLatencyBucketsMs[i]) {
    ++i;
  }
  latency_[i].fetch_add(1, std::memory_order_relaxed);
  latencySumMs_.fetch_add(ms, std::memory_order_relaxed);
  appendCount_.fetch_add(1, std::memory_order_relaxed);
}

void TransactionCoordinator::recordExecution(const TxnID& txn) {
  auto it = txns_.find(txn);
  if (it == txns_.end()) return;
  int64_t ms = std::max<int64_t>(0, clock_() - static_cast<int64_t>(it->second.startTimeMs));
  size_t i = 0;
  while (i < CoordinatorStats::kExecutionBucketsMs.size() &&
         ms > CoordinatorStats::kExecutionBucketsMs[i]) {
    ++i;
  }
  execution_[i].fetch_add(1, std::memory_order_relaxed);
}

void TransactionCoordinator::appendTimed(const Op& e,
                                         std::function<void(Status, storage::Position)> cb) {
  int64_t start = clock_();
  log_->append(e, [self = shared_from_this(), start, cb = std::move(cb)](const Status& s,
                                                                         storage::Position p) {
    self->recordLatency(std::max<int64_t>(0, self->clock_() - start));
    cb(s, p);
  });
}

void TransactionCoordinator::newTransaction(uint64_t timeoutMs, std::string owner,
                                            std::function<void(Result<TxnID>)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (Status s = checkReady(); !s.isOk()) return cb(s);
  if (maxActive_ > 0 && static_cast<int64_t>(txns_.size()) >= maxActive_) {
    return cb(Status::busy("New txn op reach max active txn! tcId : " + std::to_string(tcId_)));
  }
  TxnID id{tcId_, static_cast<uint64_t>(++sequence_)};
  seqStat_ = sequence_;
  newing_.insert(sequence_);
  const int64_t now = clock_();
  Op e = baseEntry(id, Op::NEW, now);
  e.set_start_time(static_cast<uint64_t>(now));
  e.set_timeout_ms(timeoutMs);
  e.set_max_local_txn_id(static_cast<uint64_t>(sequence_));
  if (!owner.empty()) e.set_owner(owner);
  appendTimed(e, [self = shared_from_this(), id, timeoutMs, now, owner = std::move(owner),
                  cb = std::move(cb)](const Status& s, storage::Position p) {
    self->newing_.erase(static_cast<int64_t>(id.leastBits));
    if (!s.isOk()) return cb(s);
    TxnMeta& m = self->txns_[id];
    m.id = id;
    m.timeoutMs = timeoutMs;
    m.startTimeMs = m.lastModificationTimeMs = static_cast<uint64_t>(now);
    m.owner = owner;
    m.positions.push_back(p);
    self->created_++;
    self->active_ = static_cast<int64_t>(self->txns_.size());
    self->lowWaterMarkStat_ = self->lowWaterMark();
    cb(id);
  });
}

void TransactionCoordinator::addProducedPartitions(const TxnID& txn,
                                                   std::vector<std::string> partitions,
                                                   std::function<void(Status)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (Status s = checkReady(); !s.isOk()) return cb(s);
  auto it = txns_.find(txn);
  if (it == txns_.end()) return cb(txnNotFound(txn));
  if (it->second.status != proto::OPEN)
    return cb(invalidStatus(txn, proto::OPEN, it->second.status));
  Op e = baseEntry(txn, Op::ADD_PARTITION, clock_());
  for (const auto& p : partitions) e.add_partitions(p);
  appendTimed(e, [self = shared_from_this(), txn, partitions = std::move(partitions),
                  cb = std::move(cb)](const Status& s, storage::Position p) {
    if (!s.isOk()) return cb(s);
    auto it = self->txns_.find(txn);
    if (it == self->txns_.end() || it->second.status != proto::OPEN) {
      self->log_->deletePositions({p}, self->sequence_);
      return cb(it == self->txns_.end() ? txnNotFound(txn)
                                        : invalidStatus(txn, proto::OPEN, it->second.status));
    }
    it->second.producedPartitions.insert(partitions.begin(), partitions.end());
    it->second.positions.push_back(p);
    cb(Status::ok());
  });
}

void TransactionCoordinator::addAckedSubscriptions(const TxnID& txn,
                                                   std::vector<TxnSubscription> subscriptions,
                                                   std::function<void(Status)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (Status s = checkReady(); !s.isOk()) return cb(s);
  auto it = txns_.find(txn);
  if (it == txns_.end()) return cb(txnNotFound(txn));
  if (it->second.status != proto::OPEN)
    return cb(invalidStatus(txn, proto::OPEN, it->second.status));
  Op e = baseEntry(txn, Op::ADD_SUBSCRIPTION, clock_());
  for (const auto& s : subscriptions) {
    proto::Subscription* sub = e.add_subscriptions();
    sub->set_topic(s.topic);
    sub->set_subscription(s.subscription);
  }
  appendTimed(e, [self = shared_from_this(), txn, subscriptions = std::move(subscriptions),
                  cb = std::move(cb)](const Status& s, storage::Position p) {
    if (!s.isOk()) return cb(s);
    auto it = self->txns_.find(txn);
    if (it == self->txns_.end() || it->second.status != proto::OPEN) {
      self->log_->deletePositions({p}, self->sequence_);
      return cb(it == self->txns_.end() ? txnNotFound(txn)
                                        : invalidStatus(txn, proto::OPEN, it->second.status));
    }
    it->second.ackedPartitions.insert(subscriptions.begin(), subscriptions.end());
    it->second.positions.push_back(p);
    cb(Status::ok());
  });
}

void TransactionCoordinator::updateStatus(const TxnID& txn, proto::TxnStatus newStatus,
                                          proto::TxnStatus expected,
                                          std::function<void(Status)> cb) {
  auto it = txns_.find(txn);
  if (it == txns_.end()) return cb(txnNotFound(txn));
  if (it->second.status == newStatus) return cb(Status::ok());
  if (it->second.status != expected) return cb(invalidStatus(txn, expected, it->second.status));
  Op e = baseEntry(txn, Op::UPDATE, clock_());
  e.set_expected_status(expected);
  e.set_new_status(newStatus);
  appendTimed(e, [self = shared_from_this(), txn, newStatus, expected, cb = std::move(cb)](
                     const Status& s, storage::Position p) {
    if (!s.isOk()) return cb(s);
    auto it = self->txns_.find(txn);
    if (it == self->txns_.end() || it->second.status != expected ||
        !canTransition(it->second.status, newStatus)) {
      self->log_->deletePositions({p}, self->sequence_);
      return cb(it == self->txns_.end() ? txnNotFound(txn)
                                        : invalidStatus(txn, expected, it->second.status));
    }
    it->second.status = newStatus;
    it->second.positions.push_back(p);
    if (newStatus == proto::COMMITTED || newStatus == proto::ABORTED) {
      (newStatus == proto::COMMITTED ? self->committed_ : self->aborted_)++;
      self->recordExecution(txn);
      self->forget(txn);
    }
    cb(Status::ok());
  });
}

void TransactionCoordinator::forget(const TxnID& txn) {
  auto it = txns_.find(txn);
  if (it == txns_.end()) return;
  log_->deletePositions(it->second.positions, sequence_);
  txns_.erase(it);
  retry_.erase(txn);
  active_ = static_cast<int64_t>(txns_.size());
  lowWaterMarkStat_ = lowWaterMark();
}

void TransactionCoordinator::endTransaction(const TxnID& txn, proto::TxnAction action,
                                            std::function<void(Status)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (Status s = checkReady(); !s.isOk()) return cb(s);
  if (action != proto::COMMIT && action != proto::ABORT) {
    return cb(Status::unsupported("Transaction `" + txn.toString() +
                                  "` receive unsupported txnAction " + std::to_string(action)));
  }
  const proto::TxnStatus ending = action == proto::COMMIT ? proto::COMMITTING : proto::ABORTING;
  auto it = txns_.find(txn);
  if (it == txns_.end()) return cb(txnNotFound(txn));
  const proto::TxnStatus status = it->second.status;
  if (status == ending) return fanOut(txn, action, std::move(cb));
  if (status != proto::OPEN) return cb(invalidStatus(txn, ending, status));
  updateStatus(
      txn, ending, proto::OPEN,
      [self = shared_from_this(), txn, action, cb = std::move(cb)](const Status& s) mutable {
        if (!s.isOk()) return cb(s);
        self->fanOut(txn, action, std::move(cb));
      });
}

void TransactionCoordinator::fanOut(const TxnID& txn, proto::TxnAction action,
                                    std::function<void(Status)> cb) {
  TxnMeta& m = txns_.at(txn);
  if (tb_ == nullptr && (!m.producedPartitions.empty() || !m.ackedPartitions.empty())) {
    retry_.insert(txn);
    return cb(Status::unsupported("no transaction buffer client in this build: cannot end " +
                                  txn.toString() + " on its topics"));
  }
  m.endInFlight = true;
  retry_.erase(txn);
  const int64_t lwm = lowWaterMark();
  const proto::TxnStatus final = action == proto::COMMIT ? proto::COMMITTED : proto::ABORTED;
  const proto::TxnStatus ending = action == proto::COMMIT ? proto::COMMITTING : proto::ABORTING;
  auto join = std::make_shared<Join>();
  join->left = static_cast<int>(m.producedPartitions.size() + m.ackedPartitions.size()) + 1;
  join->done = [self = shared_from_this(), txn, final, ending,
                cb = std::move(cb)](const Status& s) {
    self->executor()->execute([self, txn, final, ending, s, cb] {
      auto it = self->txns_.find(txn);
      if (it != self->txns_.end()) it->second.endInFlight = false;
      if (!s.isOk()) {
        MLOG_WARN("Ending transaction {} failed, retried at the next tick: {}", txn.toString(),
                  s.toString());
        if (it != self->txns_.end()) self->retry_.insert(txn);
        return cb(s);
      }
      self->updateStatus(txn, final, ending, cb);
    });
  };
  for (const auto& sub : m.ackedPartitions) {
    tb_->endTxnOnSubscription(sub.topic, sub.subscription, txn, action, lwm,
                              [join](const Status& s) { join->complete(s); });
  }
  for (const auto& topic : m.producedPartitions) {
    tb_->endTxnOnTopic(topic, txn, action, lwm, [join](const Status& s) { join->complete(s); });
  }
  join->complete(Status::ok());
}

void TransactionCoordinator::tick() {
  MAGNETAR_DCHECK_ON(*executor());
  if (state_ != State::kReady) return;
  const int64_t now = clock_();
  std::vector<TxnID> expired;
  for (const auto& [id, m] : txns_) {
    if (m.status == proto::OPEN && static_cast<int64_t>(m.startTimeMs + m.timeoutMs) <= now) {
      expired.push_back(id);
    }
  }
  for (const TxnID& id : expired) {
    timedOut_++;
    MLOG_INFO("Transaction {} timed out: aborting it", id.toString());
    endTransaction(id, proto::ABORT, [](const Status&) {});
  }
  std::set<TxnID> again = std::exchange(retry_, {});
  for (const TxnID& id : again) {
    auto it = txns_.find(id);
    if (it == txns_.end() || it->second.endInFlight) continue;
    proto::TxnAction action = it->second.status == proto::COMMITTING ? proto::COMMIT : proto::ABORT;
    fanOut(id, action, [](const Status&) {});
  }
}

const TxnMeta* TransactionCoordinator::find(const TxnID& txn) const {
  MAGNETAR_DCHECK_ON(*executor());
  auto it = txns_.find(txn);
  return it == txns_.end() ? nullptr : &it->second;
}

int64_t TransactionCoordinator::lowWaterMark() const {
  if (txns_.empty() && newing_.empty()) return 0;
  int64_t first = newing_.empty() ? std::numeric_limits<int64_t>::max() : *newing_.begin();
  if (!txns_.empty()) first = std::min(first, static_cast<int64_t>(txns_.begin()->first.leastBits));
  return first - 1;
}

CoordinatorStats TransactionCoordinator::stats() const {
  CoordinatorStats s;
  s.coordinatorId = tcId_;
  s.active = active_.load();
  s.created = created_.load();
  s.committed = committed_.load();
  s.aborted = aborted_.load();
  s.timedOut = timedOut_.load();
  s.sequenceId = seqStat_.load();
  s.lowWaterMark = lowWaterMarkStat_.load();
  for (size_t i = 0; i < latency_.size(); ++i) s.appendLatencyBuckets[i] = latency_[i].load();
  s.appendLatencySumMs = latencySumMs_.load();
  s.appendCount = appendCount_.load();
  for (size_t i = 0; i < execution_.size(); ++i)
    s.executionLatencyBuckets[i] = execution_[i].load();
  s.recoverStartTimeMs = recoverStartMs_.load();
  s.recoverEndTimeMs = recoverEndMs_.load();
  switch (state_.load()) {
    case State::kInitializing:
      s.state = "Initializing";
      break;
    case State::kReady:
      s.state = "Ready";
      break;
    case State::kClosed:
      s.state = "Close";
      break;
  }
  return s;
}

void TransactionCoordinator::close(std::function<void(Status)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  state_ = State::kClosed;
  txns_.clear();
  retry_.clear();
  log_->close(std::move(cb));
}

}  // namespace magnetar::broker
