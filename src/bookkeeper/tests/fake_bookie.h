// A fake bookie for tests: a thread serving one connection at a time on 127.0.0.1:<free port>,
// decoding v2 requests with the codec and answering as `Mode` says (changeable while it runs).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bookkeeper/protocol.h"

namespace magnetar::bookkeeper {

enum class Mode {
  kGood,           // stores ADDs, answers READs from what it stored (NoSuchEntry otherwise)
  kGarbage,        // answers with a frame of an unknown protocol version
  kCloseMidFrame,  // writes half a reply and closes the connection
  kSilent,         // never answers
  kFenced,         // answers every ADD with EFENCED
  kReadOnly,       // answers every ADD with EREADONLY (a read-only bookie), READs as kGood
  kSlowEntry0,     // as kGood, but holds its reply to entry 0 for 300 ms
  kQueued,         // as kGood, but answers in batches: what arrived within 20 ms of the first
                   // request held (a slow bookie: requests pile up), refusing with
                   // ETOOMANYREQUESTS (106) a request that finds queueLimit held (as a bookie
                   // with maxPendingAddRequestsPerThread = queueLimit)
};

class FakeBookie {
 public:
  // rejectFirst: the first that many requests are answered with ETOOMANYREQUESTS (any mode but
  // kSilent). queueLimit: kQueued's queue.
  explicit FakeBookie(Mode mode, int rejectFirst = 0, size_t queueLimit = 1000000)
      : mode_(mode), rejectFirst_(rejectFirst), queueLimit_(queueLimit) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(lfd_, 8);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeBookie() {
    stop_ = true;
    ::shutdown(lfd_, SHUT_RDWR);
    ::close(lfd_);
    if (cfd_ >= 0) ::shutdown(cfd_, SHUT_RDWR);
    thread_.join();
  }
  BookieId id() const { return "127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  int reads() const { return reads_.load(); }
  // ETOOMANYREQUESTS answers sent.
  int rejected() const { return rejected_.load(); }
  // kQueued: the most requests held at once (since resetMaxHeld()).
  size_t maxHeld() const { return maxHeld_.load(); }
  void resetMaxHeld() { maxHeld_ = 0; }
  void setMode(Mode m) { mode_ = m; }

 private:
  void run() {
    while (!stop_) {
      int fd = ::accept(lfd_, nullptr, nullptr);
      if (fd < 0) return;
      cfd_ = fd;
      serve(fd);
      ::close(fd);
      cfd_ = -1;
    }
  }
  // The reply of a bookie that works: ADD stored, READ from what was stored.
  std::string goodReply(const Request& req) {
    if (req.op == OpCode::kAddEntry) {
      entries_[{req.ledgerId, req.entryId}] = std::string(req.entry);
      return encodeResponse(OpCode::kAddEntry, 0, req.ledgerId, req.entryId);
    }
    auto it = entries_.find({req.ledgerId, req.entryId});
    return it == entries_.end()
               ? encodeResponse(OpCode::kReadEntry, 2, req.ledgerId, req.entryId)
               : encodeResponse(OpCode::kReadEntry, 0, req.ledgerId, req.entryId, it->second);
  }
  void serve(int fd) {
    FrameReader reader;
    uint8_t buf[65536];
    std::vector<std::string> held;  // kQueued: requests (frames) not answered yet
    std::chrono::steady_clock::time_point answerAt;
    for (;;) {
      if (mode_ == Mode::kQueued && !held.empty()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            answerAt - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
          std::string out;
          for (const auto& f : held) out += goodReply(*decodeRequest(f));
          held.clear();
          if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) return;
          continue;
        }
      }
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return;
      reader.append(buf, static_cast<size_t>(n));
      std::string batch;  // replies to this read's requests, written together
      while (auto f = reader.next()) {
        ++requests_;
        auto req = decodeRequest(*f);
        if (!req.isOk()) return;
        if (req->op == OpCode::kReadEntry) ++reads_;
        Mode mode = mode_;
        if (mode != Mode::kSilent && rejectFirst_ > 0) {
          --rejectFirst_;
          ++rejected_;
          batch += encodeResponse(req->op, 106, req->ledgerId, req->entryId);
          continue;
        }
        std::string out;
        switch (mode) {
          case Mode::kSilent:
            continue;
          case Mode::kGarbage:
            out = std::string("\x00\x00\x00\x1c", 4) + std::string(28, '\x7e');
            break;
          case Mode::kCloseMidFrame: {
            std::string full = encodeResponse(req->op, 0, req->ledgerId, req->entryId);
            out = batch + full.substr(0, 10);
            (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
            return;
          }
          case Mode::kFenced:
            out = encodeResponse(req->op, 104, req->ledgerId, req->entryId);
            break;
          case Mode::kReadOnly:
            out = req->op == OpCode::kAddEntry
                      ? encodeResponse(req->op, 105, req->ledgerId, req->entryId)
                      : goodReply(*req);
            break;
          case Mode::kQueued:
            if (held.size() >= queueLimit_) {
              ++rejected_;
              out = encodeResponse(req->op, 106, req->ledgerId, req->entryId);
            } else {
              if (held.empty()) {
                answerAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
              }
              held.emplace_back(*f);
              if (held.size() > maxHeld_) maxHeld_ = held.size();
            }
            break;
          case Mode::kSlowEntry0:
          case Mode::kGood:
            if (mode == Mode::kSlowEntry0 && req->entryId == 0) {
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
            }
            out = goodReply(*req);
            break;
        }
        batch += out;
      }
      reader.compact();
      if (!batch.empty() && ::send(fd, batch.data(), batch.size(), MSG_NOSIGNAL) < 0) return;
    }
  }

  std::atomic<Mode> mode_;
  int rejectFirst_;
  size_t queueLimit_;
  int lfd_ = -1;
  std::atomic<int> cfd_{-1};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> reads_{0};
  std::atomic<int> rejected_{0};
  std::atomic<size_t> maxHeld_{0};
  std::map<std::pair<int64_t, int64_t>, std::string> entries_;
  std::thread thread_;
};

}  // namespace magnetar::bookkeeper
