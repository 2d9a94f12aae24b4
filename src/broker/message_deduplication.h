// MessageDeduplication: broker-side dedup of a topic's publishes by (producer name, sequence id),
// as Pulsar's MessageDeduplication (brokerDeduplicationEnabled). Per producer name it keeps the
// highest sequence id pushed to storage and the highest persisted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Thread: the topic's executor only.
class MessageDeduplication {
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

  MessageDeduplication(bool enabled, int maxProducers)
      : enabled_(enabled), maxProducers_(maxProducers) {}
  bool enabled() const { return enabled_; }

  // Rebuilds the state from the stored entries (producer name and highest sequence id of each),
  // from `from` to the log's end; done(status) once finished. Pulsar replays after its last
  // snapshot; without snapshots yet we replay what the ledger still holds.
  void replay(storage::ManagedLedger& ledger, std::function<void(Status)> done);

  // Checks one publish. sequenceId is the first id of the entry, highestSequenceId its last
  // (batches). For kNew the pushed id moves to highestSequenceId.
  Verdict check(const std::string& producer, int64_t sequenceId, int64_t highestSequenceId);
  // Queues a waiter for a kInFlight publish.
  void waitFor(const std::string& producer, Waiter w);
  // The publish of [.., highestSequenceId] completed (ok or not). On failure the pushed id goes
  // back to the persisted one so the client's resend is stored (Pulsar resets it too).
  void completed(const std::string& producer, int64_t highestSequenceId, const Status& status);

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

  bool enabled_;
  int maxProducers_;
  std::unordered_map<std::string, ProducerState> state_;
};

}  // namespace magnetar::broker
