// Recovery of the durable storage at start-up: metadata (ledger lists, cursors, index runs up to
// the last checkpoint) plus a replay of the journal after the checkpoint; a torn or corrupt tail
// is cut. Runs before any thread starts.
#include <algorithm>
#include <string_view>

#include "base/logging.h"
#include "storage/durable_storage.h"

namespace magnetar::storage {

namespace {
// Entries a stored ledger really has: its index, cut at the close count.
int64_t storedEntries(const StoredLedger& l) {
  int64_t n = l.index.entries();
  return l.meta.closedAt >= 0 ? std::min(n, l.meta.closedAt) : n;
}

// A record under a key prefix: its key, the key without the prefix, its value.
struct Record {
  const std::string& key;
  std::string_view rest;
  const std::string& value;
};

// Runs fn on every record under `prefix`, in key order; stops at the first error (the scan's or
// fn's).
template <class Fn>
Status forEachUnder(MetadataStore& meta, std::string_view prefix, Fn fn) {
  auto records = meta.scan(std::string(prefix));
  if (!records) return records.status();
  for (const auto& [key, value] : *records) {
    Status s = fn(Record{key, std::string_view(key).substr(prefix.size()), value});
    if (!s) return s;
  }
  return Status::ok();
}
}  // namespace

// What the phases of recover() hand on to each other.
struct DurableManagedLedgerFactory::Recovery {
  uint64_t cpSegment = 0;  // the checkpoint: replay starts at (cpSegment, cpOffset)
  uint64_t cpOffset = 0;
  std::map<int64_t, ManagedLedgerState*> owner;  // ledger id -> its managed ledger
  int64_t maxLedger = 0;
  std::vector<uint64_t> segments;  // journal segment files, sorted
  std::vector<MetadataOp> ops;     // written at the end: stale records dropped, replayed runs
  int64_t replayed = 0;            // entries replayed from the journal
};

Status DurableManagedLedgerFactory::recover() {
  Status s = env_->createDirs(options_.journalDirectory);
  if (!s) return s;
  Recovery r;
  for (auto phase :
       {&DurableManagedLedgerFactory::recoverCheckpoint,
        &DurableManagedLedgerFactory::recoverLedgerLists,
        &DurableManagedLedgerFactory::recoverTerminations,
        &DurableManagedLedgerFactory::recoverCursors,
        &DurableManagedLedgerFactory::recoverIndexRuns, &DurableManagedLedgerFactory::replayJournal,
        &DurableManagedLedgerFactory::finishRecovery}) {
    if (s = (this->*phase)(r); !s) return s;
  }
  MLOG_INFO("storage: recovered {} managed ledgers, {} entries replayed from the journal",
            dormant_.size(), r.replayed);
  return Status::ok();
}

Status DurableManagedLedgerFactory::recoverCheckpoint(Recovery& r) {
  if (auto v = meta_->get(kCheckpointKey)) {
    auto cp = decodeCheckpoint(*v);
    if (!cp) return Status::corruption("bad journal checkpoint record");
    std::tie(r.cpSegment, r.cpOffset) = *cp;
  } else if (v.status().code() != StatusCode::kNotFound) {
    return v.status();
  }
  if (auto v = meta_->get(kNextLedgerIdKey)) {
    auto n = decodeU64(*v);
    if (!n) return Status::corruption("bad next-ledger-id record");
    persistedNextLedgerId_ = *n;
  }
  return Status::ok();
}

Status DurableManagedLedgerFactory::recoverLedgerLists(Recovery& r) {
  auto addList = [&](const Record& rec) NO_THREAD_SAFETY_ANALYSIS {
    std::string name = unescapePathComponent(std::string(rec.rest));
    auto list = decodeLedgerList(rec.value);
    if (!list) return Status::corruption("bad ledger list for " + name);
    ManagedLedgerState& st = dormant_[name];
    for (const LedgerMeta& m : *list) {
      st.ledgers[m.ledgerId].meta = m;
      r.owner[m.ledgerId] = &st;
      liveLedgers_.insert(m.ledgerId);
      ledgerOwner_[m.ledgerId] = name;
      r.maxLedger = std::max(r.maxLedger, m.ledgerId);
    }
    return Status::ok();
  };
  return forEachUnder(*meta_, kMlPrefix, addList);
}

Status DurableManagedLedgerFactory::recoverTerminations(Recovery& /*r*/) {
  auto addTermination = [&](const Record& rec) NO_THREAD_SAFETY_ANALYSIS {
    std::string name = unescapePathComponent(std::string(rec.rest));
    auto pos = decodeTerminated(rec.value);
    if (!pos) return Status::corruption("bad terminated position for " + name);
    auto it = dormant_.find(name);
    if (it != dormant_.end()) it->second.terminatedAt = *pos;  // else its ledger list is gone
    return Status::ok();
  };
  return forEachUnder(*meta_, kTerminatedPrefix, addTermination);
}

Status DurableManagedLedgerFactory::recoverCursors(Recovery& r) {
  auto addCursor = [&](const Record& rec) NO_THREAD_SAFETY_ANALYSIS {
    size_t slash = rec.rest.find('/');
    auto cm = decodeCursor(rec.value);
    std::string name = unescapePathComponent(std::string(rec.rest.substr(0, slash)));
    auto it = dormant_.find(name);
    if (slash == std::string::npos || !cm || it == dormant_.end()) {
      r.ops.push_back(MetadataOp::del(rec.key));
    } else {
      it->second.cursors[unescapePathComponent(std::string(rec.rest.substr(slash + 1)))] = *cm;
    }
    return Status::ok();
  };
  return forEachUnder(*meta_, kCursorPrefix, addCursor);
}

Status DurableManagedLedgerFactory::recoverIndexRuns(Recovery& r) {
  auto addRun = [&](const Record& rec) NO_THREAD_SAFETY_ANALYSIS {
    auto run = decodeRun(rec.key, rec.value);
    auto o = run ? r.owner.find(run->ledgerId) : r.owner.end();
    if (o == r.owner.end()) {
      r.ops.push_back(MetadataOp::del(rec.key));
      return Status::ok();
    }
    StoredLedger& l = o->second->ledgers[run->ledgerId];
    // Runs after a gap (writes that failed and were fenced) are not part of the ledger.
    if (run->firstEntryId == l.index.entries()) l.index.add(*run);
    return Status::ok();
  };
  return forEachUnder(*meta_, kIndexPrefix, addRun);
}

Status DurableManagedLedgerFactory::replayJournal(Recovery& r) {
  auto names = env_->listDir(options_.journalDirectory);
  if (!names) return names.status();
  for (const auto& n : *names) {
    uint64_t seg;
    if (parseSegmentFileName(n, &seg)) r.segments.push_back(seg);
  }
  std::sort(r.segments.begin(), r.segments.end());
  for (uint64_t seg : r.segments) {
    if (seg < r.cpSegment) continue;
    std::string path = options_.journalDirectory + "/" + segmentFileName(seg);
    auto end = scanSegment(
        env_, path, seg, seg == r.cpSegment ? r.cpOffset : 0, [&](const JournalRun& run) {
          auto o = r.owner.find(run.ledgerId);
          if (o == r.owner.end()) return;
          StoredLedger& l = o->second->ledgers[run.ledgerId];
          if (run.firstEntryId != l.index.entries()) return;
          if (l.meta.closedAt >= 0 && run.firstEntryId >= l.meta.closedAt) {
            return;
          }
          l.index.add(run);
          r.ops.push_back(
              MetadataOp::put(indexKey(run.ledgerId, run.firstEntryId), encodeRun(run)));
          r.replayed += run.count;
        });
    if (!end) {
      if (end.status().code() != StatusCode::kCorruption) return end.status();
      MLOG_WARN("storage: skipping journal segment {}: {}", seg, end.status().toString());
      continue;
    }
    auto size = env_->fileSize(path);
    if (size && *end < *size) {
      MLOG_WARN("storage: cutting journal segment {} at {} ({} bytes of torn/corrupt tail)", seg,
                *end, *size - *end);
      auto f = env_->openWritable(path);
      Status s = f ? (*f)->truncate(*end) : f.status();
      // Not fatal (e.g. a full disk): replay stops at the same place next time.
      if (!s) MLOG_WARN("storage: cutting journal segment {} failed: {}", seg, s.toString());
    }
  }
  return Status::ok();
}

Status DurableManagedLedgerFactory::finishRecovery(Recovery& r) {
  // Segment references of the surviving runs.
  for (auto& [_, st] : dormant_) {
    for (auto& [id, l] : st.ledgers) {
      if (l.meta.closedAt >= 0) l.index.truncate(std::max<int64_t>(storedEntries(l), 0));
      for (const JournalRun& run : l.index.runs()) bgAddRun(run);
    }
  }
  knownSegments_.insert(r.segments.begin(), r.segments.end());
  uint64_t maxSeg = std::max(r.segments.empty() ? 0 : r.segments.back(), r.cpSegment);
  firstSegment_ = maxSeg + 1;
  checkpointSegment_ = firstSegment_;
  nextLedgerId_ = std::max<int64_t>(
      {int64_t{1}, r.maxLedger + 1, static_cast<int64_t>(persistedNextLedgerId_)});
  // Everything is indexed now: replay will start in the new segment.
  r.ops.push_back(
      MetadataOp::put(kCheckpointKey, encodeCheckpoint(firstSegment_, kSegmentHeaderSize)));
  Status s = meta_->write(r.ops);
  if (!s) {
    // A full disk must not stop the start: serve reads, and write this with the first checkpoint
    // (until then a restart replays from the old checkpoint again).
    MLOG_WARN("storage: saving the recovered index failed ({}); retried at the next checkpoint",
              s.toString());
    failedOps_ = std::move(r.ops);
  }
  return Status::ok();
}

}  // namespace magnetar::storage
