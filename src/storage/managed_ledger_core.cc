// ManagedLedgerCore and CoreCursor: the managed-ledger behaviour both backends share.
#include "storage/managed_ledger_core.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <limits>

namespace magnetar::storage {

int64_t wallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t wallClockCoarseMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

int64_t steadyClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {
// managedLedgerDefaultMarkDeleteRateLimit as an interval in ms; 0 for no limit. Clamped to a
// day, so a tiny positive rate cannot overflow.
int64_t markDeleteIntervalMs(double rate) {
  if (rate <= 0) return 0;
  return static_cast<int64_t>(std::min(1000.0 / rate, 86400000.0));
}

// A size in MiB as bytes, saturated at INT64_MAX: a retention size of 2^43 MiB or more means
// no size limit (Java's long arithmetic in Pulsar would wrap; here it would be undefined).
int64_t mebibytesSaturated(int64_t mb) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return mb > (kMax >> 20) ? kMax : mb << 20;
}
}  // namespace

// ---- CoreCursor ----

CoreCursor::CoreCursor(std::string name, ManagedLedgerCore* ml, CursorState state)
    : state_(std::move(state)),
      persisted_(state_.markDelete()),
      name_(std::move(name)),
      core_(ml) {}

net::Executor* CoreCursor::executor() const { return core_->executor_; }

bool CoreCursor::checkOpen(StatusCallback& cb) {
  if (!core_->isClosed() && !deleted_) return true;
  executor()->execute([cb = std::move(cb)] {
    if (cb) cb(Status::closed("managed ledger closed"));
  });
  return false;
}

bool CoreCursor::checkMarkDelete(Position pos, StatusCallback& cb) {
  if (pos <= core_->ledgers_.lastConfirmed()) return true;
  executor()->execute([cb = std::move(cb)] {
    if (cb) cb(Status::invalidArgument("mark-delete beyond last confirmed entry"));
  });
  return false;
}

Position CoreCursor::markDeletedPosition() const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.markDelete();
}

const CursorProperties& CoreCursor::properties() const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.properties();
}

const AckSet* CoreCursor::batchDeletedIndexes(Position pos) const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.batchAckSet(pos);
}

bool CoreCursor::isAcknowledged(Position pos) const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.isAcked(pos);
}

int64_t CoreCursor::numberOfEntriesInBacklog() const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.backlog(core_->ledgers_);
}

void CoreCursor::asyncMarkDelete(Position pos, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb) || !checkMarkDelete(pos, cb)) return;
  bool moved = state_.markDeleteUpTo(pos, core_->ledgers_);
  core_->cursorChanged(this, std::move(cb), moved);
}

void CoreCursor::asyncMarkDelete(Position pos, CursorProperties properties, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb) || !checkMarkDelete(pos, cb)) return;
  state_.setProperties(std::move(properties));
  bool moved = state_.markDeleteUpTo(pos, core_->ledgers_);
  core_->cursorChanged(this, std::move(cb), moved);
}

void CoreCursor::asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb) || !checkMarkDelete(pos, cb)) return;
  Position before = state_.markDelete();
  state_.markDeleteWithAckSet(pos, ackSet, core_->ledgers_);
  core_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

