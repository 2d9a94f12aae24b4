#include "broker/topic/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <tuple>

#include "broker/topic/internal/draining_hashes.h"
#include "broker/topic/internal/key_shared_selector.h"
#include "broker/topic/topic.h"

namespace magnetar::broker {
namespace {

// Bytes of `entries` entries at the ledger's average entry size.
int64_t estimateBytes(storage::ManagedLedger& ml, int64_t entries) {
  int64_t n = ml.numberOfEntries();
  if (n <= 0 || entries <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(ml.totalSizeBytes()) / n * entries);
}

std::string keySharedModeOf(const Dispatcher& d) {
  const KeySharedSelector* sel = d.keySharedSelector();
  return sel && sel->stickyMode() ? "STICKY" : "AUTO_SPLIT";
}

ConsumerSnapshot snapshotConsumer(const Consumer& c, const Dispatcher& d, const std::string& sub,
                                  const std::vector<DrainingHashInfo>& draining,
                                  const TopicRates* rates) {
  ConsumerSnapshot s;
  s.consumerName = c.name();
  s.consumerId = c.id();
  s.address = c.sink() ? c.sink()->peerAddress() : "";
  s.clientVersion = c.sink() ? c.sink()->clientVersion() : "";
  s.connectedSinceMs = c.connectedSinceMs;
  s.metadata = c.metadata;
  s.priorityLevel = c.priorityLevel();
  s.availablePermits = c.permits;
  s.unackedMessages = c.unackedMessages;
  s.blockedConsumerOnUnackedMsgs = c.blockedOnUnacked;
  s.msgOutCounter = c.msgOutCounter;
  s.bytesOutCounter = c.bytesOutCounter;
  if (rates) s.rateOut = rates->rate(consumerRateKey(sub, &c));
  s.drainingHashesClearedTotal = c.drainingHashesClearedTotal;
  for (const auto& h : draining) {
    if (h.holder != &c) continue;
    s.drainingHashes.push_back(DrainingHashSnapshot{h.hash, h.unackMsgs, h.blockedAttempts});
    s.drainingHashesUnackedMessages += h.unackMsgs;
  }
  s.drainingHashesCount = static_cast<int32_t>(s.drainingHashes.size());
  if (const auto* sel = d.keySharedSelector()) {
    // Adjacent ranges (consistent-hashing points next to each other) are printed as one.
    auto ranges = sel->rangesOf(&c);
    std::sort(ranges.begin(), ranges.end());
    for (const auto& r : ranges) {
      if (!s.keyHashRanges.empty() && s.keyHashRanges.back().second + 1 >= r.first) {
        s.keyHashRanges.back().second = std::max(s.keyHashRanges.back().second, r.second);
      } else {
        s.keyHashRanges.push_back(r);
      }
    }
  }
  return s;
}

SubscriptionSnapshot snapshotSubscription(Subscription& sub, storage::ManagedLedger& ml,
                                          const TopicRates* rates) {
  SubscriptionSnapshot s;
  s.name = sub.name();
  s.durable = sub.durable();
  s.replicated = sub.isReplicated();
  s.msgBacklog = sub.msgBacklog();
  s.backlogSize = estimateBytes(ml, s.msgBacklog);
  s.type = "None";
  s.totalMsgExpired = sub.expiredCounter();
  if (const PendingAckHandle* pa = sub.pendingAck()) s.pendingAck = pa->metrics();
  s.lastExpireTimestamp = sub.lastExpireTimestampMs();
  if (Dispatcher* d = sub.dispatcher()) {
    s.type = subTypeName(d->type());
    s.unackedMessages = d->unackedMessages();
    s.msgDelayed = d->delayedMessages();
    s.delayedMessageIndexSizeInBytes = static_cast<int64_t>(d->delayedTrackerBytes());
    s.blockedOnUnackedMsgs = d->blockedOnUnacked();
    s.msgOutCounter = d->stats().msgOutCounter;
    s.bytesOutCounter = d->stats().bytesOutCounter;
    s.msgRedeliverCounter = d->stats().msgRedeliverCounter;
    s.msgDropCounter = d->stats().msgDropCounter;
    if (Consumer* a = d->activeConsumer()) s.activeConsumerName = a->name();
    if (d->type() == proto::CommandSubscribe::Key_Shared) s.keySharedMode = keySharedModeOf(*d);
    std::vector<DrainingHashInfo> draining = d->drainingHashes();
    for (const auto& h : draining) s.drainingHashesUnackedMessages += h.unackMsgs;
    s.drainingHashesCount = static_cast<int32_t>(draining.size());
    s.drainingHashesClearedTotal = d->drainingHashesClearedTotal();
    s.drainingBlockedEntries = d->entriesBlockedByDraining(draining);
    s.drainingBlockedAttemptsTotal = d->stats().blockedByDraining;
    for (const auto& c : d->consumers()) {
      s.consumers.push_back(snapshotConsumer(*c, *d, s.name, draining, rates));
    }
  }
  if (rates) {
    s.rateOut = rates->rate("s:" + s.name);
    s.msgRateRedeliver = rates->rate("r:" + s.name).msgRate;
    s.msgRateExpired = rates->rate("x:" + s.name).msgRate;
    if (sub.nonPersistent()) s.msgDropRate = rates->rate("d:" + s.name).msgRate;
  }
  return s;
}

std::vector<std::pair<storage::Position, storage::Position>> ackedRanges(
    storage::ManagedLedger& ml, storage::ManagedCursor& cursor) {
  std::vector<std::pair<storage::Position, storage::Position>> out;
  storage::Position lac = ml.lastConfirmedEntry();
  storage::Position prev = cursor.markDeletedPosition();
  storage::Position p = ml.nextValidPosition(prev);
  bool inRange = false;
  for (int64_t i = 0; i < kMaxScannedEntries && p <= lac && p.entryId >= 0; ++i) {
    if (cursor.isAcknowledged(p)) {
      if (inRange) {
        out.back().second = p;
      } else {
        out.emplace_back(prev, p);
        inRange = true;
      }
    } else {
      inRange = false;
    }
    prev = p;
    p = ml.nextValidPosition(p);
  }
  return out;
}

}  // namespace

std::string subTypeName(int subType) {
  switch (subType) {
    case proto::CommandSubscribe::Exclusive:
      return "Exclusive";
    case proto::CommandSubscribe::Shared:
      return "Shared";
    case proto::CommandSubscribe::Failover:
      return "Failover";
    case proto::CommandSubscribe::Key_Shared:
      return "Key_Shared";
    default:
      return "None";
  }
}

std::string consumerRateKey(const std::string& sub, const void* consumer) {
  return fmt::format("c:{}/{}", sub, consumer);
}

void TopicRates::sample(std::unordered_map<std::string, Sample>& next, const std::string& key,
                        uint64_t msgs, uint64_t bytes, int64_t nowNs, int64_t prevTickNs) const {
  Sample base;
  int64_t sinceNs = prevTickNs;
  auto it = samples_.find(key);
  if (it != samples_.end() && it->second.msgs <= msgs && it->second.bytes <= bytes) {
    base = it->second;
    sinceNs = lastNs_;
  }
  double seconds = std::max(1e-3, static_cast<double>(nowNs - sinceNs) / 1e9);
  Sample s;
  s.msgs = msgs;
  s.bytes = bytes;
  s.rate.msgRate = static_cast<double>(msgs - base.msgs) / seconds;
  s.rate.byteRate = static_cast<double>(bytes - base.bytes) / seconds;
  next[key] = s;
}

void TopicRates::update(PersistentTopic& topic, int64_t nowNs, int64_t prevTickNs) {
  if (owner_ != &topic) {
    owner_ = &topic;
    samples_.clear();
  }
  std::unordered_map<std::string, Sample> next;
  sample(next, "in", topic.stats().msgInCounter, topic.stats().bytesInCounter, nowNs, prevTickNs);
  for (const auto& [name, p] : topic.producers()) {
    sample(next, "p:" + name, p->msgInCounter, p->bytesInCounter, nowNs, prevTickNs);
    if (!topic.name().isPersistent())
      sample(next, "pd:" + name, p->msgDropCounter, 0, nowNs, prevTickNs);
  }
  for (const auto& [name, sub] : topic.subscriptions()) {
    sample(next, "x:" + name, sub->expiredCounter(), 0, nowNs, prevTickNs);
    Dispatcher* d = sub->dispatcher();
    if (!d) continue;
    sample(next, "s:" + name, d->stats().msgOutCounter, d->stats().bytesOutCounter, nowNs,
           prevTickNs);
    sample(next, "r:" + name, d->stats().msgRedeliverCounter, 0, nowNs, prevTickNs);
    if (d->nonPersistent())
      sample(next, "d:" + name, d->stats().msgDropCounter, 0, nowNs, prevTickNs);
    for (const auto& c : d->consumers()) {
      sample(next, consumerRateKey(name, c.get()), c->msgOutCounter, c->bytesOutCounter, nowNs,
             prevTickNs);
    }
  }
  samples_ = std::move(next);
  lastNs_ = nowNs;
  TopicLoad l;
  RateValue in = rate("in");
  // Dispatch limits relative to the publish rate follow it (PIP-52).
  topic.updatePublishRateForDispatch(in.msgRate, in.byteRate);
  l.msgRateIn = in.msgRate;
  l.msgThroughputIn = in.byteRate;
  l.producers = static_cast<int32_t>(topic.producers().size());
  for (const auto& [name, sub] : topic.subscriptions()) {
    RateValue out = rate("s:" + name);
    l.msgRateOut += out.msgRate;
    l.msgThroughputOut += out.byteRate;
    if (Dispatcher* d = sub->dispatcher())
      l.consumers += static_cast<int32_t>(d->consumers().size());
  }
  MutexLock lock(loadMu_);
  load_ = l;
}

TopicLoad TopicRates::load() const {
  MutexLock lock(loadMu_);
  return load_;
}

RateValue TopicRates::rate(const std::string& key) const {
  auto it = samples_.find(key);
  return it == samples_.end() ? RateValue{} : it->second.rate;
}

std::shared_ptr<TopicRates> RateRegistry::of(const std::string& topicName) {
  MutexLock lock(mu_);
  auto& r = rates_[topicName];
  if (!r) r = std::make_shared<TopicRates>();
  return r;
}

std::shared_ptr<TopicRates> RateRegistry::find(const std::string& topicName) const {
  MutexLock lock(mu_);
  auto it = rates_.find(topicName);
  return it == rates_.end() ? nullptr : it->second;
}

void RateRegistry::retainOnly(const std::vector<std::string>& live) {
  MutexLock lock(mu_);
  for (auto it = rates_.begin(); it != rates_.end();) {
    if (std::binary_search(live.begin(), live.end(), it->first)) {
      ++it;
    } else {
      it = rates_.erase(it);
    }
  }
}

std::string isoTime(int64_t epochMs) {
  if (epochMs <= 0) return "";
  std::time_t secs = static_cast<std::time_t>(epochMs / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, epochMs % 1000);
}

std::optional<ConsumerStatsSnapshot> snapshotConsumerStats(PersistentTopic& topic,
                                                           const std::string& sub,
                                                           const Consumer* consumer,
                                                           const TopicRates* rates) {
  Subscription* s = topic.subscription(sub);
  Dispatcher* d = s ? s->dispatcher() : nullptr;
  if (!d) return std::nullopt;
  for (const auto& c : d->consumers()) {
    if (c.get() != consumer) continue;
    ConsumerStatsSnapshot out;
    out.consumer = snapshotConsumer(*c, *d, sub, {}, rates);
    out.type = subTypeName(d->type());
    out.msgBacklog = s->msgBacklog();
    return out;
  }
  return std::nullopt;
}

TopicSnapshot snapshotTopic(PersistentTopic& topic, const TopicRates* rates) {
  TopicSnapshot t;
  storage::ManagedLedger& ml = topic.ledger();
  t.name = topic.name().toString();
  t.namespaceName = topic.name().namespaceName();
  t.nonPersistent = !topic.name().isPersistent();
  t.msgInCounter = topic.stats().msgInCounter;
  t.bytesInCounter = topic.stats().bytesInCounter;
  if (rates) t.rateIn = rates->rate("in");
  t.storageSize = ml.totalSizeBytes();
  t.backlogQuotaLimitSize = topic.policyLimits().backlogQuota.limitSize;
  t.backlogQuotaLimitTime = topic.policyLimits().backlogQuotaTime.limitTime;
  t.publishRateLimitedTimes = topic.publishRateLimitedTimes();
  t.oldestBacklogMessageAgeSeconds = topic.backlogAgeSeconds();
  t.oldestBacklogMessageSubscriptionName = topic.oldestBacklogSubscription();
  t.sizeBacklogEvictions = topic.sizeBacklogEvictions();
  t.timeBacklogEvictions = topic.timeBacklogEvictions();
  t.numberOfEntries = ml.numberOfEntries();
  t.terminated = topic.isTerminated();
  t.deduplicationEnabled = topic.deduplication().enabled();
  for (const auto& [cluster, r] : topic.replicators()) t.replication[cluster] = r->stats();
  const TransactionBufferStats tb = topic.transactionBuffer().stats(false);
  t.txnOngoing = tb.ongoingTxnSize;
  t.txnCommitted = tb.committedTxnCount;
  t.txnAborted = tb.abortedTxnCount;
  t.compaction = topic.compactor().record();
  for (const auto& [name, p] : topic.producers()) {
    PublisherSnapshot ps;
    ps.producerName = name;
    ps.producerId = p->id();
    ps.address = p->sink() ? p->sink()->peerAddress() : "";
    ps.clientVersion = p->sink() ? p->sink()->clientVersion() : "";
    ps.connectedSinceMs = p->connectedSinceMs;
    ps.metadata = p->metadata;
    ps.accessMode = proto::ProducerAccessMode_Name(p->accessMode());
    ps.msgInCounter = p->msgInCounter;
    ps.bytesInCounter = p->bytesInCounter;
    if (rates) ps.rateIn = rates->rate("p:" + name);
    if (rates && !topic.name().isPersistent()) ps.msgDropRate = rates->rate("pd:" + name).msgRate;
    t.publishers.push_back(std::move(ps));
  }
  int64_t maxBacklog = 0;
  for (const auto& [name, sub] : topic.subscriptions()) {
    SubscriptionSnapshot s = snapshotSubscription(*sub, ml, rates);
    t.msgOutCounter += s.msgOutCounter;
    t.bytesOutCounter += s.bytesOutCounter;
    t.rateOut.msgRate += s.rateOut.msgRate;
    t.rateOut.byteRate += s.rateOut.byteRate;
    t.msgBacklog += s.msgBacklog;
    maxBacklog = std::max(maxBacklog, s.msgBacklog);
    t.subscriptions.push_back(std::move(s));
  }
  t.backlogSize = estimateBytes(ml, maxBacklog);
  return t;
}

namespace {

// The ledger-wide part of the internal stats.
InternalStatsSnapshot ledgerPart(storage::ManagedLedger& ml, uint64_t entriesAdded) {
  InternalStatsSnapshot s;
  s.entriesAddedCounter = entriesAdded;
  s.numberOfEntries = ml.numberOfEntries();
  s.totalSize = ml.totalSizeBytes();
  s.lastConfirmedEntry = ml.lastWrittenEntry();
  s.state = ml.isTerminated() ? "Terminated" : "LedgerOpened";
  s.ledgers = ml.ledgerStats();
  if (!s.ledgers.empty()) {
    s.currentLedgerEntries = s.ledgers.back().entries;
    s.currentLedgerSize = s.ledgers.back().sizeBytes;
  }
  return s;
}

// One cursor's part; acked ranges only when withRanges (the scan reads the ledger's index).
CursorSnapshot cursorPart(storage::ManagedLedger& ml, storage::ManagedCursor& cur,
                          uint64_t entriesAdded, bool withRanges) {
  CursorSnapshot c;
  c.name = cur.name();
  c.markDeletePosition = cur.markDeletedPosition();
  c.backlog = cur.numberOfEntriesInBacklog();
  if (withRanges) c.individuallyDeleted = ackedRanges(ml, cur);
  // Mark-delete always covers a contiguous acked run, so the next entry is unacked.
  c.readPosition = ml.nextValidPosition(c.markDeletePosition);
  c.messagesConsumedCounter = static_cast<int64_t>(entriesAdded) - static_cast<int64_t>(c.backlog);
  std::tie(c.cursorLedger, c.cursorLedgerLastEntry) = cur.cursorLedger();
  return c;
}

}  // namespace

InternalStatsSnapshot snapshotInternalStats(PersistentTopic& topic) {
  storage::ManagedLedger& ml = topic.ledger();
  const uint64_t added = topic.stats().entriesAddedCounter;
  InternalStatsSnapshot s = ledgerPart(ml, added);
  s.state = topic.isTerminated() ? "Terminated" : "LedgerOpened";
  for (const auto& [name, sub] : topic.subscriptions()) {
    CursorSnapshot c = cursorPart(ml, sub->cursor(), added, true);
    c.name = name;
    c.active = sub->consumerCount() > 0;
    s.cursors.push_back(std::move(c));
  }
  for (auto* cur : ml.cursors()) {
    if (cur->name() == kCompactionCursorName)
      s.cursors.push_back(cursorPart(ml, *cur, added, false));
  }
  if (auto view = topic.compactor().view()) {
    s.compactedLedgerId = view->ledgerId();
    s.compactedEntries = static_cast<int64_t>(view->entries());
    s.compactedSize = view->sizeBytes();
  }
  return s;
}

InternalStatsSnapshot snapshotLedgerInternalStats(storage::ManagedLedger& ml,
                                                  uint64_t entriesAdded) {
  InternalStatsSnapshot s = ledgerPart(ml, entriesAdded);
  for (auto* cur : ml.cursors()) {
    CursorSnapshot c = cursorPart(ml, *cur, entriesAdded, true);
    c.properties = cur->properties();
    s.cursors.push_back(std::move(c));
  }
  return s;
}

}  // namespace magnetar::broker
