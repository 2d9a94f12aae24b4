// Journal: the one group-committed write stream for all topics. Appends from any thread queue up;
// the `journal` thread writes everything that arrived during the previous write(+fdatasync) as one
// group (one pwrite, one fdatasync), then tells each client once per group how many of its appends
// completed. Segmented files in journalDirectory; format in journal_format.h.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "storage/env.h"
#include "storage/journal_format.h"

namespace magnetar::storage {

// Receives group-commit outcomes (e.g. one managed ledger).
class JournalClient {
 public:
  virtual ~JournalClient() = default;
  // The next `entries` appends of this client, in submission order, completed with `status`; on
  // success `runs` locate them. Called on the journal thread once per group: implementations hand
  // it to their own executor as one task and return.
  // On failure, `retryable` true means nothing of the failed appends is left in the journal: the
  // client may append the first failed entry id again (the journal refuses every other entry of
  // that ledger until it does). false: the ledger must not be written again (start a new one).
  virtual void onJournalWritten(Status status, std::vector<JournalRun> runs, size_t entries,
                                bool retryable) = 0;
};

// Journal records copied forward by segment compaction: whole records as read from a segment.
struct RelocatedRecords {
  std::vector<std::string> records;  // each a complete record (frame + payload)
  // Called on the journal thread once they are written and synced (fdatasync, whatever
  // journalSyncData says): the segment and the offset of each record, or the error.
  std::function<void(Status, uint64_t segment, std::vector<uint64_t> offsets)> done;
};

struct JournalOptions {
  std::string directory;
  bool syncData = false;
  int maxGroupWaitMs = 0;
  int64_t maxGroupBytes = 4 << 20;  // a group is written once this much is queued, and is capped
                                    // near this size when more is queued
  int64_t segmentSizeBytes = 256ll << 20;
  int checkpointIntervalMs = 5000;
  // Payload cap of one record; a ledger's share of a group larger than this spans several records.
  size_t maxRecordBytes = 1 << 20;
  // Test hook (StorageOptions::testJournalDelayMicros): extra sleep per group commit. 0: off.
  int64_t testDelayMicrosPerGroup = 0;
};

// What is durable (under the sync policy) up to a journal position, for the index checkpoint.
struct JournalCheckpoint {
  std::vector<JournalRun> runs;  // written since the previous checkpoint
  uint64_t segment = 0;          // replay starts here at recovery
  uint64_t offset = 0;
};

// Thread: append() from any thread; the rest from the owner.
class Journal {
 public:
  // Writes start in a new segment `firstSegment` (one past every existing segment).
  // onCheckpoint runs on the journal thread and must not block long (hand the data off).
  Journal(Env* env, JournalOptions options, uint64_t firstSegment,
          std::function<void(JournalCheckpoint)> onCheckpoint);
  ~Journal();

  // Creates the first segment and starts the journal thread.
  Status start();
  // Queues one entry. Entries of one ledger must be appended in entry-id order.
  void append(const std::shared_ptr<JournalClient>& client, int64_t ledgerId, int64_t entryId,
              Buffer data);
  // Queues records copied by compaction; they go out with the next group. Thread: any.
  void appendRelocated(RelocatedRecords r);
  // Writes what is queued, takes a last checkpoint and joins the thread.
  void stop();

  uint64_t currentSegment() const { return segment_.load(); }
  const JournalOptions& options() const { return options_; }
  std::string segmentPath(uint64_t segment) const;

  // Counters (any thread).
  uint64_t groupsWritten() const { return groups_.load(std::memory_order_relaxed); }
  uint64_t entriesWritten() const { return entries_.load(std::memory_order_relaxed); }
  uint64_t bytesWritten() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t writeErrors() const { return writeErrors_.load(std::memory_order_relaxed); }
  // The last group write failed with kNoSpace (cleared by the next successful write).
  bool noSpace() const { return noSpace_.load(std::memory_order_relaxed); }
  // Forgets the last failure (space was freed): the next group is tried. Thread: any.
  void clearNoSpace() { noSpace_.store(false, std::memory_order_relaxed); }

 private:
  struct Request {
    std::shared_ptr<JournalClient> client;
    int64_t ledgerId;
    int64_t entryId;
    Buffer data;
  };
  struct Chunk;
  struct ClientGroup;

  void run();
  void takeGroup(std::vector<Request>& batch) REQUIRES(mu_);
  void writeGroup(std::vector<Request>& batch, std::vector<RelocatedRecords>& relocated);
  // writeGroup's steps, on the journal thread. Groups the batch by client in submission order;
  // entries of a ledger whose write failed are refused (a chunk of their own) until its retry.
  std::vector<ClientGroup> groupByClient(std::vector<Request>& batch);
  // Encodes into buf_ one record per run of consecutive entries of one ledger (at most
  // maxRecordBytes); returns the entries encoded.
  size_t encodeRuns(std::vector<ClientGroup>& groups);
  // Writes buf_ at offset_ (a new segment first when needed), synced with journalSyncData or
  // when it carries relocated records. Errors: the file's.
  Status writeBuffer(bool relocating);
  // The write failed: cuts the file back to offset_ (else the segment is broken) and refuses the
  // ledgers' later entries until their retry. Returns whether the cut worked (retry possible).
  bool groupFailed(const std::vector<ClientGroup>& groups, const Status& st, size_t written);
  Status rollSegment();
  void maybeCheckpoint(bool force);

  Env* env_;
  JournalOptions options_;
  std::function<void(JournalCheckpoint)> onCheckpoint_;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<Request> queue_ GUARDED_BY(mu_);
  std::vector<RelocatedRecords> relocated_ GUARDED_BY(mu_);
  int64_t queuedBytes_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point firstArrival_ GUARDED_BY(mu_);
  bool waiting_ GUARDED_BY(mu_) = false;  // journal thread asleep for work
  bool stop_ GUARDED_BY(mu_) = false;

  // Journal thread only.
  std::unique_ptr<WritableFile> file_;
  std::atomic<uint64_t> segment_;
  uint64_t offset_ = 0;         // end of good data in the current segment
  bool segmentBroken_ = false;  // a failed write could not be truncated away: start a new file
  bool haveFile_ = false;
  std::string buf_;
  std::vector<JournalRun> pendingRuns_;
  // Ledgers whose last write failed: the entry id the journal accepts next (a retry), or -1 when
  // the failed bytes may still be in a segment and the ledger takes no more writes; and why.
  std::unordered_map<int64_t, std::pair<int64_t, Status>> failedLedgers_;
  uint64_t checkpointSegment_ = 0, checkpointOffset_ = 0;
  std::chrono::steady_clock::time_point lastCheckpoint_;

  std::atomic<uint64_t> groups_{0}, entries_{0}, bytes_{0}, writeErrors_{0};
  std::atomic<bool> noSpace_{false};
  std::thread thread_;
};

}  // namespace magnetar::storage
