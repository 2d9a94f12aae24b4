// MessageDeduplication: broker-side dedup of a topic's publishes by (producer name, sequence id),
// as Pulsar's MessageDeduplication (brokerDeduplicationEnabled or the namespace policy). Per
// producer name it keeps the highest sequence id pushed to storage and the highest persisted.
//
// Durability as Pulsar: every brokerDeduplicationEntriesInterval persisted entries (and, when
// entries arrived, every brokerDeduplicationSnapshotIntervalSeconds) the persisted ids are saved
// as the properties of the ledger's "pulsar.dedup" cursor, marked at the snapshot's entry (the
// write keeps managedLedgerDefaultMarkDeleteRateLimit, as Pulsar's rate-limited mark-delete, and
// the count-based snapshots are not taken more often than it writes them). That cursor keeps the
// entries after the snapshot from being trimmed; at load the state is the snapshot plus a replay of
// only those entries.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Pulsar's name of the dedup cursor; not a subscription.
inline constexpr char kDedupCursorName[] = "pulsar.dedup";

struct DedupOptions {
  int maxProducers = 10000;               // brokerDeduplicationMaxNumberOfProducers
  int entriesInterval = 1000;             // brokerDeduplicationEntriesInterval
  // Snapshots by entry count are taken at most this often, in ms (0: every entriesInterval).
  // The cursor writes a mark-delete at most managedLedgerDefaultMarkDeleteRateLimit times a
  // second (1000 / rate here) and a newer one replaces a held one unwritten, so building more
  // is wasted (Pulsar builds them anyway). A count-based snapshot refused by it comes at the
  // next multiple of entriesInterval after the interval (or the time-based check).
  int64_t minSnapshotIntervalMs = 0;
  int snapshotIntervalSeconds = 120;      // brokerDeduplicationSnapshotIntervalSeconds (0: off)
  int producerInactivityTimeoutMinutes = 360;  // brokerDeduplicationProducerInactivityTimeoutMinutes
};

// Thread: the topic's executor only.
class MessageDeduplication {
  struct ProducerState;

 public:
  enum class Verdict {
    kNew,        // store it
    kDuplicate,  // already persisted: answer a receipt with message id -1:-1 (Pulsar)
    kInFlight,   // a publish with this id is being stored: answer when it completes
  };
  struct Waiter {
    int64_t sequenceId;
    std::function<void(Status)> done;  // OK: persisted; else the original failed
  };
  using Clock = std::chrono::steady_clock;
  // A producer's remembered place in this table (each Producer keeps one), so check() and
  // completed() skip the name lookup. Stale, and refilled by a lookup, once any producer's state
  // was dropped since it was filled (or when filled by another table). Thread: the topic's
  // executor.
  class ProducerSlot {
    friend class MessageDeduplication;
    const MessageDeduplication* owner_ = nullptr;
    ProducerState* state_ = nullptr;
    uint64_t epoch_ = 0;
  };

  MessageDeduplication(bool enabled, DedupOptions options);
  // Not copyable or movable: a ProducerSlot names its table by address.
  MessageDeduplication(const MessageDeduplication&) = delete;
  MessageDeduplication& operator=(const MessageDeduplication&) = delete;
  bool enabled() const { return enabled_; }

  // Opens the dedup cursor (created at the log's start the first time), loads its snapshot and
  // replays the entries after it; done(status) once finished. Disabled: deletes the cursor (so
  // it no longer holds data back) and completes at once.
  void recover(storage::ManagedLedger& ledger, std::function<void(Status)> done);
  // Turns dedup on (state from the snapshot and tail, as recover) or off (state dropped except
  // for in-flight waiters, cursor deleted). done on the topic's executor.
  void setEnabled(bool enabled, storage::ManagedLedger& ledger, std::function<void(Status)> done);
  // Entries read by the last recover() (the tail after the snapshot).
  int64_t entriesReplayed() const { return entriesReplayed_; }

