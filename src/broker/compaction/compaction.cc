#include "broker/compaction/compaction.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "base/logging.h"
#include "broker/common/wall_clock.h"
#include "protocol/byte_order.h"
#include "protocol/commands.h"
#include "protocol/frame.h"

namespace magnetar::broker {

using storage::Entry;
using storage::Position;

namespace {

constexpr char kPrefix[] = "__compacted/";
constexpr uint8_t kEntryMagic[4] = {'M', 'G', 'C', 'E'};
constexpr size_t kEntryHeader = 20;
// Cursor of a compacted ledger that never moves, so storage keeps all of its ledgers.
constexpr char kHoldCursor[] = "__compacted";
// Read batches of a compaction and of a view load.
constexpr int kReadEntries = 200;
constexpr size_t kReadBytes = 4 << 20;

Position after(Position p) { return Position{p.ledgerId, p.entryId + 1}; }

// One message of a batch payload: its metadata and payload bytes.
struct BatchMessage {
  proto::SingleMessageMetadata md;
  std::string_view payload;
};

// Splits an uncompressed batch payload ([u32 BE size][SingleMessageMetadata][payload]...).
bool splitBatch(std::string_view payload, int count, std::vector<BatchMessage>* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  size_t left = payload.size();
  for (int i = 0; i < count; ++i) {
    if (left < 4) return false;
    uint32_t mdSize = protocol::wire::readBE32(p);
    p += 4;
    left -= 4;
    if (mdSize > left) return false;
    BatchMessage m;
    if (!m.md.ParseFromArray(p, static_cast<int>(mdSize))) return false;
    p += mdSize;
    left -= mdSize;
    auto size = static_cast<size_t>(std::max(0, m.md.payload_size()));
    if (size > left) return false;
    m.payload = std::string_view(reinterpret_cast<const char*>(p), size);
    p += size;
    left -= size;
    out->push_back(std::move(m));
  }
  return true;
}

void appendBatchMessage(const proto::SingleMessageMetadata& md, std::string_view payload,
                        std::string* out) {
  std::string bytes = md.SerializeAsString();
  uint8_t size[4];
  protocol::wire::writeBE32(size, static_cast<uint32_t>(bytes.size()));
  out->append(reinterpret_cast<const char*>(size), 4);
  out->append(bytes);
  out->append(payload);
}

// A parsed entry: metadata, payload and, for an uncompressed batch, its messages.
struct ParsedEntry {
  proto::MessageMetadata md;
  std::string_view payload;
  bool batch = false;  // opened message by message
  std::vector<BatchMessage> messages;
};

bool parseEntry(const Entry& e, ParsedEntry* out) {
  if (!protocol::parseMetadata(e.data, &out->md).isOk()) return false;
  auto payload = protocol::payloadOf(e.data);
  if (!payload.isOk()) return false;
  out->payload = *payload;
  if (out->md.has_num_messages_in_batch() && out->md.encryption_keys_size() == 0 &&
      out->md.compression() == proto::NONE) {
    out->batch = true;
    return splitBatch(out->payload, out->md.num_messages_in_batch(), &out->messages);
  }
  return true;
}

bool emptyValue(std::string_view payload, bool nullValue) { return nullValue || payload.empty(); }

}  // namespace

std::string compactedLedgerName(const std::string& topicLedger, int64_t seq) {
  return kPrefix + topicLedger + "/" + std::to_string(seq);
}

bool isCompactedLedgerName(std::string_view name, std::string* topicLedger, int64_t* seq) {
  if (name.substr(0, sizeof(kPrefix) - 1) != kPrefix) return false;
  auto slash = name.rfind('/');
  if (slash == std::string_view::npos || slash < sizeof(kPrefix) - 1) return false;
  if (topicLedger) {
    *topicLedger = std::string(name.substr(sizeof(kPrefix) - 1, slash - (sizeof(kPrefix) - 1)));
  }
  if (seq) {
    try {
      *seq = std::stoll(std::string(name.substr(slash + 1)));
    } catch (...) {
      return false;
    }
  }
  return true;
}

Buffer encodeCompactedEntry(Position original, std::string_view entry) {
  Buffer b = Buffer::allocate(kEntryHeader + entry.size());
  uint8_t* p = b.mutableData();
  std::memcpy(p, kEntryMagic, 4);
  for (int i = 0; i < 8; ++i) p[4 + i] = static_cast<uint8_t>(original.ledgerId >> (8 * i));
  for (int i = 0; i < 8; ++i) p[12 + i] = static_cast<uint8_t>(original.entryId >> (8 * i));
  if (!entry.empty()) std::memcpy(p + kEntryHeader, entry.data(), entry.size());
  return b;
}

Result<Entry> decodeCompactedEntry(const Buffer& data) {
  if (data.size() < kEntryHeader || std::memcmp(data.data(), kEntryMagic, 4) != 0) {
    return Status::corruption("not a compacted ledger entry");
  }
  const uint8_t* p = data.data();
  uint64_t l = 0;
  uint64_t e = 0;
  for (int i = 0; i < 8; ++i) l |= static_cast<uint64_t>(p[4 + i]) << (8 * i);
  for (int i = 0; i < 8; ++i) e |= static_cast<uint64_t>(p[12 + i]) << (8 * i);
  Entry out;
  out.position = Position{static_cast<int64_t>(l), static_cast<int64_t>(e)};
  out.data = Buffer::copyOf(p + kEntryHeader, data.size() - kEntryHeader);
  return out;
}

// ---- CompactionKeyMap ----------------------------------------------------------------------

void CompactionKeyMap::observe(const Entry& e) {
  ParsedEntry pe;
  if (!parseEntry(e, &pe)) return;
  if (pe.md.has_marker_type()) return;
  if (!pe.batch) {
    seen_++;
    record(pe.md.has_partition_key() ? &pe.md.partition_key() : nullptr,
           emptyValue(pe.payload, pe.md.null_value()), MessageRef{e.position, -1});
    return;
  }
  for (size_t i = 0; i < pe.messages.size(); ++i) {
    const auto& m = pe.messages[i];
    if (m.md.compacted_out()) continue;
    seen_++;
    record(m.md.has_partition_key() ? &m.md.partition_key() : nullptr,
           emptyValue(m.payload, m.md.null_value()),
           MessageRef{e.position, static_cast<int32_t>(i)});
  }
}

void CompactionKeyMap::record(const std::string* key, bool empty, const MessageRef& ref) {
  // Pulsar's removed events: a keyless message, a tombstone, or a value that replaces another.
  if (!key || empty) {
    removed_++;
    if (key) latest_.erase(*key);
    return;
  }
  auto [it, inserted] = latest_.insert_or_assign(*key, ref);
  if (!inserted) removed_++;
}

bool CompactionKeyMap::isLatest(const std::string& key, const MessageRef& ref) const {
  auto it = latest_.find(key);
  return it != latest_.end() && it->second == ref;
}

std::optional<Buffer> CompactionKeyMap::retain(const Entry& e) {
  ParsedEntry pe;
  if (!parseEntry(e, &pe) || pe.md.has_marker_type()) return std::nullopt;
  if (!pe.batch) {
    if (!pe.md.has_partition_key() || !isLatest(pe.md.partition_key(), {e.position, -1})) {
      return std::nullopt;
    }
    kept_++;
    return e.data;
  }
  // Pulsar's RawBatchConverter.rebatchMessage: same batch size, losers become compacted_out.
  size_t keep = 0;
  std::vector<bool> keeps(pe.messages.size());
  for (size_t i = 0; i < pe.messages.size(); ++i) {
    const auto& m = pe.messages[i];
    keeps[i] = !m.md.compacted_out() && m.md.has_partition_key() &&
               isLatest(m.md.partition_key(), {e.position, static_cast<int32_t>(i)});
    keep += keeps[i];
  }
  if (keep == 0) return std::nullopt;
  kept_ += static_cast<int64_t>(keep);
  if (keep == pe.messages.size()) return e.data;
  std::string payload;
  proto::SingleMessageMetadata out;
  out.set_compacted_out(true);
  out.set_payload_size(0);
  for (size_t i = 0; i < pe.messages.size(); ++i) {
    if (keeps[i]) {
      appendBatchMessage(pe.messages[i].md, pe.messages[i].payload, &payload);
    } else {
      appendBatchMessage(out, {}, &payload);
    }
  }
  pe.md.set_uncompressed_size(static_cast<uint32_t>(payload.size()));
  return protocol::Commands::newEntry(pe.md, payload);
}

// ---- CompactedView -------------------------------------------------------------------------

CompactedView::CompactedView(std::shared_ptr<storage::CompactedLedger> ledger, Position horizon)
    : ledger_(std::move(ledger)), horizon_(horizon) {}

void CompactedView::load(const std::function<void(Status)>& cb) {
  index_.clear();
  loadFrom(0, cb);
}

void CompactedView::loadFrom(size_t index, const std::function<void(Status)>& cb) {
  ledger_->asyncRead(static_cast<int64_t>(index), kReadEntries, kReadBytes,
                     [this, index, cb](const Status& s, const std::vector<Entry>& entries) {
                       if (!s.isOk()) return cb(s);
                       if (entries.empty()) return cb(Status::ok());
                       for (const auto& e : entries) index_.push_back(e.position);
                       loadFrom(index + entries.size(), cb);
                     });
}

void CompactedView::asyncReadFromIndex(size_t index, int maxEntries, size_t maxBytes,
                                       storage::ReadEntriesCallback cb) const {
  // Past the end the ledger answers empty (on the topic's executor).
  ledger_->asyncRead(static_cast<int64_t>(std::min(index, index_.size())), maxEntries, maxBytes,
                     std::move(cb));
}

void CompactedView::asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                                     storage::ReadEntriesCallback cb) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), from);
  asyncReadFromIndex(static_cast<size_t>(it - index_.begin()), maxEntries, maxBytes, std::move(cb));
}