void CoreCursor::asyncDelete(const std::vector<Position>& positions, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position before = state_.markDelete();
  for (const Position& p : positions) state_.ack(p, core_->ledgers_);
  core_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

void CoreCursor::asyncDeleteBatchIndexes(const std::vector<std::pair<Position, AckSet>>& acks,
                                         StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position before = state_.markDelete();
  for (const auto& [p, set] : acks) state_.ackBatchIndexes(p, set, core_->ledgers_);
  core_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

void CoreCursor::asyncResetCursor(Position pos, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position next = core_->ledgers_.ceil(pos);
  state_.reset(Position{next.ledgerId, next.entryId - 1});
  core_->cursorChanged(this, std::move(cb), true);
}

CursorMeta CoreCursor::snapshot() const {
  MAGNETAR_DCHECK_ON(*executor());
  const ManagedLedgerConfig& o = core_->config_;
  CursorMeta m;
  m.markDelete = state_.markDelete();
  state_.forEachRange([&](Position first, const CursorState::Range& r) {
    if (static_cast<int>(m.ranges.size()) >= o.managedLedgerMaxUnackedRangesToPersist) return false;
    m.ranges.emplace_back(first, r.last);
    return true;
  });
  for (const auto& [p, set] : state_.batchDeleted()) {
    if (static_cast<int>(m.batchDeleted.size()) >= o.managedLedgerMaxBatchDeletedIndexToPersist) {
      break;
    }
    m.batchDeleted.emplace_back(p, set);
  }
  m.properties = state_.properties();
  return m;
}

bool CoreCursor::writeDue(int64_t nowSteadyMs) const {
  const int64_t interval =
      markDeleteIntervalMs(core_->config_.managedLedgerDefaultMarkDeleteRateLimit);
  if (!waiting_.empty() || interval == 0) return true;
  return nowSteadyMs - lastWriteMs_ >= interval;
}

// ---- ManagedLedgerCore: state and reads ----

ManagedLedgerCore::ManagedLedgerCore(std::string name, net::Executor* executor,
                                     const ManagedLedgerConfig& config,
                                     std::shared_ptr<EntryCacheManager> cacheManager,
                                     std::shared_ptr<EntryCache> cache, LedgerBackend* backend)
    : name_(std::move(name)),
      executor_(executor),
      config_(config),
      cacheManager_(std::move(cacheManager)),
      cache_(std::move(cache)),
      backend_(backend),
      retentionMinutes_(config.defaultRetentionTimeInMinutes),
      retentionSizeMB_(config.defaultRetentionSizeInMB),
      tasks_(executor) {}

ManagedLedgerCore::~ManagedLedgerCore() {
  cursors_.clear();
  cache_.reset();  // before the manager it belongs to
}

void ManagedLedgerCore::postTask(std::function<void()> fn) {
  tasks_->execute([self = shared_from_this(), fn = std::move(fn)] { fn(); });
}

// ---- adds, close, terminate ----

void ManagedLedgerCore::asyncAddEntry(Buffer data, AddEntryCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (Status refused = addRefusal(); !refused.isOk()) {
    // A task must be copyable and the callback is move-only: it goes in a shared holder (a
    // refusal is rare, so this allocation is off the hot path).
    executor_->execute(
        [cb = std::make_shared<AddEntryCallback>(std::move(cb)), refused] { (*cb)(refused, {}); });
    return;
  }
  queued_.push_back({std::move(data), std::move(cb)});
  drainQueued();
}

void ManagedLedgerCore::failQueued(const Status& s) {
  auto q = std::move(queued_);
  queued_.clear();
  for (auto& [_, cb] : q) cb(s, {});
}

void ManagedLedgerCore::entryConfirmed(Position pos, const Buffer& data) {
  ledgers_.addEntry(static_cast<int64_t>(data.size()));
  if (!cursors_.empty()) {
    cache_->insert(pos, data);
  } else if (cache_->bytes() > 0) {
    cache_->clear();
  }
}

void ManagedLedgerCore::asyncClose(StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosed()) {
    executor_->execute([cb = std::move(cb)] {
      if (cb) cb(Status::ok());
    });
    return;
  }
  closeCbs_.push_back(std::move(cb));
  if (closing_.exchange(true)) return;
  failQueued(Status::closed("managed ledger " + name_ + " closed"));
  maybeFinishClose();
}

void ManagedLedgerCore::asyncDelete(StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  deleting_ = true;
  asyncClose(std::move(cb));
}

bool ManagedLedgerCore::isTerminated() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return terminatedAt_.has_value();
}

void ManagedLedgerCore::asyncTerminate(std::function<void(Status, Position)> cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (Status refused = terminateRefusal(); !refused.isOk()) {
    executor_->execute([cb = std::move(cb), refused] { cb(refused, {}); });
    return;
  }
  if (terminatedAt_) {
    executor_->execute([cb = std::move(cb), at = *terminatedAt_] { cb(Status::ok(), at); });
    return;
  }
  terminating_ = true;
  terminateCbs_.push_back(std::move(cb));
  maybeFinishTerminate();
}

void ManagedLedgerCore::maybeFinishTerminate() {
  if (!terminating_ || terminatedAt_ || terminateCbs_.empty() || addsPending()) return;
  terminating_ = false;
  auto cbs = std::move(terminateCbs_);
  terminateCbs_.clear();
  if (Status refused = terminateFinishRefusal(); !refused.isOk()) {
    for (auto& cb : cbs) cb(refused, {});
    return;
  }
  const Position at = ledgers_.lastConfirmed();
  terminatedAt_ = at;
  backend_->storeTerminated(at, [cbs = std::move(cbs), at](const Status& s) {
    for (const auto& cb : cbs) cb(s, at);
  });
}

