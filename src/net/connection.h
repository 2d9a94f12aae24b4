// Connection: one TCP socket pinned to one EventLoop for its life. Reads are delivered to
// onData() on the loop; writes may be queued from any thread and are flushed with writev, one
// flush per loop pass for everything queued meanwhile.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "net/event_loop.h"
#include "net/frame_batch.h"

namespace magnetar::net {

class TlsSession;

// Per-connection write counters (summed per loop at scrape time).
struct ConnectionStats {
  std::atomic<uint64_t> bytesOut{0};
  std::atomic<uint64_t> bytesIn{0};
  std::atomic<uint64_t> writevCalls{0};
  std::atomic<uint64_t> flushWakeups{0};  // flushes scheduled from another thread
};

// Thread: created on any thread, then lives on loop(); send()/write() from any thread.
// Subclasses implement onData() and onClosed().
//
// With a TlsSession the socket carries TLS: reads are decrypted before onData(), and each flush
// encrypts the gathered segments in one pass and writes the ciphertext with one writev (a pass
// takes up to 256 KiB of segments). Writes queued before the handshake is done wait for it. A
// handshake not done within kTlsHandshakeTimeout, or one that fails, closes the connection and
// counts in TlsErrorStats.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(EventLoop& loop, boost::asio::ip::tcp::socket socket);
  Connection(EventLoop& loop, boost::asio::ip::tcp::socket socket, std::unique_ptr<TlsSession> tls);
  virtual ~Connection();

  // Begins reading. Call once, on any thread (it hops to the loop).
  void start();

  // Queues bytes; thread-safe. `fill` runs under the connection's write lock and appends to the
  // pending batch; a flush is scheduled unless one already is (one wake-up per burst).
  template <typename F>
  void write(F&& fill) {
    bool schedule;
    {
      MutexLock lock(writeMu_);
      if (closed_.load(std::memory_order_relaxed)) return;
      const size_t before = pending_.totalBytes();
      fill(pending_);
      pendingBytes_.fetch_add(pending_.totalBytes() - before);
      schedule = !flushScheduled_;
      flushScheduled_ = true;
    }
    if (schedule) scheduleFlush();
  }
  void send(FrameBatch&& batch) {
    write([&](FrameBatch& p) { p.append(std::move(batch)); });
  }
  void send(const Buffer& frame) {
    write([&](FrameBatch& p) { p.appendBuffer(frame); });
  }

  // Stops/resumes reading (back-pressure). Loop thread only. While paused no read wait is
  // armed, so a wait on pauseHold_ owns the connection until resumeRead() or a close (or the
  // loop's teardown): a subclass whose other owners are weak (MQTT's sink) is not destroyed
  // with its socket open (the peer would see a reset, and no close path would run).
  void pauseRead();
  void resumeRead();
  bool readPaused() const { return readPaused_; }

  // Closes the socket after flushing what is queued (graceful=true) or at once. Any thread.
  void close(bool graceful = false);
  bool isClosed() const { return closed_.load(); }

  EventLoop& loop() { return loop_; }
  const EventLoop& loop() const { return loop_; }
  const std::string& peerAddress() const { return peer_; }
  const ConnectionStats& stats() const { return stats_; }
  // Whether the connection carries TLS (fixed at construction; any thread).
  bool isTls() const { return tls_ != nullptr; }
  // The TLS peer certificate's subject CN: set once the handshake is done and the client sent a
  // certificate the broker accepted (see TlsOptions); nullopt otherwise. Loop thread.
  std::optional<std::string> peerCommonName() const;
  // Bytes queued by write()/send() and not yet written to the socket (with TLS, the plaintext
  // not yet encrypted plus the ciphertext not yet written). Any thread; a snapshot.
  size_t pendingWriteBytes() const { return pendingBytes_.load(std::memory_order_relaxed); }

  // Outbound watermarks in bytes (Pulsar's pulsarChannelWriteBufferHighWaterMark and
  // ...LowWaterMark, i.e. Netty's channel writability). Set before start(); default 64 KiB and
  // 32 KiB as Pulsar's. low <= high.
  void setWriteWatermarks(size_t low, size_t high) {
    lowWater_ = std::min(low, high);
    highWater_ = high;
  }
  // Whether at most the high watermark of bytes is queued (any thread). When it answers false,
  // onWritable() runs once on the loop when the queue falls to the low watermark (or the
  // connection flushes everything), so a caller that held back is told to go on. A false answer
  // always arms that call, so no wake-up is lost to a concurrent flush.
  bool isWritable();
  // Asks for onWritable() once the queue is at the low watermark; when it already is, the call
  // comes on the next loop pass. Any thread.
  void notifyWhenWritable();

