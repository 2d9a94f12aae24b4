#include "broker/transaction/coordinator_registry.h"

#include <future>
#include <set>
#include <utility>

#include "base/blocking_wait.h"
#include "base/logging.h"
#include "broker/common/wall_clock.h"

namespace magnetar::broker {

bool isTransactionInternalName(const std::string& name) {
  static const std::string kPendingAckSuffix = "__transaction_pending_ack";
  auto endsWith = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return endsWith(kPendingAckSuffix) || TransactionLog::isLogLedger(name) ||
         name.rfind("persistent://pulsar/system/__transaction_log_", 0) == 0 ||
         name.rfind(kTransactionCoordinatorAssign, 0) == 0 ||
         name.rfind("pulsar/system/persistent/transaction_coordinator_assign", 0) == 0;
}

CoordinatorRegistry::CoordinatorRegistry(storage::ManagedLedgerFactory& factory,
                                         std::function<net::Executor*(uint64_t)> executorFor,
                                         TransactionBufferClient* tb, int64_t maxActive,
                                         std::chrono::milliseconds tickPeriod,
                                         TransactionCoordinator::Clock clock)
    : factory_(factory),
      executorFor_(std::move(executorFor)),
      tb_(tb),
      maxActive_(maxActive),
      clock_(clock ? std::move(clock)
                   : TransactionCoordinator::Clock([] { return wallClockMs(); })) {
  if (tickPeriod.count() > 0) {
    ticker_ =
        std::make_unique<PeriodicTask>("transaction-timeout", tickPeriod, [this] { tickAll(); });
  }
}

CoordinatorRegistry::~CoordinatorRegistry() {
  if (ticker_) ticker_->stop();
}

void CoordinatorRegistry::load(uint64_t tcId, CoordinatorCallback cb) {
  {
    MutexLock lock(mu_);
    if (auto it = ready_.find(tcId); it != ready_.end()) {
      auto tc = it->second;
      tc->executor()->execute([tc, cb = std::move(cb)] { cb(tc); });
      return;
    }
    auto& waiting = loading_[tcId];
    waiting.push_back(std::move(cb));
    if (waiting.size() > 1) return;  // an open is under way
  }
  TransactionCoordinator::open(
      tcId, factory_, executorFor_(tcId), tb_, clock_, maxActive_,
      [this, tcId](const Result<std::shared_ptr<TransactionCoordinator>>& r) {
        std::vector<CoordinatorCallback> waiting;
        {
          MutexLock lock(mu_);
          waiting = std::move(loading_[tcId]);
          loading_.erase(tcId);
          if (r.isOk()) ready_[tcId] = r.value();
        }
        if (!r.isOk()) {
          MLOG_WARN("Transaction coordinator {} failed to open: {}", tcId, r.status().toString());
        }
        for (auto& w : waiting) w(r);
      });
}

std::shared_ptr<TransactionCoordinator> CoordinatorRegistry::get(uint64_t tcId) const {
  MutexLock lock(mu_);
  auto it = ready_.find(tcId);
  return it == ready_.end() ? nullptr : it->second;
}

void CoordinatorRegistry::unload(uint64_t tcId) {
  std::shared_ptr<TransactionCoordinator> tc;
  {
    MutexLock lock(mu_);
    auto it = ready_.find(tcId);
    if (it == ready_.end()) return;
    tc = std::move(it->second);
    ready_.erase(it);
  }
  tc->executor()->execute([tc] { tc->close([](const Status&) {}); });
}

std::vector<uint64_t> CoordinatorRegistry::loadedIds() const {
  MutexLock lock(mu_);
  std::set<uint64_t> ids;
  for (const auto& entry : ready_) ids.insert(entry.first);
  for (const auto& entry : loading_) ids.insert(entry.first);
  return {ids.begin(), ids.end()};
}

void CoordinatorRegistry::closeAll() {
  if (ticker_) ticker_->stop();
  std::map<uint64_t, std::shared_ptr<TransactionCoordinator>> all;
  {
    MutexLock lock(mu_);
    all.swap(ready_);
  }
  std::vector<std::future<void>> closed;
  for (auto& entry : all) {
    std::shared_ptr<TransactionCoordinator> tc = entry.second;
    auto done = std::make_shared<std::promise<void>>();
    closed.push_back(done->get_future());
    tc->executor()->execute(
        [tc, done] { tc->close([done](const Status&) { done->set_value(); }); });
  }
  for (auto& f : closed) {
    if (!blockingReady(f, std::chrono::seconds(5), "closing a transaction coordinator")) {
      MLOG_WARN("a transaction coordinator did not close within 5 s");
    }
  }
}

std::vector<CoordinatorStats> CoordinatorRegistry::stats() const {
  MutexLock lock(mu_);
  std::vector<CoordinatorStats> out;
  for (const auto& [id, tc] : ready_) out.push_back(tc->stats());
  return out;
}

void CoordinatorRegistry::tickAll() {
  MutexLock lock(mu_);
  for (const auto& entry : ready_) {
    std::shared_ptr<TransactionCoordinator> tc = entry.second;
    tc->executor()->execute([tc] { tc->tick(); });
  }
}

}  // namespace magnetar::broker
