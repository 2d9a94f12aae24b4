#include "broker/message_deduplication.h"

#include <algorithm>

#include "broker/entry_metadata.h"

namespace magnetar::broker {

namespace {

// Reads the whole log in chunks, in order, feeding each entry to `apply`.
struct ReplayScan : std::enable_shared_from_this<ReplayScan> {
  storage::ManagedLedger* ledger = nullptr;
  std::function<void(const EntryMetadataPeek&)> apply;
  std::function<void(Status)> done;

  void step(storage::Position from) {
    if (from > ledger->lastConfirmedEntry()) {
      done(Status::ok());
      return;
    }
    auto self = shared_from_this();
    ledger->asyncReadEntries(from, 1000, 16 << 20, [self](Status s, std::vector<storage::Entry> es) {
      if (!s.isOk()) {
        self->done(s);
        return;
      }
      if (es.empty()) {
        self->done(Status::ok());
        return;
      }
      for (auto& e : es) {
        EntryMetadataPeek md;
        if (peekEntryMetadata(e.data.view(), &md).isOk()) self->apply(md);
      }
      self->step(self->ledger->nextValidPosition(es.back().position));
    });
  }
};

}  // namespace

void MessageDeduplication::replay(storage::ManagedLedger& ledger,
                                  std::function<void(Status)> done) {
  if (!enabled_ || ledger.numberOfEntries() == 0) {
    done(Status::ok());
    return;
  }
  auto scan = std::make_shared<ReplayScan>();
  scan->ledger = &ledger;
  scan->apply = [this](const EntryMetadataPeek& md) {
    int64_t hi = static_cast<int64_t>(md.hasHighestSequenceId && md.highestSequenceId > md.sequenceId
                                          ? md.highestSequenceId
                                          : md.sequenceId);
    apply(std::string(md.producerName), hi);
  };
  scan->done = std::move(done);
  scan->step(ledger.firstPosition());
}

void MessageDeduplication::apply(const std::string& producer, int64_t highest) {
  auto& st = state_[producer];
  st.pushed = std::max(st.pushed, highest);
  st.persisted = std::max(st.persisted, highest);
}

MessageDeduplication::Verdict MessageDeduplication::check(const std::string& producer,
                                                          int64_t sequenceId,
                                                          int64_t highestSequenceId) {
  if (!enabled_) return Verdict::kNew;
  auto it = state_.find(producer);
  if (it == state_.end()) {
    if (maxProducers_ > 0 && static_cast<int>(state_.size()) >= maxProducers_) {
      // Over brokerDeduplicationMaxNumberOfProducers: forget producers with nothing in flight.
      for (auto i = state_.begin(); i != state_.end();) {
        i = i->second.pushed == i->second.persisted && i->second.waiters.empty() ? state_.erase(i)
                                                                                  : std::next(i);
      }
    }
    it = state_.emplace(producer, ProducerState{}).first;
  }
  auto& st = it->second;
  if (sequenceId <= st.pushed) {
    return sequenceId <= st.persisted ? Verdict::kDuplicate : Verdict::kInFlight;
  }
  st.pushed = std::max(sequenceId, highestSequenceId);
  return Verdict::kNew;
}

void MessageDeduplication::waitFor(const std::string& producer, Waiter w) {
  state_[producer].waiters.push_back(std::move(w));
}

void MessageDeduplication::completed(const std::string& producer, int64_t highestSequenceId,
                                     const Status& status) {
  if (!enabled_) return;
  auto it = state_.find(producer);
  if (it == state_.end()) return;
  auto& st = it->second;
  if (status.isOk()) {
    st.persisted = std::max(st.persisted, highestSequenceId);
  } else {
    st.pushed = st.persisted;
  }
  if (st.waiters.empty()) return;
  std::vector<Waiter> keep;
  auto waiters = std::move(st.waiters);
  st.waiters.clear();
  for (auto& w : waiters) {
    if (w.sequenceId <= highestSequenceId) {
      w.done(status);
    } else {
      keep.push_back(std::move(w));
    }
  }
  state_[producer].waiters = std::move(keep);
}

int64_t MessageDeduplication::lastSequenceId(const std::string& producer) const {
  auto it = state_.find(producer);
  return it == state_.end() ? -1 : it->second.persisted;
}

}  // namespace magnetar::broker