// ---- ManagedLedgerCompactedStore -----------------------------------------------------------

namespace {

// A compacted managed ledger. Entry i's stored position is learned when it is added or first
// read in order (the view's load reads 0, 1, ... once), so reads by index need no second scan.
class ManagedCompactedLedger : public storage::CompactedLedger,
                               public std::enable_shared_from_this<ManagedCompactedLedger> {
 public:
  ManagedCompactedLedger(std::shared_ptr<storage::ManagedLedger> ml, std::string name, int64_t seq,
                         LedgerOpener opener, int64_t entries)
      : ml_(std::move(ml)),
        name_(std::move(name)),
        seq_(seq),
        opener_(std::move(opener)),
        entries_(entries) {}

  int64_t ledgerId() const override {
    if (!stored_.empty()) return stored_.front().ledgerId;
    auto ledgers = ml_->ledgerStats();
    return ledgers.empty() ? ml_->lastConfirmedEntry().ledgerId : ledgers.front().ledgerId;
  }
  int64_t numberOfEntries() const override { return entries_; }
  int64_t sizeBytes() const override { return ml_->totalSizeBytes(); }

  void asyncAdd(Position original, Buffer entry, storage::StatusCallback cb) override {
    auto index = static_cast<size_t>(entries_++);
    auto self = shared_from_this();
    ml_->asyncAddEntry(encodeCompactedEntry(original, entry.view()),
                       [self, index, cb = std::move(cb)](const Status& s, Position stored) {
                         if (s.isOk() && self->stored_.size() == index) {
                           self->stored_.push_back(stored);
                         }
                         cb(s);
                       });
  }

  void asyncRead(int64_t first, int maxEntries, size_t maxBytes,
                 storage::ReadEntriesCallback cb) const override {
    if (first >= entries_) {
      ml_->executor()->execute([cb = std::move(cb)] { cb(Status::ok(), {}); });
      return;
    }
    auto index = static_cast<size_t>(first);
    Position from;
    if (index < stored_.size()) {
      from = stored_[index];
    } else if (index == stored_.size()) {
      from = stored_.empty() ? ml_->firstPosition() : ml_->nextValidPosition(stored_.back());
    } else {
      ml_->executor()->execute(
          [cb = std::move(cb)] { cb(Status::internal("compacted ledger read out of order"), {}); });
      return;
    }
    auto self = std::const_pointer_cast<ManagedCompactedLedger>(shared_from_this());
    ml_->asyncReadEntries(
        from, maxEntries, maxBytes,
        [self, index, cb = std::move(cb)](const Status& s, const std::vector<Entry>& entries) {
          if (!s.isOk()) return cb(s, {});
          std::vector<Entry> out;
          out.reserve(entries.size());
          for (size_t k = 0; k < entries.size(); ++k) {
            auto d = decodeCompactedEntry(entries[k].data);
            if (!d.isOk()) return cb(d.status(), {});
            if (index + k == self->stored_.size()) self->stored_.push_back(entries[k].position);
            out.push_back(std::move(d.value()));
          }
          cb(Status::ok(), std::move(out));
        });
  }

  void asyncClose(storage::StatusCallback cb) override {
    // Closing persists the ledger's metadata before the cursor names it; it is then reopened
    // for reads.
    auto self = shared_from_this();
    ml_->asyncClose([self, cb = std::move(cb)](const Status& s) {
      if (!s.isOk()) return cb(s);
      self->opener_(self->name_, [self, cb](Result<std::shared_ptr<storage::ManagedLedger>> r) {
        if (!r.isOk()) return cb(r.status());
        self->ml_ = *r;
        cb(Status::ok());
      });
    });
  }

  void asyncDelete(storage::StatusCallback cb) override { ml_->asyncDelete(std::move(cb)); }

  void describe(storage::CursorProperties* properties) const override {
    (*properties)[kCompactedTopicLedgerProperty] = ledgerId();
    (*properties)[kCompactedLedgerSeqProperty] = seq_;
  }

 private:
  std::shared_ptr<storage::ManagedLedger> ml_;
  std::string name_;
  int64_t seq_;
  LedgerOpener opener_;
  int64_t entries_;
  mutable std::vector<Position> stored_;
};

}  // namespace