  // Checks one publish. sequenceId is the first id of the entry, highestSequenceId its last
  // (batches). For kNew the pushed id moves to highestSequenceId. slot: the producer's cache,
  // or nullptr.
  Verdict check(const std::string& producer, int64_t sequenceId, int64_t highestSequenceId,
                ProducerSlot* slot = nullptr);
  // Queues a waiter for a kInFlight publish.
  void waitFor(const std::string& producer, Waiter w);
  // The publish of [.., highestSequenceId] completed (ok or not) at pos. On failure the pushed id
  // goes back to the persisted one so the client's resend is stored (Pulsar resets it too). A
  // success may take a snapshot (every entriesInterval entries).
  void completed(const std::string& producer, int64_t highestSequenceId, const Status& status,
                 storage::Position pos = {}, ProducerSlot* slot = nullptr);

  // Producer connect/disconnect: a producer gone for producerInactivityTimeoutMinutes is
  // forgotten by purgeInactiveProducers().
  void producerAdded(const std::string& producer);
  void producerRemoved(const std::string& producer, Clock::time_point now = Clock::now());
  // Forgets producers disconnected for longer than the timeout (Pulsar checks every third of it).
  void purgeInactiveProducers(Clock::time_point now = Clock::now());
  // A count-based snapshot came due but minSnapshotIntervalMs refused it: the owner calls
  // takeDeferredSnapshot() at deferredSnapshotAt() (else it comes with later entries).
  bool snapshotDeferred() const { return deferred_; }
  Clock::time_point deferredSnapshotAt() const {
    return lastSnapshot_ + std::chrono::milliseconds(options_.minSnapshotIntervalMs);
  }
  // Takes the deferred snapshot, at the last persisted entry (nothing when none is deferred).
  void takeDeferredSnapshot();
  // Takes a time-based snapshot when entries were persisted since the last one and
  // snapshotIntervalSeconds passed (Pulsar's checkDeduplicationSnapshot).
  void checkSnapshot(Clock::time_point now = Clock::now());

  // Every producer's pushed id back to its persisted one, once no publish is in flight (Pulsar's
  // resetHighestSequenceIdPushed when a topic fenced by a failed write is unfenced).
  void resetPushed();

  // For PRODUCER_SUCCESS.last_sequence_id: the highest persisted id, or -1.
  int64_t lastSequenceId(const std::string& producer) const;
  size_t producerCount() const { return state_.size(); }

 private:
  struct ProducerState {
    int64_t pushed = -1;
    int64_t persisted = -1;
    std::vector<Waiter> waiters;
  };
  void apply(const std::string& producer, int64_t highest);
  // producer's entry, or nullptr: from the slot while it is valid (checked against a lookup by
  // name in debug builds), else by name, refilling the slot.
  ProducerState* find(const std::string& producer, ProducerSlot* slot);
  void remember(ProducerSlot* slot, ProducerState* st) {
    if (!slot) return;
    slot->owner_ = this;
    slot->state_ = st;
    slot->epoch_ = epoch_;
  }
  void takeSnapshot(storage::Position pos);
  // A count-based snapshot may be taken now (entriesInterval reached; minSnapshotIntervalMs
  // checked at each multiple of it, so the clock is read once per entriesInterval entries).
  bool countSnapshotAllowed() const;

  bool enabled_;
  DedupOptions options_;
  storage::ManagedCursor* cursor_ = nullptr;
  std::unordered_map<std::string, ProducerState> state_;
  // Bumped whenever an entry of state_ is erased (ProducerSlot); starts unique per table, so a
  // table at a reused address does not accept an old slot.
  uint64_t epoch_;
  std::unordered_map<std::string, Clock::time_point> inactive_;  // disconnected since
  storage::Position lastPersisted_;
  int64_t sinceSnapshot_ = 0;  // entries persisted since the last snapshot
  bool deferred_ = false;      // a count-based snapshot waits for minSnapshotIntervalMs
  Clock::time_point lastSnapshot_ = Clock::now();
  int64_t entriesReplayed_ = 0;
};

}  // namespace magnetar::broker
