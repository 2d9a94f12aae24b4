// fuzz_frames: bytes from a client -> the frame decoder and every command handler behind it.
//
// Two passes per input:
// 1. The decoder alone (protocol/frame.h): the stream fed whole and fed in small chunks must give
//    the same frames and the same error; every entry goes through the entry parsers.
// 2. A real ServerCnx (broker/service/server_cnx.h) of a fresh in-memory BrokerService, over a
//    connected loopback TCP pair: the fuzz thread writes the stream one frame at a time and waits
//    after each until the broker has read it and its loops and ml-workers are idle, so replies to
//    PRODUCER/SUBSCRIBE arrive before the next frame as with a real client. Everything the broker
//    sends back must decode as frames; at the end the client half-closes and the broker must
//    close the connection.
//
// Input: [flags][stream]. flags bit 0: before writing a frame, fix the crc32c of its entry (so
// mutated SENDs get past the checksum); bit 1: write the stream in one piece (no waits between
// frames); bit 2: brokerDeduplicationEnabled; bit 3: allowAutoTopicCreationType=partitioned;
// bits 4-5: maxPendingPublishRequestsPerConnection 1000 / 2 / 1 / 0.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include "base/crc32c.h"
#include "broker/service/broker_service.h"
#include "broker/service/server_cnx.h"
#include "fuzz_util.h"
#include "protocol/byte_order.h"
#include "protocol/frame.h"
#include "storage/memory_managed_ledger.h"

using namespace magnetar;
using magnetar::protocol::FrameDecoder;

namespace {

constexpr size_t kMaxFrame = 64 * 1024 + protocol::kFrameSizePadding;

// ---- Pass 1: the decoder alone -------------------------------------------------------------

struct Decoded {
  std::vector<std::string> frames;  // type + command bytes + entry bytes
  StatusCode error = StatusCode::kOk;
};

void checkEntry(std::string_view e) {
  auto layout = protocol::parseEntryLayout(e);
  proto::MessageMetadata md;
  Status ms = protocol::parseMetadata(e, &md);
  auto payload = protocol::payloadOf(e);
  Status cs = protocol::verifyChecksum(e);
  proto::BrokerEntryMetadata bem;
  (void)protocol::parseBrokerEntryMetadata(e, &bem);
  if (!layout.isOk()) {
    fuzz::check(!payload.isOk() && !cs.isOk() && !ms.isOk(), "entry parsers disagree");
    return;
  }
  fuzz::check(payload.isOk(), "payloadOf fails on a valid layout");
  fuzz::check(layout->payloadOffset + layout->payloadSize == e.size() &&
                  layout->metadataOffset + layout->metadataSize == layout->payloadOffset &&
                  payload->size() == layout->payloadSize,
              "entry layout does not add up");
}

Decoded decode(const uint8_t* p, size_t n, size_t chunk) {
  Decoded out;
  FrameDecoder d(kMaxFrame);
  auto onFrame = [&](const proto::BaseCommand& cmd, Buffer entry) {
    fuzz::check(cmd.IsInitialized(), "decoder delivered a command missing required fields");
    std::string f = std::to_string(cmd.type()) + ":" + cmd.SerializeAsString() + ":";
    f.append(entry.view());
    if (!entry.empty()) checkEntry(entry.view());
    out.frames.push_back(std::move(f));
  };
  for (size_t off = 0; off < n; off += chunk) {
    Status s = d.feed(p + off, std::min(chunk, n - off), onFrame);
    if (!s.isOk()) {
      out.error = s.code();
      fuzz::check(d.error().code() == s.code(), "sticky error differs");
      // Sticky: more bytes give the same error and no frames.
      size_t before = out.frames.size();
      fuzz::check(d.feed(p, n, onFrame).code() == s.code(), "decoder error not sticky");
      fuzz::check(out.frames.size() == before, "frames after a decode error");
      break;
    }
  }
  return out;
}

void decoderPass(const uint8_t* p, size_t n) {
  Decoded whole = decode(p, n, n == 0 ? 1 : n);
  Decoded bytes = decode(p, n, 1);
  Decoded sevens = decode(p, n, 7);
  fuzz::check(whole.frames == bytes.frames && whole.frames == sevens.frames,
              "chunking changes the decoded frames");
  fuzz::check(whole.error == bytes.error && whole.error == sevens.error,
              "chunking changes the decode error");
}

// ---- Pass 2: a broker connection -------------------------------------------------------------

int listenFd() {
  static int fd = [] {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 16) != 0) {
      fuzz::fail("cannot listen on loopback");
    }
    return s;
  }();
  return fd;
}

