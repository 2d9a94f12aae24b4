// ProducerImpl's hot path: encoding SEND frames, flushing them, receipts and errors, and the
// batch/send-timeout timer. Set-up, reconnects, flush and close are in producer_impl.cc.
#include <time.h>

#include <boost/asio/post.hpp>
#include <utility>

#include "base/clock.h"
#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "client/producer_impl.h"
#include "client/transaction_impl.h"
#include "protocol/commands.h"
#include "protocol/constants.h"

namespace magnetar::client {

using protocol::Commands;
using Clock = std::chrono::steady_clock;

namespace {
// Compact the frame log once this many bytes before the oldest pending frame are dead.
constexpr size_t kCompactThreshold = 256 * 1024;

// Send-timeout bookkeeping needs no more than a few ms of precision: the coarse clock is cheaper.
Clock::time_point coarseNow() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace

// ---- Sending ------------------------------------------------------------------------------

namespace {
// A copy of an OutgoingMessage whose send waits (for its transaction's partition registration).
struct OwnedMessage {
  explicit OwnedMessage(const OutgoingMessage& m)
      : payload(m.payload), key(m.key), orderingKey(m.orderingKey), msg(m) {
    msg.payload = payload;
    msg.key = key;
    msg.orderingKey = orderingKey;
    msg.txn = nullptr;
  }
  std::string payload, key, orderingKey;
  OutgoingMessage msg;
};
}  // namespace

void ProducerImpl::sendAsync(const OutgoingMessage& m, SendCallback cb) {
  if (m.txn == nullptr) {
    enqueue(m, nullptr, std::move(cb));
    return;
  }
  std::shared_ptr<TransactionImpl> txn = m.txn->impl();
  if (!txn) return cb(Status::invalidArgument("empty transaction handle"), MessageId{});
  Status s = txn->beginOp();
  if (!s.isOk()) return cb(s, MessageId{});
  SendCallback done = [txn, cb = std::move(cb)](const Status& s, const MessageId& id) {
    txn->endOp(s);
    cb(s, id);
  };
  TxnID id = txn->id();
  // Registered already (and every send queued behind the registration is out): sent now. Else a
  // copy waits behind the registration, in call order.
  if (txn->partitionRegistered(topic_)) return enqueue(m, &id, std::move(done));
  auto owned = std::make_shared<OwnedMessage>(m);
  txn->registerPartition(topic_, [owned, id, self = shared_from_this(),
                                  done = std::move(done)](const Status& r) mutable {
    if (!r.isOk()) return done(r, MessageId{});
    self->enqueue(owned->msg, &id, std::move(done));
  });
}

void ProducerImpl::enqueue(const OutgoingMessage& m, const TxnID* txn, SendCallback cb) {
  bool needFlush = false;
  bool arm = false;
  {
    UniqueLock lock(mu_);
    if (state_ == State::kClosing || state_ == State::kClosed || state_ == State::kFailed) {
      lock.unlock();
      cb(Status::closed("producer closed"), MessageId{});
      return;
    }
    if (m.payload.size() > protocol::kDefaultMaxMessageSize) {
      lock.unlock();
      cb(Status::tooLarge("message of " + std::to_string(m.payload.size()) +
                          " bytes exceeds maxMessageSize"),
         MessageId{});
      return;
    }
    size_t max = static_cast<size_t>(std::max(0, config_.maxPendingMessages));
    if (max > 0 && pendingMessages_ >= max) {
      if (!config_.blockIfQueueFull || client_->loopForSlot(slot_).inExecutorThread()) {
        lock.unlock();
        cb(Status::busy("ProducerQueueIsFull"), MessageId{});
        return;
      }
      ++blockedSenders_;
      notFull_.wait(lock.native(), [&]() REQUIRES(mu_) {
        return pendingMessages_ < max || state_ == State::kClosing || state_ == State::kClosed ||
               state_ == State::kFailed;
      });
      --blockedSenders_;
      if (pendingMessages_ >= max) {
        lock.unlock();
        cb(Status::closed("producer closed"), MessageId{});
        return;
      }
    }
    uint64_t seq = m.sequenceId ? *m.sequenceId : nextSequenceId_;
    if (seq >= nextSequenceId_) nextSequenceId_ = seq + 1;
    ++pendingMessages_;
    ++enqueued_;
    if (config_.batchingEnabled) {
      // A batch holds the messages of one transaction (or none), as Pulsar's containers.
      std::optional<TxnID> t = txn ? std::optional<TxnID>(*txn) : std::nullopt;
      if (!batch_.accepts(m) || (!batch_.empty() && batchTxn_ != t)) encodeBatchLocked();
      batchTxn_ = t;
      if (batch_.add(m, seq, std::move(cb))) encodeBatchLocked();
    } else {
      encodeSingleLocked(m, seq, txn, std::move(cb));
    }
    needFlush = needFlushLocked();
    if (!timerArmed_ && (config_.batchingEnabled || config_.sendTimeout.count() > 0)) {
      timerArmed_ = arm = true;
    }
  }
  if (needFlush) postFlush();
  if (arm) {
    std::weak_ptr<ProducerImpl> weak = weak_from_this();
    client_->loopForSlot(slot_).execute([weak] {
      if (auto self = weak.lock()) self->armTimer();
    });
  }
}

void ProducerImpl::encodeSingleLocked(const OutgoingMessage& m, uint64_t seq, const TxnID* txn,
                                      SendCallback cb) {
  md_.set_sequence_id(seq);
  md_.set_publish_time(nowMs());
  if (m.key.empty()) {
    md_.clear_partition_key();
  } else {
    md_.mutable_partition_key()->assign(m.key.data(), m.key.size());
  }
  if (m.orderingKey.empty()) {
    md_.clear_ordering_key();
  } else {
    md_.mutable_ordering_key()->assign(m.orderingKey.data(), m.orderingKey.size());
  }
  md_.clear_properties();
  for (const auto& [k, v] : m.properties) {
    auto* kv = md_.add_properties();
    kv->set_key(k);
    kv->set_value(v);
  }
  if (m.eventTime != 0) {
    md_.set_event_time(m.eventTime);
  } else {
    md_.clear_event_time();
  }
  send_.Clear();
  send_.set_producer_id(producerId_);
  send_.set_sequence_id(seq);
  setTxnFields(txn, md_, send_);
  Commands::appendSend(send_, md_, m.payload, &log_);
  auto sentAt = config_.sendTimeout.count() > 0 ? coarseNow() : Clock::time_point{};
  pending_.push_back(PendingSend{seq, logBase_ + log_.size(), 1, false, sentAt});
  callbacks_.push_back(std::move(cb));
}

void ProducerImpl::encodeBatchLocked() {
  if (batch_.empty()) return;
  uint64_t publishTime = nowMs();
  auto sentAt = config_.sendTimeout.count() > 0 ? coarseNow() : Clock::time_point{};
  // The callback runs inside drain(), mu_ still held (the analysis cannot see through it).
  batch_.drain([&](BatchBuilder& b) NO_THREAD_SAFETY_ANALYSIS {
    uint64_t first = b.firstSequenceId();
    int32_t n = b.numMessages();
    b.encode(producerId_, publishTime, md_, send_, &log_, &callbacks_,
             batchTxn_ ? &*batchTxn_ : nullptr);
    pending_.push_back(PendingSend{first, logBase_ + log_.size(), n, true, sentAt});
  });
}

bool ProducerImpl::needFlushLocked() {
  if (flushScheduled_ || cnx_ == nullptr) return false;
  if (state_ != State::kReady && state_ != State::kClosing) return false;
  if (flushedTo_ >= logBase_ + log_.size()) return false;
  flushScheduled_ = true;
  return true;
}

void ProducerImpl::postFlush() {
  auto& loop = client_->loopForSlot(slot_);
  auto self = shared_from_this();
  if (loop.inExecutorThread()) {
    // After the current handler: everything sent during this pass goes in one write.
    boost::asio::post(loop.context(), [self] { self->flush(); });
  } else {
    loop.execute([self] { self->flush(); });
  }
}

void ProducerImpl::flush() {
  MutexLock lock(mu_);
  flushScheduled_ = false;
  if (cnx_ == nullptr || (state_ != State::kReady && state_ != State::kClosing)) return;
  uint64_t end = logBase_ + log_.size();
  if (flushedTo_ >= end) return;
  const char* p = log_.data() + (flushedTo_ - logBase_);
  size_t n = static_cast<size_t>(end - flushedTo_);
  cnx_->write([p, n](net::FrameBatch& b) { b.appendBytes(p, n); });
  flushedTo_ = end;
}

// ---- Results ------------------------------------------------------------------------------

void ProducerImpl::receiptsReceived(std::span<const Receipt> receipts) {
  Completion done;
  std::shared_ptr<ClientConnection> toClose;
  {
    MutexLock lock(mu_);
    for (const Receipt& r : receipts) {
      if (pending_.empty()) break;
      const PendingSend ps = pending_.front();
      if (r.sequenceId < ps.sequenceId) continue;  // a duplicate of a re-sent message
      if (r.sequenceId > ps.sequenceId) {
        MLOG_WARN("producer {} on {}: receipt for {} while {} is the oldest pending; reconnecting",
                  producerName_, topic_, r.sequenceId, ps.sequenceId);
        toClose = cnx_;
        break;
      }
      pending_.pop_front();
      MessageId id{r.ledgerId, r.entryId, partition_, -1, 0};
      if (ps.batch) id.batchSize = ps.numMessages;
      for (int32_t i = 0; i < ps.numMessages; ++i) {
        if (ps.batch) id.batchIndex = i;
        completions_.emplace_back(std::move(callbacks_.front()), id);
        callbacks_.pop_front();
      }
      pendingMessages_ -= static_cast<size_t>(ps.numMessages);
      uint64_t highest = std::max(r.highestSequenceId, r.sequenceId);
      if (static_cast<int64_t>(highest) > lastSequenceReceipted_) {
        lastSequenceReceipted_ = static_cast<int64_t>(highest);
      }
      headOffset_ = ps.frameEnd;
      completeLocked(static_cast<uint64_t>(ps.numMessages), Status::ok(), &done);
    }
    compactLocked();
    // Blocked senders wake at three quarters of the bound (hysteresis: one wake-up per burst).
    if (blockedSenders_ > 0 && pendingMessages_ <= notifyBelow_) notFull_.notify_all();
  }
  // Home loop only, so the scratch vector needs no lock; callbacks may call sendAsync.
  for (auto& [cb, id] : completions_) cb(Status::ok(), id);
  completions_.clear();
  for (auto& [cb, st] : done) cb(st);
  if (toClose) toClose->close();
}

void ProducerImpl::sendErrorReceived(const proto::CommandSendError& e, ClientConnection* cnx) {
  std::vector<SendCallback> failed;
  Completion done;
  Status s = serverErrorStatus(e.error(), e.message());
  {
    MutexLock lock(mu_);
    if (pending_.empty() || pending_.front().sequenceId != e.sequence_id()) return;
    if (e.error() == proto::ChecksumError) {
      // Pulsar re-sends after a checksum error: reconnecting re-sends from the oldest pending.
      MLOG_WARN("producer {} on {}: checksum error on {}, re-sending", producerName_, topic_,
                e.sequence_id());
    } else {
      PendingSend ps = pending_.front();
      pending_.pop_front();
      for (int32_t i = 0; i < ps.numMessages; ++i) {
        failed.push_back(std::move(callbacks_.front()));
        callbacks_.pop_front();
      }
      pendingMessages_ -= static_cast<size_t>(ps.numMessages);
      headOffset_ = ps.frameEnd;
      compactLocked();
      completeLocked(static_cast<uint64_t>(ps.numMessages), s, &done);
      if (blockedSenders_ > 0) notFull_.notify_all();
    }
  }
  if (e.error() == proto::ChecksumError) {
    cnx->close();
    return;
  }
  MLOG_WARN("producer on {}: send {} failed: {}", topic_, e.sequence_id(), s.toString());
  for (auto& cb : failed) cb(s, MessageId{});
  for (auto& [cb, st] : done) cb(st);
}

void ProducerImpl::failAllLocked(const Status& s, std::vector<SendCallback>* out,
                                 Completion* done) {
  for (auto& cb : callbacks_) out->push_back(std::move(cb));
  callbacks_.clear();
  pending_.clear();
  uint64_t n = pendingMessages_;
  pendingMessages_ = 0;
  headOffset_ = logBase_ + log_.size();
  if (flushedTo_ < headOffset_) flushedTo_ = headOffset_;
  compactLocked();
  completeLocked(n, s, done);
  notFull_.notify_all();
}

void ProducerImpl::compactLocked() {
  if (pending_.empty() && flushedTo_ >= logBase_ + log_.size()) {
    logBase_ += log_.size();
    log_.clear();
    return;
  }
  size_t dead = static_cast<size_t>(headOffset_ - logBase_);
  if (dead >= kCompactThreshold && dead * 2 >= log_.size()) {
    log_.erase(0, dead);
    logBase_ = headOffset_;
  }
}

void ProducerImpl::completeLocked(uint64_t n, const Status& s, Completion* done) {
  completed_ += n;
  while (!flushWaiters_.empty() && flushWaiters_.front().target <= completed_) {
    done->emplace_back(std::move(flushWaiters_.front().cb), s);
    flushWaiters_.pop_front();
  }
}

// ---- Timer: batch flush and send timeout ----------------------------------------------------

std::chrono::microseconds ProducerImpl::timerPeriod() const {
  using std::chrono::microseconds;
  if (config_.batchingEnabled) return std::max(microseconds(100), config_.batchingMaxPublishDelay);
  auto t = std::chrono::duration_cast<microseconds>(config_.sendTimeout) / 10;
  return std::clamp(t, microseconds(10000), microseconds(1000000));
}

void ProducerImpl::armTimer() {
  timer_.expires_after(timerPeriod());
  std::weak_ptr<ProducerImpl> weak = weak_from_this();
  timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->onTimer();
  });
}

void ProducerImpl::onTimer() {
  std::vector<SendCallback> failed;
  Completion done;
  bool needFlush = false;
  bool rearm = false;
  Status timeout = Status::error(StatusCode::kTimeout, "send timed out");
  {
    MutexLock lock(mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) {
      timerArmed_ = false;
      return;
    }
    encodeBatchLocked();
    needFlush = needFlushLocked();
    if (config_.sendTimeout.count() > 0 && !pending_.empty() &&
        coarseNow() - pending_.front().sentAt >= config_.sendTimeout) {
      MLOG_WARN("producer {} on {}: {} messages timed out", producerName_, topic_,
                pendingMessages_);
      failAllLocked(timeout, &failed, &done);
    }
    rearm = !pending_.empty() || !batch_.empty();
    timerArmed_ = rearm;
  }
  if (needFlush) flush();
  if (rearm) armTimer();
  for (auto& cb : failed) cb(timeout, MessageId{});
  for (auto& [cb, st] : done) cb(st);
}

}  // namespace magnetar::client
