#include "admin/stats_json.h"

#include <fmt/format.h>

#include <ctime>
#include <map>

#include "admin/rest_util.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::ConsumerSnapshot;
using broker::PublisherSnapshot;
using broker::SubscriptionSnapshot;
using broker::TopicSnapshot;

double averageSize(double bytes, double msgs) { return msgs > 0 ? bytes / msgs : 0; }

json::object publisherJson(const PublisherSnapshot& p) {
  json::object o;
  o["accessMode"] = p.accessMode;
  o["msgRateIn"] = p.rateIn.msgRate;
  o["msgThroughputIn"] = p.rateIn.byteRate;
  o["averageMsgSize"] = averageSize(p.rateIn.byteRate, p.rateIn.msgRate);
  o["chunkedMessageRate"] = 0.0;
  o["producerId"] = p.producerId;
  o["supportsPartialProducer"] = false;
  o["producerName"] = p.producerName;
  o["address"] = p.address;
  if (p.connectedSinceMs > 0) o["connectedSince"] = isoTime(p.connectedSinceMs);
  if (!p.clientVersion.empty()) o["clientVersion"] = p.clientVersion;
  o["msgInCounter"] = p.msgInCounter;
  o["bytesInCounter"] = p.bytesInCounter;
  o["metadata"] = json::object{};
  return o;
}

json::object consumerJson(const ConsumerSnapshot& c) {
  json::object o;
  o["msgRateOut"] = c.rateOut.msgRate;
  o["msgThroughputOut"] = c.rateOut.byteRate;
  o["bytesOutCounter"] = c.bytesOutCounter;
  o["msgOutCounter"] = c.msgOutCounter;
  o["msgRateRedeliver"] = 0.0;
  o["messageAckRate"] = 0.0;
  o["chunkedMessageRate"] = 0.0;
  o["consumerName"] = c.consumerName;
  o["availablePermits"] = c.availablePermits;
  o["unackedMessages"] = c.unackedMessages;
  o["avgMessagesPerEntry"] = 0;
  o["blockedConsumerOnUnackedMsgs"] = c.blockedConsumerOnUnackedMsgs;
  o["priorityLevel"] = c.priorityLevel;
  o["address"] = c.address;
  if (c.connectedSinceMs > 0) o["connectedSince"] = isoTime(c.connectedSinceMs);
  if (!c.clientVersion.empty()) o["clientVersion"] = c.clientVersion;
  if (!c.keyHashRanges.empty()) {
    json::array ranges;
    json::array arrays;
    for (const auto& [from, to] : c.keyHashRanges) {
      ranges.emplace_back(fmt::format("[{}, {}]", from, to));
      arrays.emplace_back(json::array{from, to});
    }
    o["keyHashRanges"] = std::move(ranges);
    o["keyHashRangeArrays"] = std::move(arrays);
    o["drainingHashesCount"] = c.drainingHashesCount;
    o["drainingHashesClearedTotal"] = c.drainingHashesClearedTotal;
    o["drainingHashesUnackedMessages"] = c.drainingHashesUnackedMessages;
    json::array draining;
    for (const auto& h : c.drainingHashes) {
      draining.push_back(json::object{{"hash", h.hash},
                                      {"unackMsgs", h.unackMsgs},
                                      {"blockedAttempts", h.blockedAttempts}});
    }
    o["drainingHashes"] = std::move(draining);
  }
  o["metadata"] = json::object{};
  return o;
}

