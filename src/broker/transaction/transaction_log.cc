#include "broker/transaction/transaction_log.h"

#include <utility>

#include "base/dcheck.h"
#include "base/logging.h"

namespace magnetar::broker {

namespace {
constexpr int kReplayBatchEntries = 100;
constexpr size_t kReplayBatchBytes = 1 << 20;
}  // namespace

std::string TransactionLog::ledgerName(uint64_t tcId) {
  return std::string("pulsar/system/persistent/") + kLogPrefix + std::to_string(tcId);
}

bool TransactionLog::isLogLedger(const std::string& storageName) {
  static const std::string prefix = std::string("pulsar/system/persistent/") + kLogPrefix;
  return storageName.rfind(prefix, 0) == 0;
}

void TransactionLog::open(storage::ManagedLedgerFactory& factory, uint64_t tcId,
                          net::Executor* executor, OpenCallback cb) {
  factory.asyncOpen(
      ledgerName(tcId), executor,
      [cb = std::move(cb)](Result<std::shared_ptr<storage::ManagedLedger>> r) {
        if (!r.isOk()) return cb(r.status());
        std::shared_ptr<storage::ManagedLedger> ledger = std::move(r).value();
        auto cursor = ledger->openCursor(kCursorName, storage::InitialPosition::kEarliest);
        if (!cursor.isOk()) return cb(cursor.status());
        cb(std::unique_ptr<TransactionLog>(new TransactionLog(ledger, cursor.value())));
      });
}

int64_t TransactionLog::storedMaxLocalTxnId() const {
  MAGNETAR_DCHECK_ON(*executor());
  const storage::CursorProperties& p = cursor_->properties();
  auto it = p.find(kMaxLocalTxnId);
  return it == p.end() ? -1 : std::max<int64_t>(-1, it->second);
}

void TransactionLog::replay(EntryFn onEntry, std::function<void(Status)> done) {
  MAGNETAR_DCHECK_ON(*executor());
  storage::Position from = ledger_->nextValidPosition(cursor_->markDeletedPosition());
  replayFrom(from, std::make_shared<EntryFn>(std::move(onEntry)), std::move(done));
}

void TransactionLog::replayFrom(storage::Position from, const std::shared_ptr<EntryFn>& onEntry,
                                std::function<void(Status)> done) {
  if (ledger_->lastConfirmedEntry() < from) return done(Status::ok());
  ledger_->asyncReadEntries(
      from, kReplayBatchEntries, kReplayBatchBytes,
      [this, onEntry, done = std::move(done)](const Status& s,
                                              std::vector<storage::Entry> entries) {
        if (!s.isOk()) return done(s);
        if (entries.empty()) return done(Status::ok());
        for (const storage::Entry& e : entries) {
          if (cursor_->isAcknowledged(e.position)) continue;
          proto::TransactionMetadataEntry m;
          if (!m.ParseFromArray(e.data.data(), static_cast<int>(e.data.size()))) {
            MLOG_WARN("[{}] skipping an entry that does not parse at {}:{}", ledger_->name(),
                      e.position.ledgerId, e.position.entryId);
            continue;
          }
          (*onEntry)(e.position, m);
        }
        replayFrom(ledger_->nextValidPosition(entries.back().position), onEntry, done);
      });
}

void TransactionLog::append(const proto::TransactionMetadataEntry& entry,
                            std::function<void(Status, storage::Position)> cb) {
  MAGNETAR_DCHECK_ON(*executor());
  std::string bytes = entry.SerializeAsString();
  ledger_->asyncAddEntry(Buffer::copyOf(bytes.data(), bytes.size()), std::move(cb));
}

void TransactionLog::deletePositions(const std::vector<storage::Position>& positions,
                                     int64_t maxLocalTxnId) {
  MAGNETAR_DCHECK_ON(*executor());
  // The property first, at the unchanged mark-delete position: both go in the cursor's next
  // write, so the mark-delete never passes trimmed ids without the sequence that covers them.
  storage::CursorProperties props = cursor_->properties();
  props[kMaxLocalTxnId] = maxLocalTxnId;
  cursor_->asyncMarkDelete(cursor_->markDeletedPosition(), std::move(props), nullptr);
  cursor_->asyncDelete(positions, [name = ledger_->name()](const Status& s) {
    if (!s.isOk())
      MLOG_WARN("[{}] failed to delete ended transaction positions: {}", name, s.toString());
  });
}

void TransactionLog::close(std::function<void(Status)> cb) { ledger_->asyncClose(std::move(cb)); }

}  // namespace magnetar::broker