 protected:
  // Bytes read from the socket, on the loop thread, in the loop's shared read buffer: consume
  // or copy them before returning. Return false to stop reading (e.g. the subclass closed the
  // connection).
  virtual bool onData(const uint8_t* data, size_t len) = 0;
  // Called once on the loop thread when the connection is closed (by either side).
  virtual void onClosed() = 0;
  // Called on the loop thread after each socket read batch is processed (hook for flushing
  // per-pass state). Default: nothing.
  virtual void onReadBatchDone() {}
  // At most how many bytes the next onData() may take (loop thread); must be > 0 while reading
  // is not paused. A plaintext socket read asks for no more than this (the rest stays in the
  // kernel); with TLS the decrypted plaintext beyond it is kept by the connection and delivered
  // first when reading resumes. Lets a subclass finish a frame and stop at its end (the broker
  // completes a frame already charged to its publish buffer, then pauses). Default: no limit.
  virtual size_t maxNextDelivery() const { return SIZE_MAX; }
  // On the loop thread, once after isWritable() answered false, when the queued bytes fell to the
  // low watermark. Not called after the connection closed. Default: nothing.
  virtual void onWritable() {}

 private:
  void scheduleFlush();
  void flush();
  void waitReadable();
  void handleReadable();
  void waitWritable();
  void doClose();
  // TLS: decrypts `len` read bytes and passes the plaintext to onData(); false when closed.
  bool onTlsData(const uint8_t* data, size_t len);
  // TLS: passes tlsPlain_[tlsPlainOff_..] to onData() in pieces of maxNextDelivery() until it
  // is used up, reading pauses or the connection closes; false when closed or onData() said so.
  bool deliverTlsPlain();
  void flushTls();
  // writev() of iov[0, count) on the loop, retried on EINTR, counted in the stats. Returns the
  // bytes written, or nullopt when the socket is full (waitWritable() armed) or failed (closed).
  std::optional<size_t> writeSome(const iovec* iov, int count);
  void startHandshakeTimer();
  // Loop thread, after bytes left the queue: runs onWritable() when armed and at the low mark.
  void maybeNotifyWritable();

  EventLoop& loop_;
  boost::asio::ip::tcp::socket socket_;
  int fd_;
  std::string peer_;
  bool readPaused_ = false;
  // Armed (never expiring) while readPaused_, its handler holding the connection; loop thread.
  std::unique_ptr<boost::asio::steady_timer> pauseHold_;
  bool readWaiting_ = false;
  bool writeWaiting_ = false;

  Mutex writeMu_;
  FrameBatch pending_ GUARDED_BY(writeMu_);
  bool flushScheduled_ GUARDED_BY(writeMu_) = false;
  std::atomic<bool> closed_{false};
  bool closeAfterFlush_ = false;  // loop thread
  bool closeNotified_ = false;    // loop thread

  // Loop thread only: the batch being written and how far.
  FrameBatch inflight_;
  size_t inflightSeg_ = 0;
  size_t inflightSegOff_ = 0;
  std::vector<iovec> iov_;
  // Bytes queued and not yet written. Added under writeMu_ in write(), taken off by the loop.
  std::atomic<size_t> pendingBytes_{0};
  size_t lowWater_ = 32 * 1024;   // fixed before start()
  size_t highWater_ = 64 * 1024;  // fixed before start()
  // Set by isWritable() when over the high mark; cleared by the loop when it calls onWritable().
  std::atomic<bool> writableWanted_{false};
  ConnectionStats stats_;

  // TLS state, loop thread only. tlsOut_[tlsOutOff_..] is ciphertext not yet written.
  std::unique_ptr<TlsSession> tls_;
  std::string tlsPlain_;  // decrypted, tlsPlain_[tlsPlainOff_..] not yet delivered
  size_t tlsPlainOff_ = 0;
  std::string tlsOut_;
  size_t tlsOutOff_ = 0;
  size_t tlsCounted_ = 0;  // bytes of tlsOut_ counted in pendingBytes_ (encrypted writes)
  std::unique_ptr<boost::asio::steady_timer> handshakeTimer_;
};

}  // namespace magnetar::net
