// PersistentTopic's data lifecycle: backlog quotas (size and time) and the activity the
// inactive-topic and subscription-expiration checks read.
#include <chrono>

#include "base/clock.h"
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/common/wall_clock.h"
#include "broker/compaction/compaction.h"
#include "broker/topic/entry_metadata.h"
#include "broker/topic/message_expiry.h"
#include "broker/topic/topic.h"

namespace magnetar::broker {
namespace {

bool isEviction(const BacklogQuota& q) { return q.policy == "consumer_backlog_eviction"; }

// The age read at the last check is stale once no durable subscription has a backlog.
bool hasDurableBacklog(const std::map<std::string, std::unique_ptr<Subscription>>& subs) {
  for (const auto& [_, sub] : subs) {
    if (sub->durable() && sub->msgBacklog() > 0) return true;
  }
  return false;
}

}  // namespace

int64_t PersistentTopic::backlogSizeBytes() const {
  int64_t entries = ledger_->numberOfEntries();
  if (entries <= 0) return 0;
  int64_t slowest = 0;
  for (const auto& [_, sub] : subscriptions_) {
    if (sub->durable()) slowest = std::max(slowest, sub->msgBacklog());
  }
  return static_cast<int64_t>(static_cast<double>(ledger_->totalSizeBytes()) / entries * slowest);
}

bool PersistentTopic::isSizeBacklogExceeded() const {
  int64_t limit = limits_.backlogQuota.limitSize;
  int64_t size = backlogSizeBytes();
  return limit >= 0 && size > 0 && size >= limit;
}

bool PersistentTopic::isTimeBacklogExceeded() const {
  int64_t limit = limits_.backlogQuotaTime.limitTime;
  if (limit <= 0 || oldestBacklogPublishTimeMs_ <= 0) return false;
  return hasDurableBacklog(subscriptions_) &&
         wallClockMs() - oldestBacklogPublishTimeMs_ > limit * 1000;
}

std::optional<std::string> PersistentTopic::producerBlockingPolicy() const {
  if (!isEviction(limits_.backlogQuota) && isSizeBacklogExceeded()) {
    return limits_.backlogQuota.policy;
  }
  if (!isEviction(limits_.backlogQuotaTime) && isTimeBacklogExceeded()) {
    return limits_.backlogQuotaTime.policy;
  }
  return std::nullopt;
}

int64_t PersistentTopic::backlogAgeSeconds() const {
  if (oldestBacklogPublishTimeMs_ < 0) return -1;
  if (oldestBacklogPublishTimeMs_ == 0 || !hasDurableBacklog(subscriptions_)) return 0;
  return std::max<int64_t>(0, (wallClockMs() - oldestBacklogPublishTimeMs_) / 1000);
}

void PersistentTopic::checkBacklogQuota(const std::function<void()>& done) {
  MAGNETAR_DCHECK_ON(executor_);
  // The slowest durable subscription: the one whose first unacked entry is the oldest.
  std::optional<storage::Position> oldest;
  std::string oldestSub;
  for (const auto& [name, sub] : subscriptions_) {
    if (!sub->durable() || sub->msgBacklog() <= 0) continue;
    storage::Position p = ledger_->nextValidPosition(sub->cursor().markDeletedPosition());
    if (!oldest || p < *oldest) {
      oldest = p;
      oldestSub = name;
    }
  }
  if (!oldest) {
    oldestBacklogPublishTimeMs_ = 0;
    oldestBacklogSubscription_.clear();
    enforceBacklogQuota();
    if (done) done();
    return;
  }
  auto self = shared_from_this();
  ledger_->asyncReadEntries(
      *oldest, 1, 64 << 20,
      [self, oldestSub, done](const Status& s, const std::vector<storage::Entry>& es) {
        EntryMetadataPeek md;
        if (s.isOk() && !es.empty() && peekEntryMetadata(es.front().data.view(), &md).isOk()) {
          self->oldestBacklogPublishTimeMs_ = static_cast<int64_t>(md.publishTime);
          self->oldestBacklogSubscription_ = oldestSub;
        }
        self->enforceBacklogQuota();
        if (done) done();
      });
}

void PersistentTopic::enforceBacklogQuota() {
  MAGNETAR_DCHECK_ON(executor_);
  const BacklogQuota& size = limits_.backlogQuota;
  const BacklogQuota& time = limits_.backlogQuotaTime;
  bool sizeExceeded = isSizeBacklogExceeded();
  bool timeExceeded = isTimeBacklogExceeded();
  if ((sizeExceeded && !isEviction(size)) || (timeExceeded && !isEviction(time))) {
    if (!producers_.empty()) {
      MLOG_INFO("{}: backlog quota exceeded ({} bytes, {} s old): disconnecting producers",
                name_.toString(), backlogSizeBytes(), backlogAgeSeconds());
      closeAllProducers();
    }
  }
  if (sizeExceeded && isEviction(size)) {
    // Pulsar's dropBacklogForSizeLimit: bring each cursor over 90 % of the limit down to it.
    int64_t entries = ledger_->numberOfEntries();
    double perEntry = entries > 0 ? static_cast<double>(ledger_->totalSizeBytes()) / entries : 1;
    auto keep = static_cast<int64_t>(0.9 * static_cast<double>(size.limitSize) / perEntry);
    for (auto& [name, sub] : subscriptions_) {
      if (!sub->durable() || sub->msgBacklog() <= keep) continue;
      int64_t skip = sub->msgBacklog() - keep;
      MLOG_INFO("{}: backlog quota exceeded: evicting {} entries of subscription {}",
                name_.toString(), skip, name);
      sub->skipEntries(skip, [](const Status&) {});
    }
    sizeBacklogEvictions_++;
  }
  if (timeExceeded && isEviction(time)) {
    // Pulsar's dropBacklogForTimeLimit (precise): expire what is older than 90 % of the limit.
    auto target = static_cast<int64_t>(0.9 * time.limitTime);
    auto self = shared_from_this();
    for (const auto& [name, sub] : subscriptions_) {
      if (!sub->durable()) continue;
      MLOG_INFO("{}: backlog quota exceeded: expiring messages of subscription {} older than {} s",
                name_.toString(), name, target);
      expireByTime(self, name, target, [](const Status&) {});
    }
    timeBacklogEvictions_++;
  }
}

void PersistentTopic::markActive() { lastActiveNs_ = steadyNowNs(); }

int64_t PersistentTopic::checkInactivity(const std::string& deleteMode) {
  MAGNETAR_DCHECK_ON(executor_);
  bool active = !producers_.empty() || !waitingExclusive_.empty();
  bool hasBacklog = false;
  for (const auto& [_, sub] : subscriptions_) {
    active = active || sub->consumerCount() > 0;
    hasBacklog = hasBacklog || sub->msgBacklog() > 0;
  }
  if (deleteMode == "delete_when_subscriptions_caught_up") {
    active = active || hasBacklog;
  } else {
    active = active || !subscriptions_.empty();
  }
  if (active) {
    markActive();
    return 0;
  }
  return std::max<int64_t>(1, steadyNowNs() - lastActiveNs_);
}

std::vector<std::string> PersistentTopic::expiredSubscriptions(int64_t expirationMs) const {
  MAGNETAR_DCHECK_ON(executor_);
  std::vector<std::string> out;
  int64_t now = wallClockMs();
  for (const auto& [name, sub] : subscriptions_) {
    if (!sub->durable() || sub->consumerCount() > 0 || name == kCompactionCursorName) continue;
    if (now - sub->lastActiveMs() > expirationMs) out.push_back(name);
  }
  return out;
}

}  // namespace magnetar::broker
