// BookKeeperClient and LedgerHandle: Magnetar's asynchronous Apache BookKeeper client (protocol
// v2, CRC32C digest, ledger metadata in ZooKeeper as BookKeeper 4.17 writes it). Threads
// (docs/cluster-threads.md): `bookkeeper-io-N` loops (N = bookkeeperClientNumIoThreads) own every
// bookie connection (one per bookie per loop) and each ledger handle, pinned to loop
// ledgerId % N for its life; ZooKeeper runs on libzookeeper-mt's own threads and its completions
// are posted to the ledger's loop.
//
// Ledger handles must not outlive their BookKeeperClient (they refer to its loops and metadata).
//
// Every callback runs on the ledger's loop (for createLedger/openLedger/deleteLedger: the loop of
// the ledger id, or loop 0 when no id was allocated). Callers hand results over to their own
// executor.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bookkeeper/bookie_client.h"
#include "bookkeeper/ledger_manager.h"
#include "bookkeeper/ledger_metadata.h"
#include "bookkeeper/protocol.h"
#include "metadata/store.h"
#include "net/event_loop.h"

namespace magnetar::bookkeeper {

struct ClientConfig {
  // BookKeeper's metadataServiceUri: "zk://host:port[;host:port...]/ledgers" (also
  // "zk+hierarchical://..."), as Pulsar's bookkeeperMetadataServiceUri.
  std::string metadataServiceUri;
  int numIoThreads = 1;            // bookkeeperClientNumIoThreads
  int zkSessionTimeoutMs = 30000;  // zkTimeout
  int zkConnectTimeoutMs = 30000;  // open() gives up when ZooKeeper has not answered by then
  BookieClientOptions bookie;      // timeouts, in-flight bounds, failure history
  std::string password;            // Pulsar's: empty
  // Open with recovery: entries past the LAC being read or re-added at most at a time (a sliding
  // window). BookKeeper's recoveryReadBatchSize (default 1) names its batch of reads, re-adds
  // pipelined behind them; Magnetar's window defaults to 64.
  int recoveryReadBatchSize = 64;
};

// 1 <= ackQuorum <= writeQuorum <= ensembleSize <= 64, else kInvalidArgument saying which bound
// fails, e.g. "ackQuorum 3 > writeQuorum 2" (createLedger answers kIllegalOp then).
Status checkQuorums(int ensembleSize, int writeQuorum, int ackQuorum);

// "zk://h1:2181;h2:2181/ledgers" -> {"h1:2181,h2:2181", "/ledgers"} (BookKeeper's form), and
// "metadata-store:zk:h1:2181,h2:2181/ledgers" the same (Pulsar's form, its default for
// bookkeeperMetadataServiceUri: PulsarMetadataClientDriver over a ZooKeeper metadata store).
// kInvalidArgument otherwise (another metadata store than ZooKeeper, no ledgers root).
Result<std::pair<std::string, std::string>> parseMetadataServiceUri(const std::string& uri);

struct LedgerEntry {
  int64_t entryId = 0;
  int64_t length = 0;  // the entry's length field: the ledger's length up to this entry
  std::string payload;
};

class BookKeeperClient;

// An open ledger: the writer's handle (createLedger) or a reader's (openLedger). Lives on loop().
// Adds: entry ids 0, 1, ...; each ADD goes to the Qw bookies of its write set (the round-robin
// distribution schedule: bookies (entryId + i) % E, i < Qw, of the entry's ensemble) and completes
// once Qa of them acknowledged AND every earlier add completed: callbacks strictly in entry order.
// The LAC sent with each entry is the last entry completed so far (piggybacked LAC).
// A bookie that fails an add (error, timeout, lost connection) is replaced by a bookie from
// /ledgers/available not in the ensemble (ensemble change: a new segment from LAC + 1 written by
// CAS on the metadata), and the pending adds of its write sets are resent to the replacement.
// LedgerFenced (a recovery by another client), no spare bookie (NotEnoughBookies) or a lost
// metadata CAS fail every pending add and the handle's later adds, in entry order.
class LedgerHandle : public std::enable_shared_from_this<LedgerHandle> {
 public:
  using AddCallback = std::function<void(BkResult, int64_t entryId)>;
  using ReadCallback = std::function<void(BkResult, std::vector<LedgerEntry>)>;
  using DoneCallback = std::function<void(BkResult)>;
  static constexpr int64_t kMaxReadsInFlight = 256;