void ManagedLedgerCompactedStore::asyncCreate(const std::string& topic, Position /*horizon*/,
                                              net::Executor* /*executor*/,
                                              storage::CompactedLedgerCallback cb) {
  int64_t seq = std::max<int64_t>(wallClockMs(), lastSeq_ + 1);
  lastSeq_ = seq;
  std::string name = compactedLedgerName(topic, seq);
  LedgerOpener opener = opener_;
  opener_(name, [name, seq, opener,
                 cb = std::move(cb)](Result<std::shared_ptr<storage::ManagedLedger>> r) {
    if (!r.isOk()) return cb(r.status());
    // Never moves: storage keeps every ledger of the compacted view.
    auto hold = (*r)->openCursor(kHoldCursor, storage::InitialPosition::kEarliest);
    if (!hold.isOk()) return cb(hold.status());
    cb(std::shared_ptr<storage::CompactedLedger>(
        std::make_shared<ManagedCompactedLedger>(*r, name, seq, opener, 0)));
  });
}

void ManagedLedgerCompactedStore::asyncOpen(const std::string& topic,
                                            const storage::CursorProperties& properties,
                                            net::Executor* executor,
                                            storage::CompactedLedgerCallback cb) {
  auto it = properties.find(kCompactedLedgerSeqProperty);
  if (it == properties.end()) {
    executor->execute([cb = std::move(cb)] { cb(std::shared_ptr<storage::CompactedLedger>()); });
    return;
  }
  int64_t seq = it->second;
  lastSeq_ = std::max(lastSeq_, seq);
  std::string name = compactedLedgerName(topic, seq);
  LedgerOpener opener = opener_;
  opener_(name, [name, seq, opener,
                 cb = std::move(cb)](Result<std::shared_ptr<storage::ManagedLedger>> r) {
    if (!r.isOk()) return cb(r.status());
    int64_t entries = (*r)->numberOfEntries();
    cb(std::shared_ptr<storage::CompactedLedger>(
        std::make_shared<ManagedCompactedLedger>(*r, name, seq, opener, entries)));
  });
}

