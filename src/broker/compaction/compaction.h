// Topic compaction as Pulsar's TwoPhaseCompactor and CompactedTopicImpl: the latest message per
// key, up to a horizon, written to a compacted ledger that read_compacted consumers read before
// the live tail. Where the compacted ledger lives is the storage's (storage/compacted_ledger.h):
// on BookKeeper Pulsar's compacted ledger (docs/managed-ledger-bookkeeper-format.md); else a
// managed ledger of the topic's factory (ManagedLedgerCompactedStore, docs/storage-format.md).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMPACTION)
#error "broker/compaction is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "storage/compacted_ledger.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Pulsar's Compactor.COMPACTION_SUBSCRIPTION: the durable cursor that marks the horizon.
inline constexpr char kCompactionCursorName[] = "__compaction";
// Pulsar's Compactor.COMPACTED_TOPIC_LEDGER_PROPERTY, and the embedded storage's sequence number
// naming the compacted managed ledger (compactedLedgerName).
using storage::kCompactedLedgerSeqProperty;
using storage::kCompactedTopicLedgerProperty;

// The managed ledger holding compaction number `seq` of the topic whose ledger is `topicLedger`:
// "__compacted/<topicLedger>/<seq>". Such names are never topics (isCompactedLedgerName).
std::string compactedLedgerName(const std::string& topicLedger, int64_t seq);
// True for names made by compactedLedgerName; *topicLedger and *seq get the parts.
bool isCompactedLedgerName(std::string_view name, std::string* topicLedger = nullptr,
                           int64_t* seq = nullptr);

// One compacted ledger entry: 4 bytes magic "MGCE", the original position (i64 ledger id, i64
// entry id, little-endian), then the entry bytes as stored in the topic (possibly re-batched).
Buffer encodeCompactedEntry(storage::Position original, std::string_view entry);
// The original position and entry bytes. kCorruption when too short or the magic is wrong.
Result<storage::Entry> decodeCompactedEntry(const Buffer& data);

// The per-key decision of a compaction, without storage: phase one sees every entry up to the
// horizon in order (observe), phase two sees them again (retain) and gets what to write. Keys
// are the partition keys (Pulsar's message key); messages without one are dropped (Pulsar's
// topicCompactionRetainNullKey=false); a message with an empty payload removes its key.
// Uncompressed batches are compacted message by message: a batch keeps its shape, the messages
// that lost are written as Pulsar's compacted_out placeholders (RawBatchConverter). Compressed
// batches are not opened: the entry is kept whole, as one keyless message. Thread: any (one).
class CompactionKeyMap {
 public:
  // Phase one. Entries that do not parse are ignored (and dropped in phase two).
  void observe(const storage::Entry& e);
  // Phase two: the bytes to write for e (its own bytes, or a re-batched copy), or nullopt.
  std::optional<Buffer> retain(const storage::Entry& e);
  // Keys that survive (phase one's result).
  size_t liveKeys() const { return latest_.size(); }
  // Messages phase one saw, and messages phase two wrote (compacted_out placeholders excluded).
  int64_t messagesSeen() const { return seen_; }
  int64_t messagesKept() const { return kept_; }
  // Pulsar's lastCompactionRemovedEventCount: phase one's keyless messages, tombstones and
  // values that replaced an earlier one of their key.
  int64_t removedEvents() const { return removed_; }

 private:
  struct MessageRef {
    storage::Position position;
    int32_t batchIndex = -1;  // -1: not a batch
    bool operator==(const MessageRef&) const = default;
  };
  void record(const std::string* key, bool empty, const MessageRef& ref);
  bool isLatest(const std::string& key, const MessageRef& ref) const;
  std::map<std::string, MessageRef> latest_;
  int64_t seen_ = 0;
  int64_t kept_ = 0;
  int64_t removed_ = 0;
};

// A topic's compacted view: the compacted ledger and, per compacted entry, its original position
// (an in-memory index of 16 bytes per entry, loaded by scanning the ledger).
// Thread: the topic's executor.
class CompactedView {
 public:
  CompactedView(std::shared_ptr<storage::CompactedLedger> ledger, storage::Position horizon);
  // Scans the compacted ledger to build the index; cb(status) on the topic's executor.
  void load(const std::function<void(Status)>& cb);
  // Entries whose original position is >= from, up to maxEntries / about maxBytes (at least one),
  // as Entry{original position, original-format bytes}; empty when none is left. cb on the
  // topic's executor.
  void asyncReadEntries(storage::Position from, int maxEntries, size_t maxBytes,
                        storage::ReadEntriesCallback cb) const;
  // For load/scan by the compactor: entries index i.. (i from 0).
  void asyncReadFromIndex(size_t index, int maxEntries, size_t maxBytes,
                          storage::ReadEntriesCallback cb) const;
  storage::Position horizon() const { return horizon_; }
  int64_t ledgerId() const { return ledger_->ledgerId(); }
  size_t entries() const { return index_.size(); }
  int64_t sizeBytes() const { return ledger_->sizeBytes(); }
  const std::shared_ptr<storage::CompactedLedger>& ledger() const { return ledger_; }
  // Appended by the compactor as it adds entries to the view (in order).
  void addIndex(storage::Position original) { index_.push_back(original); }

 private:
  void loadFrom(size_t index, const std::function<void(Status)>& cb);
  std::shared_ptr<storage::CompactedLedger> ledger_;
  storage::Position horizon_;
  std::vector<storage::Position> index_;  // original positions, by entry index
};

