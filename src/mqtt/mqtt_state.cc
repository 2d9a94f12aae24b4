#include "mqtt/mqtt_state.h"

#include <algorithm>
#include <future>
#include <set>

#include "base/blocking_wait.h"
#include "base/logging.h"
#include "broker/common/topic_name.h"
#include "broker/common/wall_clock.h"
#include "broker/service/broker_service.h"
#include "metadata/store.h"
#include "mqtt/message_mapping.h"
#include "mqtt/mqtt_service.h"
#include "mqtt/topic_mapping.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::mqtt {
namespace {

constexpr auto kLoadTimeout = std::chrono::seconds(30);
constexpr auto kSweepPeriod = std::chrono::seconds(1);
constexpr size_t kMaxRecordBytes = 1024 * 1024;  // metadata::Store's largest value

// The producer of one internal publish (a will): reports the receipt, then leaves the topic.
class OneShotSink final : public broker::ProducerSink {
 public:
  explicit OneShotSink(std::function<void(Status)> done) : done_(std::move(done)) {}
  void send(net::FrameBatch&& frames) override {
    std::string bytes;
    for (const auto& seg : frames.segments()) {
      if (seg.buffer) {
        bytes.append(seg.buffer.view());
      } else {
        bytes.append(frames.bytes(), seg.offset, seg.length);
      }
    }
    protocol::FrameDecoder decoder(bytes.size() + 16);
    (void)decoder.feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                       [this](const proto::BaseCommand& cmd, const Buffer&) {
                         if (cmd.type() == proto::BaseCommand::SEND_RECEIPT) {
                           finish(Status::ok());
                         } else if (cmd.type() == proto::BaseCommand::SEND_ERROR) {
                           finish(Status::ioError(cmd.send_error().message()));
                         }
                       });
  }
  void sendFrame(const Buffer&) override {}
  void publishCompleted(uint32_t, uint64_t) override {}
  void closeProducerFromBroker(uint64_t) override { finish(Status::ioError("producer closed")); }
  const std::string& peerAddress() const override { return peer_; }
  const std::string& clientVersion() const override { return version_; }

 private:
  void finish(const Status& st) {
    if (!done_) return;
    auto done = std::move(done_);
    done_ = nullptr;
    done(st);
  }
  std::function<void(Status)> done_;  // touched on the topic's executor only
  const std::string peer_ = "mqtt-will";
  const std::string version_ = "MQTT";
};

template <typename T>
Result<T> waitFor(std::future<Result<T>>& f) {
  auto r = blockingGetFor(f, kLoadTimeout, "MQTT state load (main thread, at start)");
  if (!r) return Status::error(StatusCode::kTimeout, "MQTT state: the record store did not answer");
  return std::move(*r);
}

}  // namespace

MqttState::MqttState(MqttService& service) : service_(service) {}

MqttState::~MqttState() { stop(); }

Status MqttState::start() {
  if (Status s = loadRoot(kSessionsRoot, true); !s.isOk()) return s;
  if (Status s = loadRoot(kRetainedRoot, false); !s.isOk()) return s;
  {
    MutexLock lock(mu_);
    // A session whose connection was open when the broker stopped ends now.
    const int64_t now = broker::wallClockMs();
    for (auto& [id, s] : sessions_) {
      if (s.disconnectedAtMs == 0) s.disconnectedAtMs = now;
    }
    MLOG_INFO("MQTT state: {} persistent sessions, {} retained messages", sessions_.size(),
              retained_.size());
  }
  const MqttOptions& o = service_.options();
  {
    MutexLock lock(watchGuard_->mu);
    watchGuard_->self = this;
  }
  topicWatch_ = service_.broker().topicListeners().add(
      o.defaultTenant + "/" + o.defaultNamespace,
      [guard = watchGuard_](const std::string& topic, bool created) {
        if (!created) return;
        MutexLock lock(guard->mu);  // held while it runs: stop() waits for it
        if (guard->self && !guard->self->stopping()) guard->self->onTopicCreated(topic);
      });
  sweepLoop_ = &service_.broker().ioLoops().next();
  sweepTimer_ = std::make_unique<boost::asio::steady_timer>(sweepLoop_->context());
  sweepLoop_->execute([this] { armSweep(); });
  return Status::ok();
}

