#include "broker/topic/transaction_buffer.h"

#include <fmt/format.h>

#include <charconv>
#include <memory>
#include <string_view>
#include <vector>

#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/common/wall_clock.h"
#include "broker/topic/entry_metadata.h"
#include "protocol/commands.h"

namespace magnetar::broker {

using storage::Position;

namespace {

// Snapshot keys in the cursor's properties (docs/transactions.md).
constexpr char kVersionKey[] = "tb.version";
constexpr char kMaxReadLedgerKey[] = "tb.maxRead.ledger";
constexpr char kMaxReadEntryKey[] = "tb.maxRead.entry";
constexpr char kAbortedPrefix[] = "tb.aborted.";   // tb.aborted.{most}.{least} -> marker ledger
constexpr char kLowWaterMarkPrefix[] = "tb.lwm.";  // tb.lwm.{coordinator} -> low water mark
constexpr int64_t kSnapshotVersion = 1;

// The position before p (Pulsar's getPreviousPosition within a ledger; entry -1 before the
// first entry of a ledger, which is still before every later position).
Position previous(Position p) { return Position{p.ledgerId, p.entryId - 1}; }

bool startsWith(const std::string& s, const char* prefix, size_t* rest) {
  std::string_view pre(prefix);
  if (s.compare(0, pre.size(), pre) != 0) return false;
  *rest = pre.size();
  return true;
}

// "{most}.{least}" of a snapshot key.
bool parseTxn(std::string_view s, TxnID* t) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, t->mostBits);
  if (ec != std::errc() || p == end || *p != '.') return false;
  auto [q, ec2] = std::from_chars(p + 1, end, t->leastBits);
  return ec2 == std::errc() && q == end;
}

// Reads the log from `from` to its end in chunks, feeding each entry to `apply`.
struct TxnReplay : std::enable_shared_from_this<TxnReplay> {
  storage::ManagedLedger* ledger = nullptr;
  std::function<void(const EntryMetadataPeek&, Position)> apply;
  std::function<void(Status)> done;

  void step(Position from) {
    if (from > ledger->lastConfirmedEntry()) return done(Status::ok());
    auto self = shared_from_this();
    ledger->asyncReadEntries(from, 1000, 16 << 20,
                             [self](const Status& s, std::vector<storage::Entry> es) {
                               if (!s.isOk()) return self->done(s);
                               if (es.empty()) return self->done(Status::ok());
                               for (auto& e : es) {
                                 EntryMetadataPeek md;
                                 if (peekEntryMetadata(e.data.view(), &md).isOk() && md.hasTxnid) {
                                   self->apply(md, e.position);
                                 }
                               }
                               self->step(self->ledger->nextValidPosition(es.back().position));
                             });
  }
};

}  // namespace

TransactionBuffer::TransactionBuffer(storage::ManagedLedger& ledger, bool enabled,
                                     std::string topicName, int64_t snapshotEvery)
    : ledger_(ledger),
      enabled_(enabled),
      topicName_(std::move(topicName)),
      snapshotEvery_(snapshotEvery) {}

void TransactionBuffer::recover(std::function<void(Status)> done) {
  recoverStartMs_ = wallClockMs();
  storage::ManagedCursor* found = nullptr;
  for (auto* c : ledger_.cursors()) {
    if (c->name() == kTxnBufferCursorName) found = c;
  }
  if (!found) {
    // No transactional entry was ever stored here (Pulsar's NoSnapshot): nothing to recover.
    recoverEndMs_ = wallClockMs();
    return done(Status::ok());
  }
  cursor_ = found;
  Position from = cursor_->markDeletedPosition();
  for (const auto& [key, value] : cursor_->properties()) {
    size_t at = 0;
    if (key == kMaxReadLedgerKey) {
      from.ledgerId = value;
    } else if (key == kMaxReadEntryKey) {
      from.entryId = value;
    } else if (startsWith(key, kAbortedPrefix, &at)) {
      TxnID t;
      if (parseTxn(std::string_view(key).substr(at), &t)) aborted_[t] = value;
    } else if (startsWith(key, kLowWaterMarkPrefix, &at)) {
      uint64_t tc = 0;
      std::string_view rest = std::string_view(key).substr(at);
      if (std::from_chars(rest.data(), rest.data() + rest.size(), tc).ec == std::errc()) {
        lowWaterMarks_[tc] = value;
      }
    }
  }
  auto replay = std::make_shared<TxnReplay>();
  replay->ledger = &ledger_;
  replay->apply = [this](const EntryMetadataPeek& md, Position pos) { replayEntry(md, pos); };
  replay->done = [this, done = std::move(done)](const Status& s) {
    recoverEndMs_ = wallClockMs();
    trimAborted();
    if (s.isOk()) takeSnapshot();
    MLOG_INFO("{}: transaction buffer recovered: {} ongoing, {} aborted", topicName_,
              ongoing_.size(), aborted_.size());
    done(s);
  };
  replay->step(ledger_.nextValidPosition(from));
}

