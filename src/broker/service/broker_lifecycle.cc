// BrokerService's periodic data-lifecycle checks: message TTL, backlog quotas, inactive topics
// and expired subscriptions (Pulsar's BrokerService monitors of the same names).
#include <algorithm>
#include <boost/json.hpp>

#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "broker/topic/message_expiry.h"

namespace magnetar::broker {
namespace {

// Pulsar's system topics (__change_events, __transaction_*, ...) are never garbage-collected.
bool isSystemTopic(const TopicName& name) { return name.localName().rfind("__", 0) == 0; }

}  // namespace

void BrokerService::snapshotTransactionBuffers() {
  for (auto& t : topics()) {
    t->executor().execute([t] { t->snapshotTransactionBuffer(); });
  }
}

void BrokerService::checkMessageExpiry() {
  for (auto& t : topics()) {
    int64_t ttl = messageTtlOf(t->name());
    if (ttl <= 0) continue;
    t->executor().execute([t, ttl] {
      for (const auto& [name, sub] : t->subscriptions()) {
        if (!sub->durable()) continue;
        expireByTime(t, name, ttl, [t, name = name](const Status& s) {
          if (!s.isOk() && s.code() != StatusCode::kNotFound) {
            MLOG_WARN("{}: message TTL on {} failed: {}", t->name().toString(), name, s.toString());
          }
        });
      }
    });
  }
}

BacklogQuota BrokerService::backlogQuotaOf(const TopicName& name, const std::string& type) const {
  if (auto q = policies_.topicBacklogQuota(policyKey(name), type)) return *q;
  auto ns = policies_.namespacePolicies(name.namespaceName());
  auto it = ns.backlogQuotas.find(type);
  if (it != ns.backlogQuotas.end()) return it->second;
  BacklogQuota q;
  q.limitSize = options_.backlogQuotaDefaultLimitBytes;
  q.limitTime = options_.backlogQuotaDefaultLimitSecond;
  q.policy = options_.backlogQuotaDefaultRetentionPolicy;
  return q;
}

void BrokerService::checkBacklogQuotas() {
  for (auto& t : topics()) {
    t->executor().execute([t] { t->checkBacklogQuota(); });
  }
}

InactiveTopicPolicies BrokerService::inactiveTopicPoliciesOf(const TopicName& name) const {
  if (auto p = policies_.topicInactiveTopicPolicies(policyKey(name))) return *p;
  if (auto p = policies_.namespacePolicies(name.namespaceName()).inactiveTopicPolicies) return *p;
  const BrokerDynamicOptions& d = options_.dynamic;
  InactiveTopicPolicies p;
  p.deleteWhileInactive = d.brokerDeleteInactiveTopicsEnabled.load();
  p.inactiveTopicDeleteMode = d.brokerDeleteInactiveTopicsMode.load();
  int max = d.brokerDeleteInactiveTopicsMaxInactiveDurationSeconds.load();
  p.maxInactiveDurationSeconds =
      max >= 0 ? max : options_.brokerDeleteInactiveTopicsFrequencySeconds;
  return p;
}

namespace {

// The retention time of a topic in minutes: the topic's retention policy, else the namespace's,
// else the broker default (-1: forever).
int64_t retentionMinutesOf(const PolicyRegistry& reg, const TopicName& name, int brokerDefault) {
  TopicPolicies tp = reg.topicPolicies(policyKey(name));
  if (auto it = tp.find("retention"); it != tp.end()) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(it->second, ec);
    if (!ec && v.is_object()) {
      if (const auto* m = v.as_object().if_contains("retentionTimeInMinutes");
          m && m->is_number()) {
        return m->to_number<int64_t>();
      }
    }
  }
  if (auto r = reg.namespacePolicies(name.namespaceName()).retention) {
    return r->retentionTimeInMinutes;
  }
  return brokerDefault;
}

}  // namespace

