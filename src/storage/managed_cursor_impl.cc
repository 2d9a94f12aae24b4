#include "storage/managed_cursor_impl.h"

#include "base/dcheck.h"
#include "storage/managed_ledger_impl.h"

namespace magnetar::storage {

net::Executor* ManagedCursorImpl::executor() const { return ml_->executor(); }

bool ManagedCursorImpl::checkOpen(StatusCallback& cb) {
  if (ml_->state_ != ManagedLedgerImpl::State::kClosed) return true;
  ml_->post(std::move(cb), Status::closed("managed ledger closed"));
  return false;
}

void ManagedCursorImpl::asyncMarkDelete(Position pos, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  if (pos > ml_->ledgers_.lastConfirmed()) {
    ml_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
    return;
  }
  bool moved = state_.markDeleteUpTo(pos, ml_->ledgers_);
  ml_->cursorChanged(this, std::move(cb), moved);
}

void ManagedCursorImpl::asyncMarkDelete(Position pos, CursorProperties properties,
                                        StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  if (pos > ml_->ledgers_.lastConfirmed()) {
    ml_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
    return;
  }
  state_.setProperties(std::move(properties));
  bool moved = state_.markDeleteUpTo(pos, ml_->ledgers_);
  ml_->cursorChanged(this, std::move(cb), moved);
}

void ManagedCursorImpl::asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet,
                                                  StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  if (pos > ml_->ledgers_.lastConfirmed()) {
    ml_->post(std::move(cb), Status::invalidArgument("mark-delete beyond last confirmed entry"));
    return;
  }
  Position before = state_.markDelete();
  state_.markDeleteWithAckSet(pos, ackSet, ml_->ledgers_);
  ml_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

void ManagedCursorImpl::asyncDelete(const std::vector<Position>& positions, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position before = state_.markDelete();
  for (const Position& p : positions) state_.ack(p, ml_->ledgers_);
  ml_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

void ManagedCursorImpl::asyncDeleteBatchIndexes(
    const std::vector<std::pair<Position, AckSet>>& acks, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position before = state_.markDelete();
  for (const auto& [p, set] : acks) state_.ackBatchIndexes(p, set, ml_->ledgers_);
  ml_->cursorChanged(this, std::move(cb), state_.markDelete() != before);
}

int64_t ManagedCursorImpl::numberOfEntriesInBacklog() const {
  MAGNETAR_DCHECK_ON(*executor());
  return state_.backlog(ml_->ledgers_);
}

void ManagedCursorImpl::asyncResetCursor(Position pos, StatusCallback cb) {
  MAGNETAR_DCHECK_ON(*executor());
  if (!checkOpen(cb)) return;
  Position next = ml_->ledgers_.ceil(pos);
  state_.reset(Position{next.ledgerId, next.entryId - 1});
  ml_->cursorChanged(this, std::move(cb), true);
}

CursorMeta ManagedCursorImpl::snapshot(const StorageOptions& o) const {
  MAGNETAR_DCHECK_ON(*executor());
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

}  // namespace magnetar::storage
