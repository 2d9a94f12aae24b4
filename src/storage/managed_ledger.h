// The managed ledger: a topic's append-only log of entries, and the cursors of its subscriptions.
// Names and semantics follow Pulsar's ManagedLedger/ManagedCursor (asyncAddEntry, markDelete, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/inline_function.h"
#include "base/status.h"
#include "net/executor.h"

namespace magnetar::storage {

// (ledger id, entry id). Ledger ids grow over a topic's life; entry ids start at 0 in each ledger.
struct Position {
  int64_t ledgerId = -1;
  int64_t entryId = -1;
  auto operator<=>(const Position&) const = default;
  bool operator==(const Position&) const = default;
};

// One stored entry: the bytes exactly as the producer sent them (magic 0x0e01, crc32c, metadata
// size, MessageMetadata, payload), shared by reference.
struct Entry {
  Position position;
  Buffer data;
};

// One ledger of a managed ledger, for admin stats (Pulsar's internalStats "ledgers").
struct LedgerStats {
  int64_t ledgerId = -1;
  int64_t entries = 0;
  int64_t sizeBytes = 0;
};

enum class InitialPosition { kLatest = 0, kEarliest = 1 };  // Pulsar's values; never renumber

// Batch-index ack state of one entry, as Pulsar's BitSet long array (PIP-54): bit i of word i/64
// set means batch index i is NOT yet acknowledged. The entry is acknowledged when all bits clear.
using AckSet = std::vector<int64_t>;
// True if no bit is set in the set's first `bits` bits (bits < 0: in all of it).
bool ackSetEmpty(const AckSet& s, int bits = -1);
// Number of set bits among the first `bits` bits (unacked indexes of a `bits`-message batch).
int ackSetCardinality(const AckSet& s, int bits);
// Named long values saved with a mark-delete (Pulsar's cursor properties; dedup snapshots).
using CursorProperties = std::map<std::string, int64_t>;

// The add callback: made once per published message, so it holds its callable inline (no heap
// allocation). Move-only; a callable over kAddEntryCallbackBytes fails the build where it is
// passed. The size fits the publish path's capture (PersistentTopic::publish: topic, alive
// token, producer, sequence ids, counts, transaction id: 96 bytes).
inline constexpr size_t kAddEntryCallbackBytes = 96;
using AddEntryCallback = InlineFunction<void(Status, Position), kAddEntryCallbackBytes>;
using ReadEntriesCallback = std::function<void(Status, std::vector<Entry>)>;
using StatusCallback = std::function<void(Status)>;

// A subscription's persisted state: mark-delete position (everything up to and including it is
// acknowledged) plus individually deleted (acked) positions after it.
// Thread: the owning ledger's executor only.
class ManagedCursor {
 public:
  virtual ~ManagedCursor() = default;
  virtual const std::string& name() const = 0;
  // Everything <= this position is acknowledged. Before any ack: the position before the first
  // entry the subscription starts at.
  virtual Position markDeletedPosition() const = 0;
  // Cumulative ack up to and including pos. Persisted; cb runs on the ledger's executor.
  virtual void asyncMarkDelete(Position pos, StatusCallback cb) = 0;
  // As asyncMarkDelete, and replaces the cursor's properties (persisted with the position, in the
  // same write). Pulsar's asyncMarkDelete(position, properties, ...).
  virtual void asyncMarkDelete(Position pos, CursorProperties properties, StatusCallback cb) = 0;
  // Cumulative ack ending inside the batch entry `pos`: everything before pos is acked and pos
  // keeps `ackSet` (AND-merged with what it had); when no index is left, pos is acked too.
  // Pulsar's ManagedCursorImpl.asyncMarkDelete with a position carrying an ack set.
  virtual void asyncMarkDeleteWithAckSet(Position pos, const AckSet& ackSet, StatusCallback cb) = 0;
  // The properties of the last asyncMarkDelete that carried some (empty after a reset).
  virtual const CursorProperties& properties() const = 0;
  // Individual acks. Positions <= markDeletedPosition are ignored. The mark-delete position moves
  // forward over any contiguous acked run. Persisted; cb on the ledger's executor.
  virtual void asyncDelete(const std::vector<Position>& positions, StatusCallback cb) = 0;
  // Batch-index acks: each entry's ackSet is AND-merged into what the cursor holds for it
  // (Pulsar's batchDeletedIndexes); an entry with no index left is deleted as by asyncDelete.
  // Entries already acknowledged are ignored. Persisted; cb on the ledger's executor.
  virtual void asyncDeleteBatchIndexes(const std::vector<std::pair<Position, AckSet>>& acks,
                                       StatusCallback cb) = 0;
  // The ack set of a partly acknowledged entry, or null (none acked, or the whole entry acked).
  // Pulsar's getDeletedBatchIndexesAsLongArray. Valid until the cursor next changes.
  virtual const AckSet* batchDeletedIndexes(Position pos) const = 0;
  // True if pos is acknowledged (<= mark-delete, or individually deleted).
  virtual bool isAcknowledged(Position pos) const = 0;
  // Entries after mark-delete, up to the ledger's last confirmed entry, not individually acked.
  virtual int64_t numberOfEntriesInBacklog() const = 0;
  // Moves the mark-delete position so that the next unacked entry is `pos` (seek / reset-cursor);
  // clears individual acks. Persisted; cb on the ledger's executor.
  virtual void asyncResetCursor(Position pos, StatusCallback cb) = 0;
  // The ledger the cursor's state is appended to and its last entry written (Pulsar's internal
  // stats cursorLedger / cursorLedgerLastEntry); {-1, -1} while the state is only in the
  // metadata store, and always for storage without cursor ledgers (the embedded journal).
  virtual std::pair<int64_t, int64_t> cursorLedger() const { return {-1, -1}; }
};

// A topic's log. Thread: all calls on the executor given at open; all callbacks run there too.
class ManagedLedger {
 public:
  virtual ~ManagedLedger() = default;
  // Thread: any (fixed at open), as executor().
  virtual const std::string& name() const = 0;
  // The executor given at open, which every other call runs on. Thread: any.
  virtual net::Executor* executor() const = 0;
  // Appends data. cb(status, position) runs once the entry is durable under the configured policy
  // (journalSyncData). Callbacks complete in append order. Errors: kIoError, kNoSpace (publish
  // fails with PersistenceError), kClosed.
  virtual void asyncAddEntry(Buffer data, AddEntryCallback cb) = 0;
  // Ok, or why asyncAddEntry refuses adds at once now (kNoSpace: the disk is full or above
  // diskUsageThreshold, until space is freed). The broker refuses new and reconnecting producers
  // with it, so clients back off instead of resending into the refusal. Default: Ok.
  virtual Status writeRefusal() const { return Status::ok(); }
  // Reads entries from `from` (inclusive; may name a position in a ledger that no longer has it:
  // reading continues at the next existing entry) up to maxEntries and about maxBytes (at least
  // one entry when any is available). Returns fewer, or none, at the end of the log.
  virtual void asyncReadEntries(Position from, int maxEntries, size_t maxBytes,
                                ReadEntriesCallback cb) = 0;
  // The same read answered at once from the entry cache, with no hand-over: true and *out filled
  // (possibly empty at the end of the log) when the cache holds `from`; false when it does not
  // (use asyncReadEntries). Lets a tailing dispatcher go on without a task per read.
  virtual bool readCachedEntries(Position from, int maxEntries, size_t maxBytes,
                                 std::vector<Entry>* out) = 0;
  // Single positions answered from the entry cache at once (a Key_Shared replay): each of
  // `sorted` (ascending, no repeats) the cache holds is appended to *found, in order; each it
  // cannot answer to *uncached (read those with asyncReadEntries); a position no longer in the
  // log goes to neither. The default asks readCachedEntries once per position.
  virtual void readCachedPositions(const std::vector<Position>& sorted, std::vector<Entry>* found,
                                   std::vector<Position>* uncached) {
    std::vector<Entry> one;
    for (const Position& p : sorted) {
      one.clear();
      if (!readCachedEntries(p, 1, 1, &one)) {
        uncached->push_back(p);
      } else if (!one.empty() && one.front().position == p) {
        found->push_back(std::move(one.front()));
      }
    }
  }
  // Last entry whose add completed; {currentLedger, -1} when the current ledger is empty.
  virtual Position lastConfirmedEntry() const = 0;
  // The position right after p (the first entry of the next ledger if p is a ledger's last).
  virtual Position nextValidPosition(Position p) const = 0;
  // The first position of the log still stored.
  virtual Position firstPosition() const = 0;
  // Number of stored entries in the (from, to] range, from < to.
  virtual int64_t numberOfEntriesBetween(Position fromExclusive, Position toInclusive) const = 0;
  virtual int64_t numberOfEntries() const = 0;
  virtual int64_t totalSizeBytes() const = 0;
  // The stored ledgers, oldest first (admin internalStats). Default: none known.
  virtual std::vector<LedgerStats> ledgerStats() const { return {}; }
  // The last entry written, as Pulsar's lastConfirmedEntry reads after a reopen or a rollover:
  // lastConfirmedEntry(), or while the current ledger is empty the last entry of the newest
  // ledger that has any ({currentLedger, -1} when none has). For admin and lookups (it lists the
  // ledgers when the current one is empty). Thread: the ledger's executor.
  Position lastWrittenEntry() const {
    Position lac = lastConfirmedEntry();
    if (lac.entryId >= 0 || numberOfEntries() == 0) return lac;
    std::vector<LedgerStats> ledgers = ledgerStats();
    for (auto it = ledgers.rbegin(); it != ledgers.rend(); ++it) {
      if (it->entries > 0) return Position{it->ledgerId, it->entries - 1};
    }
    return lac;
  }

