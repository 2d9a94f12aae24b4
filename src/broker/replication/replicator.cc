#include "broker/replication/replicator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/common/wall_clock.h"
#include "broker/topic/stats.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::broker {

using protocol::Commands;

namespace {
constexpr std::chrono::milliseconds kMaxBackoff{60000};  // Pulsar's replicator backoff cap
constexpr int kReadBatch = 100;                          // entries per cursor read
constexpr size_t kReadBytes = 5 << 20;
constexpr int kMaxLookupHops = 20;  // Pulsar client's maxLookupRedirects

// "pulsar://host:port" -> "host:port" (CONNECT's proxy_to_broker_url, as Pulsar's client).
std::string hostPortOf(const std::string& url) {
  std::string rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  return rest;
}

// "pulsar://h1:p1,h2:p2" -> {"pulsar://h1:p1", "pulsar://h2:p2"} (never empty).
std::vector<std::string> serviceHosts(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return {url};
  const std::string prefix = url.substr(0, scheme + 3);
  std::vector<std::string> out;
  size_t start = scheme + 3;
  while (start <= url.size()) {
    size_t comma = url.find(',', start);
    if (comma == std::string::npos) comma = url.size();
    if (comma > start) out.push_back(prefix + url.substr(start, comma - start));
    start = comma + 1;
  }
  if (out.empty()) out.push_back(url);
  return out;
}
constexpr int64_t kSecondNs = 1'000'000'000;
// Pulsar's MarkerType REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST (10) .. _UPDATE (13).
constexpr int kFirstReplSubMarker = 10;
constexpr int kLastReplSubMarker = 13;

// Not sent: entries another cluster replicated here (never replicated again), transaction
// markers, and entries whose replicate_to leaves this remote out (Pulsar's
// GeoPersistentReplicator filter). Replicated subscription markers go (a snapshot's replicate_to
// keeps it local, a response's names the asking cluster).
bool replicates(const proto::MessageMetadata& md, const std::string& remote) {
  if (md.has_replicated_from()) return false;
  if (md.has_marker_type() &&
      (md.marker_type() == kTxnCommitMarker || md.marker_type() == kTxnAbortMarker)) {
    return false;
  }
  if (md.replicate_to_size() > 0) {
    return std::find(md.replicate_to().begin(), md.replicate_to().end(), remote) !=
           md.replicate_to().end();
  }
  return true;
}
}  // namespace

Status Replicator::attach(PersistentTopic& topic, ReplicatorConfig config, PeerPool& peers) {
  MAGNETAR_DCHECK_ON(topic.executor());
  if (topic.closing() || topic.replicators().count(config.remoteCluster)) {
    return Status::error(StatusCode::kAlreadyExists, "replicator present or topic closing");
  }
  auto cursor =
      topic.ledger().openCursor(replicationCursorName(config.remoteCluster), config.startAt);
  if (!cursor.isOk()) return cursor.status();
  std::string remote = config.remoteCluster;
  auto r = std::make_shared<Replicator>(topic, **cursor, std::move(config), peers);
  topic.addReplicator(remote, r);
  r->connect();
  return Status::ok();
}

Replicator::Replicator(PersistentTopic& topic, storage::ManagedCursor& cursor,
                       ReplicatorConfig config, PeerPool& peers)
    : topic_(topic),
      ledger_(topic.ledger()),
      cursor_(cursor),
      config_(std::move(config)),
      peers_(peers),
      topicName_(topic.name().toString()),
      producerName_(std::string(kReplicatorPrefix) + "." + config_.localCluster + "-->" +
                    config_.remoteCluster),
      timer_(topic.executor().context()),
      throttleTimer_(topic.executor().context()) {
  pubMsgs_ = topic.stats().msgInCounter;
  pubBytes_ = topic.stats().bytesInCounter;
  setDispatchRate(config_.dispatchRate);
  ackedPosition_ = cursor_.markDeletedPosition();
  markRequested_ = ackedPosition_;
  readPosition_ = ledger_.nextValidPosition(ackedPosition_);
}