// ---- reads ----

Position ManagedLedgerCore::lastConfirmedEntry() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.lastConfirmed();
}

Position ManagedLedgerCore::nextValidPosition(Position p) const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.next(p);
}

Position ManagedLedgerCore::firstPosition() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.first();
}

int64_t ManagedLedgerCore::numberOfEntriesBetween(Position from, Position to) const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.count(from, to);
}

int64_t ManagedLedgerCore::numberOfEntries() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.totalEntries();
}

int64_t ManagedLedgerCore::totalSizeBytes() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.totalBytes();
}

std::vector<LedgerStats> ManagedLedgerCore::ledgerStats() const {
  MAGNETAR_DCHECK_ON(*executor_);
  return ledgers_.stats();
}

void ManagedLedgerCore::asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                                         ReadEntriesCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosed()) {
    executor_->execute([cb = std::move(cb)] { cb(Status::closed("managed ledger closed"), {}); });
    return;
  }
  std::vector<Entry> acc;
  Position start = ledgers_.ceil(from);
  if (maxEntries <= 0 || !ledgers_.contains(start)) {
    executor_->execute([cb = std::move(cb)] { cb(Status::ok(), {}); });
    return;
  }
  if (cache_->read(start, maxEntries, maxBytes, &acc)) {
    executor_->execute(
        [cb = std::move(cb), acc = std::move(acc)]() mutable { cb(Status::ok(), std::move(acc)); });
    return;
  }
  readFromBackend(start, maxEntries, maxBytes, std::move(acc), std::move(cb));
}

bool ManagedLedgerCore::readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                                          std::vector<Entry>* out) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosed() || maxEntries <= 0) return false;
  Position start = ledgers_.ceil(from);
  if (!ledgers_.contains(start)) return false;
  return cache_->read(start, maxEntries, maxBytes, out);
}

void ManagedLedgerCore::readCachedPositions(const std::vector<Position>& sorted,
                                            std::vector<Entry>* found,
                                            std::vector<Position>* uncached) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosed()) {
    uncached->insert(uncached->end(), sorted.begin(), sorted.end());
    return;
  }
  // The cache holds a gap-free suffix of the log, all in stored ledgers (it is evicted up to the
  // slowest mark-delete, below which ledgers are trimmed), so a cached position needs no check.
  cache_->readPositions(sorted, found, uncached);
}

void ManagedLedgerCore::readFromBackend(Position start, int maxEntries, size_t maxBytes,
                                        std::vector<Entry> acc, ReadEntriesCallback cb) {
  const LedgerInfo* info = ledgers_.find(start.ledgerId);
  if (!info || start.entryId >= info->entries) {
    executor_->execute(
        [cb = std::move(cb), acc = std::move(acc)]() mutable { cb(Status::ok(), std::move(acc)); });
    return;
  }
  size_t used = 0;
  for (const Entry& e : acc) used += e.data.size();
  const int64_t want = maxEntries - static_cast<int64_t>(acc.size());
  const int64_t last = std::min(start.entryId + std::max<int64_t>(want, 1) - 1, info->entries - 1);
  const size_t wantBytes = used < maxBytes ? maxBytes - used : 1;
  backend_->read(start.ledgerId, start.entryId, last, wantBytes,
                 [self = shared_from_this(), maxEntries, maxBytes, used, acc = std::move(acc),
                  cb = std::move(cb)](Status s, std::vector<Entry> got) mutable {
                   if (!s.isOk()) {
                     cb(std::move(s), {});
                     return;
                   }
                   size_t bytes = used;
                   acc.reserve(acc.size() + got.size());  // one growth per backend read
                   for (Entry& e : got) {
                     // As the cache's continuation: past maxBytes only as the read's first entry.
                     if (!acc.empty() && bytes + e.data.size() > maxBytes) {
                       cb(Status::ok(), std::move(acc));
                       return;
                     }
                     bytes += e.data.size();
                     acc.push_back(std::move(e));
                   }
                   if (got.empty() || acc.empty()) {
                     cb(Status::ok(), std::move(acc));
                     return;
                   }
                   self->continueRead(std::move(acc), maxEntries, maxBytes, std::move(cb));
                 });
}