json::object subscriptionJson(const SubscriptionSnapshot& s) {
  json::object o;
  o["msgRateOut"] = s.rateOut.msgRate;
  o["msgThroughputOut"] = s.rateOut.byteRate;
  o["bytesOutCounter"] = s.bytesOutCounter;
  o["msgOutCounter"] = s.msgOutCounter;
  o["msgRateRedeliver"] = s.msgRateRedeliver;
  o["messageAckRate"] = 0.0;
  o["chunkedMessageRate"] = 0;
  o["msgBacklog"] = s.msgBacklog;
  o["backlogSize"] = s.backlogSize;
  o["earliestMsgPublishTimeInBacklog"] = 0;
  o["msgBacklogNoDelayed"] = s.msgBacklog - s.msgDelayed;  // as Pulsar
  o["blockedSubscriptionOnUnackedMsgs"] = s.blockedOnUnackedMsgs;
  o["msgDelayed"] = s.msgDelayed;
  o["delayedMessageIndexSizeInBytes"] = s.delayedMessageIndexSizeInBytes;
  o["unackedMessages"] = s.unackedMessages;
  o["type"] = s.type;
  if (!s.activeConsumerName.empty()) o["activeConsumerName"] = s.activeConsumerName;
  o["msgRateExpired"] = s.msgRateExpired;
  o["totalMsgExpired"] = s.totalMsgExpired;
  o["lastExpireTimestamp"] = s.lastExpireTimestamp;
  json::array consumers;
  for (const auto& c : s.consumers) consumers.push_back(consumerJson(c));
  o["consumers"] = std::move(consumers);
  o["isDurable"] = s.durable;
  o["isReplicated"] = false;
  o["allowOutOfOrderDelivery"] = false;
  if (!s.keySharedMode.empty()) {
    o["keySharedMode"] = s.keySharedMode;
    o["drainingHashesCount"] = s.drainingHashesCount;
    o["drainingHashesClearedTotal"] = s.drainingHashesClearedTotal;
    o["drainingHashesUnackedMessages"] = s.drainingHashesUnackedMessages;
    // Magnetar's: entries held back now because their hash drains, and attempts so far.
    o["drainingBlockedEntries"] = s.drainingBlockedEntries;
    o["drainingBlockedAttemptsTotal"] = s.drainingBlockedAttemptsTotal;
  }
  o["consumersAfterMarkDeletePosition"] = json::object{};
  o["nonContiguousDeletedMessagesRanges"] = 0;
  o["nonContiguousDeletedMessagesRangesSerializedSize"] = 0;
  o["subscriptionProperties"] = json::object{};
  return o;
}

void addRate(broker::RateValue& into, const broker::RateValue& r) {
  into.msgRate += r.msgRate;
  into.byteRate += r.byteRate;
}

void mergeSubscription(SubscriptionSnapshot& into, const SubscriptionSnapshot& s) {
  into.msgBacklog += s.msgBacklog;
  into.backlogSize += s.backlogSize;
  into.unackedMessages += s.unackedMessages;
  into.msgDelayed += s.msgDelayed;
  into.delayedMessageIndexSizeInBytes += s.delayedMessageIndexSizeInBytes;
  into.blockedOnUnackedMsgs = into.blockedOnUnackedMsgs || s.blockedOnUnackedMsgs;
  into.msgOutCounter += s.msgOutCounter;
  into.bytesOutCounter += s.bytesOutCounter;
  into.msgRedeliverCounter += s.msgRedeliverCounter;
  addRate(into.rateOut, s.rateOut);
  into.msgRateRedeliver += s.msgRateRedeliver;
  into.drainingHashesCount += s.drainingHashesCount;
  into.drainingHashesClearedTotal += s.drainingHashesClearedTotal;
  into.drainingHashesUnackedMessages += s.drainingHashesUnackedMessages;
  into.drainingBlockedEntries += s.drainingBlockedEntries;
  into.drainingBlockedAttemptsTotal += s.drainingBlockedAttemptsTotal;
  if (into.type == "None") into.type = s.type;
  for (const auto& c : s.consumers) {
    auto it =
        std::find_if(into.consumers.begin(), into.consumers.end(),
                     [&](const ConsumerSnapshot& x) { return x.consumerName == c.consumerName; });
    if (it == into.consumers.end()) {
      into.consumers.push_back(c);
      continue;
    }
    it->availablePermits += c.availablePermits;
    it->unackedMessages += c.unackedMessages;
    it->msgOutCounter += c.msgOutCounter;
    it->bytesOutCounter += c.bytesOutCounter;
    it->blockedConsumerOnUnackedMsgs =
        it->blockedConsumerOnUnackedMsgs || c.blockedConsumerOnUnackedMsgs;
    it->drainingHashesCount += c.drainingHashesCount;
    it->drainingHashesClearedTotal += c.drainingHashesClearedTotal;
    it->drainingHashesUnackedMessages += c.drainingHashesUnackedMessages;
    addRate(it->rateOut, c.rateOut);
  }
}

}  // namespace