// Opens a managed ledger by name on the topic's executor (the broker's factory).
using LedgerOpener = std::function<void(
    const std::string& name, std::function<void(Result<std::shared_ptr<storage::ManagedLedger>>)>)>;

// The embedded storage's compacted ledgers: managed ledgers "__compacted/<topic>/<seq>" of the
// topic's factory (through `opener`, on the topic's executor), entries encodeCompactedEntry, the
// cursor naming them by kCompactedLedgerSeqProperty (docs/storage-format.md). One per topic.
// Thread: the topic's executor.
class ManagedLedgerCompactedStore : public storage::CompactedLedgerStore {
 public:
  explicit ManagedLedgerCompactedStore(LedgerOpener opener) : opener_(std::move(opener)) {}
  void asyncCreate(const std::string& topic, storage::Position horizon, net::Executor* executor,
                   storage::CompactedLedgerCallback cb) override;
  void asyncOpen(const std::string& topic, const storage::CursorProperties& properties,
                 net::Executor* executor, storage::CompactedLedgerCallback cb) override;

 private:
  LedgerOpener opener_;
  int64_t lastSeq_ = 0;
};

// Pulsar's LongRunningProcessStatus.Status.
enum class CompactionStatus { kNotRun, kRunning, kSuccess, kError };
const char* compactionStatusName(CompactionStatus s);  // "NOT_RUN", "RUNNING", ...

// Pulsar's CompactionRecord (topic stats "compaction").
struct CompactionRecord {
  int64_t lastCompactionRemovedEventCount = 0;
  int64_t lastCompactionSucceedTimestamp = 0;  // epoch ms, 0: never
  int64_t lastCompactionFailedTimestamp = 0;
  int64_t lastCompactionDurationTimeInMills = 0;
};

// Runs one topic's compactions and owns its current compacted view.
// Thread: the topic's executor (the topic ledger's), for every method and callback.
class TopicCompactor : public std::enable_shared_from_this<TopicCompactor> {
 public:
  // Without an opener (unit tests of other parts) trigger() answers kUnsupported. With one, the
  // compacted ledgers are managed ledgers (ManagedLedgerCompactedStore) unless setStore names
  // the storage's own store.
  TopicCompactor(std::shared_ptr<storage::ManagedLedger> ledger, LedgerOpener opener);
  void setOpener(LedgerOpener opener);
  // The storage's compacted ledgers (ManagedLedgerFactory::compactedLedgerStore); after
  // setOpener.
  void setStore(std::shared_ptr<storage::CompactedLedgerStore> store) { store_ = std::move(store); }

  // Loads the view named by the __compaction cursor's properties (if any) and deletes the
  // compacted managed ledgers in `others` (seqs of this topic left by an interrupted compaction).
  void initialize(const std::vector<int64_t>& others, const std::function<void(Status)>& done);
  // Starts a compaction (Pulsar's triggerCompaction). kBusy ("Compaction already in progress")
  // when one runs. done (optional) runs when it ends.
  Status trigger(const std::function<void(Status)>& done = nullptr);
  CompactionStatus status() const { return status_; }
  const std::string& lastError() const { return lastError_; }
  const CompactionRecord& record() const { return record_; }
  // The current view (null: never compacted). Shared so a read in flight keeps it alive.
  std::shared_ptr<const CompactedView> view() const { return view_; }
  // Bytes of the topic after the __compaction cursor (the whole topic when there is none):
  // what brokerServiceCompactionThresholdInBytes is compared with (Pulsar's checkCompaction).
  int64_t backlogBytes() const;
  // Transactions (the topic's transaction buffer): a compaction's horizon stops at maxRead()
  // (nullopt: no limit), and entries for which hidden() is true (txn markers, aborted txns'
  // entries) are left out of the view, as Pulsar's compaction reader never receives them.
  void setTxnFilter(std::function<std::optional<storage::Position>()> maxRead,
                    std::function<bool(const storage::Entry&)> hidden) {
    txnMaxRead_ = std::move(maxRead);
    txnHidden_ = std::move(hidden);
  }
  // The topic is being deleted: a running compaction stops at its next step.
  void close() { closed_ = true; }
  // Topic delete: close() and delete the compacted ledger.
  void deleteView();

 private:
  struct Run;
  void scan(const std::shared_ptr<Run>& run, bool phaseTwo);
  void scanTopic(const std::shared_ptr<Run>& run, bool phaseTwo, storage::Position from);
  void onEntries(const std::shared_ptr<Run>& run, bool phaseTwo, std::vector<storage::Entry>& es,
                 const std::function<void()>& next);
  void finishPhaseOne(const std::shared_ptr<Run>& run);
  void commit(const std::shared_ptr<Run>& run);
  void fail(const std::shared_ptr<Run>& run, const Status& s);

  std::shared_ptr<storage::ManagedLedger> ledger_;
  LedgerOpener opener_;
  std::shared_ptr<storage::CompactedLedgerStore> store_;
  std::shared_ptr<CompactedView> view_;
  CompactionStatus status_ = CompactionStatus::kNotRun;
  std::string lastError_;
  CompactionRecord record_;
  bool closed_ = false;
  std::function<std::optional<storage::Position>()> txnMaxRead_;
  std::function<bool(const storage::Entry&)> txnHidden_;
};

}  // namespace magnetar::broker