const char* compactionStatusName(CompactionStatus s) {
  // Indexed by CompactionStatus.
  static constexpr const char* kNames[] = {"NOT_RUN", "RUNNING", "SUCCESS", "ERROR"};
  static_assert(std::size(kNames) == static_cast<size_t>(CompactionStatus::kError) + 1,
                "a CompactionStatus without a name");
  auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "NOT_RUN";
}

// ---- TopicCompactor ------------------------------------------------------------------------

struct TopicCompactor::Run {
  std::shared_ptr<CompactedView> old;
  Position horizon;
  storage::ManagedCursor* cursor = nullptr;
  CompactionKeyMap keys;
  std::shared_ptr<CompactedView> next;
  std::function<void(Status)> done;
  std::chrono::steady_clock::time_point start;
  int64_t pendingAdds = 0;
  Status addStatus;
  bool closedOutput = false;
};

TopicCompactor::TopicCompactor(std::shared_ptr<storage::ManagedLedger> ledger, LedgerOpener opener)
    : ledger_(std::move(ledger)) {
  setOpener(std::move(opener));
}

void TopicCompactor::setOpener(LedgerOpener opener) {
  opener_ = std::move(opener);
  store_ = opener_ ? std::make_shared<ManagedLedgerCompactedStore>(opener_) : nullptr;
}