void Replicator::connect() {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (state_ == State::kClosed) return;
  state_ = State::kConnecting;
  ++epoch_;
  std::optional<RemoteEndpoint> remote = config_.remote ? config_.remote() : std::nullopt;
  if (!remote || remote->serviceUrl.empty()) {
    MLOG_WARN("{}: no broker service URL for cluster {}; retrying", topicName_,
              config_.remoteCluster);
    return scheduleReconnect();
  }
  remote_ = std::move(*remote);
  // A service URL may list several brokers (pulsar://h1:p1,h2:p2): each attempt asks the next
  // one, as the client's service name resolver, so a dead broker is passed over.
  std::vector<std::string> hosts = serviceHosts(remote_.serviceUrl);
  lookupAt(hosts[nextHost_++ % hosts.size()], /*authoritative=*/false, kMaxLookupHops);
}

void Replicator::lookupAt(const std::string& url, bool authoritative, int hopsLeft) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (hopsLeft <= 0) return disconnected("too many lookup redirects");
  url_ = url;  // the broker asked (logged if it fails)
  auto self = weak_from_this();
  net::EventLoop* exec = &topic_.executor();
  const uint64_t epoch = epoch_;
  const std::string topic = topicName_;
  const auto timeout = config_.connectTimeout;
  pool().get(url, [self, exec, epoch, hopsLeft, topic, authoritative,
                   timeout](Result<std::shared_ptr<PeerConnection>> c) {
    auto reply = [self, exec, epoch, hopsLeft](Result<proto::BaseCommand> answer) {
      exec->execute([self, epoch, hopsLeft, answer = std::move(answer)]() mutable {
        if (auto me = self.lock()) me->onLookup(epoch, hopsLeft, std::move(answer));
      });
    };
    if (!c.isOk()) return reply(c.status());
    (*c)->request([topic, authoritative](
                      uint64_t id) { return Commands::newLookup(topic, id, authoritative); },
                  timeout, reply);
  });
}

void Replicator::onLookup(uint64_t epoch, int hopsLeft, Result<proto::BaseCommand> r) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (epoch != epoch_ || state_ != State::kConnecting) return;
  if (!r.isOk()) return disconnected("lookup: " + r.status().toString());
  if (r->type() != proto::BaseCommand::LOOKUP_RESPONSE) {
    return disconnected("lookup: " + (r->type() == proto::BaseCommand::ERROR
                                          ? r->error().message()
                                          : std::string("unexpected answer")));
  }
  using L = proto::CommandLookupTopicResponse;
  const auto& a = r->lookuptopicresponse();
  if (a.response() != L::Connect && a.response() != L::Redirect) {
    return disconnected("lookup failed: " + proto::ServerError_Name(a.error()) + " " + a.message());
  }
  const std::string& next = remote_.tls ? a.brokerserviceurltls() : a.brokerserviceurl();
  if (next.empty()) {
    return disconnected(remote_.tls ? "the owner has no brokerServiceUrlTls"
                                    : "the owner has no brokerServiceUrl");
  }
  if (a.response() == L::Redirect) return lookupAt(next, a.authoritative(), hopsLeft - 1);
  // proxy_through_service_url: the broker asked is a proxy; the producer goes through it to
  // the owner (CONNECT's proxy_to_broker_url), as Pulsar's BinaryProtoLookupService.
  if (a.proxy_through_service_url()) return openProducer(url_, hostPortOf(next));
  openProducer(next, {});
}

void Replicator::openProducer(const std::string& owner, const std::string& proxyTo) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  url_ = owner;
  auto self = weak_from_this();
  net::EventLoop* exec = &topic_.executor();
  const uint64_t epoch = epoch_;
  pool().get(owner, proxyTo, [self, exec, epoch](Result<std::shared_ptr<PeerConnection>> r) {
    exec->execute([self, epoch, r = std::move(r)]() mutable {
      if (auto me = self.lock()) me->onConnection(epoch, std::move(r));
    });
  });
}

void Replicator::onConnection(uint64_t epoch, Result<std::shared_ptr<PeerConnection>> r) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (epoch != epoch_ || state_ != State::kConnecting) return;
  if (!r.isOk()) return disconnected(r.status().toString());
  cnx_ = *r;
  auto self = weak_from_this();
  net::EventLoop* exec = &topic_.executor();
  producerId_ = cnx_->addProducer([self, exec, epoch](const proto::BaseCommand* cmd) {
    std::optional<proto::BaseCommand> copy;
    if (cmd) copy = *cmd;
    exec->execute([self, epoch, copy = std::move(copy)]() mutable {
      if (auto me = self.lock()) me->onProducerFrame(epoch, std::move(copy));
    });
  });
  const uint64_t pid = producerId_;
  const std::string topicName = topicName_;
  const std::string name = producerName_;
  cnx_->request(
      [pid, topicName, name](uint64_t requestId) {
        return Commands::newProducer(topicName, pid, requestId, name);
      },
      config_.connectTimeout,
      [self, exec, epoch](Result<proto::BaseCommand> answer) {
        exec->execute([self, epoch, answer = std::move(answer)]() mutable {
          if (auto me = self.lock()) me->onProducerAnswer(epoch, std::move(answer));
        });
      });
}