void MqttState::stop() {
  if (stopping_.exchange(true)) return;
  if (topicWatch_) service_.broker().topicListeners().remove(topicWatch_);
  topicWatch_ = 0;
  {
    MutexLock lock(watchGuard_->mu);
    watchGuard_->self = nullptr;
  }
  if (!sweepLoop_) return;
  auto stopped = std::make_shared<std::promise<void>>();
  auto done = stopped->get_future();
  sweepLoop_->execute([this, stopped] {
    sweepTimer_->cancel();
    stopped->set_value();
  });
  (void)blockingReady(done, std::chrono::seconds(5), "MQTT state stop (main thread)");
}

Status MqttState::loadRoot(std::string_view root, bool sessions) {
  metadata::Store* store = service_.broker().recordStore();
  if (!store) return Status::ok();
  net::Executor* ex = &service_.broker().metadataExecutor();
  std::promise<Result<std::vector<std::string>>> names;
  auto namesDone = names.get_future();
  store->getChildren(std::string(root), ex, [&names](Result<std::vector<std::string>> r) {
    names.set_value(std::move(r));
  });
  auto children = waitFor(namesDone);
  if (!children.isOk()) return children.status();
  for (const std::string& child : *children) {
    const std::string path = std::string(root) + "/" + child;
    std::promise<Result<std::optional<metadata::GetResult>>> value;
    auto valueDone = value.get_future();
    store->get(path, ex, [&value](auto r) { value.set_value(std::move(r)); });
    auto got = waitFor(valueDone);
    if (!got.isOk()) return got.status();
    if (!*got) continue;
    auto key = fromStorePathComponent(child);
    MutexLock lock(mu_);
    if (sessions) {
      auto s = decodeSession((*got)->value);
      if (s.isOk() && key.isOk()) {
        // A will that waited for its delay when the broker stopped: published when due.
        if (s->will) wills_[*key] = *s->will;
        sessions_[*key] = std::move(*s);
        continue;
      }
    } else if (auto r = decodeRetained((*got)->value); r.isOk()) {
      retained_[r->topic] = std::move(*r);
      continue;
    }
    MLOG_WARN("MQTT state: {} does not decode; skipped", path);
  }
  return Status::ok();
}

void MqttState::putRecord(const std::string& path, const std::optional<std::string>& value,
                          net::Executor* ex, const std::function<void(Status)>& done) {
  metadata::Store* store = service_.broker().recordStore();
  if (!store) {
    if (done) ex->execute([done] { done(Status::ok()); });
    return;
  }
  auto report = [path, done](const Status& st) {
    if (!st.isOk()) MLOG_WARN("MQTT state: writing {} failed: {}", path, st.message());
    if (done) done(st);
  };
  if (!value) {
    store->remove(path, std::nullopt, ex, [report](const Status& st) {
      report(st.code() == StatusCode::kNotFound ? Status::ok() : st);
    });
    return;
  }
  store->put(path, *value, metadata::PutOptions{}, ex,
             [report](const Result<metadata::Stat>& r) { report(r.status()); });
}

std::optional<StoredSession> MqttState::session(const std::string& clientId) const {
  MutexLock lock(mu_);
  auto it = sessions_.find(clientId);
  if (it == sessions_.end()) return std::nullopt;
  return it->second;
}

void MqttState::saveSession(const std::string& clientId, StoredSession s, net::Executor* ex,
                            const std::function<void(Status)>& done) {
  const std::string record = encodeSession(s);
  {
    MutexLock lock(mu_);
    sessions_[clientId] = std::move(s);
  }
  putRecord(std::string(kSessionsRoot) + "/" + storePathComponent(clientId), record,
            ex ? ex : &service_.broker().metadataExecutor(), done);
}

