// The durable ManagedCursor (internal to storage): a ManagedLedgerImpl's cursor. Its state changes
// at once; the ledger persists the changes of one executor pass together and then runs the
// callbacks (ManagedLedgerImpl::cursorChanged).
// Thread: everything on the owning ledger's executor, except what the comments say.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/dcheck.h"
#include "storage/cursor_state.h"
#include "storage/durable_storage.h"

namespace magnetar::storage {

class ManagedLedgerImpl;

class ManagedCursorImpl : public ManagedCursor {
 public:
  ManagedCursorImpl(std::string name, ManagedLedgerImpl* ml, CursorState state)
      : name_(std::move(name)),
        ml_(ml),
        state_(std::move(state)),
        persisted_(state_.markDelete()) {}

  const std::string& name() const override { return name_; }  // any thread
  Position markDeletedPosition() const override {
    MAGNETAR_DCHECK_ON(*executor());
    return state_.markDelete();
  }
  void asyncMarkDelete(Position pos, StatusCallback cb) override;
  void asyncMarkDelete(Position pos, CursorProperties properties, StatusCallback cb) override;
  void asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet, StatusCallback cb) override;
  const CursorProperties& properties() const override {
    MAGNETAR_DCHECK_ON(*executor());
    return state_.properties();
  }
  void asyncDelete(const std::vector<Position>& positions, StatusCallback cb) override;
  void asyncDeleteBatchIndexes(const std::vector<std::pair<Position, AckSet>>& acks,
                               StatusCallback cb) override;
  const AckSet* batchDeletedIndexes(Position pos) const override {
    MAGNETAR_DCHECK_ON(*executor());
    return state_.batchAckSet(pos);
  }
  bool isAcknowledged(Position pos) const override {
    MAGNETAR_DCHECK_ON(*executor());
    return state_.isAcked(pos);
  }
  int64_t numberOfEntriesInBacklog() const override;
  void asyncResetCursor(Position pos, StatusCallback cb) override;

  // What is persisted: the mark-delete position, the first managedLedgerMaxUnackedRangesToPersist
  // ranges and managedLedgerMaxBatchDeletedIndexToPersist ack sets, the properties.
  CursorMeta snapshot(const StorageOptions& o) const;

 private:
  friend class ManagedLedgerImpl;
  // The owning ledger's executor.
  net::Executor* executor() const;
  // Shared checks of the mutators: false (and cb failed) when the ledger is closed.
  bool checkOpen(StatusCallback& cb);
  std::string name_;
  ManagedLedgerImpl* ml_;
  CursorState state_;
  bool dirty_ = false;
  std::vector<StatusCallback> waiting_;  // callbacks that complete with the next flush
  // The mark-delete position in the metadata store (the restored or initial one until the first
  // write completes): trimming never goes past it, so a crash cannot leave a cursor pointing
  // into ledgers that are gone while its own move was lost (e.g. a compaction's switch).
  Position persisted_;
};

}  // namespace magnetar::storage
