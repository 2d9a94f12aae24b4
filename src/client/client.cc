#include "client/client.h"

#include <boost/asio/steady_timer.hpp>
#include <future>

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/client_impl.h"
#include "client/join.h"
#include "client/partitioned.h"
#include "client/routing.h"

namespace magnetar::client {

namespace {

// What the name accessors of an empty handle return.
const std::string& emptyString() {
  static const std::string kEmpty;
  return kEmpty;
}

// Waits for an async call that reports through a callback taking T.
template <typename T, typename Start>
T await(Start&& start) {
  auto pr = std::make_shared<std::promise<T>>();
  auto f = pr->get_future();
  start([pr](T v) { pr->set_value(std::move(v)); });
  return f.get();
}

// close() of a Producer or Consumer handle: its closeAsync(), awaited.
template <class Handle>
Status closeAndWait(Handle& h) {
  return await<Status>([&](auto cb) { h.closeAsync(std::move(cb)); });
}

// closeAsync() of a handle: an empty one is closed already.
template <class Impl>
void closeImpl(const std::shared_ptr<Impl>& impl, StatusCallback cb) {
  if (!impl) return cb(Status::ok());
  impl->closeAsync(std::move(cb));
}

// Starts every partition's producer or consumer; once all started, registers the partitioned
// handler `whole` and gives cb its Handle, else closes `whole` and gives cb the first failure.
template <class Handle, class Part, class Whole, class Callback>
void startPartitions(const std::vector<std::shared_ptr<Part>>& parts,
                     const std::shared_ptr<Whole>& whole,
                     const std::function<void()>& registerWhole, Callback cb) {
  auto join = joinStatuses(parts.size(), [whole, registerWhole, cb](const Status& s) {
    if (!s.isOk()) {
      whole->closeAsync([](const Status&) {});
      return cb(s);
    }
    registerWhole();
    cb(Handle(whole));
  });
  for (auto& p : parts) p->start(join);
}

// PARTITIONED_METADATA, retried with back-off on retriable failures until the deadline.
void partitionsWithRetry(const std::shared_ptr<ClientImpl>& impl, const std::string& topic,
                         std::chrono::steady_clock::time_point deadline,
                         const std::shared_ptr<Backoff>& backoff,
                         std::function<void(Result<int>)> cb) {
  impl->getPartitionedMetadata(topic, [impl, topic, deadline, backoff,
                                       cb = std::move(cb)](Result<int> r) mutable {
    if (r.isOk() || !isRetriable(r.status()) || impl->closed()) {
      cb(std::move(r));
      return;
    }
    auto delay = backoff->next();
    if (std::chrono::steady_clock::now() + delay >= deadline) {
      cb(std::move(r));
      return;
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(impl->loopForSlot(0).context());
    timer->expires_after(delay);
    timer->async_wait([impl, topic, deadline, backoff, timer,
                       cb = std::move(cb)](const boost::system::error_code& ec) mutable {
      if (ec) {
        cb(Status::closed("client closed"));
        return;
      }
      partitionsWithRetry(impl, topic, deadline, backoff, std::move(cb));
    });
  });
}

// The partition count of `topic` (normalized first; 0: not partitioned): PARTITIONED_METADATA
// retried with the client's back-off until operationTimeout. cb(normalized name, count or the
// failure).
void partitionsOf(const std::shared_ptr<ClientImpl>& impl, const std::string& topic,
                  std::function<void(const std::string&, Result<int>)> cb) {
  auto name = normalizeTopic(topic);
  if (!name) return cb(topic, name.status());
  auto backoff =
      std::make_shared<Backoff>(impl->config().initialBackoff, impl->config().maxBackoff);
  auto deadline = std::chrono::steady_clock::now() + impl->config().operationTimeout;
  partitionsWithRetry(
      impl, *name, deadline, backoff,
      [name = *name, cb = std::move(cb)](Result<int> n) { cb(name, std::move(n)); });
}

}  // namespace

// ---- Client ---------------------------------------------------------------------------------

Client::Client(const std::string& serviceUrl, ClientConfig config)
    : impl_(std::make_shared<ClientImpl>(serviceUrl, std::move(config))) {
  status_ = impl_->start();
}

Client::~Client() { close(); }

Status Client::close() { return impl_->close(); }

size_t Client::connectionCount() const { return impl_->connectionCount(); }

namespace {
// One tick of Client::runEvery: re-armed while fn returns true and the client is open.
void runTick(const std::shared_ptr<ClientImpl>& impl,
             const std::shared_ptr<boost::asio::steady_timer>& timer,
             std::chrono::microseconds period, const std::shared_ptr<std::function<bool()>>& fn) {
  timer->expires_after(period);
  timer->async_wait([impl, timer, period, fn](const boost::system::error_code& ec) {
    if (ec || impl->closed() || !(*fn)()) return;
    runTick(impl, timer, period, fn);
  });
}
}  // namespace

Status Client::runEvery(int slot, std::chrono::microseconds period, std::function<bool()> fn) {
  if (!status_.isOk()) return status_;
  if (impl_->closed()) return Status::closed("client closed");
  auto timer = std::make_shared<boost::asio::steady_timer>(impl_->loopForSlot(slot).context());
  auto shared = std::make_shared<std::function<bool()>>(std::move(fn));
  // Armed on the loop itself: asio timers are not thread-safe.
  impl_->loopForSlot(slot).execute(
      [impl = impl_, timer, period, shared] { runTick(impl, timer, period, shared); });
  return Status::ok();
}

Result<int> Client::getNumberOfPartitions(const std::string& topic) {
  if (!status_.isOk()) return status_;
  return await<Result<int>>([&](auto cb) {
    partitionsOf(impl_, topic, [cb](const std::string&, Result<int> n) { cb(std::move(n)); });
  });
}

void Client::createProducerAsync(const std::string& topic, const ProducerConfig& config,
                                 std::function<void(Result<Producer>)> cb) {
  if (!status_.isOk()) return cb(status_);
  if (impl_->closed()) return cb(Status::closed("client closed"));
  auto impl = impl_;
  partitionsOf(
      impl, topic, [impl, config, cb = std::move(cb)](const std::string& topic, Result<int> n) {
        if (!n) return cb(n.status());
        if (*n == 0) {
          auto p = std::make_shared<ProducerImpl>(impl, topic, -1, config);
          p->start([impl, p, cb](const Status& s) {
            if (!s.isOk()) return cb(s);
            impl->registerProducer(p);
            cb(Producer(p));
          });
          return;
        }
        std::vector<std::shared_ptr<ProducerImpl>> parts;
        parts.reserve(static_cast<size_t>(*n));
        for (int i = 0; i < *n; ++i) {
          parts.push_back(std::make_shared<ProducerImpl>(impl, partitionName(topic, i), i, config));
        }
        auto pp = std::make_shared<PartitionedProducer>(topic, parts, config.routingMode);
        startPartitions<Producer>(
            parts, pp, [impl, pp] { impl->registerProducer(pp); }, cb);
      });
}

Result<Producer> Client::createProducer(const std::string& topic, const ProducerConfig& config) {
  return await<Result<Producer>>(
      [&](auto cb) { createProducerAsync(topic, config, std::move(cb)); });
}

void Client::subscribeAsync(const std::string& topic, const std::string& subscription,
                            const ConsumerConfig& config,
                            std::function<void(Result<Consumer>)> cb) {
  if (!status_.isOk()) return cb(status_);
  if (impl_->closed()) return cb(Status::closed("client closed"));
  if (subscription.empty()) return cb(Status::invalidArgument("empty subscription name"));
  auto impl = impl_;
  partitionsOf(
      impl, topic,
      [impl, subscription, config, cb = std::move(cb)](const std::string& topic, Result<int> n) {
        if (!n) return cb(n.status());
        auto queue = std::make_shared<ReceiveQueue>();
        if (*n == 0) {
          auto c = std::make_shared<ConsumerImpl>(impl, topic, -1, subscription, config, queue,
                                                  std::weak_ptr<ConsumerBase>());
          c->start([impl, c, cb](const Status& s) {
            if (!s.isOk()) return cb(s);
            impl->registerConsumer(c);
            cb(Consumer(c));
          });
          return;
        }
        auto pc = std::make_shared<PartitionedConsumer>(topic, subscription, queue);
        std::vector<std::shared_ptr<ConsumerImpl>> parts;
        parts.reserve(static_cast<size_t>(*n));
        for (int i = 0; i < *n; ++i) {
          parts.push_back(std::make_shared<ConsumerImpl>(impl, partitionName(topic, i), i,
                                                         subscription, config, queue, pc));
        }
        pc->setPartitions(parts);
        startPartitions<Consumer>(
            parts, pc, [impl, pc] { impl->registerConsumer(pc); }, cb);
      });
}

Result<Consumer> Client::subscribe(const std::string& topic, const std::string& subscription,
                                   const ConsumerConfig& config) {
  return await<Result<Consumer>>(
      [&](auto cb) { subscribeAsync(topic, subscription, config, std::move(cb)); });
}

// ---- Producer -------------------------------------------------------------------------------

void Producer::sendAsync(const OutgoingMessage& m, SendCallback cb) {
  if (!impl_) return cb(Status::invalidArgument("empty producer handle"), MessageId{});
  impl_->sendAsync(m, std::move(cb));
}

Result<MessageId> Producer::send(const OutgoingMessage& m) {
  using R = Result<MessageId>;
  return await<R>([&](auto cb) {
    sendAsync(m, [cb = std::move(cb)](const Status& s, const MessageId& id) {
      cb(s.isOk() ? R(id) : R(s));
    });
  });
}

Status Producer::flush() {
  return await<Status>([&](auto cb) { flushAsync(std::move(cb)); });
}

void Producer::flushAsync(StatusCallback cb) {
  if (!impl_) return cb(Status::invalidArgument("empty producer handle"));
  impl_->flushAsync(std::move(cb));
}

Status Producer::close() { return closeAndWait(*this); }

void Producer::closeAsync(StatusCallback cb) { closeImpl(impl_, std::move(cb)); }

const std::string& Producer::topic() const { return impl_ ? impl_->topic() : emptyString(); }
std::string Producer::producerName() const { return impl_ ? impl_->producerName() : ""; }
int64_t Producer::lastSequenceId() const { return impl_ ? impl_->lastSequenceId() : -1; }
bool Producer::isConnected() const { return impl_ && impl_->isConnected(); }
size_t Producer::pendingMessages() const { return impl_ ? impl_->pendingMessages() : 0; }

// ---- Consumer -------------------------------------------------------------------------------

namespace {
const Status& noConsumer() {
  static const Status kStatus = Status::invalidArgument("empty consumer handle");
  return kStatus;
}
}  // namespace

Result<Message> Consumer::receive(std::chrono::milliseconds timeout) {
  if (!impl_) return noConsumer();
  return impl_->receive(timeout);
}

void Consumer::receiveAsync(std::function<void(Result<Message>)> cb) {
  if (!impl_) {
    cb(noConsumer());
    return;
  }
  impl_->receiveAsync(std::move(cb));
}

Status Consumer::acknowledge(const MessageId& id) {
  return impl_ ? impl_->acknowledge(id) : noConsumer();
}

Status Consumer::acknowledgeCumulative(const MessageId& id) {
  return impl_ ? impl_->acknowledgeCumulative(id) : noConsumer();
}

void Consumer::negativeAcknowledge(const MessageId& id) {
  if (impl_) impl_->negativeAcknowledge(id);
}

void Consumer::redeliverUnacknowledgedMessages() {
  if (impl_) impl_->redeliverUnacknowledgedMessages();
}

void Consumer::seekAsync(const MessageId& id, StatusCallback cb) {
  if (!impl_) return cb(noConsumer());
  impl_->seekAsync(id, std::move(cb));
}

void Consumer::seekAsync(uint64_t publishTimeMs, StatusCallback cb) {
  if (!impl_) return cb(noConsumer());
  impl_->seekAsync(publishTimeMs, std::move(cb));
}

Status Consumer::seek(const MessageId& id) {
  return await<Status>([&](auto cb) { seekAsync(id, std::move(cb)); });
}

Status Consumer::seek(uint64_t publishTimeMs) {
  return await<Status>([&](auto cb) { seekAsync(publishTimeMs, std::move(cb)); });
}

Result<MessageId> Consumer::getLastMessageId() {
  if (!impl_) return noConsumer();
  return await<Result<MessageId>>(
      [&](auto cb) { impl_->getLastMessageIdAsync(std::move(cb)); });
}

Status Consumer::unsubscribe() {
  if (!impl_) return noConsumer();
  return await<Status>([&](auto cb) { impl_->unsubscribeAsync(std::move(cb)); });
}

void Consumer::unsubscribeAsync(StatusCallback cb) {
  if (!impl_) {
    cb(noConsumer());
    return;
  }
  impl_->unsubscribeAsync(std::move(cb));
}

Status Consumer::close() { return closeAndWait(*this); }

void Consumer::closeAsync(StatusCallback cb) { closeImpl(impl_, std::move(cb)); }

const std::string& Consumer::topic() const { return impl_ ? impl_->topic() : emptyString(); }
const std::string& Consumer::subscription() const {
  return impl_ ? impl_->subscription() : emptyString();
}
const std::string& Consumer::consumerName() const {
  return impl_ ? impl_->consumerName() : emptyString();
}
bool Consumer::isConnected() const { return impl_ && impl_->isConnected(); }
size_t Consumer::numMessagesInQueue() const { return impl_ ? impl_->numMessagesInQueue() : 0; }
bool Consumer::hasReachedEndOfTopic() const { return impl_ && impl_->hasReachedEndOfTopic(); }
ConsumerStats Consumer::stats() const { return impl_ ? impl_->stats() : ConsumerStats{}; }

}  // namespace magnetar::client