void MqttState::addQos2Received(const std::string& clientId, uint16_t packetId) {
  std::optional<StoredSession> s;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(clientId);
    if (it == sessions_.end()) return;
    auto& ids = it->second.qos2Received;
    if (std::find(ids.begin(), ids.end(), packetId) != ids.end()) return;
    ids.push_back(packetId);
    s = it->second;
  }
  saveSession(clientId, std::move(*s));
}

void MqttState::sessionDisconnected(const std::string& clientId) {
  std::optional<StoredSession> s;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(clientId);
    if (it == sessions_.end()) return;
    it->second.disconnectedAtMs = broker::wallClockMs();
    s = it->second;
  }
  if (s->expirySeconds == 0) return removeSession(clientId, /*deleteSubscriptions=*/false);
  saveSession(clientId, std::move(*s));
}

void MqttState::removeSession(const std::string& clientId, bool deleteSubscriptions) {
  std::vector<SubscriptionRequest> filters;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(clientId);
    if (it == sessions_.end()) return;
    filters = std::move(it->second.filters);
    sessions_.erase(it);
  }
  putRecord(std::string(kSessionsRoot) + "/" + storePathComponent(clientId), std::nullopt,
            &service_.broker().metadataExecutor(), nullptr);
  if (deleteSubscriptions) this->deleteSubscriptions(clientId, filters);
}

