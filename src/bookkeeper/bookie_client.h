// BookieClient: the bookie connections of one `bookkeeper-io-N` loop, one per bookie
// (docs/cluster-threads.md), speaking protocol v2 (protocol.h). Replies carry no request id: they
// are matched by (operation, ledger, entry), first-sent first-matched for duplicates, as
// BookKeeper's PerChannelBookieClient does for v2.
//
// Per request: a timeout (kTimeout; the connection stays up, a late reply is dropped); a
// connection that fails to connect or closes fails its open requests (kBookieHandleNotAvailable),
// the next request reconnects; a reply that is not a valid v2 frame closes that connection and
// fails its requests with kProtocolError. Requests to other bookies are unaffected.
// In-flight bytes per bookie are bounded (maxInFlightBytesPerBookie): requests beyond it wait, in
// order, until replies free room.
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

  // Connections currently open or connecting (tests).
  size_t channelCount() const { return channels_.size(); }

 private:
  friend class BookieChannel;
  BookieChannel& channel(const BookieId& bookie);
  void channelClosed(BookieChannel* ch);

  net::EventLoop& loop_;
  BookieClientOptions options_;
  std::unordered_map<BookieId, std::shared_ptr<BookieChannel>> channels_;
  bool closed_ = false;
};

}  // namespace magnetar::bookkeeper