namespace {
storage::ManagedCursor* findCursor(storage::ManagedLedger& ledger, const std::string& name) {
  for (auto* c : ledger.cursors()) {
    if (c->name() == name) return c;
  }
  return nullptr;
}
}  // namespace

void TopicCompactor::initialize(const std::vector<int64_t>& others,
                                const std::function<void(Status)>& done) {
  if (!store_) return done(Status::ok());
  storage::ManagedCursor* cursor = findCursor(*ledger_, kCompactionCursorName);
  storage::CursorProperties props;
  if (cursor) props = cursor->properties();
  int64_t current = -1;
  auto seqIt = props.find(kCompactedLedgerSeqProperty);
  if (seqIt != props.end()) current = seqIt->second;
  // Managed ledgers of a compaction that did not commit, or whose successor committed before
  // the delete.
  for (int64_t seq : others) {
    if (seq == current || !opener_) continue;
    MLOG_INFO("{}: deleting compacted ledger {} left by an earlier run", ledger_->name(), seq);
    opener_(compactedLedgerName(ledger_->name(), seq),
            [](Result<std::shared_ptr<storage::ManagedLedger>> r) {
              if (r.isOk()) (*r)->asyncDelete([](const Status&) {});
            });
  }
  if (!cursor) return done(Status::ok());
  Position horizon = cursor->markDeletedPosition();
  auto self = shared_from_this();
  store_->asyncOpen(ledger_->name(), props, ledger_->executor(),
                    [self, horizon, done](Result<std::shared_ptr<storage::CompactedLedger>> r) {
                      if (!r.isOk()) return done(r.status());
                      if (!*r) return done(Status::ok());
                      auto view = std::make_shared<CompactedView>(*r, horizon);
                      view->load([self, view, done](const Status& s) {
                        // A view loaded from storage does not change status() (Pulsar reports
                        // NOT_RUN until this broker compacts; the view is what matters to readers).
                        if (s.isOk()) self->view_ = view;
                        done(s);
                      });
                    });
}

void TopicCompactor::deleteView() {
  closed_ = true;
  if (view_) view_->ledger()->asyncDelete([](const Status&) {});
  view_.reset();
}

