#include "bookkeeper/bookie_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/dcheck.h"
#include "base/logging.h"
#include "net/connection.h"

namespace magnetar::bookkeeper {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// (op, ledger, entry): how a v2 reply finds its request.
using RequestKey = std::tuple<uint8_t, int64_t, int64_t>;

// What encodes a request again when a bookie refused it (ETOOMANYREQUESTS).
struct RequestSpec {
  OpCode op = OpCode::kAddEntry;
  uint16_t flags = kFlagNone;
  EntryHeader header;  // ADD: the entry's header; READ: ledgerId and entryId
  Buffer payload;      // ADD
  bool withKey = false;
  MasterKey key{};

  RequestKey requestKey() const {
    return RequestKey{static_cast<uint8_t>(op), header.ledgerId, header.entryId};
  }
  // Encodes the frame; returns its size including the length prefix.
  size_t encode(net::FrameBatch& out) const {
    if (op == OpCode::kAddEntry) return encodeAddRequest(out, key, header, payload, flags);
    return encodeReadRequest(out, header.ledgerId, header.entryId, flags, withKey ? &key : nullptr);
  }
  size_t frameBytes() const {
    if (op == OpCode::kAddEntry) return 8 + kMasterKeyLength + kEntryHeaderLength + payload.size();
    return 8 + 16 + (withKey && (flags & kFlagDoFencing) != 0 ? kMasterKeyLength : 0);
  }
};

struct OpenRequest {
  uint64_t seq = 0;              // submission order: failures are reported in it
  uint64_t sendSeq = 0;          // order of the latest send on the channel
  Clock::time_point deadline;    // of the latest send
  Clock::time_point retryUntil;  // first send + timeout: refusals are retried until then
  std::chrono::milliseconds timeout{0};
  bool sentOnce = false;
  size_t bytes = 0;
  RequestSpec spec;
  BookieClient::AddCallback addCb;
  BookieClient::ReadCallback readCb;

  void fail(BkResult rc) {
    if (addCb) {
      addCb(rc);
    } else if (readCb) {
      readCb(rc, {});
    }
  }
};

class BookieConnection;

// One bookie on one loop: its connection (or the attempt to make one), the requests sent on it
// and those waiting for room (count, bytes) or for the end of a pause after ETOOMANYREQUESTS.
// Loop thread only.
class BookieChannel : public std::enable_shared_from_this<BookieChannel> {
 public:
  BookieChannel(BookieClient& client, BookieId bookie)
      : client_(client),
        bookie_(std::move(bookie)),
        window_(std::max<size_t>(1, client.options().maxInFlightRequestsPerBookie)),
        backoff_(client.options().tooManyRequestsBackoffMin),
        timer_(client.loop().context()),
        resumeTimer_(client.loop().context()) {}

  void connect();
  void submit(OpenRequest&& req);
  bool onFrame(std::string_view frame);
  void onProtocolError(const Status& s);
  void fail(BkResult rc);
  void connectionClosed();

 private:
  bool canSend(const OpenRequest& req);
  void send(OpenRequest&& req);
  void drainWaiting();
  OpenRequest* nextToSend();
  void onTooManyRequests(OpenRequest req);
  void armTimer();
  void onTimer();
  // A timer and whether it is armed (from arm() until it fires or is cancelled).
  struct ChannelTimer {
    explicit ChannelTimer(asio::io_context& io) : timer(io) {}
    asio::steady_timer timer;
    bool armed = false;
  };
  // Arms `t` for `at`; when it fires while this channel lives, disarms it and, unless it was
  // cancelled, calls `then`.
  void arm(ChannelTimer& t, Clock::time_point at, void (BookieChannel::*then)());

