// Recovery of the durable storage at start-up: metadata (ledger lists, cursors, index runs up to
// the last checkpoint) plus a replay of the journal after the checkpoint; a torn or corrupt tail
// is cut. Runs before any thread starts.
#include <algorithm>

#include "base/logging.h"
#include "storage/durable_storage.h"

namespace magnetar::storage {

namespace {
// Entries a stored ledger really has: its index, cut at the close count.
int64_t storedEntries(const StoredLedger& l) {
  int64_t n = l.index.entries();
  return l.meta.closedAt >= 0 ? std::min(n, l.meta.closedAt) : n;
}
}  // namespace

Status DurableManagedLedgerFactory::recover() {
  Status s = env_->createDirs(options_.journalDirectory);
  if (!s) return s;
  uint64_t cpSegment = 0, cpOffset = 0;
  if (auto v = meta_->get(kCheckpointKey)) {
    auto cp = decodeCheckpoint(*v);
    if (!cp) return Status::corruption("bad journal checkpoint record");
    std::tie(cpSegment, cpOffset) = *cp;
  } else if (v.status().code() != StatusCode::kNotFound) {
    return v.status();
  }
  if (auto v = meta_->get(kNextLedgerIdKey)) {
    auto n = decodeU64(*v);
    if (!n) return Status::corruption("bad next-ledger-id record");
    persistedNextLedgerId_ = *n;
  }

  // Managed ledgers and their ledgers.
  std::map<int64_t, ManagedLedgerState*> owner;
  int64_t maxLedger = 0;
  auto mls = meta_->scan(kMlPrefix);
  if (!mls) return mls.status();
  for (const auto& [key, value] : *mls) {
    std::string name = unescapePathComponent(key.substr(sizeof(kMlPrefix) - 1));
    auto list = decodeLedgerList(value);
    if (!list) return Status::corruption("bad ledger list for " + name);
    ManagedLedgerState& st = dormant_[name];
    for (const LedgerMeta& m : *list) {
      st.ledgers[m.ledgerId].meta = m;
      owner[m.ledgerId] = &st;
      liveLedgers_.insert(m.ledgerId);
      maxLedger = std::max(maxLedger, m.ledgerId);
    }
  }

  std::vector<MetadataOp> ops;
  // Cursors.
  auto cursors = meta_->scan(kCursorPrefix);
  if (!cursors) return cursors.status();
  for (const auto& [key, value] : *cursors) {
    std::string rest = key.substr(sizeof(kCursorPrefix) - 1);
    size_t slash = rest.find('/');
    auto cm = decodeCursor(value);
    std::string name = unescapePathComponent(rest.substr(0, slash));
    auto it = dormant_.find(name);
    if (slash == std::string::npos || !cm || it == dormant_.end()) {
      ops.push_back(MetadataOp::del(key));
      continue;
    }
    it->second.cursors[unescapePathComponent(rest.substr(slash + 1))] = *cm;
  }

  // Index runs saved by checkpoints.
  auto runs = meta_->scan(kIndexPrefix);
  if (!runs) return runs.status();
  for (const auto& [key, value] : *runs) {
    auto run = decodeRun(key, value);
    auto o = run ? owner.find(run->ledgerId) : owner.end();
    if (o == owner.end()) {
      ops.push_back(MetadataOp::del(key));
      continue;
    }
    StoredLedger& l = o->second->ledgers[run->ledgerId];
    // Runs after a gap (writes that failed and were fenced) are not part of the ledger.
    if (run->firstEntryId != l.index.entries()) continue;
    l.index.add(*run);
  }

  // Journal segments: replay what follows the checkpoint.
  auto names = env_->listDir(options_.journalDirectory);
  if (!names) return names.status();
  std::vector<uint64_t> segs;
  for (const auto& n : *names) {
    uint64_t seg;
    if (parseSegmentFileName(n, &seg)) segs.push_back(seg);
  }
  std::sort(segs.begin(), segs.end());
  int64_t replayed = 0;
  for (uint64_t seg : segs) {
    if (seg < cpSegment) continue;
    std::string path = options_.journalDirectory + "/" + segmentFileName(seg);
    auto end =
        scanSegment(env_, path, seg, seg == cpSegment ? cpOffset : 0, [&](const JournalRun& r) {
          auto o = owner.find(r.ledgerId);
          if (o == owner.end()) return;
          StoredLedger& l = o->second->ledgers[r.ledgerId];
          if (r.firstEntryId != l.index.entries()) return;
          if (l.meta.closedAt >= 0 && r.firstEntryId >= l.meta.closedAt) return;
          l.index.add(r);
          ops.push_back(MetadataOp::put(indexKey(r.ledgerId, r.firstEntryId), encodeRun(r)));
          replayed += r.count;
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
      if (!f) return f.status();
      s = (*f)->truncate(*end);
      if (!s) return s;
    }
  }

  // Segment references of the surviving runs.
  for (auto& [_, st] : dormant_) {
    for (auto& [id, l] : st.ledgers) {
      if (l.meta.closedAt >= 0) l.index.truncate(std::max<int64_t>(storedEntries(l), 0));
      for (const JournalRun& r : l.index.runs()) {
        segmentLedgers_[r.segment].insert(id);
        ledgerSegments_[id].insert(r.segment);
      }
    }
  }
  knownSegments_.insert(segs.begin(), segs.end());
  uint64_t maxSeg = std::max(segs.empty() ? 0 : segs.back(), cpSegment);
  firstSegment_ = maxSeg + 1;
  checkpointSegment_ = firstSegment_;
  nextLedgerId_ =
      std::max<int64_t>({int64_t{1}, maxLedger + 1, static_cast<int64_t>(persistedNextLedgerId_)});

  // Everything is indexed now: replay will start in the new segment.
  ops.push_back(
      MetadataOp::put(kCheckpointKey, encodeCheckpoint(firstSegment_, kSegmentHeaderSize)));
  s = meta_->write(ops);
  if (!s) return s;
  MLOG_INFO("storage: recovered {} managed ledgers, {} entries replayed from the journal",
            dormant_.size(), replayed);
  return Status::ok();
}

}  // namespace magnetar::storage