// A connected TCP pair on loopback: {client, server}.
std::pair<int, int> tcpPair() {
  int l = listenFd();
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fuzz::fail("connect");
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) fuzz::fail("accept");
  ::fcntl(c, F_SETFL, ::fcntl(c, F_GETFL) | O_NONBLOCK);
  return {c, s};
}

// Runs fn on the executor's thread and waits for its result.
template <typename F>
auto onThread(net::Executor& ex, F fn) -> decltype(fn()) {
  std::promise<decltype(fn())> p;
  auto f = p.get_future();
  ex.execute([&] { p.set_value(fn()); });
  return f.get();
}

class Session {
 public:
  Session(uint8_t flags) : flags_(flags) {
    broker::BrokerOptions o;
    o.bindAddress = "127.0.0.1";
    o.brokerServicePort = 0;
    o.numIOThreads = 1;
    o.managedLedgerNumWorkerThreads = 1;
    o.keepAliveIntervalSeconds = 0;  // no timers: runs must not depend on time
    o.maxMessageSize = 64 * 1024;
    o.brokerDeduplicationEnabled = flags & 4;
    if (flags & 8) {
      o.dynamic.allowAutoTopicCreationType.store("partitioned");
      o.dynamic.defaultNumPartitions.store(2);
    }
    static constexpr int kPending[] = {1000, 2, 1, 0};
    o.maxPendingPublishRequestsPerConnection = kPending[(flags >> 4) & 3];
    o.maxMessagePublishBufferSizeInMB = 1;
    storage::MemoryLedgerOptions mo;
    mo.maxEntriesPerLedger = 3;  // rollovers are reached
    service_ = std::make_unique<broker::BrokerService>(
        o, std::make_shared<storage::MemoryManagedLedgerFactory>(mo));
    if (!service_->start().isOk()) fuzz::fail("broker start");
    net::EventLoop& loop = service_->ioLoops().at(0);
    throttle_ = std::make_unique<broker::PublishBufferThrottle>(loop, 1 << 20, admission_);
    auto [c, s] = tcpPair();
    client_ = c;
    boost::asio::ip::tcp::socket sock(loop.context());
    boost::system::error_code ec;
    sock.assign(boost::asio::ip::tcp::v4(), s, ec);
    if (ec) fuzz::fail("assign: " + ec.message());
    cnx_ = std::make_shared<broker::ServerCnx>(loop, std::move(sock), *service_, *throttle_);
    auto* t = throttle_.get();
    auto cnx = cnx_;
    loop.execute([t, cnx] { t->registerConnection(cnx); });
    cnx_->start();
  }

  ~Session() {
    service_->stop();
    cnx_.reset();
    service_.reset();
    ::close(client_);
  }

  void run(const uint8_t* p, size_t n) {
    if (flags_ & 2) {
      writeAll(p, n);
      settle();
    } else {
      std::string frame;
      while (n > 0) {
        size_t len = n;
        if (n >= 4) {
          uint64_t total = protocol::wire::readBE32(p);
          if (total + 4 <= n) len = total + 4;
        }
        frame.assign(reinterpret_cast<const char*>(p), len);
        if (flags_ & 1) fixChecksum(frame);
        writeAll(reinterpret_cast<const uint8_t*>(frame.data()), frame.size());
        p += len;
        n -= len;
        if (!settle()) break;  // closed by the broker
      }
    }
    ::shutdown(client_, SHUT_WR);
    settle();
    bool closed = onThread(loop(), [&] { return cnx_->isClosed(); });
    fuzz::check(closed, "the broker did not close a connection the client half-closed");
  }

 private:
  net::EventLoop& loop() { return service_->ioLoops().at(0); }

