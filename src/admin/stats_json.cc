#include "admin/stats_json.h"

#include <fmt/format.h>

#include <ctime>
#include <functional>
#include <initializer_list>
#include <map>
#include <string_view>

#include "admin/rest_util.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::ConsumerSnapshot;
using broker::PublisherSnapshot;
using broker::SubscriptionSnapshot;
using broker::TopicSnapshot;

// Pulsar's ReplicatorStatsImpl (what Magnetar does not count: inbound counts, expiry, 0).
json::object replicatorStatsJson(const broker::ReplicatorStats& r) {
  json::object o{{"msgRateIn", 0.0},
                 {"msgInCount", 0},
                 {"msgThroughputIn", 0.0},
                 {"bytesInCount", 0},
                 {"msgRateOut", r.msgRateOut},
                 {"msgOutCount", r.msgOutCount},
                 {"msgThroughputOut", r.msgThroughputOut},
                 {"bytesOutCount", r.bytesOutCount},
                 {"msgRateExpired", 0.0},
                 {"msgExpiredCount", 0},
                 {"replicationBacklog", r.replicationBacklog},
                 {"connected", r.connected},
                 {"replicationDelayInSeconds", r.replicationDelayInSeconds}};
  if (!r.outboundConnection.empty()) {
    o["outboundConnection"] = r.outboundConnection;
    o["outboundConnectedSince"] = r.outboundConnectedSince;
  }
  return o;
}

// Pulsar's PersistentTopic.asyncGetStats: a remote cluster's replicator producing here is not a
// publisher; it gives its cluster's entry (made, not connected, when this topic has no
// replicator to that cluster) the inbound side: inboundConnection, inboundConnectedSince,
// msgRateIn, msgThroughputIn. False for the other producers (listed as publishers).
bool inboundReplicator(const broker::PublisherSnapshot& p, json::object& replication) {
  std::string remote = broker::replicatorProducerCluster(p.producerName);
  if (remote.empty()) return false;
  if (!replication.contains(remote)) replication[remote] = replicatorStatsJson({});
  json::object& r = replication[remote].as_object();
  r["msgRateIn"] = p.rateIn.msgRate;
  r["msgThroughputIn"] = p.rateIn.byteRate;
  r["inboundConnection"] = p.address;
  if (p.connectedSinceMs > 0) r["inboundConnectedSince"] = isoTime(p.connectedSinceMs);
  return true;
}

double averageSize(double bytes, double msgs) { return msgs > 0 ? bytes / msgs : 0; }

// A producer's or consumer's metadata (the client's properties), as Pulsar's stats show it.
json::object metadataJson(const std::map<std::string, std::string>& m) {
  json::object o;
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

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
  o["metadata"] = metadataJson(p.metadata);
  return o;
}

// The dispatch rates and counters Pulsar's ConsumerStats and SubscriptionStats both begin with.
template <typename S>
json::object dispatchStatsJson(const S& s) {
  return json::object{{"msgRateOut", s.rateOut.msgRate},
                      {"msgThroughputOut", s.rateOut.byteRate},
                      {"bytesOutCounter", s.bytesOutCounter},
                      {"msgOutCounter", s.msgOutCounter}};
}

json::object consumerJson(const ConsumerSnapshot& c) {
  json::object o = dispatchStatsJson(c);
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
      draining.push_back(json::object{
          {"hash", h.hash}, {"unackMsgs", h.unackMsgs}, {"blockedAttempts", h.blockedAttempts}});
    }
    o["drainingHashes"] = std::move(draining);
  }
  o["metadata"] = metadataJson(c.metadata);
  return o;
}