  BookieClient& client_;
  BookieId bookie_;
  std::shared_ptr<BookieConnection> conn_;
  bool connected_ = false;
  bool failed_ = false;
  net::FrameBatch beforeConnect_;  // frames sent while connecting
  // Sent and not answered, by key; requests with the same key (a retry of a timed-out one) in
  // send order (a multimap inserts after the equal keys): one node per request.
  std::multimap<RequestKey, OpenRequest> open_;
  size_t openCount_ = 0;
  size_t inFlightBytes_ = 0;
  std::deque<OpenRequest> waiting_;  // never sent, by seq
  std::deque<OpenRequest> refused_;  // refused (ETOOMANYREQUESTS): sent again before waiting_
  uint64_t nextSeq_ = 0;
  uint64_t nextSendSeq_ = 0;
  // Count bound in force: maxInFlightRequestsPerBookie, less after refusals.
  size_t window_;
  // A refusal of a request sent before this send sequence number does not shrink the window
  // again (one decrease per round of refusals).
  uint64_t decreaseFromSendSeq_ = 0;
  std::chrono::milliseconds backoff_;
  Clock::time_point pausedUntil_{};
  ChannelTimer timer_;        // request timeouts, every 100 ms while requests are open
  ChannelTimer resumeTimer_;  // the end of a pause after ETOOMANYREQUESTS
};

class BookieConnection final : public net::Connection {
 public:
  BookieConnection(net::EventLoop& loop, tcp::socket socket, std::weak_ptr<BookieChannel> ch)
      : Connection(loop, std::move(socket)), channel_(std::move(ch)) {}

 protected:
  bool onData(const uint8_t* data, size_t len) override {
    auto ch = channel_.lock();
    if (!ch) return false;
    reader_.append(data, len);
    while (auto f = reader_.next()) {
      if (!ch->onFrame(*f)) {
        close();
        return false;
      }
    }
    if (!reader_.error().isOk()) {
      ch->onProtocolError(reader_.error());
      close();
      return false;
    }
    reader_.compact();
    return true;
  }
  void onClosed() override {
    if (auto ch = channel_.lock()) ch->connectionClosed();
  }