  // Recomputes the crc32c of the frame's entry, if it has one with a 0x0e01 magic.
  static void fixChecksum(std::string& f) {
    if (f.size() < 8) return;
    size_t cmdSize = protocol::wire::readBE32(reinterpret_cast<const uint8_t*>(f.data()) + 4);
    if (cmdSize > f.size() - 8) return;
    size_t start = 8 + cmdSize;
    auto l = protocol::parseEntryLayout(std::string_view(f).substr(start));
    if (!l.isOk()) return;
    size_t covered = start + l->checksummedOffset;
    uint32_t crc = crc32c(f.data() + covered, f.size() - covered);
    size_t at = start + l->magicOffset + protocol::kMagicLen;
    for (int i = 0; i < 4; i++) f[at + i] = static_cast<char>((crc >> (24 - 8 * i)) & 0xff);
  }

  void writeAll(const uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::send(client_, p, n, MSG_NOSIGNAL);
      if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
        drainReplies();  // the broker may be blocked writing to us
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      if (w <= 0) return;  // the broker closed: the rest is not delivered
      written_ += static_cast<size_t>(w);
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // Reads what the broker sent; it must be well-formed frames.
  void drainReplies() {
    uint8_t buf[16384];
    for (;;) {
      ssize_t r = ::recv(client_, buf, sizeof buf, 0);
      if (r <= 0) return;
      replyBytes_ += static_cast<size_t>(r);
      Status s = replies_.feed(buf, static_cast<size_t>(r), [](const proto::BaseCommand&, Buffer) {});
      if (!s.isOk()) fuzz::fail("the broker sent a malformed frame: " + s.toString());
    }
  }

  // Sum of tasks handed to every loop and worker so far.
  uint64_t tasks() {
    uint64_t n = 0;
    for (auto* g : {&service_->ioLoops(), &service_->mlWorkers()}) {
      for (int i = 0; i < g->size(); i++) n += g->at(i).stats().tasks.load();
    }
    return n;
  }

  // One barrier through every loop and worker; true when nothing else was handed over meanwhile.
  bool quietRound() {
    uint64_t before = tasks();
    int barriers = 0;
    for (auto* g : {&service_->ioLoops(), &service_->mlWorkers(), &service_->ioLoops()}) {
      for (int i = 0; i < g->size(); i++, barriers++) onThread(g->at(i), [] { return 0; });
    }
    return tasks() - before == static_cast<uint64_t>(barriers);
  }

  // Waits until the broker has read everything written (or closed, or paused reading) and all its
  // threads are idle. Returns false when the connection is closed. Fails after 10 s (a hang).
  bool settle() {
    struct State {
      uint64_t in, out;
      bool closed, paused;
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int quiet = 0;
    State prev{};
    for (;;) {
      drainReplies();
      State st = onThread(loop(), [&] {
        return State{cnx_->stats().bytesIn.load(), cnx_->stats().bytesOut.load(),
                     cnx_->isClosed(), cnx_->readPaused()};
      });
      bool consumed = st.in >= written_ || st.closed;
      bool same = st.in == prev.in && st.out == prev.out && st.closed == prev.closed;
      prev = st;
      if ((consumed || st.paused) && quietRound() && same) {
        if (++quiet >= 2) return !st.closed;
      } else {
        quiet = 0;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        fuzz::fail("broker did not settle: read " + std::to_string(st.in) + " of " +
                   std::to_string(written_) + " bytes, paused=" + std::to_string(st.paused));
      }
    }
  }

  uint8_t flags_;
  broker::FrameAdmission admission_{1 << 20};                // outlives throttle_
  std::unique_ptr<broker::PublishBufferThrottle> throttle_;  // outlives the service's loops
  std::unique_ptr<broker::BrokerService> service_;
  std::shared_ptr<broker::ServerCnx> cnx_;
  int client_ = -1;
  size_t written_ = 0;
  size_t replyBytes_ = 0;
  FrameDecoder replies_{16 << 20};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  static bool protobufQuiet = [] {
    // Unparsable metadata is expected here; protobuf would log each one.
    if (!getenv("MAGNETAR_FUZZ_LOG")) google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)protobufQuiet;
  if (size == 0) return 0;
  decoderPass(data + 1, size - 1);
  Session session(data[0]);
  session.run(data + 1, size - 1);
  return 0;
}