std::string isoTime(int64_t epochMs) { return broker::isoTime(epochMs); }

json::object topicStatsJson(const TopicSnapshot& t) {
  json::object o;
  o["msgRateIn"] = t.rateIn.msgRate;
  o["msgThroughputIn"] = t.rateIn.byteRate;
  o["msgRateOut"] = t.rateOut.msgRate;
  o["msgThroughputOut"] = t.rateOut.byteRate;
  o["bytesInCounter"] = t.bytesInCounter;
  o["msgInCounter"] = t.msgInCounter;
  o["bytesOutCounter"] = t.bytesOutCounter;
  o["msgOutCounter"] = t.msgOutCounter;
  o["averageMsgSize"] = averageSize(t.rateIn.byteRate, t.rateIn.msgRate);
  o["msgChunkPublished"] = false;
  o["storageSize"] = t.storageSize;
  o["backlogSize"] = t.backlogSize;
  o["backlogQuotaLimitSize"] = t.backlogQuotaLimitSize;
  o["backlogQuotaLimitTime"] = t.backlogQuotaLimitTime;
  o["oldestBacklogMessageAgeSeconds"] = t.oldestBacklogMessageAgeSeconds;
  if (t.oldestBacklogMessageSubscriptionName.empty()) {
    o["oldestBacklogMessageSubscriptionName"] = nullptr;
  } else {
    o["oldestBacklogMessageSubscriptionName"] = t.oldestBacklogMessageSubscriptionName;
  }
  o["publishRateLimitedTimes"] = 0;
  o["earliestMsgPublishTimeInBacklogs"] = 0;
  o["offloadedStorageSize"] = 0;
  json::array publishers;
  for (const auto& p : t.publishers) publishers.push_back(publisherJson(p));
  o["publishers"] = std::move(publishers);
  o["waitingPublishers"] = 0;
  json::object subs;
  for (const auto& s : t.subscriptions) subs[s.name] = subscriptionJson(s);
  o["subscriptions"] = std::move(subs);
  o["replication"] = json::object{};
  o["deduplicationStatus"] = t.deduplicationEnabled ? "Enabled" : "Disabled";
  o["nonContiguousDeletedMessagesRanges"] = 0;
  o["nonContiguousDeletedMessagesRangesSerializedSize"] = 0;
  o["delayedMessageIndexSizeInBytes"] = 0;
  o["topicEpoch"] = nullptr;
  o["compaction"] = json::object{
      {"lastCompactionRemovedEventCount", t.compaction.lastCompactionRemovedEventCount},
      {"lastCompactionSucceedTimestamp", t.compaction.lastCompactionSucceedTimestamp},
      {"lastCompactionFailedTimestamp", t.compaction.lastCompactionFailedTimestamp},
      {"lastCompactionDurationTimeInMills", t.compaction.lastCompactionDurationTimeInMills}};
  return o;
}

