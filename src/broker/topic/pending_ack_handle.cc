#include "broker/topic/pending_ack_handle.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cctype>

#include "base/logging.h"

namespace magnetar::broker {

namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using storage::AckSet;
using storage::Position;

// Pulsar's MLPendingAckStore cursor over the log.
constexpr const char* kLogCursorName = "__pending_ack_state";
// PendingAckMetadataEntry / PendingAckMetadata field numbers (TransactionPendingAck.proto).
constexpr int kEntryOp = 1, kEntryAckType = 2, kEntryTxnLeast = 3, kEntryTxnMost = 4,
              kEntryMetadata = 5;
constexpr int kMdLedger = 1, kMdEntry = 2, kMdAckSet = 3, kMdBatchSize = 4;
constexpr int kOpAck = 1, kOpCommit = 2, kOpAbort = 3;
constexpr int kIndividual = 0, kCumulative = 1;

void putVarint(CodedOutputStream& out, int field, uint64_t v) {
  out.WriteTag(static_cast<uint32_t>(field) << 3);
  out.WriteVarint64(v);
}

std::string encodeMetadata(const PendingAckLogEntry::Position& p) {
  std::string s;
  {
    StringOutputStream zs(&s);
    CodedOutputStream out(&zs);
    putVarint(out, kMdLedger, static_cast<uint64_t>(p.pos.ledgerId));
    putVarint(out, kMdEntry, static_cast<uint64_t>(p.pos.entryId));
    for (int64_t w : p.ackSet) putVarint(out, kMdAckSet, static_cast<uint64_t>(w));
    if (p.batchSize > 0) putVarint(out, kMdBatchSize, static_cast<uint64_t>(p.batchSize));
  }
  return s;
}

bool decodeMetadata(std::string_view bytes, PendingAckLogEntry::Position* p) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  while (uint32_t tag = in.ReadTag()) {
    uint64_t v = 0;
    int field = static_cast<int>(tag >> 3);
    if ((tag & 7) == 2 && field == kMdAckSet) {  // packed, as other writers may use
      uint32_t len = 0;
      if (!in.ReadVarint32(&len)) return false;
      auto limit = in.PushLimit(static_cast<int>(len));
      while (in.BytesUntilLimit() > 0) {
        if (!in.ReadVarint64(&v)) return false;
        p->ackSet.push_back(static_cast<int64_t>(v));
      }
      in.PopLimit(limit);
      continue;
    }
    if ((tag & 7) != 0 || !in.ReadVarint64(&v)) return false;
    if (field == kMdLedger) p->pos.ledgerId = static_cast<int64_t>(v);
    if (field == kMdEntry) p->pos.entryId = static_cast<int64_t>(v);
    if (field == kMdAckSet) p->ackSet.push_back(static_cast<int64_t>(v));
    if (field == kMdBatchSize) p->batchSize = static_cast<int32_t>(v);
  }
  return true;
}

std::string posString(Position p) {
  return std::to_string(p.ledgerId) + ":" + std::to_string(p.entryId);
}

// An individual ack's position as Pulsar's AckSetPositionImpl.toString prints it in the
// TransactionConflict texts: "L:E (ackSet is null)" or "L:E (ackSet with long[] size of N)".
std::string ackPosString(const PendingAckLogEntry::Position& a) {
  return posString(a.pos) + " (ackSet " +
         (a.ackSet.empty() ? std::string("is null")
                           : "with long[] size of " + std::to_string(a.ackSet.size())) +
         ")";
}

// Bit i of a Pulsar ack set: set = index i not acked (bits past the words are clear).
bool bitSet(const AckSet& s, int i) {
  size_t w = static_cast<size_t>(i) / 64;
  return w < s.size() && ((static_cast<uint64_t>(s[w]) >> (i % 64)) & 1U);
}

// Some index below `bits` is acked in both sets (Pulsar's isAckSetOverlap within the batch).
bool ackedInBoth(const AckSet& a, const AckSet& b, int bits) {
  for (int i = 0; i < bits; ++i) {
    if (!bitSet(a, i) && !bitSet(b, i)) return true;
  }
  return false;
}

int bitsOf(const PendingAckLogEntry::Position& a) {
  return a.batchSize > 0 ? a.batchSize : static_cast<int>(a.ackSet.size() * 64);
}

