// A fake bookie for tests: a thread serving one connection at a time on 127.0.0.1:<free port>,
// decoding v2 requests with the codec and answering as `Mode` says.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "bookkeeper/protocol.h"

namespace magnetar::bookkeeper {

enum class Mode {
  kGood,           // stores ADDs, answers READs from what it stored (NoSuchEntry otherwise)
  kGarbage,        // answers with a frame of an unknown protocol version
  kCloseMidFrame,  // writes half a reply and closes the connection
  kSilent,         // never answers
  kFenced,         // answers every ADD with EFENCED
  kSlowEntry0,     // as kGood, but holds its reply to entry 0 for 300 ms
};

class FakeBookie {
 public:
  explicit FakeBookie(Mode mode) : mode_(mode) {
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
  void serve(int fd) {
    FrameReader reader;
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return;
      reader.append(buf, static_cast<size_t>(n));
      while (auto f = reader.next()) {
        ++requests_;
        auto req = decodeRequest(*f);
        if (!req.isOk()) return;
        std::string out;
        switch (mode_) {
          case Mode::kSilent:
            continue;
          case Mode::kGarbage:
            out = std::string("\x00\x00\x00\x1c", 4) + std::string(28, '\x7e');
            break;
          case Mode::kCloseMidFrame: {
            std::string full = encodeResponse(req->op, 0, req->ledgerId, req->entryId);
            out = full.substr(0, 10);
            (void)::write(fd, out.data(), out.size());
            return;
          }
          case Mode::kFenced:
            out = encodeResponse(req->op, 104, req->ledgerId, req->entryId);
            break;
          case Mode::kSlowEntry0:
          case Mode::kGood:
            if (mode_ == Mode::kSlowEntry0 && req->entryId == 0) {
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
            }
            if (req->op == OpCode::kAddEntry) {
              entries_[{req->ledgerId, req->entryId}] = std::string(req->entry);
              out = encodeResponse(OpCode::kAddEntry, 0, req->ledgerId, req->entryId);
            } else {
              auto it = entries_.find({req->ledgerId, req->entryId});
              out = it == entries_.end()
                        ? encodeResponse(OpCode::kReadEntry, 2, req->ledgerId, req->entryId)
                        : encodeResponse(OpCode::kReadEntry, 0, req->ledgerId, req->entryId,
                                         it->second);
            }
            break;
        }
        if (::write(fd, out.data(), out.size()) < 0) return;
      }
      reader.compact();
    }
  }

  Mode mode_;
  int lfd_ = -1;
  std::atomic<int> cfd_{-1};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::map<std::pair<int64_t, int64_t>, std::string> entries_;
  std::thread thread_;
};

}  // namespace magnetar::bookkeeper