void Replicator::onProducerAnswer(uint64_t epoch, Result<proto::BaseCommand> r) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (epoch != epoch_ || state_ != State::kConnecting) return;
  if (!r.isOk()) return disconnected(r.status().toString());
  if (r->type() != proto::BaseCommand::PRODUCER_SUCCESS) {
    return disconnected(r->type() == proto::BaseCommand::ERROR ? r->error().message()
                                                               : "unexpected answer to PRODUCER");
  }
  state_ = State::kReady;
  backoff_ = std::chrono::milliseconds(100);
  connectedSinceMs_ = wallClockMs();
  MLOG_INFO("{}: replicator to {} connected to {}", topicName_, config_.remoteCluster, url_);
  readMore();
}

void Replicator::onProducerFrame(uint64_t epoch, std::optional<proto::BaseCommand> cmd) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (epoch != epoch_ || state_ == State::kClosed) return;
  if (!cmd) return disconnected("connection closed");
  using T = proto::BaseCommand;
  if (cmd->type() == T::SEND_RECEIPT) return onReceipt(cmd->send_receipt().sequence_id(), true);
  if (cmd->type() == T::SEND_ERROR)
    return disconnected("SEND_ERROR " + cmd->send_error().message());
  if (cmd->type() == T::CLOSE_PRODUCER) return disconnected("closed by the remote broker");
}

void Replicator::disconnected(const std::string& why) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (state_ == State::kClosed) return;
  MLOG_WARN("{}: replicator to {} ({}): {}; reconnecting in {} ms", topicName_,
            config_.remoteCluster, url_, why, backoff_.count());
  if (cnx_) {
    cnx_->removeProducer(producerId_);
    if (state_ == State::kReady && !cnx_->isClosed()) {
      const uint64_t pid = producerId_;
      cnx_->request([pid](uint64_t id) { return Commands::newCloseProducer(pid, id); },
                    config_.connectTimeout, [](const Result<proto::BaseCommand>&) {});
    }
    cnx_.reset();
  }
  state_ = State::kDisconnected;
  ++epoch_;  // reads and frames of the old connection are ignored from now on
  connectedSinceMs_ = 0;
  inFlight_.clear();
  reading_ = false;
  // Everything not acknowledged is sent again (the remote's dedup drops what it already has).
  readPosition_ = ledger_.nextValidPosition(ackedPosition_);
  scheduleReconnect();
}

void Replicator::scheduleReconnect() {
  state_ = State::kDisconnected;
  auto delay = backoff_;
  backoff_ = std::min(kMaxBackoff, backoff_ * 2);
  timer_.expires_after(delay);
  timer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto me = self.lock(); me && me->state_ == State::kDisconnected) me->connect();
  });
}

void Replicator::entriesAdded() {
  if (state_ == State::kReady && !reading_) readMore();
}

void Replicator::readMore() {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (state_ != State::kReady || reading_) return;
  int room = config_.producerQueueSize - static_cast<int>(inFlight_.size());
  if (room <= 0) return;
  if (ledger_.lastConfirmedEntry() < readPosition_) return;  // caught up: entriesAdded wakes
  int entries = std::min(room, kReadBatch);
  size_t bytes = kReadBytes;
  if (rate_.enabled() && !rateAllows(&entries, &bytes)) return;
  reading_ = true;
  uint64_t epoch = epoch_;
  ledger_.asyncReadEntries(
      readPosition_, entries, bytes,
      [self = weak_from_this(), epoch](const Status& s, std::vector<storage::Entry> entries) {
        if (auto me = self.lock()) me->onEntries(epoch, s, std::move(entries));
      });
}