TopicSnapshot mergeTopicSnapshots(const std::string& name,
                                  const std::vector<TopicSnapshot>& parts) {
  TopicSnapshot m;
  m.name = name;
  for (const auto& t : parts) {
    m.namespaceName = t.namespaceName;
    m.msgInCounter += t.msgInCounter;
    m.bytesInCounter += t.bytesInCounter;
    m.msgOutCounter += t.msgOutCounter;
    m.bytesOutCounter += t.bytesOutCounter;
    addRate(m.rateIn, t.rateIn);
    addRate(m.rateOut, t.rateOut);
    m.storageSize += t.storageSize;
    m.backlogSize += t.backlogSize;
    m.msgBacklog += t.msgBacklog;
    m.numberOfEntries += t.numberOfEntries;
    for (const auto& p : t.publishers) {
      auto it = std::find_if(
          m.publishers.begin(), m.publishers.end(),
          [&](const PublisherSnapshot& x) { return x.producerName == p.producerName; });
      if (it == m.publishers.end()) {
        m.publishers.push_back(p);
      } else {
        it->msgInCounter += p.msgInCounter;
        it->bytesInCounter += p.bytesInCounter;
        addRate(it->rateIn, p.rateIn);
      }
    }
    for (const auto& s : t.subscriptions) {
      auto it = std::find_if(m.subscriptions.begin(), m.subscriptions.end(),
                             [&](const SubscriptionSnapshot& x) { return x.name == s.name; });
      if (it == m.subscriptions.end()) {
        m.subscriptions.push_back(s);
      } else {
        mergeSubscription(*it, s);
      }
    }
  }
  return m;
}

json::object partitionedStatsJson(const std::string& name, const std::vector<TopicSnapshot>& parts,
                                  bool perPartition) {
  json::object o = topicStatsJson(mergeTopicSnapshots(name, parts));
  o["metadata"] = json::object{{"partitions", static_cast<int64_t>(parts.size())}};
  json::object per;
  if (perPartition) {
    for (const auto& t : parts) per[t.name] = topicStatsJson(t);
  }
  o["partitions"] = std::move(per);
  return o;
}

json::object internalStatsJson(const broker::InternalStatsSnapshot& s) {
  json::object o;
  o["entriesAddedCounter"] = s.entriesAddedCounter;
  o["numberOfEntries"] = s.numberOfEntries;
  o["totalSize"] = s.totalSize;
  o["currentLedgerEntries"] = s.currentLedgerEntries;
  o["currentLedgerSize"] = s.currentLedgerSize;
  o["waitingCursorsCount"] = 0;
  o["pendingAddEntriesCount"] = 0;
  o["lastConfirmedEntry"] = positionText(s.lastConfirmedEntry);
  o["state"] = s.state;
  json::array ledgers;
  for (const auto& l : s.ledgers) {
    ledgers.push_back(json::object{{"ledgerId", l.ledgerId},
                                   {"entries", l.entries},
                                   {"size", l.sizeBytes},
                                   {"offloaded", false},
                                   {"underReplicated", false}});
  }
  o["ledgers"] = std::move(ledgers);
  json::object cursors;
  for (const auto& c : s.cursors) {
    std::string ranges = "[";
    for (size_t i = 0; i < c.individuallyDeleted.size(); ++i) {
      if (i) ranges += ", ";
      ranges += fmt::format("({}..{}]", positionText(c.individuallyDeleted[i].first),
                            positionText(c.individuallyDeleted[i].second));
    }
    ranges += "]";
    json::object co;
    co["markDeletePosition"] = positionText(c.markDeletePosition);
    co["readPosition"] = positionText(c.readPosition);
    co["waitingReadOp"] = false;
    co["pendingReadOps"] = 0;
    co["messagesConsumedCounter"] = c.messagesConsumedCounter;
    co["cursorLedger"] = -1;
    co["cursorLedgerLastEntry"] = -1;
    co["individuallyDeletedMessages"] = ranges;
    co["lastLedgerSwitchTimestamp"] = "";
    co["state"] = "Open";
    co["active"] = c.active;
    co["numberOfEntriesSinceFirstNotAckedMessage"] = c.backlog;
    co["totalNonContiguousDeletedMessagesRange"] = c.individuallyDeleted.size();
    co["subscriptionHavePendingRead"] = false;
    co["subscriptionHavePendingReplayRead"] = false;
    co["properties"] = json::object{};
    cursors[c.name] = std::move(co);
  }
  o["cursors"] = std::move(cursors);
  o["schemaLedgers"] = json::array{};
  o["compactedLedger"] = json::object{{"ledgerId", s.compactedLedgerId},
                                      {"entries", s.compactedEntries},
                                      {"size", s.compactedSize},
                                      {"offloaded", false},
                                      {"underReplicated", false}};
  return o;
}

}  // namespace magnetar::admin