  // Opens (creating if needed, at `initial`) the named durable cursor. The pointer is valid until
  // deleteCursor or the ledger closes.
  virtual Result<ManagedCursor*> openCursor(const std::string& name, InitialPosition initial) = 0;
  virtual Status deleteCursor(const std::string& name) = 0;
  virtual std::vector<ManagedCursor*> cursors() const = 0;
  // First entry with publish time >= t is what seek-by-time needs; the broker scans entries itself.
  virtual void asyncClose(StatusCallback cb) = 0;
  // Gives the ledger up after this broker lost it (ownership gone, or another owner fenced it):
  // adds fail from now on and the ledger closes as asyncClose does, but nothing more is written
  // to storage, since a new owner may already be recovering it (BookKeeper storage: the ledgers
  // stay open for its recovery, the cursors as last written). cb on the executor.
  // Default: asyncClose (local storage has no other owner).
  virtual void asyncRelease(StatusCallback cb) { asyncClose(std::move(cb)); }
  // Deletes all data and cursors of this ledger.
  virtual void asyncDelete(StatusCallback cb) = 0;
  // This ledger's retention of consumed data (the namespace's or topic's policy; until called,
  // defaultRetentionTimeInMinutes / defaultRetentionSizeInMB): minutes and MiB, -1 unlimited,
  // 0 none. Consumed ledgers beyond it go at the next trim (at once here). Default: ignored.
  virtual void setRetention(int32_t /*retentionTimeInMinutes*/, int64_t /*retentionSizeInMB*/) {}
  // Pulsar's asyncTerminate: adds are refused from now on (kNotAllowed); once the adds already
  // taken complete, the last confirmed entry is stored as the ledger's terminated position (the
  // embedded store's /ml-terminated key, BookKeeper's ManagedLedgerInfo.terminatedPosition), so
  // a reopen, a restart or another owner keeps the ledger terminated. cb(status, that position)
  // on the executor; a second call answers the stored position. Errors: kClosed, the metadata
  // write's. Default: kUnsupported.
  virtual void asyncTerminate(std::function<void(Status, Position)> cb) {
    executor()->execute([cb = std::move(cb)] { cb(Status::unsupported("terminate"), {}); });
  }
  // Terminated (asyncTerminate completed, or as stored). Thread: the executor.
  virtual bool isTerminated() const { return false; }
  // Pulsar's asyncTruncate: moves every cursor to the last entry, then deletes every ledger but
  // the current one whatever the retention. cb on the executor. Default: kUnsupported.
  virtual void asyncTruncate(StatusCallback cb) {
    executor()->execute([cb = std::move(cb)] { cb(Status::unsupported("truncate")); });
  }
};

// Opens ledgers by name (a topic's persistence name, e.g. "public/default/persistent/t1").
// Thread: any; the ledger is then used on the given executor.
class CompactedLedgerStore;

class ManagedLedgerFactory {
 public:
  virtual ~ManagedLedgerFactory() = default;
  virtual void asyncOpen(const std::string& name, net::Executor* executor,
                         std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) = 0;
  // asyncOpen, but only a ledger that exists: kNotFound and nothing created otherwise (Pulsar's
  // ManagedLedgerConfig.setCreateIfMissing(false), as BrokerService.getTopicIfExists opens). For
  // shared storage, where another broker may delete the ledger between an existence check and
  // the open. Default: asyncOpen (the process's own ledgers: its caller's check is current).
  virtual void asyncOpenExisting(const std::string& name, net::Executor* executor,
                                 std::function<void(Result<std::shared_ptr<ManagedLedger>>)> cb) {
    asyncOpen(name, executor, std::move(cb));
  }
  // Names of all ledgers that exist (to restore topics at start-up).
  virtual std::vector<std::string> ledgerNames() const = 0;
  virtual void shutdown() = 0;