void BrokerService::checkGC() {
  for (auto& t : topics()) {
    const TopicName& name = t->name();
    if (isSystemTopic(name)) continue;
    InactiveTopicPolicies p = inactiveTopicPoliciesOf(name);
    if (!p.deleteWhileInactive) continue;
    int64_t retentionMin =
        retentionMinutesOf(policies_, name, options_.defaultRetentionTimeInMinutes);
    t->executor().execute([this, t, p, retentionMin] {
      int64_t idleNs = t->checkInactivity(p.inactiveTopicDeleteMode);
      constexpr int64_t kNsPerSecond = 1000000000;
      if (idleNs == 0 || idleNs < p.maxInactiveDurationSeconds * kNsPerSecond) return;
      if (retentionMin < 0 || idleNs < retentionMin * 60 * kNsPerSecond) return;
      const TopicName name = t->name();
      MLOG_INFO("{}: inactive for {} s ({}): deleting", name.toString(), idleNs / kNsPerSecond,
                p.inactiveTopicDeleteMode);
      deleteTopic(name, false, [this, name](const Status& s) {
        if (s.isOk()) {
          MLOG_INFO("{}: topic deleted successfully due to inactivity", name.toString());
          if (name.partitionIndex() < 0) {
            policies_.removeTopicPolicies(name.toString());
          } else {
            deleteInactivePartitionedMetadata(name);
          }
        } else if (s.code() != StatusCode::kBusy && s.code() != StatusCode::kNotFound) {
          MLOG_WARN("{}: inactive topic deletion failed: {}", name.toString(), s.toString());
        }
      });
    });
  }
}

void BrokerService::deleteInactivePartitionedMetadata(const TopicName& partition) {
  if (!options_.dynamic.brokerDeleteInactivePartitionedTopicMetadataEnabled.load()) return;
  auto parent = TopicName::parse(partition.partitionedTopicName());
  if (!parent.isOk()) return;
  auto n = namespaces_.partitions(parent->toString());
  if (!n) return;
  {
    MutexLock lock(mu_);
    for (int i = 0; i < *n; ++i) {
      TopicName p = parent->partition(i);
      if (topics_.count(p.toString()) || storedLedgers_.count(p.persistenceName())) return;
    }
  }
  if (factory_->sharedBetweenBrokers()) {
    // Shared storage: partitions stored (loaded by another broker or none) are the storage's to
    // say, not this broker's view.
    const int partitions = *n;
    TopicName topic = *parent;
    sharedStoredTopicsOf(
        topic.namespaceName(), TopicDomain::kPersistent, &mlWorkers_->next(),
        [this, topic, partitions](Result<std::vector<std::string>> stored) {
          if (!stored.isOk()) {
            MLOG_WARN("{}: partitioned metadata kept: listing the stored topics failed: {}",
                      topic.toString(), stored.status().toString());
            return;
          }
          for (int i = 0; i < partitions; ++i) {
            if (std::binary_search(stored->begin(), stored->end(), topic.partition(i).toString()))
              return;
          }
          removeInactivePartitionedMetadata(topic);
        });
    return;
  }
  removeInactivePartitionedMetadata(*parent);
}

void BrokerService::removeInactivePartitionedMetadata(const TopicName& parent) {
  auto removed = [this, parent](const Status& s) {
    if (s.isOk()) {
      policies_.removeTopicPolicies(parent.toString());
      MLOG_INFO("{}: partitioned metadata deleted: every partition was deleted for inactivity",
                parent.toString());
    } else if (s.code() != StatusCode::kNotFound) {
      MLOG_WARN("{}: deleting the partitioned metadata failed: {}", parent.toString(),
                s.toString());
    }
  };
  if (!shared_) return removed(removePartitionedTopic(parent));
  // On a topic's executor (or an ml-worker): the store's delete is not waited for.
  shared_->deletePartitionedAsync(parent.toString(), [this, parent, removed](const Result<int>& r) {
    if (r.isOk()) {
      applySharedPartitioned(parent.toString(), std::nullopt);
      forgetSchema(parent);
    }
    removed(r.status());
  });
}

int64_t BrokerService::subscriptionExpirationMinutesOf(const TopicName& name) const {
  if (auto t = policies_.topicPolicyInt(policyKey(name), "subscriptionExpirationTime")) return *t;
  auto ns = policies_.namespacePolicies(name.namespaceName());
  return ns.subscriptionExpirationTimeMinutes.value_or(options_.subscriptionExpirationTimeMinutes);
}

void BrokerService::checkInactiveSubscriptions() {
  for (auto& t : topics()) {
    int64_t minutes = subscriptionExpirationMinutesOf(t->name());
    if (minutes <= 0) continue;
    t->executor().execute([t, minutes] {
      for (const std::string& sub : t->expiredSubscriptions(minutes * 60 * 1000)) {
        Status s = t->unsubscribe(sub, nullptr);
        if (s.isOk()) {
          MLOG_INFO("{}: the subscription {} was deleted due to expiration", t->name().toString(),
                    sub);
        } else {
          MLOG_WARN("{}: expired subscription {} not deleted: {}", t->name().toString(), sub,
                    s.toString());
        }
      }
    });
  }
}

}  // namespace magnetar::broker