 private:
  std::weak_ptr<BookieChannel> channel_;
  FrameReader reader_;
};

void BookieChannel::connect() {
  auto& loop = client_.loop();
  size_t colon = bookie_.rfind(':');
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(bookie_.substr(0, colon), ec);
  int port = colon == std::string::npos ? 0 : std::atoi(bookie_.c_str() + colon + 1);
  if (ec || port <= 0 || port > 65535) {
    MLOG_WARN("bookkeeper: bookie id {} is not ip:port", bookie_);
    // Fail asynchronously: the caller is still inside submit().
    auto self = shared_from_this();
    loop.execute([self] { self->fail(BkResult::kBookieHandleNotAvailable); });
    return;
  }
  auto socket = std::make_shared<tcp::socket>(loop.context());
  auto timer = std::make_shared<asio::steady_timer>(loop.context());
  timer->expires_after(client_.options().connectTimeout);
  timer->async_wait([socket](const boost::system::error_code& e) {
    if (!e) {
      boost::system::error_code ignored;
      socket->close(ignored);
    }
  });
  std::weak_ptr<BookieChannel> weak = shared_from_this();
  socket->async_connect(
      tcp::endpoint(addr, static_cast<uint16_t>(port)),
      [weak, socket, timer, &loop](const boost::system::error_code& e) {
        timer->cancel();
        auto self = weak.lock();
        if (!self || self->failed_) return;
        if (e) {
          MLOG_WARN("bookkeeper: cannot connect to bookie {}: {}", self->bookie_, e.message());
          self->fail(BkResult::kBookieHandleNotAvailable);
          return;
        }
        socket->set_option(tcp::no_delay(true));
        self->conn_ = std::make_shared<BookieConnection>(loop, std::move(*socket), weak);
        self->connected_ = true;
        self->conn_->start();
        if (!self->beforeConnect_.empty()) {
          self->conn_->send(std::move(self->beforeConnect_));
          self->beforeConnect_.clear();
        }
      });
}

bool BookieChannel::canSend(const OpenRequest& req) {
  if (openCount_ >= window_) return false;
  if (inFlightBytes_ > 0 &&
      inFlightBytes_ + req.bytes > client_.options().maxInFlightBytesPerBookie) {
    return false;
  }
  // No clock read per request unless a pause after ETOOMANYREQUESTS was set.
  if (pausedUntil_ == Clock::time_point{}) return true;
  if (pausedUntil_ > Clock::now()) return false;
  pausedUntil_ = {};
  return true;
}

void BookieChannel::submit(OpenRequest&& req) {
  req.seq = nextSeq_++;
  req.bytes = req.spec.frameBytes();
  if (!waiting_.empty() || !refused_.empty() || !canSend(req)) {
    ++client_.stats_.waitedForRoom;
    waiting_.push_back(std::move(req));
    drainWaiting();  // arms the end of a pause, if that is what holds it
    return;
  }
  send(std::move(req));
}

void BookieChannel::send(OpenRequest&& req) {
  // Encoded straight into the connection's pending batch (no frame of its own per request).
  if (connected_) {
    conn_->write([&req](net::FrameBatch& pending) { req.spec.encode(pending); });
  } else {
    req.spec.encode(beforeConnect_);
  }
  auto now = Clock::now();
  req.deadline = now + req.timeout;
  if (!req.sentOnce) {
    req.sentOnce = true;
    req.retryUntil = req.deadline;
  }
  req.sendSeq = nextSendSeq_++;
  inFlightBytes_ += req.bytes;
  ++openCount_;
  ++client_.stats_.requestsSent;
  RequestKey key = req.spec.requestKey();
  open_.emplace(key, std::move(req));
  armTimer();
}

OpenRequest* BookieChannel::nextToSend() {
  if (!refused_.empty()) return &refused_.front();
  if (!waiting_.empty()) return &waiting_.front();
  return nullptr;
}

void BookieChannel::drainWaiting() {
  for (OpenRequest* next = nextToSend(); !failed_ && next != nullptr && canSend(*next);
       next = nextToSend()) {
    auto& q = refused_.empty() ? waiting_ : refused_;
    OpenRequest r = std::move(q.front());
    q.pop_front();
    send(std::move(r));
  }
  if (failed_ || nextToSend() == nullptr || pausedUntil_ <= Clock::now() || resumeTimer_.armed) {
    return;
  }
  // Paused after a refusal: resume at the end of the pause.
  arm(resumeTimer_, pausedUntil_, &BookieChannel::drainWaiting);
}

void BookieChannel::arm(ChannelTimer& t, Clock::time_point at, void (BookieChannel::*then)()) {
  t.armed = true;
  t.timer.expires_at(at);
  std::weak_ptr<BookieChannel> weak = shared_from_this();
  t.timer.async_wait([weak, &t, then](const boost::system::error_code& e) {
    auto self = weak.lock();
    if (!self) return;  // `t` went with the channel
    t.armed = false;
    if (!e) (self.get()->*then)();
  });
}

void BookieChannel::onTooManyRequests(OpenRequest req) {
  ++client_.stats_.tooManyRequests;
  auto now = Clock::now();
  if (now >= req.retryUntil) {
    MLOG_WARN(
        "bookkeeper: bookie {} refused op {} ledger {} entry {} (TooManyRequests) until its "
        "timeout",
        bookie_, static_cast<int>(req.spec.op), req.spec.header.ledgerId, req.spec.header.entryId);
    req.fail(BkResult::kTooManyRequests);
    return;
  }
  if (req.sendSeq >= decreaseFromSendSeq_) {
    // The first refusal of this round: fewer in flight, and a pause before sending again.
    size_t before = window_;
    window_ = std::max<size_t>(1, std::min(window_, openCount_ + 1) / 2);
    decreaseFromSendSeq_ = nextSendSeq_;
    pausedUntil_ = now + backoff_;
    MLOG_DEBUG("bookkeeper: bookie {} is busy (TooManyRequests): {} -> {} in flight, pause {} ms",
               bookie_, before, window_, backoff_.count());
    backoff_ = std::min(backoff_ * 2, client_.options().tooManyRequestsBackoffMax);
  }
  // Refusals come back in the order the requests were sent: the oldest go again first.
  refused_.push_back(std::move(req));
}

bool BookieChannel::onFrame(std::string_view frame) {
  MAGNETAR_DCHECK_ON(client_.loop());
  auto r = decodeResponse(frame);
  if (!r.isOk()) {
    onProtocolError(r.status());
    return false;
  }
  RequestKey key{static_cast<uint8_t>(r->op), r->ledgerId, r->entryId};
  auto it = open_.find(key);  // the first sent of that key
  if (it == open_.end()) {
    // A reply after its request timed out, or one we never asked for: dropped.
    MLOG_DEBUG("bookkeeper: {}: unmatched reply op {} ledger {} entry {}", bookie_,
               static_cast<int>(r->op), r->ledgerId, r->entryId);
    return true;
  }
  OpenRequest req = std::move(it->second);
  open_.erase(it);
  --openCount_;
  inFlightBytes_ -= req.bytes;
  BkResult rc = bkResultFromBookieRc(r->rc);
  auto self = shared_from_this();  // a callback may close the client
  if (rc == BkResult::kTooManyRequests) {
    onTooManyRequests(std::move(req));
  } else {
    if (rc == BkResult::kOk) {
      // +1 per OK reply back to the configured bound; the backoff starts over.
      window_ = std::min(window_ + 1,
                         std::max<size_t>(1, client_.options().maxInFlightRequestsPerBookie));
      backoff_ = client_.options().tooManyRequestsBackoffMin;
    }
    if (req.addCb) {
      req.addCb(rc);
    } else if (req.readCb) {
      req.readCb(rc, rc == BkResult::kOk ? std::string(r->body) : std::string());
    }
  }
  if (!failed_) drainWaiting();
  return !failed_;
}

void BookieChannel::onProtocolError(const Status& s) {
  MLOG_WARN("bookkeeper: bookie {} sent an invalid frame ({}); closing its connection", bookie_,
            s.message());
  fail(BkResult::kProtocolError);
}

void BookieChannel::connectionClosed() {
  if (!failed_) fail(BkResult::kBookieHandleNotAvailable);
}

void BookieChannel::fail(BkResult rc) {
  if (failed_) return;
  failed_ = true;
  auto self = shared_from_this();
  if (rc != BkResult::kClientClosed) client_.recordFailure(bookie_);
  client_.channelClosed(this);  // new requests get a new channel
  timer_.timer.cancel();
  resumeTimer_.timer.cancel();
  std::vector<OpenRequest> victims;
  for (auto& [k, r] : open_) victims.push_back(std::move(r));
  open_.clear();
  for (auto& w : waiting_) victims.push_back(std::move(w));
  waiting_.clear();
  for (auto& w : refused_) victims.push_back(std::move(w));
  refused_.clear();
  openCount_ = 0;
  inFlightBytes_ = 0;
  if (conn_) conn_->close();
  std::sort(victims.begin(), victims.end(),
            [](const OpenRequest& a, const OpenRequest& b) { return a.seq < b.seq; });
  for (auto& v : victims) v.fail(rc);
}

void BookieChannel::armTimer() {
  if (timer_.armed || failed_) return;
  arm(timer_, Clock::now() + std::chrono::milliseconds(100), &BookieChannel::onTimer);
}

void BookieChannel::onTimer() {
  MAGNETAR_DCHECK_ON(client_.loop());
  auto now = Clock::now();
  std::vector<OpenRequest> expired;
  for (auto it = open_.begin(); it != open_.end();) {
    // Timing a request out keeps its place for the reply that may still come: the key stays
    // matched to the later requests in order, so only the oldest ones of a key may expire.
    if (it->second.deadline <= now) {
      inFlightBytes_ -= it->second.bytes;
      --openCount_;
      expired.push_back(std::move(it->second));
      it = open_.erase(it);
      continue;
    }
    auto next = std::next(it);  // the key's later requests stay
    while (next != open_.end() && next->first == it->first) ++next;
    it = next;
  }
  // Waiting requests have no deadline yet: theirs starts when they are sent.
  auto self = shared_from_this();
  if (!expired.empty()) {
    client_.stats_.timeouts += expired.size();
    client_.recordFailure(bookie_);
    MLOG_WARN("bookkeeper: bookie {}: {} request(s) timed out", bookie_, expired.size());
  }
  std::sort(expired.begin(), expired.end(),
            [](const OpenRequest& a, const OpenRequest& b) { return a.seq < b.seq; });
  for (auto& r : expired) r.fail(BkResult::kTimeout);
  if (failed_) return;
  drainWaiting();
  if (openCount_ > 0) armTimer();
}

BookieClient::BookieClient(net::EventLoop& loop, BookieClientOptions options)
    : loop_(loop), options_(options) {}

BookieClient::~BookieClient() { MAGNETAR_DCHECK(channels_.empty() || loop_.inExecutorThread()); }

BookieChannel& BookieClient::channel(const BookieId& bookie) {
  auto it = channels_.find(bookie);
  if (it != channels_.end()) return *it->second;
  auto ch = std::make_shared<BookieChannel>(*this, bookie);
  channels_.emplace(bookie, ch);
  ch->connect();
  return *ch;
}

void BookieClient::channelClosed(BookieChannel* ch) {
  for (auto it = channels_.begin(); it != channels_.end(); ++it) {
    if (it->second.get() == ch) {
      channels_.erase(it);
      return;
    }
  }
}

void BookieClient::addEntry(const BookieId& bookie, const MasterKey& key, const EntryHeader& h,
                            const Buffer& payload, uint16_t flags, AddCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (closed_) return cb(BkResult::kClientClosed);
  OpenRequest req;
  req.spec.op = OpCode::kAddEntry;
  req.spec.flags = flags;
  req.spec.header = h;
  req.spec.payload = payload;
  req.spec.withKey = true;
  req.spec.key = key;
  req.timeout = options_.addTimeout;
  req.addCb = std::move(cb);
  auto ch = channel(bookie).shared_from_this();
  ch->submit(std::move(req));
}

void BookieClient::readEntry(const BookieId& bookie, int64_t ledgerId, int64_t entryId,
                             uint16_t flags, const MasterKey* key, ReadCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (closed_) return cb(BkResult::kClientClosed, {});
  OpenRequest req;
  req.spec.op = OpCode::kReadEntry;
  req.spec.flags = flags;
  req.spec.header.ledgerId = ledgerId;
  req.spec.header.entryId = entryId;
  if (key != nullptr) {
    req.spec.withKey = true;
    req.spec.key = *key;
  }
  req.timeout = options_.readTimeout;
  req.readCb = std::move(cb);
  auto ch = channel(bookie).shared_from_this();
  ch->submit(std::move(req));
}

std::optional<Clock::time_point> BookieClient::failedRecently(const BookieId& bookie) {
  MAGNETAR_DCHECK_ON(loop_);
  auto it = failures_.find(bookie);
  if (it == failures_.end()) return std::nullopt;
  if (Clock::now() - it->second >= options_.bookieFailureHistoryExpiration) {
    failures_.erase(it);
    return std::nullopt;
  }
  return it->second;
}

void BookieClient::recordFailure(const BookieId& bookie) {
  MAGNETAR_DCHECK_ON(loop_);
  if (!failures_.count(bookie)) {
    MLOG_INFO(
        "bookkeeper: bookie {} failed: reads try it last for {} s", bookie,
        std::chrono::duration_cast<std::chrono::seconds>(options_.bookieFailureHistoryExpiration)
            .count());
  }
  failures_[bookie] = Clock::now();
}

void BookieClient::close() {
  MAGNETAR_DCHECK_ON(loop_);
  closed_ = true;
  auto channels = std::move(channels_);
  channels_.clear();
  for (auto& [id, ch] : channels) ch->fail(BkResult::kClientClosed);
}

}  // namespace magnetar::bookkeeper
