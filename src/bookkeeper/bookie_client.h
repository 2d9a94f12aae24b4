// BookieClient: the bookie connections of one `bookkeeper-io-N` loop, one per bookie
// (docs/cluster-threads.md), speaking protocol v2 (protocol.h). Replies carry no request id: they
// are matched by (operation, ledger, entry), first-sent first-matched for duplicates, as
// BookKeeper's PerChannelBookieClient does for v2.
//
// Per request: a timeout counted from the moment it is written to the bookie (kTimeout; the
// connection stays up, a late reply is dropped); a connection that fails to connect or closes
// fails its open requests (kBookieHandleNotAvailable), the next request reconnects; a reply that
// is not a valid v2 frame closes that connection and fails its requests with kProtocolError.
// Requests to other bookies are unaffected.
// Per bookie, requests in flight are bounded by count (maxInFlightRequestsPerBookie) and bytes
// (maxInFlightBytesPerBookie): requests beyond either wait, in order, until replies free room.
// A bookie answering ETOOMANYREQUESTS (its queue is full) gets the request again after a pause,
// with fewer requests in flight (see BookieClientOptions); it is not a bookie failure.
// Bookie health: timeouts and lost connections are remembered per bookie for
// bookieFailureHistoryExpiration (failedRecently()); readers try such bookies last.
//
// Thread: created on any thread; every call and every callback on loop() only (asserted).
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "bookkeeper/protocol.h"
#include "net/event_loop.h"
#include "net/frame_batch.h"

namespace magnetar::bookkeeper {

struct BookieClientOptions {
  std::chrono::milliseconds addTimeout{30000};   // Pulsar's bookkeeperClientTimeoutInSeconds
  std::chrono::milliseconds readTimeout{30000};  // ditto (BookKeeper readEntryTimeout)
  std::chrono::milliseconds connectTimeout{10000};
  size_t maxInFlightBytesPerBookie = 64 * 1024 * 1024;
  // Requests written to one bookie and not answered yet, at most (Magnetar's; the Java client has
  // no count bound). A bookie queues at most maxPendingAddRequestsPerThread ADDs and
  // maxPendingReadRequestsPerThread READs per worker thread (10,000 each by default) and refuses
  // more with ETOOMANYREQUESTS; half of that leaves room for a second client.
  size_t maxInFlightRequestsPerBookie = 5000;
  // ETOOMANYREQUESTS: the refused request waits and is sent again to the same bookie. The bookie's
  // channel halves its count bound (at least 1; +1 per OK reply up to the maximum, so it finds the
  // bookie's queue) and pauses for a backoff that starts at the minimum and doubles while refusals
  // continue (reset by an OK reply). A request refused after its timeout (counted from its first
  // send) has passed fails with kTooManyRequests.
  std::chrono::milliseconds tooManyRequestsBackoffMin{10};
  std::chrono::milliseconds tooManyRequestsBackoffMax{1000};
  // How long a bookie that timed out, dropped or refused a connection, or sent garbage counts as
  // failing (BookKeeper's bookieFailureHistoryExpirationMSec, 60 s): readers order each entry's
  // replicas healthy first (BookKeeper's reorderReadSequence with the failure history).
  std::chrono::milliseconds bookieFailureHistoryExpiration{60000};
};

// Counters of one BookieClient (tests, `magnetar bookkeeper` summaries). Loop thread.
struct BookieClientStats {
  uint64_t requestsSent = 0;     // frames written, retries included
  uint64_t tooManyRequests = 0;  // ETOOMANYREQUESTS replies (each one retried or failed)
  uint64_t timeouts = 0;         // requests failed with kTimeout
  uint64_t waitedForRoom = 0;    // requests queued behind a bound (count, bytes or a pause)
};

class BookieChannel;

class BookieClient {
 public:
  using AddCallback = std::function<void(BkResult)>;
  // READ: the stored entry bytes (header, digest, payload) on kOk; verify with verifyEntry().
  using ReadCallback = std::function<void(BkResult, std::string entry)>;

  BookieClient(net::EventLoop& loop, BookieClientOptions options);
  ~BookieClient();
  BookieClient(const BookieClient&) = delete;
  BookieClient& operator=(const BookieClient&) = delete;

  net::EventLoop& loop() { return loop_; }
  const BookieClientOptions& options() const { return options_; }

  // ADD of one entry to `bookie` ("host:port"). flags: kFlagNone or kFlagRecoveryAdd.
  void addEntry(const BookieId& bookie, const MasterKey& key, const EntryHeader& h,
                const Buffer& payload, uint16_t flags, AddCallback cb);
  // READ of one entry (entryId may be kLastAddConfirmed); with kFlagDoFencing, `key` is sent
  // and the bookie fences the ledger.
  void readEntry(const BookieId& bookie, int64_t ledgerId, int64_t entryId, uint16_t flags,
                 const MasterKey* key, ReadCallback cb);

  // Fails every open request with kClientClosed and closes the connections.
  void close();

  // When `bookie` last timed out, lost or refused a connection, or sent an invalid frame, if
  // within bookieFailureHistoryExpiration; nullopt otherwise. Loop thread.
  std::optional<std::chrono::steady_clock::time_point> failedRecently(const BookieId& bookie);
  // Records such a failure seen by a caller (e.g. an entry whose digest did not match).
  void recordFailure(const BookieId& bookie);

  const BookieClientStats& stats() const { return stats_; }
  // Connections currently open or connecting (tests).
  size_t channelCount() const { return channels_.size(); }

 private:
  friend class BookieChannel;
  BookieChannel& channel(const BookieId& bookie);
  void channelClosed(BookieChannel* ch);

  net::EventLoop& loop_;
  BookieClientOptions options_;
  std::unordered_map<BookieId, std::shared_ptr<BookieChannel>> channels_;
  std::unordered_map<BookieId, std::chrono::steady_clock::time_point> failures_;
  BookieClientStats stats_;
  bool closed_ = false;
};

}  // namespace magnetar::bookkeeper