void TransactionBuffer::replayEntry(const EntryMetadataPeek& md, Position pos) {
  const TxnID txn{md.txnidMostBits, md.txnidLeastBits};
  if (md.hasMarkerType && (md.markerType == kTxnCommitMarker || md.markerType == kTxnAbortMarker)) {
    if (md.markerType == kTxnAbortMarker) aborted_[txn] = pos.ledgerId;
    removeOngoing(txn);
    return;
  }
  if (!ongoingByTxn_.count(txn) && !aborted_.count(txn)) {
    ongoingByTxn_.emplace(txn, pos);
    ongoing_.emplace(pos, txn);
  }
}

std::optional<Status> TransactionBuffer::appendRefusal(const TxnID& txn) const {
  if (!enabled_) return Status::notAllowed("Transaction buffer disable!");
  if (atOrBelowLowWaterMark(lowWaterMarks_, txn)) {
    return Status::notAllowed("Transaction [" + txn.toString() +
                              "] has been ended. Please use a new transaction to send message.");
  }
  return std::nullopt;
}

void TransactionBuffer::openCursor() {
  if (cursor_) return;
  auto c = ledger_.openCursor(kTxnBufferCursorName, storage::InitialPosition::kEarliest);
  if (!c.isOk()) {
    MLOG_WARN("{}: transaction buffer cursor not opened: {}", topicName_, c.status().toString());
    return;
  }
  cursor_ = *c;
}

void TransactionBuffer::appended(const TxnID& txn, Position pos) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (ongoingByTxn_.count(txn) || aborted_.count(txn)) return;
  const bool first = cursor_ == nullptr;
  ongoingByTxn_.emplace(txn, pos);
  ongoing_.emplace(pos, txn);
  changed_ = true;
  openCursor();
  if (first) takeSnapshot();  // Pulsar's takeFirstSnapshot: a restart now finds the cursor
}

void TransactionBuffer::endTxn(const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
                               std::function<void(Status)> done) {
  MAGNETAR_DCHECK_ON(*ledger_.executor());
  if (!enabled_) return done(Status::notAllowed("Transaction buffer disable!"));
  const bool commit = action == proto::COMMIT;
  if (!commit && (!cursor_ || aborted_.count(txn))) {
    // Nothing was sent here in any txn (Pulsar's abort without a snapshot), or a retried abort.
    raiseLowWaterMark(lowWaterMarks_, txn.mostBits, lowWaterMark);
    return done(Status::ok());
  }
  writeMarker(txn, commit, lowWaterMark, std::move(done));
}

void TransactionBuffer::writeMarker(const TxnID& txn, bool commit, int64_t lowWaterMark,
                                    std::function<void(Status)> done) {
  // Pulsar's Markers.newTxnCommitMarker / newTxnAbortMarker: sequence id -1, no payload.
  proto::MessageMetadata md;
  md.set_producer_name("pulsar.txn.marker");
  md.set_sequence_id(static_cast<uint64_t>(-1));
  md.set_publish_time(static_cast<uint64_t>(wallClockMs()));
  md.set_marker_type(commit ? kTxnCommitMarker : kTxnAbortMarker);
  md.set_txnid_most_bits(txn.mostBits);
  md.set_txnid_least_bits(txn.leastBits);
  ledger_.asyncAddEntry(protocol::Commands::newEntry(md, {}),
                        [this, alive = alive_, txn, commit, lowWaterMark, done = std::move(done)](
                            const Status& s, Position pos) {
                          if (!*alive) return done(Status::closed("topic closed"));
                          if (!s.isOk()) {
                            MLOG_WARN("{}: {} marker of txn {} not stored: {}", topicName_,
                                      commit ? "commit" : "abort", txn.toString(), s.toString());
                            return done(s);
                          }
                          markerStored(txn, commit, pos, lowWaterMark);
                          done(Status::ok());
                        });
}