  int64_t id() const { return ledgerId_; }
  net::EventLoop& loop() { return loop_; }
  // Loop thread only.
  const LedgerMetadata& metadata() const { return md_.metadata; }
  int64_t lastAddConfirmed() const { return lastAddConfirmed_; }
  int64_t lastAddPushed() const { return lastAddPushed_; }
  int64_t length() const { return length_; }

  // Appends one entry. Writer handles only. Loop thread. A payload over kMaxEntryPayload fails at
  // once with IllegalOp, and the handle stays usable (no bookie would take it).
  void addEntry(Buffer payload, AddCallback cb);
  // Reads entries [first, last] (inclusive), verified (CRC32C, ids), in order, at most
  // kMaxReadsInFlight at a time. Each entry from one bookie of its write set at a time, the next
  // one on an error: bookies in write-set order, except that those with a recent failure
  // (BookieClient::failedRecently: a timeout, a lost connection) come last, so a stalled bookie
  // costs one timeout, not one per read (BookKeeper's reorderReadSequence). kReadOutOfRange when
  // last is past lastAddConfirmed(). Loop thread.
  void readEntries(int64_t first, int64_t last, ReadCallback cb);
  // Asks every bookie of the last ensemble for its last entry (READ of entry -1) and takes the
  // highest LAC they report (ReadLastConfirmedOp). Updates lastAddConfirmed(). Loop thread.
  void readLastAddConfirmed(std::function<void(BkResult, int64_t)> cb);
  // Writer: fails adds still pending (LedgerClosed, as BookKeeper's close), then writes the
  // metadata CLOSED with lastEntryId = lastAddConfirmed() and its length, by CAS on the znode
  // version (re-read and retried when only the version moved). Reader: releases the handle.
  void close(DoneCallback cb);

  // Recovery (BookKeeper's LedgerRecoveryOp) of a ledger that is not CLOSED: metadata to
  // IN_RECOVERY, fence on the last ensemble (a fenced bookie refuses the old writer's adds with
  // LedgerFenced), read forward from the highest LAC reported (at least the last segment's first
  // entry - 1) and re-add what is found with the recovery flag, then CLOSED with the last entry
  // recovered and its length. Reads and re-adds are pipelined: up to
  // ClientConfig::recoveryReadBatchSize entries past the LAC in flight; an entry missing from
  // Qw - Qa + 1 bookies of its write set ends the ledger before it. kOk at once for a CLOSED
  // ledger. Loop thread. Used by openLedger(id, recovery=true).
  void recover(DoneCallback cb);

  // Internal: use BookKeeperClient::createLedger / openLedger.
  LedgerHandle(BookKeeperClient& client, net::EventLoop& loop, BookieClient& bookies,
               int64_t ledgerId, VersionedMetadata md, bool writer);

 private:
  struct PendingAdd {
    int64_t entryId = 0;
    Buffer payload;
    EntryHeader header;
    uint16_t flags = kFlagNone;
    uint64_t acked = 0;               // ensemble indexes that acknowledged
    bool sent = false;                // false while an ensemble change holds new adds back
    bool done = false;                // result known; completes once all before it did
    BkResult result = BkResult::kOk;  // when done
    AddCallback cb;
  };
  void pushAdd(int64_t entryId, int64_t length, Buffer payload, uint16_t flags, AddCallback cb);
  void sendAdd(PendingAdd& p, uint64_t indexes);
  void onAddReply(int64_t entryId, const BookieId& bookie, BkResult rc);
  void changeEnsemble();
  void completeAdds();
  using EntryCallback = std::function<void(BkResult, LedgerEntry)>;
  struct RecoveryRun;
  void fence(DoneCallback cb);
  void recoverFrom(int64_t entryId, DoneCallback cb);
  void pumpRecovery(const std::shared_ptr<RecoveryRun>& r);
  void applyRecoveryReads(const std::shared_ptr<RecoveryRun>& r);
  void finishRecovery(const std::shared_ptr<RecoveryRun>& r, BkResult rc);
  void failAllPending(BkResult rc);
  // One entry from its write set, one replica at a time (nextReplica's order). Recovery reads
  // fence (FLAG_DO_FENCING | FLAG_HIGH_PRIORITY with the master key, as LedgerRecoveryOp) and
  // answer kNoSuchEntry once Qw - Qa + 1 replicas said they do not have the entry.
  void readOne(int64_t entryId, EntryCallback cb) {
    readFrom(entryId, false, 0, 0, BkResult::kOk, std::move(cb));
  }
  void readFrom(int64_t entryId, bool recovery, uint64_t tried, int missing, BkResult firstError,
                EntryCallback cb);
  // The ensemble index of entryId's write set to read from next, among those not in `tried`:
  // the first without a recent failure, else the one whose failure is the oldest; -1 when none.
  int nextReplica(int64_t entryId, uint64_t tried);
  void writeClosed(DoneCallback cb);

