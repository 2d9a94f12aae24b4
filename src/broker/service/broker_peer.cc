#include "broker/service/broker_peer.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "base/dcheck.h"
#include "base/logging.h"
#include "net/tls.h"
#include "protocol/commands.h"

namespace magnetar::broker {

namespace asio = boost::asio;
using boost::asio::ip::tcp;
using protocol::Commands;

namespace {

constexpr std::string_view kPeerClientVersion = "magnetar-broker";

// The request id an answer frame carries, or nullopt for frames that answer no request.
std::optional<uint64_t> answeredRequest(const proto::BaseCommand& cmd) {
  using T = proto::BaseCommand;
  switch (cmd.type()) {
    case T::LOOKUP_RESPONSE:
      return cmd.lookuptopicresponse().request_id();
    case T::END_TXN_ON_PARTITION_RESPONSE:
      return cmd.endtxnonpartitionresponse().request_id();
    case T::END_TXN_ON_SUBSCRIPTION_RESPONSE:
      return cmd.endtxnonsubscriptionresponse().request_id();
    case T::PRODUCER_SUCCESS:
      return cmd.producer_success().request_id();
    case T::SUCCESS:
      return cmd.success().request_id();
    case T::ERROR:
      return cmd.error().request_id();
    default:
      return std::nullopt;
  }
}

bool isTlsUrl(const std::string& url) { return url.rfind("pulsar+ssl://", 0) == 0; }

// A pool key, "URL" or "URL PROXY_TO" -> (URL, PROXY_TO).
std::pair<std::string, std::string> splitKey(const std::string& key) {
  auto space = key.find(' ');
  if (space == std::string::npos) return {key, {}};
  return {key.substr(0, space), key.substr(space + 1)};
}

// "pulsar://host:port" -> (host, port); without a port 6650 (pulsar+ssl: 6651).
std::pair<std::string, std::string> hostPortOf(const std::string& url) {
  std::string rest = url;
  if (auto scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  if (auto slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  auto colon = rest.rfind(':');
  if (colon == std::string::npos) return {rest, isTlsUrl(url) ? "6651" : "6650"};
  return {rest.substr(0, colon), rest.substr(colon + 1)};
}

}  // namespace

PeerConnection::PeerConnection(net::EventLoop& loop, tcp::socket socket, std::string url,
                               std::unique_ptr<net::TlsSession> tls)
    : net::Connection(loop, std::move(socket), std::move(tls)), url_(std::move(url)) {}

void PeerConnection::handshake(std::chrono::milliseconds timeout, PeerCredentials credentials,
                               std::function<void(Status)> done, const std::string& proxyTo) {
  auto me = std::static_pointer_cast<PeerConnection>(shared_from_this());
  loop().execute([me, timeout, credentials = std::move(credentials), done = std::move(done),
                  proxyTo]() mutable {
    me->connected_ = std::move(done);
    auto timer = std::make_shared<asio::steady_timer>(me->loop().context(), timeout);
    timer->async_wait([me, timer](const boost::system::error_code& ec) {
      if (ec || !me->connected_) return;
      auto cb = std::move(me->connected_);
      me->connected_ = nullptr;
      me->close();
      cb(Status::error(StatusCode::kTimeout, "no CONNECTED from " + me->url_));
    });
    me->start();
    me->send(Commands::newConnect(kPeerClientVersion, credentials.method, credentials.data,
                                  protocol::kMaxProtocolVersion, nullptr, proxyTo));
  });
}

void PeerConnection::request(const std::function<Buffer(uint64_t)>& build,
                             std::chrono::milliseconds timeout, Reply reply) {
  uint64_t id;
  {
    MutexLock lock(mu_);
    id = nextRequestId_++;
    pending_[id] = std::move(reply);
  }
  if (isClosed()) {
    if (auto r = take(id)) r(Status::ioError("connection to " + url_ + " closed"));
    return;
  }
  send(build(id));
  auto me = std::static_pointer_cast<PeerConnection>(shared_from_this());
  loop().execute([me, id, timeout] {
    auto timer = std::make_shared<asio::steady_timer>(me->loop().context(), timeout);
    timer->async_wait([me, id, timer](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto r = me->take(id)) {
        r(Status::error(StatusCode::kTimeout, "no answer from " + me->url_ + " in time"));
      }
    });
  });
}

PeerConnection::Reply PeerConnection::take(uint64_t requestId) {
  MutexLock lock(mu_);
  auto it = pending_.find(requestId);
  if (it == pending_.end()) return nullptr;
  Reply r = std::move(it->second);
  pending_.erase(it);
  return r;
}

bool PeerConnection::onData(const uint8_t* data, size_t len) {
  MAGNETAR_DCHECK_ON(loop());
  Status s = decoder_.feed(
      data, len, [this](const proto::BaseCommand& cmd, const Buffer&) { return onFrame(cmd); });
  if (!s.isOk()) {
    MLOG_WARN("broker connection to {}: closing on bad input: {}", url_, s.toString());
    close();
    return false;
  }
  return true;
}

Status PeerConnection::onFrame(const proto::BaseCommand& cmd) {
  using T = proto::BaseCommand;
  if (cmd.type() == T::CONNECTED) {
    ready_ = true;
    if (auto cb = std::move(connected_)) {
      connected_ = nullptr;
      cb(Status::ok());
    }
    return Status::ok();
  }
  if (cmd.type() == T::PING) {
    send(Commands::newPong());
    return Status::ok();
  }
  if (cmd.type() == T::ERROR && connected_) {  // CONNECT refused (authentication)
    auto cb = std::move(connected_);
    connected_ = nullptr;
    cb(Status::notAllowed(cmd.error().message()));
    return Status::closed("refused");
  }
  if (auto id = answeredRequest(cmd)) {
    if (auto r = take(*id)) r(cmd);
    return Status::ok();
  }
  std::optional<uint64_t> producer;
  if (cmd.type() == T::SEND_RECEIPT) producer = cmd.send_receipt().producer_id();
  if (cmd.type() == T::SEND_ERROR) producer = cmd.send_error().producer_id();
  if (cmd.type() == T::CLOSE_PRODUCER) producer = cmd.close_producer().producer_id();
  if (producer) {
    if (auto h = producerHandler(*producer)) h(&cmd);
  }
  return Status::ok();
}

uint64_t PeerConnection::addProducer(ProducerHandler handler) {
  MutexLock lock(mu_);
  uint64_t id = nextProducerId_++;
  producers_[id] = std::move(handler);
  return id;
}

void PeerConnection::removeProducer(uint64_t producerId) {
  MutexLock lock(mu_);
  producers_.erase(producerId);
}

PeerConnection::ProducerHandler PeerConnection::producerHandler(uint64_t producerId) {
  MutexLock lock(mu_);
  auto it = producers_.find(producerId);
  return it == producers_.end() ? nullptr : it->second;
}

void PeerConnection::onClosed() {
  MAGNETAR_DCHECK_ON(loop());
  ready_ = false;
  if (auto cb = std::move(connected_)) {
    connected_ = nullptr;
    cb(Status::ioError("connection to " + url_ + " closed"));
  }
  std::map<uint64_t, Reply> all;
  std::map<uint64_t, ProducerHandler> producers;
  {
    MutexLock lock(mu_);
    all.swap(pending_);
    producers.swap(producers_);
  }
  for (auto& [id, r] : all) r(Status::ioError("connection to " + url_ + " closed"));
  for (auto& [id, h] : producers) h(nullptr);
}

PeerPool::PeerPool(net::EventLoopGroup& loops, std::chrono::milliseconds connectTimeout,
                   std::shared_ptr<const BrokerClientSettings> settings)
    : loops_(loops), connectTimeout_(connectTimeout), settings_(std::move(settings)) {}

PeerPool::~PeerPool() { closeAll(); }

void PeerPool::get(const std::string& target, const std::string& proxyTo, ConnectionCallback cb) {
  const std::string url = proxyTo.empty() ? target : target + " " + proxyTo;  // the pool's key
  {
    MutexLock lock(mu_);
    if (auto it = ready_.find(url); it != ready_.end()) {
      if (!it->second->isClosed()) {
        auto c = it->second;
        return c->loop().execute([c, cb = std::move(cb)] { cb(c); });
      }
      ready_.erase(it);
    }
    auto& w = waiting_[url];
    w.push_back(std::move(cb));
    if (w.size() > 1) return;  // a connect is under way
  }
  connect(url);
}

void PeerPool::connect(const std::string& url) {
  const std::string target = splitKey(url).first;
  if (isTlsUrl(target) && !settings_->tlsEnabled()) {
    return connected(url, Status::invalidArgument(target + " needs brokerClientTlsEnabled"));
  }
  net::EventLoop& loop = loops_.next();
  const auto hostPort = hostPortOf(target);
  const std::string host = hostPort.first;
  const std::string port = hostPort.second;
  auto resolver = std::make_shared<tcp::resolver>(loop.context());
  auto socket = std::make_shared<tcp::socket>(loop.context());
  auto timer = std::make_shared<asio::steady_timer>(loop.context());
  loop.execute([this, url, host, port, resolver, socket, timer, &loop] {
    timer->expires_after(connectTimeout_);  // a peer that does not answer SYN: give up
    timer->async_wait([resolver, socket](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: connected or failed first
      resolver->cancel();
      boost::system::error_code ignored;
      socket->close(ignored);
    });
    resolver->async_resolve(
        host, port,
        [=, this, &loop](const boost::system::error_code& ec,
                         const tcp::resolver::results_type& rs) {
          if (ec)
            return connected(url, Status::ioError("cannot resolve " + url + ": " + ec.message()));
          asio::async_connect(
              *socket, rs,
              [=, this, &loop](const boost::system::error_code& ec2, const tcp::endpoint&) {
                timer->cancel();
                if (ec2) {
                  return connected(
                      url, Status::ioError("cannot connect to " + url + ": " + ec2.message()));
                }
                startSession(url, host, loop, std::move(*socket));
              });
        });
  });
}

void PeerPool::startSession(const std::string& url, const std::string& host, net::EventLoop& loop,
                            tcp::socket socket) {
  const auto [target, proxyTo] = splitKey(url);
  auto credentials = settings_->credentials();
  if (!credentials.isOk()) {
    return connected(
        url, Status::ioError("broker client credentials: " + credentials.status().message()));
  }
  std::unique_ptr<net::TlsSession> tls;
  if (isTlsUrl(target)) {
    tls = std::make_unique<net::TlsSession>(settings_->tlsContext(), /*client=*/true,
                                            settings_->verifyHostname() ? host : std::string());
  }
  auto c = std::make_shared<PeerConnection>(loop, std::move(socket), target, std::move(tls));
  c->handshake(
      connectTimeout_, std::move(*credentials),
      [this, url, c](const Status& s) {
        if (!s.isOk()) return connected(url, s);
        connected(url, c);
      },
      proxyTo);
}

void PeerPool::connected(const std::string& url, Result<std::shared_ptr<PeerConnection>> r) {
  std::vector<ConnectionCallback> waiting;
  {
    MutexLock lock(mu_);
    waiting = std::move(waiting_[url]);
    waiting_.erase(url);
    if (r.isOk()) ready_[url] = r.value();
  }
  if (!r.isOk()) MLOG_WARN("broker connection to {} failed: {}", url, r.status().toString());
  for (auto& w : waiting) w(r);
}

void PeerPool::closeAll() {
  std::map<std::string, std::shared_ptr<PeerConnection>> all;
  {
    MutexLock lock(mu_);
    all.swap(ready_);
  }
  for (auto& [url, c] : all) c->close();
}

}  // namespace magnetar::broker