  // True when several brokers share these ledgers (BookKeeper, cluster mode): a ledger may exist
  // that this process did not create and did not see at start-up, so the two calls below ask the
  // storage itself. False (the embedded storage): ledgerNames() at start plus the ledgers opened
  // since are all there is.
  virtual bool sharedBetweenBrokers() const { return false; }
  // Whether ledger `name` exists, without opening or creating it (Pulsar's
  // TopicResources.persistentTopicExists: its managed-ledger znode exists). cb on `executor`.
  // Errors: the store's. Default: kUnsupported.
  virtual void asyncExists(const std::string& /*name*/, net::Executor* executor,
                           std::function<void(Result<bool>)> cb) {
    executor->execute([cb = std::move(cb)] { cb(Status::unsupported("asyncExists")); });
  }
  // Names of the ledgers directly under `prefix` ("tenant/ns/persistent": a namespace's topics of
  // one domain), as storage names ("tenant/ns/persistent/local"), sorted; empty when there are
  // none (Pulsar's TopicResources.listPersistentTopicsAsync). cb on `executor`. Errors: the
  // store's. Default: kUnsupported.
  virtual void asyncLedgerNamesUnder(const std::string& /*prefix*/, net::Executor* executor,
                                     std::function<void(Result<std::vector<std::string>>)> cb) {
    executor->execute([cb = std::move(cb)] { cb(Status::unsupported("asyncLedgerNamesUnder")); });
  }
  // Where compacted views go when this storage has its own format for them (BookKeeper: Pulsar's
  // compacted ledgers, storage/compacted_ledger.h). Null: the broker keeps them in managed
  // ledgers of this factory (the embedded storage's format, docs/storage-format.md).
  virtual std::shared_ptr<CompactedLedgerStore> compactedLedgerStore() { return nullptr; }
};

}  // namespace magnetar::storage
