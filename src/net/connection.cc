#include "net/connection.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "base/dcheck.h"
#include "base/logging.h"
#include "net/tls.h"

namespace magnetar::net {

namespace {
// Bounded work per readable event so one busy connection does not starve the loop's others.
constexpr size_t kMaxReadPerEvent = 1024 * 1024;
constexpr int kMaxIov = IOV_MAX;
// Plaintext encrypted per TLS flush pass: bounds the ciphertext buffered per connection.
constexpr size_t kTlsPassBytes = 256 * 1024;
// Decrypted bytes a TLS connection keeps capacity for between reads.
constexpr size_t kKeptTlsPlainCapacity = 16 * 1024;
}  // namespace

Connection::Connection(EventLoop& loop, boost::asio::ip::tcp::socket socket)
    : Connection(loop, std::move(socket), nullptr) {}

Connection::Connection(EventLoop& loop, boost::asio::ip::tcp::socket socket,
                       std::unique_ptr<TlsSession> tls)
    : loop_(loop), socket_(std::move(socket)), fd_(socket_.native_handle()), tls_(std::move(tls)) {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
}

Connection::~Connection() = default;

void Connection::start() {
  auto self = shared_from_this();
  loop_.execute([self] {
    if (self->tls_) {
      self->startHandshakeTimer();
      if (self->tls_->isClient()) {  // the ClientHello goes first
        if (Status s = self->tls_->startHandshake(self->tlsOut_); !s) {
          MLOG_WARN("{}: TLS handshake: {}", self->peer_, s.message());
          self->doClose();
          return;
        }
        self->flush();
      }
    }
    self->waitReadable();
  });
}

std::optional<std::string> Connection::peerCommonName() const {
  return tls_ ? tls_->peerCommonName() : std::nullopt;
}

void Connection::startHandshakeTimer() {
  MAGNETAR_DCHECK_ON(loop_);
  handshakeTimer_ = std::make_unique<boost::asio::steady_timer>(loop_.context());
  handshakeTimer_->expires_after(kTlsHandshakeTimeout);
  auto self = shared_from_this();
  handshakeTimer_->async_wait([self](const boost::system::error_code& ec) {
    if (ec || self->closed_ || self->tls_->handshakeDone()) return;
    TlsErrorStats::record(TlsError::kHandshakeTimeout);
    MLOG_DEBUG("{}: TLS handshake not done after {} s, closing", self->peer_,
               std::chrono::seconds(kTlsHandshakeTimeout).count());
    self->doClose();
  });
}

bool Connection::onTlsData(const uint8_t* data, size_t len) {
  const bool wasDone = tls_->handshakeDone();
  MAGNETAR_DCHECK(tlsPlainOff_ == 0 && tlsPlain_.empty());  // delivered before reading more
  Status s = tls_->feed(data, len, tlsPlain_, tlsOut_);
  if (!s) {
    if (s.code() != StatusCode::kClosed) {
      TlsErrorStats::record(tls_->error());
      MLOG_DEBUG("{}: TLS {}: {}", peer_, TlsErrorStats::label(tls_->error()), s.message());
      // Best effort: the alert that tells the peer why.
      if (tlsOutOff_ < tlsOut_.size()) {
        [[maybe_unused]] ssize_t n =
            ::send(fd_, tlsOut_.data() + tlsOutOff_, tlsOut_.size() - tlsOutOff_, MSG_NOSIGNAL);
      }
    }
    doClose();
    return false;
  }
  if (!wasDone && tls_->handshakeDone() && handshakeTimer_) handshakeTimer_->cancel();
  // Handshake flights, or writes that waited for the handshake.
  if (tlsOutOff_ < tlsOut_.size() || (!wasDone && tls_->handshakeDone())) flush();
  if (closed_) return false;
  return deliverTlsPlain();
}

bool Connection::deliverTlsPlain() {
  while (tlsPlainOff_ < tlsPlain_.size() && !readPaused_ && !closed_) {
    const size_t limit = maxNextDelivery();
    MAGNETAR_DCHECK(limit > 0);
    const size_t n = std::min(tlsPlain_.size() - tlsPlainOff_, std::max<size_t>(limit, 1));
    const auto* p = reinterpret_cast<const uint8_t*>(tlsPlain_.data()) + tlsPlainOff_;
    tlsPlainOff_ += n;
    if (!onData(p, n)) return false;
  }
  if (tlsPlainOff_ >= tlsPlain_.size()) {
    tlsPlain_.clear();
    tlsPlainOff_ = 0;
    // An idle TLS connection keeps no read-sized plaintext buffer (up to 64 KiB + a record).
    if (tlsPlain_.capacity() > kKeptTlsPlainCapacity) std::string().swap(tlsPlain_);
  }
  return !closed_;
}

void Connection::waitReadable() {
  if (readPaused_ || readWaiting_ || closed_) return;
  readWaiting_ = true;
  auto self = shared_from_this();
  socket_.async_wait(boost::asio::ip::tcp::socket::wait_read,
                     [self](const boost::system::error_code& ec) {
                       self->readWaiting_ = false;
                       if (ec || self->closed_) {
                         if (ec != boost::asio::error::operation_aborted) self->doClose();
                         return;
                       }
                       self->handleReadable();
                     });
}

void Connection::handleReadable() {
  MAGNETAR_DCHECK_ON(loop_);
  size_t total = 0;
  uint8_t* buf = loop_.readBuffer();  // consumed by onData() before the next read
  constexpr size_t kBufSize = EventLoop::kReadBufferSize;
  while (!readPaused_ && !closed_ && total < kMaxReadPerEvent) {
    if (tls_ && tlsPlainOff_ < tlsPlain_.size()) {  // kept from before a pause
      if (!deliverTlsPlain()) {
        onReadBatchDone();
        return;
      }
      continue;
    }
    // With TLS the plaintext is cut instead (a ciphertext read does not map to frame bytes).
    size_t want = kBufSize;
    if (!tls_) {
      const size_t limit = maxNextDelivery();
      MAGNETAR_DCHECK(limit > 0);
      want = std::clamp<size_t>(limit, 1, kBufSize);
    }
    ssize_t n = ::read(fd_, buf, want);
    if (n > 0) {
      total += static_cast<size_t>(n);
      stats_.bytesIn.fetch_add(n, std::memory_order_relaxed);
      bool more =
          tls_ ? onTlsData(buf, static_cast<size_t>(n)) : onData(buf, static_cast<size_t>(n));
      if (!more) {
        onReadBatchDone();
        return;
      }
      if (static_cast<size_t>(n) < want) break;
    } else if (n == 0) {
      onReadBatchDone();
      doClose();
      return;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else {
      onReadBatchDone();
      doClose();
      return;
    }
  }
  onReadBatchDone();
  if (total >= kMaxReadPerEvent && !readPaused_ && !closed_) {
    // More may be buffered: yield to other handlers, then continue.
    auto self = shared_from_this();
    boost::asio::post(loop_.context(), [self] { self->handleReadable(); });
    return;
  }
  waitReadable();
}

void Connection::pauseRead() {
  MAGNETAR_DCHECK_ON(loop_);
  if (readPaused_ || closed_) return;
  readPaused_ = true;
  // The handler's copy of `self` is the owner until resumeRead()/doClose() cancel the wait (its
  // handler then runs after the caller's frame) or the loop is torn down (it is destroyed).
  if (!pauseHold_) pauseHold_ = std::make_unique<boost::asio::steady_timer>(loop_.context());
  pauseHold_->expires_at(boost::asio::steady_timer::time_point::max());
  pauseHold_->async_wait([self = shared_from_this()](const boost::system::error_code&) {});
}

void Connection::resumeRead() {
  MAGNETAR_DCHECK_ON(loop_);
  if (!readPaused_) return;
  readPaused_ = false;
  if (pauseHold_) pauseHold_->cancel();
  // Data may already sit in the kernel buffer: read it now rather than wait for a new edge.
  auto self = shared_from_this();
  boost::asio::post(loop_.context(), [self] {
    if (!self->readPaused_ && !self->closed_ && !self->readWaiting_) self->handleReadable();
  });
}

void Connection::scheduleFlush() {
  auto self = shared_from_this();
  if (loop_.inExecutorThread()) {
    boost::asio::post(loop_.context(), [self] { self->flush(); });
  } else {
    stats_.flushWakeups.fetch_add(1, std::memory_order_relaxed);
    // flush() acts on the state it finds when it runs, so it may wait for the end of the
    // caller's pass: one hand-over per io loop per pass, however many connections it fed.
    loop_.executeAfterPass([self] { self->flush(); });
  }
}

void Connection::flush() {
  MAGNETAR_DCHECK_ON(loop_);
  if (writeWaiting_) return;  // the writable callback continues the flush
  if (tls_) {
    flushTls();
    return;
  }
  for (;;) {
    if (inflightSeg_ >= inflight_.segmentCount()) {
      inflight_.clear();
      inflightSeg_ = 0;
      inflightSegOff_ = 0;
      MutexLock lock(writeMu_);
      flushScheduled_ = false;
      if (pending_.empty()) {
        // Nothing queued (write() adds under this lock): the count is exactly zero.
        pendingBytes_.store(0);
        break;
      }
      inflight_.swap(pending_);
    }
    if (closed_) return;
    // Gather up to IOV_MAX segments into one writev.
    iov_.clear();
    const auto& segs = inflight_.segments();
    const char* base = inflight_.bytes().data();
    for (size_t i = inflightSeg_; i < segs.size() && iov_.size() < static_cast<size_t>(kMaxIov);
         ++i) {
      const auto& s = segs[i];
      const char* p = s.buffer ? reinterpret_cast<const char*>(s.buffer.data()) : base + s.offset;
      size_t skip = (i == inflightSeg_) ? inflightSegOff_ : 0;
      iov_.push_back(iovec{const_cast<char*>(p) + skip, s.length - skip});
    }
    std::optional<size_t> n = writeSome(iov_.data(), static_cast<int>(iov_.size()));
    if (!n) return;
    pendingBytes_.fetch_sub(*n);
    maybeNotifyWritable();
    size_t left = *n;
    while (left > 0 && inflightSeg_ < segs.size()) {
      size_t rem = segs[inflightSeg_].length - inflightSegOff_;
      if (left >= rem) {
        left -= rem;
        ++inflightSeg_;
        inflightSegOff_ = 0;
      } else {
        inflightSegOff_ += left;
        left = 0;
      }
    }
  }
  maybeNotifyWritable();
  if (closeAfterFlush_) doClose();
}

std::optional<size_t> Connection::writeSome(const iovec* iov, int count) {
  for (;;) {
    ssize_t n = ::writev(fd_, iov, count);
    stats_.writevCalls.fetch_add(1, std::memory_order_relaxed);
    loop_.stats().writevCalls.fetch_add(1, std::memory_order_relaxed);
    if (n >= 0) {
      stats_.bytesOut.fetch_add(n, std::memory_order_relaxed);
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      waitWritable();
    } else {
      doClose();
    }
    return std::nullopt;
  }
}

void Connection::flushTls() {
  for (;;) {
    if (closed_) return;
    if (tlsOutOff_ < tlsOut_.size()) {
      iovec iov{tlsOut_.data() + tlsOutOff_, tlsOut_.size() - tlsOutOff_};
      std::optional<size_t> n = writeSome(&iov, 1);
      if (!n) return;
      // Handshake records in tlsOut_ were never queued by write(): only counted bytes come off.
      const size_t counted = std::min(*n, tlsCounted_);
      tlsCounted_ -= counted;
      pendingBytes_.fetch_sub(counted);
      maybeNotifyWritable();
      if (closed_) return;
      tlsOutOff_ += *n;
      continue;
    }
    tlsOut_.clear();
    tlsOutOff_ = 0;
    // Plaintext waits for the handshake; flushScheduled_ stays set until then, so writes in
    // the meantime only queue, and the handshake's end flushes.
    if (!tls_->handshakeDone()) break;
    if (inflightSeg_ >= inflight_.segmentCount()) {
      inflight_.clear();
      inflightSeg_ = 0;
      MutexLock lock(writeMu_);
      if (pending_.empty()) {
        flushScheduled_ = false;
        pendingBytes_.store(0);  // nothing queued, as above
        tlsCounted_ = 0;
        break;
      }
      inflight_.swap(pending_);
    }
    // One pass: gather whole segments up to kTlsPassBytes, encrypt them together.
    std::vector<std::pair<const uint8_t*, size_t>> bufs;
    const auto& segs = inflight_.segments();
    const char* base = inflight_.bytes().data();
    size_t bytes = 0;
    for (; inflightSeg_ < segs.size() && bytes < kTlsPassBytes; ++inflightSeg_) {
      const auto& sg = segs[inflightSeg_];
      const char* p =
          sg.buffer ? reinterpret_cast<const char*>(sg.buffer.data()) : base + sg.offset;
      bufs.emplace_back(reinterpret_cast<const uint8_t*>(p), sg.length);
      bytes += sg.length;
    }
    if (Status s = tls_->encrypt(bufs.data(), bufs.size(), tlsOut_); !s) {
      MLOG_WARN("{}: TLS encryption failed: {}", peer_, s.message());
      doClose();
      return;
    }
    // The plaintext left the queue; its ciphertext takes its place until written.
    tlsCounted_ = tlsOut_.size();
    pendingBytes_.fetch_add(tlsOut_.size());
    pendingBytes_.fetch_sub(bytes);
  }
  maybeNotifyWritable();
  if (closeAfterFlush_) doClose();
}

bool Connection::isWritable() {
  if (pendingBytes_.load() <= highWater_) return true;
  // Arm first, then look again: a flush that took the bytes off before the flag was seen by it
  // leaves the second look at or below the mark (all seq_cst, so one side sees the other).
  writableWanted_.store(true);
  return pendingBytes_.load() <= highWater_;
}

void Connection::notifyWhenWritable() {
  writableWanted_.store(true);
  if (pendingBytes_.load() > lowWater_) return;  // the flush that takes it lower calls back
  auto self = shared_from_this();
  loop_.execute([self] { self->maybeNotifyWritable(); });
}

void Connection::maybeNotifyWritable() {
  MAGNETAR_DCHECK_ON(loop_);
  if (!writableWanted_.load() || pendingBytes_.load() > lowWater_) return;
  if (!writableWanted_.exchange(false) || closed_) return;
  onWritable();
}

void Connection::waitWritable() {
  writeWaiting_ = true;
  auto self = shared_from_this();
  socket_.async_wait(boost::asio::ip::tcp::socket::wait_write,
                     [self](const boost::system::error_code& ec) {
                       self->writeWaiting_ = false;
                       if (ec) {
                         if (ec != boost::asio::error::operation_aborted) self->doClose();
                         return;
                       }
                       self->flush();
                     });
}

void Connection::close(bool graceful) {
  auto self = shared_from_this();
  auto fn = [self, graceful] {
    if (graceful) {
      self->closeAfterFlush_ = true;
      self->flush();
    } else {
      self->doClose();
    }
  };
  loop_.dispatch(std::move(fn));
}

void Connection::doClose() {
  MAGNETAR_DCHECK_ON(loop_);
  if (closeNotified_) return;
  closeNotified_ = true;
  {
    MutexLock lock(writeMu_);
    closed_ = true;
    pending_.clear();
    pendingBytes_.store(0);
  }
  inflight_.clear();
  if (handshakeTimer_) handshakeTimer_->cancel();
  boost::system::error_code ec;
  socket_.cancel(ec);
  socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (pauseHold_) pauseHold_->cancel();  // a paused connection's owner goes (handler posted)
  onClosed();
}

}  // namespace magnetar::net