  BookKeeperClient& client_;
  net::EventLoop& loop_;
  BookieClient& bookies_;
  int64_t ledgerId_;
  VersionedMetadata md_;
  MasterKey key_;
  bool writer_;
  bool closed_ = false;
  BkResult error_ = BkResult::kOk;  // sticky add failure
  bool changingEnsemble_ = false;
  uint64_t failedIndexes_ = 0;  // ensemble indexes of bookies that failed an add
  // Bookies that failed an add of this handle: never chosen again as a replacement, so every
  // ensemble change takes a fresh bookie and a fault that follows the entry (one no bookie
  // accepts) ends in NotEnoughBookies instead of changing the ensemble forever.
  std::vector<BookieId> failedBookies_;
  int metadataRetries_ = 0;
  int64_t lastAddPushed_ = -1;
  int64_t lastAddConfirmed_ = -1;
  int64_t length_ = 0;              // bytes of all entries pushed
  int64_t confirmedLength_ = 0;     // bytes up to lastAddConfirmed_
  std::deque<PendingAdd> pending_;  // by entry id, front = lastAddConfirmed_ + 1
};

class BookKeeperClient {
 public:
  using HandleCallback = std::function<void(BkResult, std::shared_ptr<LedgerHandle>)>;

  // Connects to ZooKeeper, checks the ledger layout, starts the bookkeeper-io loops. Blocks (up to
  // the session timeout): not on an event loop. kInvalidArgument for a bad URI; kIoError when the
  // cluster is not reachable or not initialised.
  static Result<std::unique_ptr<BookKeeperClient>> open(const ClientConfig& config);
  // The same on a metadata store the caller opened (tests: a LocalStore); the URI gives the
  // ledgers root only.
  static Result<std::unique_ptr<BookKeeperClient>> openWithStore(
      const ClientConfig& config, std::unique_ptr<metadata::Store> store);
  ~BookKeeperClient();

  // A new ledger: id from idgen, E bookies picked at random from /ledgers/available
  // (kNotEnoughBookies when fewer), metadata OPEN written, then a writer handle. Requires
  // checkQuorums() (else kIllegalOp, the reason logged). Thread: any.
  void createLedger(int ensembleSize, int writeQuorum, int ackQuorum,
                    std::map<std::string, std::string> customMetadata, HandleCallback cb);
  // A reader's handle. Without recovery: for a CLOSED ledger lastAddConfirmed() is its
  // lastEntryId; otherwise the bookies' highest LAC (no fencing). With recovery: the ledger is
  // recovered and closed first (LedgerHandle::recover), the writer fenced. kNoSuchLedger when
  // missing. Thread: any.
  void openLedger(int64_t ledgerId, HandleCallback cb, bool recovery = false);
  // Removes the ledger's metadata (the bookies garbage-collect its entries, as BookKeeper's
  // delete). kNoSuchLedger when missing. Thread: any.
  void deleteLedger(int64_t ledgerId, std::function<void(BkResult)> cb);
  // Reads the ledger's metadata (ledgermetadata). Thread: any.
  void readLedgerMetadata(int64_t ledgerId, std::function<void(BkResult, VersionedMetadata)> cb);

  // Fails open requests with kClientClosed, stops the loops, ends the ZooKeeper session. Blocks;
  // not from a callback of this client.
  void close();

  LedgerManager& ledgerManager() { return *ledgers_; }
  const ClientConfig& config() const { return config_; }
  net::EventLoop& loopFor(int64_t ledgerId);
  BookieClient& bookiesOn(net::EventLoop& loop);

 private:
  explicit BookKeeperClient(ClientConfig config) : config_(std::move(config)) {}

  ClientConfig config_;
  std::unique_ptr<metadata::Store> store_;
  std::unique_ptr<LedgerManager> ledgers_;
  std::unique_ptr<net::EventLoopGroup> loops_;
  std::vector<std::unique_ptr<BookieClient>> bookies_;  // one per loop, same index
  std::atomic<bool> closed_{false};
};

}  // namespace magnetar::bookkeeper
