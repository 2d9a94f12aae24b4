// Where a topic's compacted view is stored (Pulsar's compacted ledger, written by
// TwoPhaseCompactor and read by CompactedTopicImpl): entries 0, 1, ... in the order of the
// original positions, each the original position plus the entry bytes as stored in the topic.
// The broker's compactor (broker/compaction/compaction.h) decides what goes in; a storage backend
// that has its own format offers a CompactedLedgerStore (ManagedLedgerFactory::
// compactedLedgerStore): BookKeeper writes Pulsar's (docs/managed-ledger-bookkeeper-format.md,
// "Compacted ledgers").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/buffer.h"
#include "base/status.h"
#include "net/executor.h"
#include "storage/managed_ledger.h"

namespace magnetar::storage {

// Pulsar's Compactor.COMPACTED_TOPIC_LEDGER_PROPERTY: the __compaction cursor property naming the
// compacted ledger (a BookKeeper ledger id; for the embedded storage the first ledger of the
// compacted managed ledger).
inline constexpr char kCompactedTopicLedgerProperty[] = "CompactedTopicLedger";
// Magnetar's embedded storage: the sequence number naming the compacted managed ledger.
inline constexpr char kCompactedLedgerSeqProperty[] = "magnetar.compactedLedgerSeq";

// One compacted ledger. Thread: the executor it was created or opened for; every callback runs
// there.
class CompactedLedger {
 public:
  virtual ~CompactedLedger() = default;
  // The id stored in the __compaction cursor's CompactedTopicLedger property.
  virtual int64_t ledgerId() const = 0;
  virtual int64_t numberOfEntries() const = 0;
  virtual int64_t sizeBytes() const = 0;
  // Appends entry numberOfEntries() (writer only: a ledger from asyncCreate, not yet closed).
  // Callbacks in order.
  virtual void asyncAdd(Position original, Buffer entry, StatusCallback cb) = 0;
  // Entries first.. (at most maxEntries, about maxBytes, at least one) as Entry{original
  // position, entry bytes}; empty past the end. kCorruption for an entry that does not parse.
  virtual void asyncRead(int64_t first, int maxEntries, size_t maxBytes,
                         ReadEntriesCallback cb) const = 0;
  // Seals a written ledger (its last entry and size made durable); then it reads as opened.
  virtual void asyncClose(StatusCallback cb) = 0;
  // Removes the ledger from storage (after the cursor names another, or a failed compaction).
  virtual void asyncDelete(StatusCallback cb) = 0;
  // Sets the __compaction cursor properties that name this ledger (CompactedTopicLedger and
  // whatever else the backend needs to open it again), removing the backend's other ones.
  virtual void describe(CursorProperties* properties) const = 0;
};

using CompactedLedgerCallback = std::function<void(Result<std::shared_ptr<CompactedLedger>>)>;

// Creates and opens the compacted ledgers of topics. Thread: any; cb on `executor`.
class CompactedLedgerStore {
 public:
  virtual ~CompactedLedgerStore() = default;
  // A new, empty compacted ledger for `topic` (the managed ledger's name) compacted up to
  // `horizon`.
  virtual void asyncCreate(const std::string& topic, Position horizon, net::Executor* executor,
                           CompactedLedgerCallback cb) = 0;
  // The ledger the __compaction cursor's properties name; null (and ok) when they name none this
  // store can read.
  virtual void asyncOpen(const std::string& topic, const CursorProperties& properties,
                         net::Executor* executor, CompactedLedgerCallback cb) = 0;
};

}  // namespace magnetar::storage