json::object subscriptionJson(const SubscriptionSnapshot& s, bool excludeConsumers) {
  json::object o = dispatchStatsJson(s);
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
  if (!excludeConsumers) {
    for (const auto& c : s.consumers) consumers.push_back(consumerJson(c));
  }
  o["consumers"] = std::move(consumers);
  o["isDurable"] = s.durable;
  o["isReplicated"] = s.replicated;
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
  into.msgDropCounter += s.msgDropCounter;
  into.msgDropRate += s.msgDropRate;
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

json::object topicStatsJson(const TopicSnapshot& t, const StatsOptions& opts) {
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
  o["publishRateLimitedTimes"] = t.publishRateLimitedTimes;
  o["earliestMsgPublishTimeInBacklogs"] = 0;
  o["offloadedStorageSize"] = 0;
  json::object replication;
  for (const auto& [cluster, r] : t.replication) replication[cluster] = replicatorStatsJson(r);
  json::array publishers;
  for (const auto& p : t.publishers) {
    if (!t.nonPersistent && inboundReplicator(p, replication)) continue;
    if (opts.excludePublishers) continue;  // the replication entries above are still made
    publishers.push_back(publisherJson(p));
    // Pulsar's NonPersistentPublisherStats: the messages dropped over
    // maxConcurrentNonPersistentMessagePerConnection.
    if (t.nonPersistent) publishers.back().as_object()["msgDropRate"] = p.msgDropRate;
  }
  o["publishers"] = std::move(publishers);
  o["waitingPublishers"] = 0;
  json::object subs;
  for (const auto& s : t.subscriptions) {
    json::object so = subscriptionJson(s, opts.excludeConsumers);
    if (t.nonPersistent) {
      // Pulsar's NonPersistentSubscriptionStats: never durable, plus the drop rate (its
      // counter is Magnetar's).
      so["isDurable"] = false;
      so["durable"] = false;
      so["msgDropRate"] = s.msgDropRate;
      so["msgDropCounter"] = s.msgDropCounter;
    }
    subs[s.name] = std::move(so);
  }
  o["subscriptions"] = std::move(subs);
  // NonPersistentTopicStats.msgDropRate: Pulsar sets it only when summing partitions' stats
  // (always 0 there too).
  if (t.nonPersistent) o["msgDropRate"] = 0.0;
  o["replication"] = std::move(replication);
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
    m.nonPersistent = t.nonPersistent;
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

// Pulsar's merged publishers and consumers (PublisherStatsImpl.add, ConsumerStatsImpl.add) carry
// no metadata; each partition's do.
static void dropMergedMetadata(json::object& o) {
  if (json::array* pubs = o["publishers"].if_array()) {
    for (json::value& p : *pubs) {
      if (json::object* po = p.if_object()) po->erase("metadata");
    }
  }
  if (json::object* subs = o["subscriptions"].if_object()) {
    for (auto& [name, sub] : *subs) {
      json::object* so = sub.if_object();
      json::value* cv = so ? so->if_contains("consumers") : nullptr;
      json::array* consumers = cv ? cv->if_array() : nullptr;
      if (consumers == nullptr) continue;
      for (json::value& c : *consumers) {
        if (json::object* co = c.if_object()) co->erase("metadata");
      }
    }
  }
}

json::object partitionedStatsJson(const std::string& name, const std::vector<TopicSnapshot>& parts,
                                  bool perPartition, const StatsOptions& opts) {
  json::object o = topicStatsJson(mergeTopicSnapshots(name, parts), opts);
  dropMergedMetadata(o);
  o["metadata"] = json::object{{"partitions", static_cast<int64_t>(parts.size())}};
  json::object per;
  if (perPartition) {
    for (const auto& t : parts) per[t.name] = topicStatsJson(t, opts);
  }
  o["partitions"] = std::move(per);
  return o;
}

namespace {

// into[k] += from[k] for each numeric key present in from (int64 stays int64, else double).
void sumFields(json::object& into, const json::object& from,
               std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    const json::value* v = from.if_contains(k);
    if (v == nullptr || !(v->is_number())) continue;
    json::value& t = into[k];
    bool intoInt = t.is_int64() || t.is_uint64() || t.is_null();
    if (intoInt && (v->is_int64() || v->is_uint64())) {  // counters stay integers, their kind kept
      int64_t sum = (t.is_null() ? 0 : t.to_number<int64_t>()) + v->to_number<int64_t>();
      if (t.is_uint64()) {
        t = static_cast<uint64_t>(sum);
      } else {
        t = sum;
      }
    } else {
      double a = t.is_number() ? t.to_number<double>() : 0.0;
      t = a + v->to_number<double>();
    }
  }
}

void orField(json::object& into, const json::object& from, const char* key) {
  const json::value* v = from.if_contains(key);
  if (v != nullptr && v->is_bool() && v->as_bool()) into[key] = true;
}

// Merges `from` into `into` by the string field `key` (publishers by producerName, consumers by
// consumerName): a new name is appended, a known one gets merge(existing, new).
void mergeByName(json::array& into, const json::array& from, const char* key,
                 const std::function<void(json::object&, const json::object&)>& merge) {
  for (const json::value& v : from) {
    const json::object* o = v.if_object();
    if (o == nullptr) continue;
    const json::value* name = o->if_contains(key);
    json::object* found = nullptr;
    for (json::value& x : into) {
      json::object* xo = x.if_object();
      const json::value* xn = xo ? xo->if_contains(key) : nullptr;
      if (name != nullptr && xn != nullptr && *xn == *name) {
        found = xo;
        break;
      }
    }
    if (found == nullptr) {
      into.push_back(*o);
    } else {
      merge(*found, *o);
    }
  }
}

void mergeConsumerJson(json::object& into, const json::object& c) {
  sumFields(into, c,
            {"availablePermits", "unackedMessages", "msgOutCounter", "bytesOutCounter",
             "msgRateOut", "msgThroughputOut", "drainingHashesCount", "drainingHashesClearedTotal",
             "drainingHashesUnackedMessages"});
  orField(into, c, "blockedConsumerOnUnackedMsgs");
}

void mergeSubscriptionJson(json::object& into, const json::object& s) {
  sumFields(
      into, s,
      {"msgBacklog", "backlogSize", "unackedMessages", "msgDelayed",
       "delayedMessageIndexSizeInBytes", "msgOutCounter", "bytesOutCounter", "msgRedeliverCounter",
       "msgRateOut", "msgThroughputOut", "msgRateRedeliver", "msgBacklogNoDelayed",
       "drainingHashesCount", "drainingHashesClearedTotal", "drainingHashesUnackedMessages",
       "drainingBlockedEntries", "drainingBlockedAttemptsTotal"});
  orField(into, s, "blockedSubscriptionOnUnackedMsgs");
  const json::value* type = s.if_contains("type");
  if (type != nullptr && into["type"] == json::value("None")) into["type"] = *type;
  const json::value* consumers = s.if_contains("consumers");
  if (consumers != nullptr && consumers->is_array()) {
    json::value& mine = into["consumers"];
    if (!mine.is_array()) mine = json::array{};
    mergeByName(mine.as_array(), consumers->as_array(), "consumerName", mergeConsumerJson);
  }
}

void mergeTopicJson(json::object& into, const json::object& t) {
  sumFields(into, t,
            {"msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
             "msgInCounter", "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize"});
  if (const json::value* pubs = t.if_contains("publishers"); pubs && pubs->is_array()) {
    mergeByName(
        into["publishers"].as_array(), pubs->as_array(), "producerName",
        [](json::object& a, const json::object& b) {
          sumFields(a, b, {"msgInCounter", "bytesInCounter", "msgRateIn", "msgThroughputIn"});
          a["averageMsgSize"] = averageSize(a["msgThroughputIn"].to_number<double>(),
                                            a["msgRateIn"].to_number<double>());
        });
  }
  if (const json::value* subs = t.if_contains("subscriptions"); subs && subs->is_object()) {
    json::object& mine = into["subscriptions"].as_object();
    for (const auto& [name, sub] : subs->as_object()) {
      if (!sub.is_object()) continue;
      if (json::value* have = mine.if_contains(name); have && have->is_object()) {
        mergeSubscriptionJson(have->as_object(), sub.as_object());
      } else {
        mine[name] = sub;
      }
    }
  }
}

}  // namespace

json::object partitionedStatsFromJson(const std::string& name,
                                      const std::vector<std::string>& partitionNames,
                                      const std::vector<json::value>& parts, bool perPartition) {
  TopicSnapshot empty;
  empty.name = name;
  json::object o = topicStatsJson(empty);
  json::object per;
  for (size_t i = 0; i < parts.size(); ++i) {
    const json::object* part = parts[i].if_object();
    if (part == nullptr) continue;
    mergeTopicJson(o, *part);
    if (perPartition && i < partitionNames.size()) per[partitionNames[i]] = *part;
  }
  dropMergedMetadata(o);
  double rate = o["msgRateIn"].to_number<double>();
  o["averageMsgSize"] = averageSize(o["msgThroughputIn"].to_number<double>(), rate);
  o["metadata"] = json::object{{"partitions", static_cast<int64_t>(parts.size())}};
  o["partitions"] = std::move(per);
  return o;
}

json::object internalStatsJson(const broker::InternalStatsSnapshot& s) {
  json::object o = ledgerInternalStatsJson(s);
  o["schemaLedgers"] = json::array{};
  o["compactedLedger"] = json::object{{"ledgerId", s.compactedLedgerId},
                                      {"entries", s.compactedEntries},
                                      {"size", s.compactedSize},
                                      {"offloaded", false},
                                      {"underReplicated", false}};
  return o;
}

json::object ledgerInternalStatsJson(const broker::InternalStatsSnapshot& s) {
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
    co["cursorLedger"] = c.cursorLedger;
    co["cursorLedgerLastEntry"] = c.cursorLedgerLastEntry;
    co["individuallyDeletedMessages"] = ranges;
    co["lastLedgerSwitchTimestamp"] = "";
    co["state"] = "Open";
    co["active"] = c.active;
    co["numberOfEntriesSinceFirstNotAckedMessage"] = c.backlog;
    co["totalNonContiguousDeletedMessagesRange"] = c.individuallyDeleted.size();
    co["subscriptionHavePendingRead"] = false;
    co["subscriptionHavePendingReplayRead"] = false;
    json::object props;
    for (const auto& [k, v] : c.properties) props[k] = v;
    co["properties"] = std::move(props);
    cursors[c.name] = std::move(co);
  }
  o["cursors"] = std::move(cursors);
  o["properties"] = json::object{};  // the ledger's own properties: none kept
  return o;
}

}  // namespace magnetar::admin