// MoP's model: the session's Pulsar subscriptions are named by the client id on each topic its
// filters select (wildcards: the default namespace's topics that match).
void MqttState::deleteSubscriptions(const std::string& clientId,
                                    const std::vector<SubscriptionRequest>& filters) {
  broker::BrokerService& broker = service_.broker();
  const MqttOptions& o = service_.options();
  std::set<std::string> topics;
  for (const SubscriptionRequest& f : filters) {
    // A shared subscription's Pulsar subscription is its group's, not this client's.
    if (auto shared = parseSharedFilter(f.filter); !shared.isOk() || *shared) continue;
    if (!isWildcardFilter(f.filter)) {
      auto name =
          pulsarTopicName(f.filter, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
      if (name.isOk()) topics.insert(*name);
      continue;
    }
    for (const std::string& t :
         broker.topicsOfNamespace(o.defaultTenant + "/" + o.defaultNamespace)) {
      auto parsed = broker::TopicName::parse(t);
      if (!parsed.isOk()) continue;
      auto decoded = urlDecode(parsed->localName());
      if (decoded.isOk() && topicMatches(f.filter, *decoded)) topics.insert(t);
    }
  }
  for (const std::string& t : topics) {
    auto name = broker::TopicName::parse(t);
    if (!name.isOk()) continue;
    broker.getOrCreateTopic(
        *name, false, [clientId](Result<std::shared_ptr<broker::PersistentTopic>> r) {
          if (!r.isOk()) return;  // on the topic's executor when found
          Status st = (*r)->unsubscribe(clientId, nullptr);
          MLOG_INFO("MQTT session {} expired: subscription on {} deleted: {}", clientId,
                    (*r)->name().toString(), st.isOk() ? "ok" : st.message());
        });
  }
}

void MqttState::onTopicCreated(const std::string& pulsarTopic) {
  auto name = broker::TopicName::parse(pulsarTopic);
  if (!name.isOk()) return;
  auto decoded = urlDecode(name->localName());
  if (!decoded.isOk()) return;
  std::set<std::string> subscriptions;  // Pulsar subscription names: client ids, groups
  {
    MutexLock lock(mu_);
    for (const auto& [id, s] : sessions_) {
      for (const SubscriptionRequest& f : s.filters) {
        auto shared = parseSharedFilter(f.filter);
        if (!shared.isOk()) continue;
        const std::string& filter = *shared ? (*shared)->filter : f.filter;
        if (!isWildcardFilter(filter) || !topicMatches(filter, *decoded)) continue;
        subscriptions.insert(*shared ? (*shared)->group : id);
      }
    }
  }
  if (subscriptions.empty()) return;
  service_.broker().getOrCreateTopic(
      *name, false, [subscriptions](Result<std::shared_ptr<broker::PersistentTopic>> r) {
        if (!r.isOk()) return;  // on the topic's executor when found
        for (const std::string& sub : subscriptions) {
          // A connected session's own subscribe may have made it already.
          Status st = (*r)->createSubscription(sub, storage::InitialPosition::kEarliest);
          if (!st.isOk() && st.code() != StatusCode::kAlreadyExists) {
            MLOG_WARN("MQTT session {}: no subscription on new topic {}: {}", sub,
                      (*r)->name().toString(), st.message());
          }
        }
      });
}

void MqttState::setRetained(const Publish& p, net::Executor* ex,
                            const std::function<void(Status)>& done) {
  const std::string path = std::string(kRetainedRoot) + "/" + storePathComponent(p.topic);
  if (p.payload.empty()) {
    {
      MutexLock lock(mu_);
      retained_.erase(p.topic);
    }
    return putRecord(path, std::nullopt, ex, done);
  }
  RetainedMessage r = retainedOf(p, broker::wallClockMs() / 1000);
  std::string record = encodeRetained(r);
  if (record.size() > kMaxRecordBytes) {
    ex->execute([done, n = record.size()] {
      done(Status::error(StatusCode::kTooLarge,
                         fmt::format("a retained message record of {} bytes is over 1 MiB", n)));
    });
    return;
  }
  {
    MutexLock lock(mu_);
    retained_[p.topic] = std::move(r);
  }
  putRecord(path, record, ex, done);
}

std::vector<RetainedMessage> MqttState::retainedMatching(const std::string& filter) const {
  const int64_t now = broker::wallClockMs() / 1000;
  std::vector<RetainedMessage> out;
  MutexLock lock(mu_);
  for (const auto& [topic, r] : retained_) {
    if (!topicMatches(filter, topic)) continue;
    Properties props;
    if (!propertiesFromPulsar(r.pulsarProperties, now, &props)) continue;  // expired
    out.push_back(r);
  }
  return out;
}

void MqttState::scheduleWill(const std::string& clientId, const Will& will, uint32_t delaySeconds) {
  if (delaySeconds > 0) {
    MutexLock lock(mu_);
    PendingWill w{will, broker::wallClockMs() + static_cast<int64_t>(delaySeconds) * 1000};
    // A delay is cut to the session's expiry, so only a persistent session has one.
    if (auto it = sessions_.find(clientId); it != sessions_.end()) it->second.will = w;
    wills_[clientId] = std::move(w);
    return;
  }
  Publish p;
  p.topic = will.topic;
  p.payload = will.payload;
  p.qos = will.qos;
  p.retain = will.retain;
  p.properties = will.properties;
  p.properties.ints.erase(PropertyId::kWillDelayInterval);
  MLOG_INFO("MQTT client {}: publishing its will to {}", clientId, will.topic);
  if (will.retain) setRetained(p, &service_.broker().metadataExecutor(), [](const Status&) {});
  publish(p, clientId + "-will", [clientId](const Status& st) {
    if (!st.isOk())
      MLOG_WARN("MQTT client {}: its will was not published: {}", clientId, st.message());
  });
}

void MqttState::cancelWill(const std::string& clientId) {
  MutexLock lock(mu_);
  wills_.erase(clientId);
  if (auto it = sessions_.find(clientId); it != sessions_.end()) it->second.will.reset();
}

void MqttState::publish(const Publish& p, const std::string& producerName,
                        const std::function<void(Status)>& done) {
  const MqttOptions& o = service_.options();
  auto pulsarName =
      pulsarTopicName(p.topic, o.defaultTenant, o.defaultNamespace, o.defaultTopicDomain);
  auto name = pulsarName.isOk() ? broker::TopicName::parse(*pulsarName)
                                : Result<broker::TopicName>(pulsarName.status());
  if (!name.isOk()) return done(name.status());
  broker::BrokerService& broker = service_.broker();
  static std::atomic<uint64_t> ids{1ull << 62};  // apart from the connections' producer ids
  proto::MessageMetadata md;
  md.set_producer_name(producerName);
  md.set_publish_time(static_cast<uint64_t>(broker::wallClockMs()));
  toPulsarProperties(p, broker::wallClockMs() / 1000, &md);
  auto entryMd = std::make_shared<proto::MessageMetadata>(std::move(md));
  broker.getOrCreateTopic(
      *name, broker.allowAutoTopicCreation(*name),
      [p, producerName, entryMd, done](Result<std::shared_ptr<broker::PersistentTopic>> r) {
        if (!r.isOk()) return done(r.status());
        auto topic = *r;
        // The producer leaves once its one publish is answered (the sink runs on the topic's
        // executor); weak: the producer holds the sink.
        auto weak = std::make_shared<std::weak_ptr<broker::Producer>>();
        auto sink = std::make_shared<OneShotSink>([topic, weak, done](const Status& st) {
          if (auto producer = weak->lock()) topic->removeProducer(producer.get());
          done(st);
        });
        auto producer = std::make_shared<broker::Producer>(ids.fetch_add(1), producerName, sink);
        *weak = producer;
        topic->addProducer(
            producer,
            [topic, producer, p, entryMd, done](const Status& s, proto::ServerError,
                                                std::optional<uint64_t>) {
              if (!s.isOk()) return done(s);
              topic->executor().dispatch([topic, producer, p, entryMd] {
                const int64_t last = topic->lastSequenceId(producer->name());
                const auto seq = static_cast<uint64_t>(std::max<int64_t>(last + 1, 0));
                entryMd->set_sequence_id(seq);
                std::vector<broker::PendingSend> sends(1);
                sends[0].producer = producer;
                sends[0].sequenceId = seq;
                sends[0].highestSequenceId = seq;
                sends[0].entry = protocol::Commands::newEntry(*entryMd, p.payload);
                topic->publish(sends);
              });
            },
            [] {});
      });
}

void MqttState::armSweep() {
  if (stopping()) return;
  sweepTimer_->expires_after(kSweepPeriod);
  sweepTimer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping()) return;
    sweep();
    armSweep();
  });
}