void Replicator::setDispatchRate(const DispatchRate& rate) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  DispatchRate want = rate;
  if (rate.relativeToPublishRate) {
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - pubAt_).count();
    const uint64_t msgs = topic_.stats().msgInCounter;
    const uint64_t bytes = topic_.stats().bytesInCounter;
    if (secs > 0 && want.msgs > 0) {
      want.msgs += static_cast<int64_t>(static_cast<double>(msgs - pubMsgs_) / secs);
    }
    if (secs > 0 && want.bytes > 0) {
      want.bytes += static_cast<int64_t>(static_cast<double>(bytes - pubBytes_) / secs);
    }
    pubMsgs_ = msgs;
    pubBytes_ = bytes;
    pubAt_ = now;
  }
  if (want == rateApplied_) return;
  rateApplied_ = want;
  rate_.configure(want.msgs, want.bytes, std::max<int64_t>(1, want.ratePeriodInSecond) * kSecondNs,
                  steadyNowNs());
  if (throttled_) {  // waiting for tokens of the old rate: read again now
    throttleTimer_.cancel();
    throttled_ = false;
    readMore();
  }
}

bool Replicator::rateAllows(int* entries, size_t* bytes) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (throttled_) return false;
  const int64_t now = steadyNowNs();
  if (!rate_.hasTokens(now)) {
    // Pulsar reads again after a fixed 1 s; here once the tokens are back, at most 1 s (a
    // changed rate ends the wait).
    throttled_ = true;
    const int64_t waitNs = std::clamp<int64_t>(rate_.throttleNanos(now), 1'000'000, kSecondNs);
    throttleTimer_.expires_after(std::chrono::nanoseconds(waitNs));
    throttleTimer_.async_wait([self = weak_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto me = self.lock()) {
        me->throttled_ = false;
        me->readMore();
      }
    });
    return false;
  }
  // Pulsar reads at most the message permits left (an entry counts as one message).
  if (int64_t m = rate_.msgTokens(now); m != INT64_MAX) {
    *entries = static_cast<int>(std::clamp<int64_t>(m, 1, *entries));
  }
  if (int64_t b = rate_.byteTokens(now); b != INT64_MAX) {
    *bytes = static_cast<size_t>(std::clamp<int64_t>(b, 1, static_cast<int64_t>(*bytes)));
  }
  return true;
}

void Replicator::onEntries(uint64_t epoch, const Status& s, std::vector<storage::Entry> entries) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (epoch != epoch_ || state_ != State::kReady) return;
  reading_ = false;
  if (!s.isOk()) {
    MLOG_WARN("{}: replicator to {}: read failed: {}", topicName_, config_.remoteCluster,
              s.toString());
    return disconnected("read failed");
  }
  if (entries.empty()) return;  // entriesAdded() reads again
  for (const auto& e : entries) forward(e);
  readPosition_ = ledger_.nextValidPosition(entries.back().position);
  advanceCursor();  // skipped entries at the front
  readMore();
}

void Replicator::forward(const storage::Entry& e) {
  InFlight f;
  f.position = e.position;
  proto::MessageMetadata md;
  auto payload = protocol::payloadOf(e.data);
  if (!protocol::parseMetadata(e.data, &md).isOk() || !payload.isOk()) {
    MLOG_WARN("{}: replicator to {}: entry {}:{} unreadable, skipped", topicName_,
              config_.remoteCluster, e.position.ledgerId, e.position.entryId);
    f.done = true;
    inFlight_.push_back(f);
    return;
  }
  remoteMarker(e.position, md, *payload);
  if (!replicates(md, config_.remoteCluster) || md.has_txnid_most_bits()) {
    f.done = true;  // transactional messages: not replicated yet (docs/geo-replication.md)
  } else {
    md.set_replicated_from(config_.localCluster);
    f.sendId = nextSendId_++;
    f.messages = md.has_num_messages_in_batch() ? md.num_messages_in_batch() : 1;
    f.bytes = payload->size();
    f.publishTimeMs = static_cast<int64_t>(md.publish_time());
    proto::CommandSend send;
    send.set_producer_id(producerId_);
    send.set_sequence_id(f.sendId);
    send.set_num_messages(f.messages);
    if (md.has_chunk_id()) send.set_is_chunk(true);
    if (md.has_marker_type()) send.set_marker(true);  // Pulsar's brokers skip dedup for it
    cnx_->send(Commands::newSend(send, md, *payload));
    // Pulsar charges each entry sent as one message and its stored length in bytes.
    if (rate_.enabled()) {
      rate_.consume(1, static_cast<int64_t>(e.data.size()), steadyNowNs());
    }
  }
  inFlight_.push_back(f);
}