void ManagedLedgerCore::continueRead(std::vector<Entry> acc, int maxEntries, size_t maxBytes,
                                     ReadEntriesCallback cb) {
  size_t bytes = 0;
  for (const Entry& e : acc) bytes += e.data.size();
  Position next = ledgers_.next(acc.back().position);
  if (static_cast<int>(acc.size()) >= maxEntries || bytes >= maxBytes || !ledgers_.contains(next) ||
      isClosed()) {
    cb(Status::ok(), std::move(acc));
    return;
  }
  std::vector<Entry> more;
  if (cache_->read(next, maxEntries - static_cast<int>(acc.size()), maxBytes - bytes, &more)) {
    for (auto& e : more) {
      if (bytes + e.data.size() > maxBytes) break;
      bytes += e.data.size();
      acc.push_back(std::move(e));
    }
    cb(Status::ok(), std::move(acc));
    return;
  }
  readFromBackend(next, maxEntries, maxBytes, std::move(acc), std::move(cb));
}

// ---- cursors ----

Result<ManagedCursor*> ManagedLedgerCore::openCursor(const std::string& name,
                                                     InitialPosition initial) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosing() || isClosed()) return Status::closed("managed ledger closed");
  if (auto it = cursors_.find(name); it != cursors_.end()) {
    return static_cast<ManagedCursor*>(it->second.get());
  }
  if (Status refused = cursorChangeRefusal(); !refused.isOk()) return refused;
  Position mark = ledgers_.lastConfirmed();
  if (initial == InitialPosition::kEarliest) {
    Position first = ledgers_.first();
    mark = Position{first.ledgerId, first.entryId - 1};
  }
  std::shared_ptr<CoreCursor> c = makeCursor(name, CursorState(mark));
  CoreCursor* raw = c.get();
  cursors_.emplace(name, std::move(c));
  // Never written: due whatever the rate limit (lastWriteMs_ is long past).
  cursorChanged(raw, nullptr, false);
  return static_cast<ManagedCursor*>(raw);
}

Status ManagedLedgerCore::deleteCursor(const std::string& name) {
  MAGNETAR_DCHECK_ON(*executor_);
  auto it = cursors_.find(name);
  if (it == cursors_.end()) return Status::notFound("no cursor " + name);
  if (Status refused = cursorChangeRefusal(); !refused.isOk()) return refused;
  std::shared_ptr<CoreCursor> c = std::move(it->second);
  cursors_.erase(it);
  for (auto& cb : c->waiting_) {
    executor_->execute([cb = std::move(cb)] {
      if (cb) cb(Status::ok());
    });
  }
  c->waiting_.clear();
  backend_->removeCursor(std::move(c));
  trimConsumedLedgers();
  return Status::ok();
}

std::vector<ManagedCursor*> ManagedLedgerCore::cursors() const {
  MAGNETAR_DCHECK_ON(*executor_);
  std::vector<ManagedCursor*> out;
  for (const auto& [_, c] : cursors_) out.push_back(c.get());
  return out;
}

void ManagedLedgerCore::cursorChanged(CoreCursor* c, StatusCallback cb, bool markDeleteMoved) {
  MAGNETAR_DCHECK_ON(*executor_);
  c->dirty_ = true;
  if (cb) c->waiting_.push_back(std::move(cb));
  if (!flushScheduled_ && c->canWrite() && c->writeDue(steadyClockMs())) {
    flushScheduled_ = true;
    postTask([this] { flushCursors(); });
  }
  // Trimming waits for the write (the backend's persisted_ move).
  if (markDeleteMoved) cache_->evictUpTo(minMarkDelete());
}

void ManagedLedgerCore::flushCursors(bool all) {
  MAGNETAR_DCHECK_ON(*executor_);
  flushScheduled_ = false;
  if (!cursorsWritable()) return;
  const int64_t now = steadyClockMs();
  std::vector<CoreCursor*> due;
  for (auto& [_, c] : cursors_) {
    if (c->dirty_ && c->canWrite() && (all || c->writeDue(now))) due.push_back(c.get());
  }
  if (!due.empty()) backend_->storeCursors(due);
}

Position ManagedLedgerCore::minMarkDelete() const {
  Position m = ledgers_.lastConfirmed();
  for (const auto& [_, c] : cursors_) m = std::min(m, c->state_.markDelete());
  return m;
}

Position ManagedLedgerCore::minPersistedMarkDelete() const {
  Position m = ledgers_.lastConfirmed();
  for (const auto& [_, c] : cursors_) m = std::min(m, c->persisted_);
  return m;
}

// ---- trimming, retention, rollover rules ----