// Once a second: expired sessions go (with their subscriptions), due wills are published.
void MqttState::sweep() {
  const int64_t now = broker::wallClockMs();
  std::vector<std::string> expired;
  std::vector<std::pair<std::string, Will>> due;
  // Records of sessions that lose their published will, encoded under the lock (the copy in
  // memory is already without it; a connection's newer write is not replaced in memory).
  std::vector<std::pair<std::string, std::string>> rewrite;
  {
    MutexLock lock(mu_);
    for (const auto& [id, s] : sessions_) {
      if (sessionExpired(s, now)) expired.push_back(id);
    }
    for (auto it = wills_.begin(); it != wills_.end();) {
      const bool sessionEnds =
          std::find(expired.begin(), expired.end(), it->first) != expired.end();
      if (it->second.dueMs > now && !sessionEnds) {
        ++it;
        continue;
      }
      due.emplace_back(it->first, std::move(it->second.will));
      auto sit = sessions_.find(it->first);
      if (!sessionEnds && sit != sessions_.end() && sit->second.will) {
        sit->second.will.reset();
        rewrite.emplace_back(it->first, encodeSession(sit->second));
      }
      it = wills_.erase(it);
    }
  }
  for (auto& [id, will] : due) scheduleWill(id, will, 0);
  for (const auto& [id, record] : rewrite) {
    putRecord(std::string(kSessionsRoot) + "/" + storePathComponent(id), record,
              &service_.broker().metadataExecutor(), nullptr);
  }
  for (const std::string& id : expired) {
    MLOG_INFO("MQTT session {} expired", id);
    removeSession(id, /*deleteSubscriptions=*/true);
  }
}

}  // namespace magnetar::mqtt
