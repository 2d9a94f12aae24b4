#include "client/transaction_impl.h"

#include <fmt/format.h>

#include <boost/asio/steady_timer.hpp>

#include "base/logging.h"
#include "client/backoff.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "protocol/commands.h"

namespace magnetar::client {

using protocol::Commands;
using Clock = std::chrono::steady_clock;
using CnxResult = Result<std::shared_ptr<ClientConnection>>;

std::string TxnID::toString() const { return fmt::format("({},{})", mostBits, leastBits); }

proto::ServerError tcResponseError(const proto::BaseCommand& cmd) {
  using T = proto::BaseCommand;
  auto err = [](const auto& r) { return r.has_error() ? r.error() : proto::UnknownError; };
  switch (cmd.type()) {
    case T::TC_CLIENT_CONNECT_RESPONSE:
      return err(cmd.tcclientconnectresponse());
    case T::NEW_TXN_RESPONSE:
      return err(cmd.newtxnresponse());
    case T::ADD_PARTITION_TO_TXN_RESPONSE:
      return err(cmd.addpartitiontotxnresponse());
    case T::ADD_SUBSCRIPTION_TO_TXN_RESPONSE:
      return err(cmd.addsubscriptiontotxnresponse());
    case T::END_TXN_RESPONSE:
      return err(cmd.endtxnresponse());
    default:
      return proto::UnknownError;
  }
}

// ---- TcHandler ------------------------------------------------------------------------------

struct TcHandler::Op {
  std::function<Buffer(uint64_t)> build;
  TcResponseCallback cb;
  Clock::time_point deadline;
  Backoff backoff;
};

TcHandler::TcHandler(std::shared_ptr<ClientImpl> client, uint64_t tcId, std::string assignTopic)
    : client_(std::move(client)),
      tcId_(tcId),
      assignTopic_(std::move(assignTopic)),
      slot_(client_->slotFor(tcId)) {}

void TcHandler::connect(StatusCallback cb) {
  withConnection([cb = std::move(cb)](const CnxResult& r) { cb(r ? Status::ok() : r.status()); });
}

void TcHandler::withConnection(std::function<void(CnxResult)> cb) {
  std::shared_ptr<ClientConnection> ready;
  std::function<void(CnxResult)> now;  // cb when a connection is ready, else cb waits
  bool start = false;
  {
    MutexLock lock(mu_);
    if (cnx_ && !cnx_->isClosed()) {
      ready = cnx_;
      now = std::move(cb);
    } else {
      cnx_.reset();
      waiters_.push_back(std::move(cb));
      start = !connecting_;
      connecting_ = true;
    }
  }
  if (now) {
    now(std::move(ready));
  } else if (start) {
    startConnect();
  }
}

void TcHandler::startConnect() {
  auto self = shared_from_this();
  client_->connectionForTopic(assignTopic_, slot_, [self](CnxResult r) {
    if (!r) {
      self->connected(r.status());
      return;
    }
    auto cnx = *r;
    uint64_t id = self->client_->newRequestId();
    cnx->sendRequest(id, Commands::newTcClientConnectRequest(self->tcId_, id),
                     [self, cnx](const Status& s, const proto::BaseCommand&) {
                       if (!s.isOk()) {
                         self->connected(s);
                       } else {
                         self->connected(cnx);
                       }
                     });
  });
}

void TcHandler::connected(CnxResult r) {
  std::vector<std::function<void(CnxResult)>> waiters;
  {
    MutexLock lock(mu_);
    connecting_ = false;
    if (r) cnx_ = *r;
    waiters.swap(waiters_);
  }
  if (!r) {
    MLOG_INFO("transaction coordinator {}: cannot connect: {}", tcId_, r.status().toString());
  }
  for (auto& w : waiters) w(r);
}

void TcHandler::request(std::function<Buffer(uint64_t)> build, TcResponseCallback cb) {
  const auto& cfg = client_->config();
  auto op =
      std::make_shared<Op>(Op{std::move(build), std::move(cb), Clock::now() + cfg.operationTimeout,
                              Backoff(cfg.initialBackoff, cfg.maxBackoff / 10)});
  send(op);
}

void TcHandler::send(const std::shared_ptr<Op>& op) {
  auto self = shared_from_this();
  withConnection([self, op](CnxResult r) {
    if (!r) {
      if (r.status().code() == StatusCode::kTimeout || !isRetriable(r.status())) {
        // A coordinator that is not (yet) served answers TC_CLIENT_CONNECT with
        // TransactionCoordinatorNotFound (kNotAllowed here): retried like the requests.
        if (r.status().message().find("TransactionCoordinatorNotFound") == std::string::npos) {
          op->cb(r.status(), proto::BaseCommand{});
          return;
        }
      }
      self->retryLater(op, r.status());
      return;
    }
    uint64_t id = self->client_->newRequestId();
    (*r)->sendRequest(id, op->build(id),
                      [self, op](const Status& s, const proto::BaseCommand& cmd) {
                        if (s.isOk()) {
                          op->cb(s, cmd);
                        } else if (isCoordinatorNotFound(cmd) ||
                                   (isRetriable(s) && s.code() != StatusCode::kTimeout)) {
                          if (isCoordinatorNotFound(cmd)) {
                            MutexLock lock(self->mu_);
                            self->cnx_.reset();  // TC_CLIENT_CONNECT again
                          }
                          self->retryLater(op, s);
                        } else {
                          op->cb(s, cmd);
                        }
                      });
  });
}

void TcHandler::retryLater(const std::shared_ptr<Op>& op, const Status& why) {
  auto delay = op->backoff.next();
  if (Clock::now() + delay >= op->deadline) {
    op->cb(Status::error(StatusCode::kTimeout,
                         fmt::format("transaction coordinator {}: request timed out ({})", tcId_,
                                     why.toString())),
           proto::BaseCommand{});
    return;
  }
  auto self = shared_from_this();
  auto timer = std::make_shared<boost::asio::steady_timer>(client_->loopForSlot(slot_).context());
  timer->expires_after(delay);
  timer->async_wait([self, op, timer](const boost::system::error_code& ec) {
    if (ec) {
      op->cb(Status::closed("client closed"), proto::BaseCommand{});
      return;
    }
    self->send(op);
  });
}

// ---- TcClient -------------------------------------------------------------------------------

void TcClient::ensureStarted(StatusCallback cb) {
  {
    UniqueLock lock(mu_);
    if (state_ == State::kReady) {
      lock.unlock();
      cb(Status::ok());
      return;
    }
    startWaiters_.push_back(std::move(cb));
    if (state_ == State::kStarting) return;
    state_ = State::kStarting;
  }
  auto self = shared_from_this();
  client_->getPartitionedMetadata(std::string(kTcAssignTopic), [self](Result<int> n) {
    if (!n) {
      self->started(n.status());
      return;
    }
    // Not partitioned: one coordinator on the topic itself (as Pulsar's client).
    int count = std::max(1, *n);
    self->handlers_.clear();
    for (int i = 0; i < count; ++i) {
      std::string topic =
          *n > 0 ? fmt::format("{}-partition-{}", kTcAssignTopic, i) : std::string(kTcAssignTopic);
      self->handlers_.push_back(
          std::make_shared<TcHandler>(self->client_, static_cast<uint64_t>(i), topic));
    }
    auto left = std::make_shared<std::atomic<int>>(count);
    auto first = std::make_shared<Status>();
    auto firstMu = std::make_shared<Mutex>();
    for (auto& h : self->handlers_) {
      h->connect([self, left, first, firstMu](const Status& s) {
        if (!s.isOk()) {
          MutexLock lock(*firstMu);
          if (first->isOk()) *first = s;
        }
        if (left->fetch_sub(1) == 1) self->started(*first);
      });
    }
  });
}

void TcClient::started(const Status& s) {
  std::vector<StatusCallback> waiters;
  {
    MutexLock lock(mu_);
    state_ = s.isOk() ? State::kReady : State::kNone;
    waiters.swap(startWaiters_);
  }
  for (auto& w : waiters) w(s);
}

void TcClient::newTransaction(std::chrono::milliseconds ttl,
                              std::function<void(Result<std::shared_ptr<TransactionImpl>>)> cb) {
  auto self = shared_from_this();
  ensureStarted([self, ttl, cb = std::move(cb)](const Status& s) mutable {
    if (!s.isOk()) {
      cb(s);
      return;
    }
    auto& h = self->handlers_[self->next_.fetch_add(1) % self->handlers_.size()];
    uint64_t tcId = h->tcId();
    uint64_t ttlMs = static_cast<uint64_t>(std::max<int64_t>(0, ttl.count()));
    h->request([tcId, ttlMs](uint64_t id) { return Commands::newNewTxn(tcId, id, ttlMs); },
               [h, cb = std::move(cb)](const Status& s, const proto::BaseCommand& cmd) {
                 if (!s.isOk()) {
                   cb(s);
                   return;
                 }
                 const auto& r = cmd.newtxnresponse();
                 cb(std::make_shared<TransactionImpl>(
                     h, TxnID{r.txnid_most_bits(), r.txnid_least_bits()}));
               });
  });
}

// ---- TransactionImpl ------------------------------------------------------------------------

namespace {
const char* stateName(TransactionState s) {
  switch (s) {
    case TransactionState::kOpen:
      return "OPEN";
    case TransactionState::kCommitting:
      return "COMMITTING";
    case TransactionState::kAborting:
      return "ABORTING";
    case TransactionState::kCommitted:
      return "COMMITTED";
    case TransactionState::kAborted:
      return "ABORTED";
    case TransactionState::kError:
      return "ERROR";
  }
  return "?";
}
}  // namespace

TransactionState TransactionImpl::state() const {
  MutexLock lock(mu_);
  return state_;
}

Status TransactionImpl::beginOp() {
  MutexLock lock(mu_);
  if (state_ != TransactionState::kOpen) {
    return Status::notAllowed(fmt::format("InvalidTxnStatus: transaction {} is {}, not OPEN",
                                          id_.toString(), stateName(state_)));
  }
  ++pendingOps_;
  return Status::ok();
}

void TransactionImpl::endOp(const Status& s) {
  std::function<void()> done;
  {
    MutexLock lock(mu_);
    if (!s.isOk() && firstOpError_.isOk()) firstOpError_ = s;
    if (--pendingOps_ == 0 && onOpsDone_) {
      done = std::move(onOpsDone_);
      onOpsDone_ = nullptr;
    }
  }
  if (done) done();
}

namespace {
std::string partitionKey(const std::string& partition) { return "p\n" + partition; }
}  // namespace

bool TransactionImpl::partitionRegistered(const std::string& partition) const {
  MutexLock lock(mu_);
  auto it = registrations_.find(partitionKey(partition));
  return it != registrations_.end() && it->second.done;
}

void TransactionImpl::registerPartition(const std::string& partition, StatusCallback then) {
  TxnID id = id_;
  registerOnce(
      partitionKey(partition),
      [id, partition](uint64_t rid) {
        return Commands::newAddPartitionToTxn(rid, id.mostBits, id.leastBits, partition);
      },
      std::move(then));
}

void TransactionImpl::registerSubscription(const std::string& topic,
                                           const std::string& subscription, StatusCallback then) {
  TxnID id = id_;
  registerOnce(
      "s\n" + topic + "\n" + subscription,
      [id, topic, subscription](uint64_t rid) {
        return Commands::newAddSubscriptionToTxn(rid, id.mostBits, id.leastBits, topic,
                                                 subscription);
      },
      std::move(then));
}

void TransactionImpl::registerOnce(const std::string& key, std::function<Buffer(uint64_t)> build,
                                   StatusCallback then) {
  StatusCallback now;  // then, when registered already
  {
    MutexLock lock(mu_);
    Registration& r = registrations_[key];
    if (r.done) {
      now = std::move(then);
    } else {
      r.waiters.push_back(std::move(then));
      if (r.running) return;
      r.running = true;
    }
  }
  if (now) {
    now(Status::ok());
    return;
  }
  auto self = shared_from_this();
  tc_->request(std::move(build), [self, key](const Status& s, const proto::BaseCommand&) {
    self->registered(key, s);
  });
}

void TransactionImpl::registered(const std::string& key, const Status& s) {
  // Waiters run in order; one added meanwhile joins the queue, so nothing overtakes them.
  UniqueLock lock(mu_);
  Registration& r = registrations_[key];
  while (!r.waiters.empty()) {
    auto waiters = std::move(r.waiters);
    r.waiters.clear();
    lock.unlock();
    for (auto& w : waiters) w(s);
    lock.lock();
  }
  r.running = false;
  r.done = s.isOk();  // a failed registration is tried again by the next operation
  r.result = s;
}

void TransactionImpl::end(bool commit, StatusCallback cb) {
  {
    UniqueLock lock(mu_);
    if (state_ != TransactionState::kOpen) {
      TransactionState now = state_;
      lock.unlock();
      cb(Status::notAllowed(fmt::format("InvalidTxnStatus: transaction {} is {}, not OPEN",
                                        id_.toString(), stateName(now))));
      return;
    }
    state_ = commit ? TransactionState::kCommitting : TransactionState::kAborting;
    if (pendingOps_ > 0) {
      auto self = shared_from_this();
      onOpsDone_ = [self, commit, cb = std::move(cb)]() mutable {
        self->sendEnd(commit, std::move(cb));
      };
      return;
    }
  }
  sendEnd(commit, std::move(cb));
}

void TransactionImpl::sendEnd(bool commit, StatusCallback cb) {
  Status opError;
  {
    MutexLock lock(mu_);
    opError = firstOpError_;
    if (commit && !opError.isOk()) state_ = TransactionState::kAborting;
  }
  bool abortInstead = commit && !opError.isOk();
  auto action = commit && !abortInstead ? proto::COMMIT : proto::ABORT;
  auto self = shared_from_this();
  TxnID id = id_;
  tc_->request(
      [id, action](uint64_t rid) {
        return Commands::newEndTxn(rid, id.mostBits, id.leastBits, action);
      },
      [self, action, abortInstead, opError, cb = std::move(cb)](const Status& s,
                                                                const proto::BaseCommand& cmd) {
        {
          MutexLock lock(self->mu_);
          if (s.isOk()) {
            self->state_ =
                action == proto::COMMIT ? TransactionState::kCommitted : TransactionState::kAborted;
          } else if (auto e = tcResponseError(cmd);
                     e == proto::TransactionNotFound || e == proto::InvalidTxnStatus) {
            self->state_ = TransactionState::kError;
          }
        }
        if (abortInstead && s.isOk()) {
          cb(
              Status::notAllowed(fmt::format("TransactionHasOperationFailed: transaction {} was "
                                             "aborted: an operation failed: {}",
                                             self->id_.toString(), opError.toString())));
          return;
        }
        cb(s);
      });
}

}  // namespace magnetar::client