int64_t TopicCompactor::backlogBytes() const {
  storage::ManagedCursor* cursor = findCursor(*ledger_, kCompactionCursorName);
  int64_t total = ledger_->totalSizeBytes();
  if (!cursor) return total;
  int64_t entries = ledger_->numberOfEntries();
  if (entries <= 0) return 0;
  return total / entries * cursor->numberOfEntriesInBacklog();
}

Status TopicCompactor::trigger(const std::function<void(Status)>& done) {
  if (status_ == CompactionStatus::kRunning) {
    return Status::busy("Compaction already in progress");
  }
  if (!store_) return Status::unsupported("compaction is not available on this topic");
  auto cursor = ledger_->openCursor(kCompactionCursorName, storage::InitialPosition::kEarliest);
  if (!cursor.isOk()) return cursor.status();
  auto run = std::make_shared<Run>();
  run->old = view_;
  run->cursor = *cursor;
  run->horizon = ledger_->lastConfirmedEntry();
  if (auto maxRead = txnMaxRead_ ? txnMaxRead_() : std::nullopt;
      maxRead && *maxRead < run->horizon) {
    run->horizon = *maxRead;
  }
  run->done = done;
  run->start = std::chrono::steady_clock::now();
  status_ = CompactionStatus::kRunning;
  lastError_.clear();
  if (ledger_->numberOfEntries() == 0 || (view_ && run->horizon <= view_->horizon())) {
    // Nothing new since the last compaction (or nothing at all): the view stands.
    ledger_->executor()->execute([self = shared_from_this(), run] { self->commit(run); });
    return Status::ok();
  }
  scan(run, false);
  return Status::ok();
}

void TopicCompactor::scan(const std::shared_ptr<Run>& run, bool phaseTwo) {
  Position topicStart = run->old ? after(run->old->horizon()) : ledger_->firstPosition();
  if (!run->old) {
    scanTopic(run, phaseTwo, topicStart);
    return;
  }
  // The previous view first (the topic before its horizon may be trimmed), then the topic.
  auto self = shared_from_this();
  auto step = std::make_shared<std::function<void(size_t)>>();
  *step = [self, run, phaseTwo, topicStart, step](size_t index) {
    run->old->asyncReadFromIndex(index, kReadEntries, kReadBytes,
                                 [self, run, phaseTwo, topicStart, step, index](
                                     const Status& s, std::vector<Entry> entries) {
                                   if (self->closed_) return;
                                   if (!s.isOk()) {
                                     *step = nullptr;
                                     return self->fail(run, s);
                                   }
                                   if (entries.empty()) {
                                     *step = nullptr;
                                     return self->scanTopic(run, phaseTwo, topicStart);
                                   }
                                   size_t nextIndex = index + entries.size();
                                   self->onEntries(run, phaseTwo, entries,
                                                   [step, nextIndex] { (*step)(nextIndex); });
                                 });
  };
  (*step)(0);
}

void TopicCompactor::scanTopic(const std::shared_ptr<Run>& run, bool phaseTwo, Position from) {
  if (closed_) return;
  if (from > run->horizon) {
    return phaseTwo ? commit(run) : finishPhaseOne(run);
  }
  auto self = shared_from_this();
  ledger_->asyncReadEntries(
      from, kReadEntries, kReadBytes,
      [self, run, phaseTwo](const Status& s, std::vector<Entry> entries) {
        if (self->closed_) return;
        if (!s.isOk()) return self->fail(run, s);
        while (!entries.empty() && entries.back().position > run->horizon) entries.pop_back();
        if (entries.empty()) {
          return phaseTwo ? self->commit(run) : self->finishPhaseOne(run);
        }
        Position next = after(entries.back().position);
        self->onEntries(run, phaseTwo, entries,
                        [self, run, phaseTwo, next] { self->scanTopic(run, phaseTwo, next); });
      });
}