void TransactionBuffer::markerStored(const TxnID& txn, bool commit, Position pos,
                                     int64_t lowWaterMark) {
  if (commit) {
    committed_++;
  } else {
    aborted_[txn] = pos.ledgerId;
    abortedCount_++;
  }
  removeOngoing(txn);
  raiseLowWaterMark(lowWaterMarks_, txn.mostBits, lowWaterMark);
  trimAborted();
  changed_ = true;
  if (++endsSinceSnapshot_ >= snapshotEvery_) takeSnapshot();  // Pulsar's takeSnapshotByChangeTimes
  if (onMoved_) onMoved_();
  // Pulsar's handleLowWaterMark: the oldest ongoing txn of a coordinator at or below its low
  // water mark was ended there without reaching this topic: abort it.
  if (!ongoing_.empty()) {
    const TxnID first = ongoing_.begin()->second;
    if (atOrBelowLowWaterMark(lowWaterMarks_, first)) {
      writeMarker(first, false, lowWaterMarks_.at(first.mostBits), [this, first](const Status& s) {
        if (!s.isOk()) {
          MLOG_WARN("{}: abort of txn {} below the low water mark failed: {}", topicName_,
                    first.toString(), s.toString());
        }
      });
    }
  }
}

void TransactionBuffer::removeOngoing(const TxnID& txn) {
  auto it = ongoingByTxn_.find(txn);
  if (it == ongoingByTxn_.end()) return;
  ongoing_.erase(it->second);
  ongoingByTxn_.erase(it);
}

std::optional<Position> TransactionBuffer::maxReadPosition() const {
  if (ongoing_.empty()) return std::nullopt;
  return previous(ongoing_.begin()->first);
}

bool TransactionBuffer::hides(const EntryMetadataPeek& md) const {
  if (!md.hasTxnid) return false;
  if (md.hasMarkerType && (md.markerType == kTxnCommitMarker || md.markerType == kTxnAbortMarker)) {
    return true;
  }
  return !aborted_.empty() && aborted_.count(TxnID{md.txnidMostBits, md.txnidLeastBits}) > 0;
}

void TransactionBuffer::trimAborted() {
  const int64_t firstLedger = ledger_.firstPosition().ledgerId;
  if (firstLedger < 0) return;
  for (auto it = aborted_.begin(); it != aborted_.end();) {
    it = it->second < firstLedger ? aborted_.erase(it) : std::next(it);
  }
}

void TransactionBuffer::takeSnapshot() {
  if (!cursor_) return;
  const Position lac = ledger_.lastConfirmedEntry();
  const Position maxRead = maxReadPosition().value_or(lac);
  storage::CursorProperties props;
  props[kVersionKey] = kSnapshotVersion;
  props[kMaxReadLedgerKey] = maxRead.ledgerId;
  props[kMaxReadEntryKey] = maxRead.entryId;
  for (const auto& [t, ledgerId] : aborted_) {
    props[fmt::format("{}{}.{}", kAbortedPrefix, t.mostBits, t.leastBits)] = ledgerId;
  }
  for (const auto& [tc, lwm] : lowWaterMarks_) {
    props[fmt::format("{}{}", kLowWaterMarkPrefix, tc)] = static_cast<int64_t>(lwm);
  }
  // The cursor holds the entries after the max read position for the next replay.
  Position mark = cursor_->markDeletedPosition();
  if (maxRead.entryId >= 0 && maxRead > mark && maxRead <= lac) mark = maxRead;
  cursor_->asyncMarkDelete(mark, std::move(props), nullptr);
  changed_ = false;
  endsSinceSnapshot_ = 0;
  lastSnapshotMs_ = wallClockMs();
}

void TransactionBuffer::snapshotIfChanged() {
  if (changed_) takeSnapshot();
}

TransactionBufferStats TransactionBuffer::stats(bool lowWaterMarks) const {
  TransactionBufferStats s;
  s.state = !enabled_ ? "None" : cursor_ ? "Ready" : "NoSnapshot";
  const Position p = maxReadPosition().value_or(ledger_.lastConfirmedEntry());
  s.maxReadPosition = fmt::format("{}:{}", p.ledgerId, p.entryId);
  s.lastSnapshotTimestamps = lastSnapshotMs_;
  if (lowWaterMarks) s.lowWaterMarks = lowWaterMarks_;
  s.ongoingTxnSize = static_cast<int64_t>(ongoing_.size());
  s.recoverStartTime = recoverStartMs_;
  s.recoverEndTime = recoverEndMs_;
  s.totalAbortedTransactions = static_cast<int64_t>(aborted_.size());
  s.committedTxnCount = committed_;
  s.abortedTxnCount = abortedCount_;
  return s;
}

TransactionInBufferStats TransactionBuffer::txnStats(const TxnID& txn) const {
  TransactionInBufferStats s;
  s.aborted = isAborted(txn);
  if (auto it = ongoingByTxn_.find(txn); it != ongoingByTxn_.end()) {
    s.startPosition = fmt::format("{}:{}", it->second.ledgerId, it->second.entryId);
  }
  return s;
}

}  // namespace magnetar::broker