// Pulsar's compareToWithAckSet: positions, then the set with fewer indexes left is later (no
// set: the whole entry, latest).
int compareWithAckSet(Position a, const AckSet& as, Position b, const AckSet& bs) {
  if (a != b) return a < b ? -1 : 1;
  auto left = [](const AckSet& s) {
    return s.empty() ? 0 : storage::ackSetCardinality(s, static_cast<int>(s.size() * 64));
  };
  int la = left(as), lb = left(bs);
  return la == lb ? 0 : (la > lb ? -1 : 1);
}

// java.net.URLEncoder.encode (UTF-8), as Pulsar's Codec.encode.
std::string urlEncodeName(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '*' || c == '_') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string pendingAckLedgerName(const std::string& persistenceName, const std::string& sub) {
  return persistenceName + "-" + urlEncodeName(sub) + kPendingAckLedgerSuffix;
}

bool isPendingAckLedgerName(const std::string& n) {
  std::string_view suffix = kPendingAckLedgerSuffix;
  return n.size() > suffix.size() &&
         n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Buffer encodePendingAckEntry(const PendingAckLogEntry& e) {
  std::string s;
  {
    StringOutputStream zs(&s);
    CodedOutputStream out(&zs);
    putVarint(out, kEntryOp, static_cast<uint64_t>(e.op));
    putVarint(out, kEntryAckType, static_cast<uint64_t>(e.ackType));
    putVarint(out, kEntryTxnLeast, e.txn.leastBits);
    putVarint(out, kEntryTxnMost, e.txn.mostBits);
    for (const auto& p : e.positions) {
      std::string md = encodeMetadata(p);
      out.WriteTag(static_cast<uint32_t>(kEntryMetadata) << 3 | 2);
      out.WriteVarint32(static_cast<uint32_t>(md.size()));
      out.WriteString(md);
    }
  }
  return Buffer::copyOf(s);
}

Result<PendingAckLogEntry> decodePendingAckEntry(std::string_view bytes) {
  PendingAckLogEntry e;
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  auto bad = [] { return Status::corruption("not a PendingAckMetadataEntry"); };
  while (uint32_t tag = in.ReadTag()) {
    int field = static_cast<int>(tag >> 3);
    if (field == kEntryMetadata && (tag & 7) == 2) {
      std::string md;
      uint32_t len = 0;
      if (!in.ReadVarint32(&len) || !in.ReadString(&md, static_cast<int>(len))) return bad();
      PendingAckLogEntry::Position p;
      if (!decodeMetadata(md, &p)) return bad();
      e.positions.push_back(std::move(p));
      continue;
    }
    uint64_t v = 0;
    if ((tag & 7) != 0 || !in.ReadVarint64(&v)) return bad();
    if (field == kEntryOp) e.op = static_cast<int>(v);
    if (field == kEntryAckType) e.ackType = static_cast<int>(v);
    if (field == kEntryTxnLeast) e.txn.leastBits = v;
    if (field == kEntryTxnMost) e.txn.mostBits = v;
  }
  if (e.op < kOpAck || e.op > kOpAbort) return bad();
  return e;
}

PendingAckHandle::PendingAckHandle(std::string topic, std::string sub, std::string logName,
                                   storage::ManagedCursor& cursor, PendingAckStoreOpener opener)
    : topic_(std::move(topic)),
      sub_(std::move(sub)),
      logName_(std::move(logName)),
      cursor_(cursor),
      opener_(std::move(opener)) {}

PendingAckHandle::~PendingAckHandle() {
  *alive_ = false;
  // The subscription may go on another thread (the broker's shutdown): the close runs on the
  // log's own executor, as ManagedLedger::asyncClose requires.
  if (auto log = log_)
    log->executor()->execute([log] { log->asyncClose([log](const Status&) {}); });
}

std::string PendingAckHandle::prefix(const TxnID& txn) const {
  return "[" + topic_ + "][" + sub_ + "] Transaction:" + txn.toString();
}

void PendingAckHandle::whenReady(std::function<void()> fn) {
  if (state_ == State::kReady) return fn();
  queue_.push_back(std::move(fn));
}

void PendingAckHandle::drainQueue() {
  while (!queue_.empty() && state_ == State::kReady) {
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    fn();
  }
}

void PendingAckHandle::recover(const std::function<void(Status)>& done) {
  if (!opener_.open) {
    if (done) done(Status::ok());
    return;
  }
  state_ = State::kInitializing;
  opener_.open(
      logName_, false,
      [this, alive = alive_, done](Result<std::shared_ptr<storage::ManagedLedger>> r) {
        if (!*alive) return;
        auto finish = [this, done](const Status& s) {
          state_ = s.isOk() ? State::kReady : State::kError;
          if (!s.isOk()) MLOG_WARN("{}: pending ack replay failed: {}", logName_, s.toString());
          if (done) done(s);
          if (s.isOk()) drainQueue();
        };
        if (!r.isOk()) {
          // No log yet: nothing was acked in a transaction on this subscription.
          return finish(r.status().code() == StatusCode::kNotFound ? Status::ok() : r.status());
        }
        log_ = r.value();
        auto cursor = log_->openCursor(kLogCursorName, storage::InitialPosition::kEarliest);
        if (!cursor.isOk()) return finish(cursor.status());
        replayFrom(log_->nextValidPosition(cursor.value()->markDeletedPosition()), finish);
      });
}

void PendingAckHandle::replayFrom(Position from, const std::function<void(Status)>& done) {
  // After a reopen the current ledger is a new, empty one: the last entry is in an older one.
  Position lac = log_->lastWrittenEntry();
  if (lac.entryId < 0 || from > lac) return done(Status::ok());
  log_->asyncReadEntries(
      from, 100, 1 << 20,
      [this, alive = alive_, done, lac](const Status& s, std::vector<storage::Entry> entries) {
        if (!*alive) return;
        if (!s.isOk()) return done(s);
        if (entries.empty()) return done(Status::ok());
        for (const auto& e : entries) {
          if (e.position > lac) return done(Status::ok());
          auto parsed = decodePendingAckEntry(e.data.view());
          if (!parsed.isOk()) return done(parsed.status());
          applyEntry(parsed.value());
          lastLogPos_ = e.position;
        }
        replayFrom(log_->nextValidPosition(entries.back().position), done);
      });
}

void PendingAckHandle::applyEntry(const PendingAckLogEntry& e) {
  if (e.op == kOpCommit || e.op == kOpAbort) {
    Ended ended = release(e.txn);
    // A commit whose cursor write was lost in a crash is applied again (Pulsar's handleCommit).
    if (e.op == kOpCommit && onCommit_) onCommit_(std::move(ended), nullptr);
    return;
  }
  if (e.ackType == kCumulative) {
    if (e.positions.empty()) return;
    const auto& p = e.positions.front();
    if (p.pos > cursor_.markDeletedPosition() &&
        (!cumulative_ ||
         (cumulative_->txn == e.txn &&
          compareWithAckSet(p.pos, p.ackSet, cumulative_->pos, cumulative_->ackSet) > 0))) {
      cumulative_ = Cumulative{e.txn, p.pos, p.ackSet};
    }
    return;
  }
  // Pulsar's handleIndividualAckRecover: an entry with any conflicting position is dropped.
  for (const auto& a : e.positions) {
    if (!individualConflict(e.txn, a).empty()) return;
  }
  holdIndividual(e.txn, e.positions);
}

std::string PendingAckHandle::individualConflict(const TxnID& txn, const IndividualAck& a) const {
  if (cursor_.isAcknowledged(a.pos)) {
    return prefix(txn) + " try to ack message:" + ackPosString(a) + " already acked before.";
  }
  auto held = held_.find(a.pos);
  if (a.ackSet.empty()) {
    if (held != held_.end()) {
      return prefix(txn) + " try to ack message:" + ackPosString(a) + " in pending ack status.";
    }
    return {};
  }
  int bits = bitsOf(a);
  const AckSet* cursorSet = cursor_.batchDeletedIndexes(a.pos);
  if (cursorSet && ackedInBoth(a.ackSet, *cursorSet, bits)) {
    return prefix(txn) + " try to ack message:" + ackPosString(a) + " already acked before.";
  }
  if (held != held_.end() &&
      (held->second.ackSet.empty() || ackedInBoth(a.ackSet, held->second.ackSet, bits))) {
    return prefix(txn) + " try to ack batch message:" + ackPosString(a) + " in pending ack status.";
  }
  return {};
}

void PendingAckHandle::holdIndividual(const TxnID& txn, const std::vector<IndividualAck>& acks) {
  auto& mine = individual_[txn];
  for (const auto& a : acks) {
    auto andInto = [&a](Held& h) {
      if (h.ackSet.empty() || a.ackSet.empty()) {
        h.ackSet.clear();
        return;
      }
      h.ackSet.resize(std::max(h.ackSet.size(), a.ackSet.size()), 0);
      for (size_t i = 0; i < h.ackSet.size(); ++i) {
        h.ackSet[i] &= i < a.ackSet.size() ? a.ackSet[i] : 0;
      }
    };
    auto [m, newInTxn] = mine.try_emplace(a.pos, Held{a.ackSet, a.batchSize});
    if (!newInTxn) andInto(m->second);
    auto [h, newHeld] = held_.try_emplace(a.pos, Held{a.ackSet, a.batchSize});
    if (!newHeld) andInto(h->second);
  }
}

PendingAckHandle::Ended PendingAckHandle::release(const TxnID& txn) {
  Ended ended;
  if (cumulative_ && cumulative_->txn == txn) {
    ended.cumulative.emplace(cumulative_->pos, cumulative_->ackSet);
    cumulative_.reset();
  }
  auto it = individual_.find(txn);
  if (it == individual_.end()) return ended;
  for (auto& [pos, mine] : it->second) {
    if (mine.ackSet.empty()) {
      ended.whole.push_back(pos);
    } else {
      ended.batch.emplace_back(pos, mine.ackSet);
    }
    auto h = held_.find(pos);
    if (h == held_.end()) continue;
    if (mine.ackSet.empty() || h->second.ackSet.empty()) {
      held_.erase(h);
      continue;
    }
    // The indexes this txn held are no longer held (Pulsar's individualAckAbortCommon).
    auto& set = h->second.ackSet;
    set.resize(std::max(set.size(), mine.ackSet.size()), 0);
    for (size_t i = 0; i < set.size(); ++i) {
      set[i] |= ~(i < mine.ackSet.size() ? mine.ackSet[i] : -1);
    }
    int bits = std::max(h->second.batchSize, mine.batchSize);
    if (bits > 0 && storage::ackSetCardinality(set, bits) == bits) held_.erase(h);
  }
  individual_.erase(it);
  return ended;
}

void PendingAckHandle::individualAck(const TxnID& txn, std::vector<IndividualAck> acks,
                                     storage::StatusCallback cb) {
  whenReady([this, txn, acks = std::move(acks), cb = std::move(cb)]() mutable {
    for (const auto& a : acks) {
      std::string conflict = individualConflict(txn, a);
      if (!conflict.empty()) {
        MLOG_WARN("{}", conflict);
        return cb(Status::alreadyExists(conflict));
      }
    }
    holdIndividual(txn, acks);
    PendingAckLogEntry e{kOpAck, kIndividual, txn, std::move(acks)};
    append(e, std::move(cb));
  });
}

void PendingAckHandle::cumulativeAck(const TxnID& txn, Position pos, AckSet ackSet,
                                     storage::StatusCallback cb) {
  whenReady([this, txn, pos, ackSet = std::move(ackSet), cb = std::move(cb)]() mutable {
    Position md = cursor_.markDeletedPosition();
    if (pos <= md) {
      std::string m = prefix(txn) + " try to cumulative ack position: " + posString(pos) +
                      " within range of cursor's markDeletePosition: " + posString(md);
      return cb(Status::alreadyExists(m));
    }
    if (cumulative_ && (cumulative_->txn != txn || compareWithAckSet(pos, ackSet, cumulative_->pos,
                                                                     cumulative_->ackSet) <= 0)) {
      std::string m = prefix(txn) + " try to cumulative batch ack position: " + posString(pos) +
                      " within range of current currentPosition: " + posString(cumulative_->pos);
      return cb(Status::alreadyExists(m));
    }
    cumulative_ = Cumulative{txn, pos, ackSet};
    PendingAckLogEntry e{kOpAck, kCumulative, txn, {{pos, std::move(ackSet), 0}}};
    append(e, std::move(cb));
  });
}

void PendingAckHandle::endTxn(const TxnID& txn, bool commit, int64_t lowWaterMark,
                              storage::StatusCallback answer) {
  storage::StatusCallback done = [this, alive = alive_, commit, start = Clock::now(),
                                  answer = std::move(answer)](const Status& s) {
    if (*alive) recordEnd(commit, s.isOk(), start);
    answer(s);
  };
  whenReady([this, txn, commit, lowWaterMark, done = std::move(done)]() mutable {
    bool cumulative = cumulative_ && cumulative_->txn == txn;
    if (!cumulative && !individual_.count(txn)) {
      handleLowWaterMark(txn, lowWaterMark);
      return done(Status::ok());  // nothing held (or a retried end)
    }
    PendingAckLogEntry e{
        commit ? kOpCommit : kOpAbort, cumulative ? kCumulative : kIndividual, txn, {}};
    append(e, [this, alive = alive_, txn, commit, lowWaterMark,
               done = std::move(done)](const Status& s) {
      if (!*alive) return done(Status::closed("subscription closed"));
      if (!s.isOk()) return done(s);  // held still: the coordinator retries
      Ended ended = release(txn);
      ++(commit ? committed_ : aborted_);
      if (commit && onCommit_) {
        ++commitsNotDurable_;
        onCommit_(std::move(ended), [this, alive](const Status& written) {
          if (!*alive) return;
          --commitsNotDurable_;
          commitWriteFailed_ = !written.isOk();
          if (!written.isOk()) {
            // The COMMIT stays in the log: a later trim comes after a cursor write that carries
            // these acks too (the cursor writes its whole state), or a replay applies them again.
            MLOG_WARN("{}: cursor write of committed acks failed: {}", logName_,
                      written.toString());
            return;
          }
          trimLog();
        });
      } else if (!commit && onAbort_) {
        onAbort_(ended);
      }
      handleLowWaterMark(txn, lowWaterMark);
      trimLog();
      done(Status::ok());
    });
  });
}

namespace {
constexpr auto kLatencyWindow = std::chrono::minutes(10);
constexpr size_t kMaxLatencies = 1000;
}  // namespace

void PendingAckHandle::recordEnd(bool commit, bool ok, Clock::time_point start) {
  if (!commit) {
    ++(ok ? metrics_.abortSucceeded : metrics_.abortFailed);
    return;
  }
  if (!ok) {
    ++metrics_.commitFailed;
    return;
  }
  ++metrics_.commitSucceeded;
  const Clock::time_point now = Clock::now();
  const auto micros = static_cast<double>(
      std::chrono::duration_cast<std::chrono::microseconds>(now - start).count());
  ++metrics_.latencyCount;
  metrics_.latencySumMicros += micros;
  latencies_.emplace_back(now, micros);
  while (latencies_.size() > kMaxLatencies) latencies_.pop_front();
}

PendingAckMetrics PendingAckHandle::metrics() const {
  PendingAckMetrics m = metrics_;
  const Clock::time_point since = Clock::now() - kLatencyWindow;
  for (const auto& [at, micros] : latencies_) {
    if (at >= since) m.recentLatencyMicros.push_back(micros);
  }
  return m;
}

void PendingAckHandle::handleLowWaterMark(const TxnID& txn, int64_t lowWaterMark) {
  const int64_t lwm = raiseLowWaterMark(lowWaterMarks_, txn.mostBits, lowWaterMark);
  // Txns of this coordinator at or below its low water mark have ended there: their acks here
  // are stale (an END_TXN_ON_SUBSCRIPTION that never arrived), so they are aborted.
  std::vector<TxnID> stale;
  for (const auto& [t, acks] : individual_) {
    if (t.mostBits == txn.mostBits && atOrBelowLowWaterMark(lowWaterMarks_, t) && t != txn) {
      stale.push_back(t);
    }
  }
  for (const auto& t : stale) {
    MLOG_WARN("{}: aborting {} below the low water mark {}", logName_, t.toString(), lwm);
    endTxn(t, false, lwm, [](const Status&) {});
  }
}

void PendingAckHandle::append(const PendingAckLogEntry& e, storage::StatusCallback cb) {
  if (!opener_.open) return cb(Status::ok());  // in memory only
  if (!log_) {
    waitingForLog_.emplace_back(e, std::move(cb));
    if (opening_) return;
    opening_ = true;
    opener_.open(logName_, true,
                 [this, alive = alive_](Result<std::shared_ptr<storage::ManagedLedger>> r) {
                   if (*alive) openedForAppend(std::move(r));
                 });
    return;
  }
  log_->asyncAddEntry(encodePendingAckEntry(e),
                      [this, alive = alive_, cb = std::move(cb)](const Status& s, Position p) {
                        if (*alive && s.isOk()) {
                          lastLogPos_ = p;
                          logAppends_++;
                        }
                        if (!s.isOk()) MLOG_WARN("pending ack log write failed: {}", s.toString());
                        cb(s);
                      });
}

void PendingAckHandle::openedForAppend(Result<std::shared_ptr<storage::ManagedLedger>> r) {
  opening_ = false;
  auto waiting = std::move(waitingForLog_);
  waitingForLog_.clear();
  if (r.isOk()) {
    log_ = r.value();
    auto cursor = log_->openCursor(kLogCursorName, storage::InitialPosition::kEarliest);
    if (!cursor.isOk())
      MLOG_WARN("{}: cannot open its cursor: {}", logName_, cursor.status().toString());
  }
  for (auto& [e, cb] : waiting) {
    if (!r.isOk()) {
      cb(r.status());
    } else {
      append(e, std::move(cb));
    }
  }
}

void PendingAckHandle::trimLog() {
  // Nothing held: no entry up to the last one is needed by a replay (Pulsar trims by the
  // subscription's mark-delete position; this is the simple case of it).
  if (!log_ || !empty() || commitsNotDurable_ > 0 || commitWriteFailed_ ||
      lastLogPos_.entryId < 0) {
    return;
  }
  if (logAppends_ - appendsAtTrim_ <
      static_cast<uint64_t>(std::max<int64_t>(1, opener_.logIndexMinLag))) {
    return;  // Pulsar's MLPendingAckStore: trimmed once the index lag is reached
  }
  appendsAtTrim_ = logAppends_;
  for (auto* c : log_->cursors()) {
    if (c->name() == kLogCursorName && c->markDeletedPosition() < lastLogPos_) {
      c->asyncMarkDelete(lastLogPos_, nullptr);
    }
  }
}

bool PendingAckHandle::isWhollyHeld(Position pos, int32_t batchSize) const {
  auto h = held_.find(pos);
  if (h == held_.end()) return false;
  return h->second.ackSet.empty() || storage::ackSetCardinality(h->second.ackSet, batchSize) == 0;
}

const AckSet* PendingAckHandle::heldAckSet(Position pos) const {
  auto h = held_.find(pos);
  return h == held_.end() || h->second.ackSet.empty() ? nullptr : &h->second.ackSet;
}

PendingAckStats PendingAckHandle::stats() const {
  PendingAckStats s;
  static const char* kStates[] = {"None", "Initializing", "Ready", "Error"};
  s.state = kStates[static_cast<int>(state_)];
  s.ongoingTxnCount = static_cast<int64_t>(individual_.size());
  if (cumulative_ && !individual_.count(cumulative_->txn)) ++s.ongoingTxnCount;
  s.heldPositions = static_cast<int64_t>(held_.size());
  if (cumulative_) {
    s.cumulativeTxn = cumulative_->txn.toString();
    s.cumulativeAckPosition = posString(cumulative_->pos);
    const AckSet& set = cumulative_->ackSet;
    for (int i = 0; !set.empty() && i < static_cast<int>(set.size() * 64); ++i) {
      if (bitSet(set, i)) {
        s.cumulativeAckPosition += ":" + std::to_string(i - 1);  // Pulsar's nextSetBit(0) - 1
        break;
      }
    }
  }
  s.committedCount = committed_;
  s.abortedCount = aborted_;
  return s;
}

void PendingAckHandle::deleteLog(storage::StatusCallback cb) {
  individual_.clear();
  held_.clear();
  cumulative_.reset();
  auto finish = [name = logName_, deleted = opener_.deleted, cb = std::move(cb)](const Status& s) {
    if (s.isOk() && deleted) deleted(name);
    if (cb) cb(s);
  };
  if (log_) {
    auto log = std::move(log_);
    log->asyncDelete([log, finish](const Status& s) { finish(s); });
    return;
  }
  if (!opener_.open) return finish(Status::ok());
  // Not opened here (no transaction acked since load): open it only if it exists, then delete.
  opener_.open(logName_, false, [finish](Result<std::shared_ptr<storage::ManagedLedger>> r) {
    if (!r.isOk())
      return finish(r.status().code() == StatusCode::kNotFound ? Status::ok() : r.status());
    auto log = r.value();
    log->asyncDelete([log, finish](const Status& s) { finish(s); });
  });
}

}  // namespace magnetar::broker