void TopicCompactor::onEntries(const std::shared_ptr<Run>& run, bool phaseTwo,
                               std::vector<Entry>& entries, const std::function<void()>& next) {
  if (txnHidden_) {
    std::erase_if(entries, [this](const Entry& e) { return txnHidden_(e); });
  }
  if (!phaseTwo) {
    for (auto& e : entries) run->keys.observe(e);
    next();
    return;
  }
  // Phase two: the winners go to the new compacted ledger, in order; the next read waits for
  // this batch's adds (bounded memory).
  struct Batch {
    int64_t left = 1;
    std::function<void()> next;
  };
  auto batch = std::make_shared<Batch>();
  batch->next = next;
  auto self = shared_from_this();
  auto release = [self, run, batch] {
    if (--batch->left > 0) return;
    if (!run->addStatus.isOk()) return self->fail(run, run->addStatus);
    batch->next();
  };
  for (auto& e : entries) {
    std::optional<Buffer> kept = run->keys.retain(e);
    if (!kept) continue;
    batch->left++;
    Position original = e.position;
    run->next->addIndex(original);
    run->next->ledger()->asyncAdd(original, std::move(*kept), [run, release](const Status& s) {
      if (!s.isOk() && run->addStatus.isOk()) run->addStatus = s;
      release();
    });
  }
  release();
}

void TopicCompactor::finishPhaseOne(const std::shared_ptr<Run>& run) {
  auto self = shared_from_this();
  store_->asyncCreate(ledger_->name(), run->horizon, ledger_->executor(),
                      [self, run](Result<std::shared_ptr<storage::CompactedLedger>> r) {
                        if (self->closed_) {
                          if (r.isOk()) (*r)->asyncDelete([](const Status&) {});
                          return;
                        }
                        if (!r.isOk()) return self->fail(run, r.status());
                        run->next = std::make_shared<CompactedView>(*r, run->horizon);
                        self->scan(run, true);
                      });
}

void TopicCompactor::commit(const std::shared_ptr<Run>& run) {
  if (closed_) return;
  auto finish = [self = shared_from_this(), run] {
    self->status_ = CompactionStatus::kSuccess;
    auto now = wallClockMs();
    self->record_.lastCompactionSucceedTimestamp = now;
    self->record_.lastCompactionRemovedEventCount = run->keys.removedEvents();
    self->record_.lastCompactionDurationTimeInMills =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              run->start)
            .count();
    if (run->done) run->done(Status::ok());
  };
  if (!run->next) return finish();
  if (!run->closedOutput) {
    // Closing makes the compacted ledger durable (and readable by others) before the cursor
    // names it.
    run->closedOutput = true;
    auto self = shared_from_this();
    run->next->ledger()->asyncClose([self, run](const Status& s) {
      if (!s.isOk()) return self->fail(run, s);
      self->commit(run);
    });
    return;
  }
  storage::CursorProperties props = run->cursor->properties();
  run->next->ledger()->describe(&props);
  auto self = shared_from_this();
  // The one durable switch: mark-delete and properties go in one write, so a crash leaves the
  // cursor naming either the old view or the new one.
  run->cursor->asyncMarkDelete(run->horizon, props, [self, run, finish](const Status& s) {
    if (!s.isOk()) return self->fail(run, s);
    std::shared_ptr<CompactedView> old = self->view_;
    self->view_ = run->next;
    if (old) old->ledger()->asyncDelete([](const Status&) {});
    finish();
  });
}

void TopicCompactor::fail(const std::shared_ptr<Run>& run, const Status& s) {
  MLOG_WARN("{}: compaction failed: {}", ledger_->name(), s.toString());
  status_ = CompactionStatus::kError;
  lastError_ = s.message();
  record_.lastCompactionFailedTimestamp = wallClockMs();
  // The cursor still names the old view: the new ledger is garbage.
  if (run->next) run->next->ledger()->asyncDelete([](const Status&) {});
  if (run->done) run->done(s);
}

}  // namespace magnetar::broker