void Replicator::remoteMarker(storage::Position pos, const proto::MessageMetadata& md,
                              std::string_view payload) {
  // Markers the remote replicated here reach its replicator only (Pulsar's
  // checkReplicatedSubscriptionMarker), so each is handled once.
  if (!md.has_marker_type() || md.replicated_from() != config_.remoteCluster) return;
  if (!topic_.replicatedSubscriptions() && config_.startReplicatedSubscriptions &&
      md.marker_type() >= kFirstReplSubMarker && md.marker_type() <= kLastReplSubMarker) {
    config_.startReplicatedSubscriptions(topic_);
  }
  if (auto* rs = topic_.replicatedSubscriptions()) rs->remoteMarker(pos, md.marker_type(), payload);
}

void Replicator::onReceipt(uint64_t sendId, bool ok) {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (state_ != State::kReady) return;
  // Receipts of new messages come in order; a duplicate's may come before them.
  auto it = std::find_if(inFlight_.begin(), inFlight_.end(),
                         [sendId](const InFlight& f) { return f.sendId == sendId && !f.done; });
  if (it == inFlight_.end()) return;
  it->done = ok;
  msgOutCount_ += it->messages;
  bytesOutCount_ += static_cast<int64_t>(it->bytes);
  advanceCursor();
  readMore();
}

void Replicator::advanceCursor() {
  while (!inFlight_.empty() && inFlight_.front().done) {
    ackedPosition_ = inFlight_.front().position;
    inFlight_.pop_front();
  }
  // One mark-delete at a time; the positions acknowledged meanwhile go with the next one.
  if (markDeleting_ || !(markRequested_ < ackedPosition_)) return;
  markDeleting_ = true;
  storage::Position pos = ackedPosition_;
  markRequested_ = pos;
  cursor_.asyncMarkDelete(pos, [self = weak_from_this(), pos](const Status& s) {
    auto me = self.lock();
    if (!me) return;
    me->markDeleting_ = false;
    if (me->state_ == State::kClosed) return;
    if (!s.isOk()) {
      MLOG_WARN("{}: replication cursor of {}: mark-delete failed: {}", me->topicName_,
                me->config_.remoteCluster, s.toString());
      me->markRequested_ = me->cursor_.markDeletedPosition();  // tried again with the next
    }
    if (pos < me->ackedPosition_) me->advanceCursor();
  });
}

void Replicator::close() {
  MAGNETAR_DCHECK_ON(topic_.executor());
  if (state_ == State::kClosed) return;
  if (cnx_) {
    cnx_->removeProducer(producerId_);
    if (!cnx_->isClosed()) {
      const uint64_t pid = producerId_;
      cnx_->request([pid](uint64_t id) { return Commands::newCloseProducer(pid, id); },
                    config_.connectTimeout, [](const Result<proto::BaseCommand>&) {});
    }
    cnx_.reset();
  }
  state_ = State::kClosed;
  ++epoch_;
  timer_.cancel();
  throttleTimer_.cancel();
  inFlight_.clear();
}

ReplicatorStats Replicator::stats() const {
  ReplicatorStats s;
  auto now = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(now - rateAt_).count();
  if (secs >= 1.0) {
    msgRateOut_ = static_cast<double>(msgOutCount_ - rateMsgs_) / secs;
    byteRateOut_ = static_cast<double>(bytesOutCount_ - rateBytes_) / secs;
    rateMsgs_ = msgOutCount_;
    rateBytes_ = bytesOutCount_;
    rateAt_ = now;
  }
  s.msgRateOut = msgRateOut_;
  s.msgThroughputOut = byteRateOut_;
  s.msgOutCount = msgOutCount_;
  s.bytesOutCount = bytesOutCount_;
  s.replicationBacklog = state_ == State::kClosed ? 0 : cursor_.numberOfEntriesInBacklog();
  s.connected = state_ == State::kReady;
  if (s.connected) {
    s.outboundConnection = url_;
    s.outboundConnectedSince = isoTime(connectedSinceMs_);
  }
  for (const auto& f : inFlight_) {
    if (f.done || f.publishTimeMs <= 0) continue;
    s.replicationDelayInSeconds = std::max<int64_t>(0, (wallClockMs() - f.publishTimeMs) / 1000);
    break;
  }
  return s;
}

}  // namespace magnetar::broker