std::vector<int64_t> ManagedLedgerCore::consumedLedgersToDrop(bool truncate) const {
  const int retMin = retentionMinutes_;
  const int64_t retMB = retentionSizeMB_;
  if (!truncate && retMin < 0 && retMB < 0) return {};
  const Position mark = minPersistedMarkDelete();
  const int64_t now = wallClockMs();
  int64_t remaining = ledgers_.totalBytes();
  std::vector<int64_t> drop;
  for (const auto& [id, info] : ledgers_.ledgers()) {
    if (id == ledgers_.currentLedgerId()) break;
    bool consumed = info.entries == 0 || Position{id, info.entries - 1} <= mark;
    if (!consumed) break;
    const int64_t closed = ledgerClosedMs(id);
    const int64_t closedMs = closed > 0 ? closed : info.createdMs;
    bool expired = retMin == 0 || (retMin > 0 && now - closedMs >= int64_t{retMin} * 60000);
    bool overSize = retMB == 0 || (retMB > 0 && remaining > mebibytesSaturated(retMB));
    if (!truncate && !expired && !overSize) break;
    drop.push_back(id);
    remaining -= info.sizeBytes;
  }
  return drop;
}

bool ManagedLedgerCore::ledgerFull(int64_t entries, int64_t bytes, int64_t createdMs) const {
  if (entries < config_.managedLedgerMaxEntriesPerLedger &&
      bytes < config_.managedLedgerMaxSizePerLedgerMbytes * (int64_t{1} << 20)) {
    return false;
  }
  // The age (wall clock, as Pulsar) only counts when a minimum is set. Checked at every add
  // while a full ledger is younger than the minimum (at max rate most adds): the coarse clock,
  // a few milliseconds off on a minutes scale, costs a fifth of the precise one.
  const int64_t minMs = int64_t{config_.managedLedgerMinLedgerRolloverTimeMinutes} * 60000;
  return minMs <= 0 || wallClockCoarseMs() - createdMs >= minMs;
}

bool ManagedLedgerCore::ledgerTooOld(int64_t entries, int64_t createdMs) const {
  const int maxMin = config_.managedLedgerMaxLedgerRolloverTimeMinutes;
  return maxMin > 0 && entries > 0 && wallClockMs() - createdMs >= int64_t{maxMin} * 60000;
}

void ManagedLedgerCore::tickCacheAndRetention() {
  queued_.trim();
  cache_->evictUpTo(minMarkDelete());
  const int64_t now = steadyClockMs();
  if (config_.retentionCheckIntervalInSeconds > 0 && now >= nextRetentionCheckMs_) {
    nextRetentionCheckMs_ = now + int64_t{config_.retentionCheckIntervalInSeconds} * 1000;
    trimConsumedLedgers();
  } else if (cursors_.empty() && ledgers_.ledgers().size() > 1) {
    // Without cursors nothing else moves after a rollover: the trim there may have come before
    // the old ledger's last entries were written, so look again at each tick (stops at the
    // first ledger retention keeps).
    trimConsumedLedgers();
  }
}

void ManagedLedgerCore::setRetention(int32_t retentionTimeInMinutes, int64_t retentionSizeInMB) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (retentionMinutes_ == retentionTimeInMinutes && retentionSizeMB_ == retentionSizeInMB) return;
  retentionMinutes_ = retentionTimeInMinutes;
  retentionSizeMB_ = retentionSizeInMB;
  trimConsumedLedgers();
}

void ManagedLedgerCore::asyncTruncate(StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor_);
  if (isClosing() || isClosed()) {
    executor_->execute([cb = std::move(cb)] {
      if (cb) cb(Status::closed("managed ledger closed"));
    });
    return;
  }
  // Every cursor to the last entry (stored), then the trim whatever the retention.
  Position last = ledgers_.lastConfirmed();
  auto left = std::make_shared<size_t>(cursors_.size() + 1);
  auto first = std::make_shared<Status>();
  auto finish = [self = shared_from_this(), left, first, cb = std::move(cb)](const Status& s) {
    if (!s.isOk() && first->isOk()) *first = s;
    if (--*left > 0) return;
    if (first->isOk()) self->trimConsumedLedgers(true);
    if (cb) cb(*first);
  };
  for (auto& [_, c] : cursors_) {
    bool moved = c->state_.markDeleteUpTo(last, ledgers_);
    cursorChanged(c.get(), finish, moved);
  }
  finish(Status::ok());
}

}  // namespace magnetar::storage
