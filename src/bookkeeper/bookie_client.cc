#include "bookkeeper/bookie_client.h"

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

struct OpenRequest {
  uint64_t seq = 0;
  Clock::time_point deadline;
  size_t bytes = 0;
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
// and those waiting for in-flight room. Loop thread only.
class BookieChannel : public std::enable_shared_from_this<BookieChannel> {
 public:
  BookieChannel(BookieClient& client, BookieId bookie)
      : client_(client), bookie_(std::move(bookie)), timer_(client.loop().context()) {}

  void connect();
  void submit(RequestKey key, net::FrameBatch frame, size_t bytes, OpenRequest req,
              std::chrono::milliseconds timeout);
  bool onFrame(std::string_view frame);
  void onProtocolError(const Status& s);
  void fail(BkResult rc);
  void connectionClosed();

 private:
  void send(RequestKey key, net::FrameBatch frame, OpenRequest req);
  void drainWaiting();
  void armTimer();
  void onTimer();

  BookieClient& client_;
  BookieId bookie_;
  std::shared_ptr<BookieConnection> conn_;
  bool connected_ = false;
  bool failed_ = false;
  net::FrameBatch beforeConnect_;  // frames sent while connecting
  std::map<RequestKey, std::deque<OpenRequest>> open_;
  size_t openCount_ = 0;
  size_t inFlightBytes_ = 0;
  struct Waiting {
    RequestKey key;
    net::FrameBatch frame;
    OpenRequest req;
  };
  std::deque<Waiting> waiting_;
  uint64_t nextSeq_ = 0;
  asio::steady_timer timer_;
  bool timerArmed_ = false;
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

void BookieChannel::submit(RequestKey key, net::FrameBatch frame, size_t bytes, OpenRequest req,
                           std::chrono::milliseconds timeout) {
  req.seq = nextSeq_++;
  req.deadline = Clock::now() + timeout;
  req.bytes = bytes;
  if (!waiting_.empty() || (inFlightBytes_ > 0 &&
                            inFlightBytes_ + bytes > client_.options().maxInFlightBytesPerBookie)) {
    waiting_.push_back(Waiting{key, std::move(frame), std::move(req)});
    armTimer();
    return;
  }
  send(key, std::move(frame), std::move(req));
}

void BookieChannel::send(RequestKey key, net::FrameBatch frame, OpenRequest req) {
  inFlightBytes_ += req.bytes;
  ++openCount_;
  open_[key].push_back(std::move(req));
  if (connected_) {
    conn_->send(std::move(frame));
  } else {
    beforeConnect_.append(std::move(frame));
  }
  armTimer();
}

void BookieChannel::drainWaiting() {
  while (!waiting_.empty() &&
         (inFlightBytes_ == 0 || inFlightBytes_ + waiting_.front().req.bytes <=
                                     client_.options().maxInFlightBytesPerBookie)) {
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    send(w.key, std::move(w.frame), std::move(w.req));
  }
}

bool BookieChannel::onFrame(std::string_view frame) {
  MAGNETAR_DCHECK_ON(client_.loop());
  auto r = decodeResponse(frame);
  if (!r.isOk()) {
    onProtocolError(r.status());
    return false;
  }
  RequestKey key{static_cast<uint8_t>(r->op), r->ledgerId, r->entryId};
  auto it = open_.find(key);
  if (it == open_.end()) {
    // A reply after its request timed out, or one we never asked for: dropped.
    MLOG_DEBUG("bookkeeper: {}: unmatched reply op {} ledger {} entry {}", bookie_,
               static_cast<int>(r->op), r->ledgerId, r->entryId);
    return true;
  }
  OpenRequest req = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) open_.erase(it);
  --openCount_;
  inFlightBytes_ -= req.bytes;
  BkResult rc = bkResultFromBookieRc(r->rc);
  auto self = shared_from_this();  // a callback may close the client
  if (req.addCb) {
    req.addCb(rc);
  } else if (req.readCb) {
    req.readCb(rc, rc == BkResult::kOk ? std::string(r->body) : std::string());
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
  client_.channelClosed(this);  // new requests get a new channel
  timer_.cancel();
  std::vector<OpenRequest> victims;
  for (auto& [k, q] : open_) {
    for (auto& r : q) victims.push_back(std::move(r));
  }
  open_.clear();
  for (auto& w : waiting_) victims.push_back(std::move(w.req));
  waiting_.clear();
  openCount_ = 0;
  inFlightBytes_ = 0;
  if (conn_) conn_->close();
  std::sort(victims.begin(), victims.end(),
            [](const OpenRequest& a, const OpenRequest& b) { return a.seq < b.seq; });
  for (auto& v : victims) v.fail(rc);
}

void BookieChannel::armTimer() {
  if (timerArmed_ || failed_) return;
  timerArmed_ = true;
  timer_.expires_after(std::chrono::milliseconds(100));
  std::weak_ptr<BookieChannel> weak = shared_from_this();
  timer_.async_wait([weak](const boost::system::error_code& e) {
    auto self = weak.lock();
    if (!self) return;
    self->timerArmed_ = false;
    if (!e) self->onTimer();
  });
}

void BookieChannel::onTimer() {
  MAGNETAR_DCHECK_ON(client_.loop());
  auto now = Clock::now();
  std::vector<OpenRequest> expired;
  for (auto it = open_.begin(); it != open_.end();) {
    auto& q = it->second;
    // Timing a request out keeps its place for the reply that may still come: the key stays
    // matched to the later requests in order, so only the oldest ones may expire.
    while (!q.empty() && q.front().deadline <= now) {
      inFlightBytes_ -= q.front().bytes;
      --openCount_;
      expired.push_back(std::move(q.front()));
      q.pop_front();
    }
    it = q.empty() ? open_.erase(it) : std::next(it);
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->req.deadline <= now) {
      expired.push_back(std::move(it->req));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  auto self = shared_from_this();
  std::sort(expired.begin(), expired.end(),
            [](const OpenRequest& a, const OpenRequest& b) { return a.seq < b.seq; });
  for (auto& r : expired) r.fail(BkResult::kTimeout);
  if (failed_) return;
  drainWaiting();
  if (openCount_ > 0 || !waiting_.empty()) armTimer();
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
  net::FrameBatch frame;
  size_t bytes = encodeAddRequest(frame, key, h, payload, flags);
  OpenRequest req;
  req.addCb = std::move(cb);
  auto ch = channel(bookie).shared_from_this();
  ch->submit(RequestKey{static_cast<uint8_t>(OpCode::kAddEntry), h.ledgerId, h.entryId},
             std::move(frame), bytes, std::move(req), options_.addTimeout);
}

void BookieClient::readEntry(const BookieId& bookie, int64_t ledgerId, int64_t entryId,
                             uint16_t flags, const MasterKey* key, ReadCallback cb) {
  MAGNETAR_DCHECK_ON(loop_);
  if (closed_) return cb(BkResult::kClientClosed, {});
  net::FrameBatch frame;
  size_t bytes = encodeReadRequest(frame, ledgerId, entryId, flags, key);
  OpenRequest req;
  req.readCb = std::move(cb);
  auto ch = channel(bookie).shared_from_this();
  ch->submit(RequestKey{static_cast<uint8_t>(OpCode::kReadEntry), ledgerId, entryId},
             std::move(frame), bytes, std::move(req), options_.readTimeout);
}

void BookieClient::close() {
  MAGNETAR_DCHECK_ON(loop_);
  closed_ = true;
  auto channels = std::move(channels_);
  channels_.clear();
  for (auto& [id, ch] : channels) ch->fail(BkResult::kClientClosed);
}

}  // namespace magnetar::bookkeeper
