// BkManagedLedgerFactory: the open ledgers, the housekeeping tick, shutdown, ledgerNames.
#include <algorithm>
#include <future>

#include "base/logging.h"
#include "storage/bk/bk_managed_ledger.h"

namespace magnetar::storage::bk {

namespace {

// Runs each task at once on the thread that hands it over: for the blocking ledgerNames walk,
// whose waiting thread is not an executor.
class InlineExecutor : public net::Executor {
 public:
  void execute(net::Task t) override { t(); }
  bool inExecutorThread() const override { return true; }
};

Result<std::vector<std::string>> childrenOf(metadata::Store& store, const std::string& path) {
  InlineExecutor ex;
  std::promise<Result<std::vector<std::string>>> p;
  store.getChildren(path, &ex,
                    [&p](Result<std::vector<std::string>> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

Result<std::optional<metadata::GetResult>> valueOf(metadata::Store& store,
                                                   const std::string& path) {
  InlineExecutor ex;
  std::promise<Result<std::optional<metadata::GetResult>>> p;
  store.get(path, &ex,
            [&p](Result<std::optional<metadata::GetResult>> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// Collects the managed ledgers under `path`: a node whose value is a ManagedLedgerInfo with at
// least one ledger is one (its children are cursors); other nodes are walked into.
void walk(metadata::Store& store, const std::string& path, const std::string& rel,
          std::vector<std::string>* out) {
  auto children = childrenOf(store, path);
  if (!children.isOk()) {
    MLOG_WARN("listing managed ledgers under {}: {}", path, children.status().toString());
    return;
  }
  for (const std::string& c : *children) {
    std::string child = path;
    child.append("/").append(c);
    std::string childRel = rel;
    if (!childRel.empty()) childRel += "/";
    childRel += c;
    auto v = valueOf(store, child);
    if (v.isOk() && *v && !(*v)->value.empty()) {
      auto info = parseManagedLedgerInfo((*v)->value);
      if (info.isOk() && info->ledgerinfo_size() > 0) {
        auto name = storageLedgerName(childRel);
        if (name.isOk()) out->push_back(*name);
        continue;
      }
    }
    walk(store, child, childRel, out);
  }
}

}  // namespace

BkManagedLedgerFactory::BkManagedLedgerFactory(BkStorageOptions options,
                                               bookkeeper::BookKeeperClient* bk,
                                               metadata::Store* store)
    : options_(std::move(options)),
      bk_(bk),
      store_(store),
      gate_(std::make_shared<Gate>()),
      cache_(std::make_shared<EntryCacheManager>(options_.managedLedgerCacheSizeMB << 20)) {
  tick_ = std::make_unique<TaskThread>("bk-ml-tick", std::max(10, options_.tickIntervalMs),
                                       [this] { tick(); });
}

BkManagedLedgerFactory::~BkManagedLedgerFactory() { shutdown(); }

void BkManagedLedgerFactory::asyncOpen(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  open(name, executor, std::move(cb), true);
}

void BkManagedLedgerFactory::asyncOpenExisting(
    const std::string& name, net::Executor* executor,
    std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
  open(name, executor, std::move(cb), false);
}

void BkManagedLedgerFactory::open(const std::string& name, net::Executor* executor,
                                  std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb,
                                  bool create) {
  if (stopped_) {
    executor->execute(
        [cb = std::move(cb)] { cb(Status::closed("managed ledger factory stopped")); });
    return;
  }
  std::shared_ptr<BkManagedLedger> ml;
  {
    MutexLock lock(mu_);
    Slot& slot = open_[name];
    if (slot.ml && slot.ready && slot.ml->isClosing()) {
      slot.reopen.push_back(Waiter{executor, std::move(cb), create});
      return;
    }
    if (slot.ml && slot.ready) {
      std::shared_ptr<ManagedLedger> ready = slot.ml;
      executor->execute([cb = std::move(cb), ready] { cb(ready); });
      return;
    }
    slot.waiters.push_back(Waiter{executor, std::move(cb), create});
    if (slot.ml) return;  // opening: answered with the others
    slot.ml = std::make_shared<BkManagedLedger>(this, name, executor, create);
    ml = slot.ml;
  }
  gate_->wrap(executor)->execute(
      [this, ml, name] { ml->open([this, name](const Status& s) { opened(name, s); }); });
}

void BkManagedLedgerFactory::opened(const std::string& name, const Status& s) {
  std::shared_ptr<BkManagedLedger> ml;
  decltype(Slot::waiters) waiters;
  {
    MutexLock lock(mu_);
    auto it = open_.find(name);
    if (it == open_.end()) return;
    ml = it->second.ml;
    waiters = std::move(it->second.waiters);
    it->second.waiters.clear();
    if (s.isOk()) {
      it->second.ready = true;
    } else {
      open_.erase(it);
    }
  }
  const bool missing = !s.isOk() && s.code() == StatusCode::kNotFound && !ml->createsIfMissing();
  if (!s.isOk() && !missing) MLOG_WARN("opening managed ledger {} failed: {}", name, s.toString());
  for (auto& w : waiters) {
    if (s.isOk()) {
      std::shared_ptr<ManagedLedger> r = ml;
      gate_->wrap(w.executor)->execute([cb = std::move(w.cb), r] { cb(r); });
    } else if (missing && w.create) {
      // Joined an open that would not create: this caller creates.
      open(name, w.executor, std::move(w.cb), true);
    } else {
      gate_->wrap(w.executor)->execute([cb = std::move(w.cb), s] { cb(s); });
    }
  }
}

void BkManagedLedgerFactory::released(const std::string& name, const BkManagedLedger* ml) {
  std::shared_ptr<BkManagedLedger> next;
  {
    MutexLock lock(mu_);
    auto it = open_.find(name);
    if (it == open_.end() || it->second.ml.get() != ml) return;
    if (it->second.reopen.empty() || stopped_) {
      open_.erase(it);
      return;
    }
    Slot& slot = it->second;
    slot.waiters = std::move(slot.reopen);
    slot.reopen.clear();
    slot.ready = false;
    // A deleted ledger is not created again for callers that asked for an existing one.
    bool create = std::any_of(slot.waiters.begin(), slot.waiters.end(),
                              [](const Waiter& w) { return w.create; });
    slot.ml = std::make_shared<BkManagedLedger>(this, name, slot.waiters.front().executor, create);
    next = slot.ml;
  }
  gate_->wrap(next->executor())->execute([this, next, name] {
    next->open([this, name](const Status& s) { opened(name, s); });
  });
}

void BkManagedLedgerFactory::tick() {
  std::vector<std::shared_ptr<BkManagedLedger>> ready;
  {
    MutexLock lock(mu_);
    for (auto& [_, slot] : open_) {
      if (slot.ready) ready.push_back(slot.ml);
    }
  }
  for (auto& ml : ready) {
    gate_->wrap(ml->executor())->execute([ml] { ml->onTick(); });
  }
}

std::vector<std::string> BkManagedLedgerFactory::ledgerNames() const {
  std::vector<std::string> out;
  walk(*store_, options_.root, "", &out);
  return out;
}

void BkManagedLedgerFactory::asyncExists(const std::string& name, net::Executor* executor,
                                         std::function<void(Result<bool>)> cb) {
  if (stopped_) {
    executor->execute(
        [cb = std::move(cb)] { cb(Status::closed("managed ledger factory stopped")); });
    return;
  }
  store_->exists(managedLedgerPath(options_.root, name), gate_->wrap(executor), std::move(cb));
}

void BkManagedLedgerFactory::asyncLedgerNamesUnder(
    const std::string& prefix, net::Executor* executor,
    std::function<void(Result<std::vector<std::string>>)> cb) {
  if (stopped_) {
    executor->execute(
        [cb = std::move(cb)] { cb(Status::closed("managed ledger factory stopped")); });
    return;
  }
  // The prefix ("tenant/ns/persistent") has no local name: its path is the plain one.
  store_->getChildren(options_.root + "/" + prefix, gate_->wrap(executor),
                      [prefix, cb = std::move(cb)](Result<std::vector<std::string>> children) {
                        if (!children.isOk()) return cb(children.status());
                        std::vector<std::string> out;
                        out.reserve(children->size());
                        for (const std::string& c : *children) {
                          auto name = storageLedgerName(std::string(prefix).append("/").append(c));
                          if (!name.isOk()) {
                            MLOG_WARN("managed ledger {}/{}: {}", prefix, c,
                                      name.status().toString());
                            continue;
                          }
                          out.push_back(std::move(*name));
                        }
                        std::sort(out.begin(), out.end());
                        cb(std::move(out));
                      });
}

StorageStats BkManagedLedgerFactory::stats() const {
  StorageStats s;
  s.cacheBytes = cache_->size();
  s.ledgersDeleted = ledgersDeleted_.load(std::memory_order_relaxed);
  return s;
}

void BkManagedLedgerFactory::shutdown() {
  if (stopped_.exchange(true)) return;
  if (tick_) tick_->stop();
  std::map<std::string, Slot> slots;
  {
    MutexLock lock(mu_);
    slots.swap(open_);
  }
  for (auto& [_, slot] : slots) {
    if (slot.ml) slot.ml->markStopped();
  }
  gate_->close();
}

}  // namespace magnetar::storage::bk
