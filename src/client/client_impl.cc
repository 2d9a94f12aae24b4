#include "client/client_impl.h"

#include <pthread.h>
#include <signal.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <future>

#include "base/logging.h"
#include "client/client_connection.h"
#include "client/consumer_impl.h"
#include "client/producer_impl.h"
#include "client/transaction_impl.h"
#include "protocol/commands.h"

namespace magnetar::client {

using protocol::Commands;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
constexpr int kMaxRedirects = 20;

Result<std::string> addressOfUrl(std::string_view url) {
  auto r = parseServiceUrl(url);
  if (!r) return r.status();
  return r->front();
}

std::pair<std::string, std::string> splitHostPort(const std::string& address) {
  auto colon = address.rfind(':');
  return {address.substr(0, colon), address.substr(colon + 1)};
}
}  // namespace

Result<std::vector<std::string>> parseServiceUrl(std::string_view url) {
  constexpr std::string_view kScheme = "pulsar://";
  constexpr std::string_view kTlsScheme = "pulsar+ssl://";
  std::string_view rest;
  std::string defaultPort = "6650";
  if (url.substr(0, kScheme.size()) == kScheme) {
    rest = url.substr(kScheme.size());
  } else if (url.substr(0, kTlsScheme.size()) == kTlsScheme) {
    rest = url.substr(kTlsScheme.size());
    defaultPort = "6651";
  } else {
    return Status::invalidArgument("service URL must start with pulsar:// or pulsar+ssl://: " +
                                   std::string(url));
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  std::vector<std::string> out;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view hp = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (hp.empty()) continue;
    std::string host(hp);
    std::string port = defaultPort;
    if (hp.front() == '[') {  // [v6]:port
      auto close = hp.find(']');
      if (close == std::string_view::npos) return Status::invalidArgument("bad host in URL");
      host = std::string(hp.substr(1, close - 1));
      if (close + 1 < hp.size() && hp[close + 1] == ':') port = std::string(hp.substr(close + 2));
    } else if (auto colon = hp.rfind(':'); colon != std::string_view::npos) {
      host = std::string(hp.substr(0, colon));
      port = std::string(hp.substr(colon + 1));
    }
    int p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p <= 0 || p > 65535 ||
        host.empty()) {
      return Status::invalidArgument("bad host:port in service URL: " + std::string(hp));
    }
    host += ':';
    host += port;
    out.push_back(std::move(host));
  }
  if (out.empty()) return Status::invalidArgument("service URL has no host: " + std::string(url));
  return out;
}

ClientImpl::ClientImpl(std::string serviceUrl, ClientConfig config)
    : serviceUrl_(std::move(serviceUrl)), config_(std::move(config)) {
  config_.ioThreads = std::max(1, config_.ioThreads);
  slots_ = config_.connectionsPerBroker > 0 ? config_.connectionsPerBroker : config_.ioThreads;
}

ClientImpl::~ClientImpl() { close(); }

Status ClientImpl::start() {
  auto addrs = parseServiceUrl(serviceUrl_);
  if (!addrs) return addrs.status();
  serviceAddresses_ = std::move(*addrs);
  if (serviceUrl_.rfind("pulsar+ssl://", 0) == 0) {
    net::TlsOptions tls;
    tls.trustCertsFilePath = config_.tlsTrustCertsFilePath;
    tls.allowInsecureConnection = config_.tlsAllowInsecureConnection;
    tls.certificateFilePath = config_.tlsCertificateFilePath;
    tls.keyFilePath = config_.tlsKeyFilePath;
    auto ctx = net::newClientSslCtx(tls);
    if (!ctx) return ctx.status();
    tlsCtx_ = std::move(*ctx);
  }
  loops_ = std::make_unique<net::EventLoopGroup>(config_.ioThreadPrefix, config_.ioThreads);
  // A write to a connection the broker closed raises SIGPIPE, whose default action kills the
  // process. The I/O threads (the only ones that write to sockets) start with SIGPIPE blocked, so
  // such a write fails with EPIPE instead; the process's signal disposition is left alone.
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  loops_->start();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return Status::ok();
}

std::string ClientImpl::serviceAddress() {
  uint32_t i = serviceIndex_.fetch_add(1, std::memory_order_relaxed);
  return serviceAddresses_[i % serviceAddresses_.size()];
}

Status ClientImpl::close() {
  if (closed_.exchange(true)) return Status::ok();
  if (!loops_) return Status::ok();
  std::vector<std::shared_ptr<ProducerBase>> producers;
  std::vector<std::shared_ptr<ConsumerBase>> consumers;
  {
    MutexLock lock(mu_);
    for (auto& w : producers_) {
      if (auto p = w.lock()) producers.push_back(std::move(p));
    }
    for (auto& w : consumers_) {
      if (auto c = w.lock()) consumers.push_back(std::move(c));
    }
    producers_.clear();
    consumers_.clear();
    tcClient_.reset();
  }
  // Close everything in parallel, then wait.
  std::vector<std::future<Status>> done;
  for (auto& p : producers) {
    auto pr = std::make_shared<std::promise<Status>>();
    done.push_back(pr->get_future());
    p->closeAsync([pr](const Status& s) { pr->set_value(s); });
  }
  for (auto& c : consumers) {
    auto pr = std::make_shared<std::promise<Status>>();
    done.push_back(pr->get_future());
    c->closeAsync([pr](const Status& s) { pr->set_value(s); });
  }
  Status result;
  auto deadline = std::chrono::steady_clock::now() + config_.operationTimeout;
  for (auto& f : done) {
    if (f.wait_until(deadline) != std::future_status::ready) {
      result = Status::error(StatusCode::kTimeout, "closing producers/consumers timed out");
    }
  }
  std::vector<std::shared_ptr<ClientConnection>> cnxs;
  {
    MutexLock lock(mu_);
    for (auto& [k, slot] : pool_) {
      if (slot.cnx) cnxs.push_back(slot.cnx);
    }
  }
  for (auto& c : cnxs) c->close();
  cnxs.clear();
  // Let every loop run what was queued (connection close callbacks, cancelled timers) twice over,
  // so no queued handler keeps an object alive past the loops.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < loops_->size(); ++i) {
      std::promise<void> barrier;
      auto f = barrier.get_future();
      loops_->at(i).execute([&barrier] { barrier.set_value(); });
      f.wait_for(std::chrono::seconds(5));
    }
  }
  loops_->stop();
  {
    MutexLock lock(mu_);
    pool_.clear();
  }
  return result;
}

std::shared_ptr<TcClient> ClientImpl::tcClient() {
  MutexLock lock(mu_);
  if (closed_) return nullptr;
  if (!tcClient_) tcClient_ = std::make_shared<TcClient>(shared_from_this());
  return tcClient_;
}

void ClientImpl::registerProducer(const std::shared_ptr<ProducerBase>& p) {
  MutexLock lock(mu_);
  std::erase_if(producers_, [](const auto& w) { return w.expired(); });
  producers_.push_back(p);
}

void ClientImpl::registerConsumer(const std::shared_ptr<ConsumerBase>& c) {
  MutexLock lock(mu_);
  std::erase_if(consumers_, [](const auto& w) { return w.expired(); });
  consumers_.push_back(c);
}

size_t ClientImpl::connectionCount() {
  MutexLock lock(mu_);
  size_t n = 0;
  for (auto& [k, s] : pool_) n += s.cnx != nullptr;
  return n;
}

void ClientImpl::getConnection(const std::string& address, int slot, ConnectionCallback cb) {
  if (closed_) {
    cb(Status::closed("client closed"));
    return;
  }
  SlotKey key{address, slot};
  net::EventLoop& loop = loopForSlot(slot);
  bool start = false;
  std::shared_ptr<ClientConnection> ready;
  ConnectionCallback readyCb;  // cb when a connection is ready, else cb waits in the slot
  {
    MutexLock lock(mu_);
    Slot& s = pool_[key];
    if (s.cnx && !s.cnx->isClosed()) {
      ready = s.cnx;
      readyCb = std::move(cb);
    } else {
      s.cnx.reset();
      s.waiters.push_back(std::move(cb));
      if (!s.connecting) {
        s.connecting = true;
        start = true;
      }
    }
  }
  if (ready) {
    loop.dispatch([cb = std::move(readyCb), ready]() mutable { cb(std::move(ready)); });
    return;
  }
  if (start) {
    std::weak_ptr<ClientImpl> weak = weak_from_this();
    loop.execute([weak, address, slot] {
      if (auto self = weak.lock()) self->connect(address, slot);
    });
  }
}

void ClientImpl::connect(const std::string& address, int slot) {
  SlotKey key{address, slot};
  net::EventLoop& loop = loopForSlot(slot);
  auto [host, port] = splitHostPort(address);
  auto resolver = std::make_shared<tcp::resolver>(loop.context());
  auto socket = std::make_shared<tcp::socket>(loop.context());
  auto timer = std::make_shared<asio::steady_timer>(loop.context());
  std::weak_ptr<ClientImpl> weak = weak_from_this();
  timer->expires_after(config_.connectionTimeout);
  timer->async_wait([resolver, socket](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: connected or failed first
    resolver->cancel();
    boost::system::error_code ignored;
    socket->close(ignored);
  });
  resolver->async_resolve(
      host, port,
      [weak, key, resolver, socket, timer, &loop](const boost::system::error_code& ec,
                                                  const tcp::resolver::results_type& results) {
        auto self = weak.lock();
        if (!self) return;
        if (ec) {
          timer->cancel();
          self->connectDone(key, Status::ioError("cannot resolve " + key.first + ": " +
                                                 ec.message()));
          return;
        }
        asio::async_connect(
            *socket, results,
            [weak, key, socket, timer, &loop](const boost::system::error_code& ec,
                                              const tcp::endpoint&) {
              timer->cancel();
              auto self = weak.lock();
              if (!self) return;
              if (ec) {
                self->connectDone(key, Status::ioError("cannot connect to " + key.first + ": " +
                                                       ec.message()));
                return;
              }
              auto cnx = std::make_shared<ClientConnection>(
                  loop, std::move(*socket), key.first, self->config_,
                  self->tlsCtx_ ? std::make_unique<net::TlsSession>(self->tlsCtx_, true) : nullptr);
              cnx->handshake(
                  [weak, key, cnx](const Status& s) {
                    auto self = weak.lock();
                    if (!self) return;
                    if (!s.isOk()) {
                      self->connectDone(key, s);
                    } else {
                      self->connectDone(key, cnx);
                    }
                  },
                  [weak, key](ClientConnection* c) {
                    if (auto self = weak.lock()) self->connectionClosed(key, c);
                  });
            });
      });
}

void ClientImpl::connectDone(const SlotKey& key, Result<std::shared_ptr<ClientConnection>> r) {
  std::vector<ConnectionCallback> waiters;
  {
    MutexLock lock(mu_);
    Slot& s = pool_[key];
    s.connecting = false;
    waiters.swap(s.waiters);
    if (r.isOk() && !closed_) {
      s.cnx = *r;
    } else {
      pool_.erase(key);
    }
  }
  if (!r.isOk()) {
    MLOG_WARN("client: connection to {} failed: {}", key.first, r.status().toString());
  } else if (closed_) {
    (*r)->close();
    r = Status::closed("client closed");
  }
  for (auto& w : waiters) w(r);
}

void ClientImpl::connectionClosed(const SlotKey& key, ClientConnection* cnx) {
  MutexLock lock(mu_);
  auto it = pool_.find(key);
  if (it != pool_.end() && it->second.cnx.get() == cnx) pool_.erase(it);
}

void ClientImpl::lookup(const std::string& topic, int slot,
                        std::function<void(Result<std::string>)> cb) {
  lookupAt(topic, serviceAddress(), slot, false, 0, std::move(cb));
}

void ClientImpl::connectionForTopic(const std::string& topic, int slot, ConnectionCallback cb) {
  lookup(topic, slot, [this, slot, cb = std::move(cb)](Result<std::string> addr) {
    if (!addr) {
      cb(addr.status());
      return;
    }
    getConnection(*addr, slot, cb);
  });
}

void ClientImpl::lookupAt(const std::string& topic, const std::string& address, int slot,
                          bool authoritative, int redirects,
                          std::function<void(Result<std::string>)> cb) {
  if (redirects > kMaxRedirects) {
    cb(Status::notAllowed("too many lookup redirects for " + topic));
    return;
  }
  std::weak_ptr<ClientImpl> weak = weak_from_this();
  requestOn(
      address, slot,
      [topic, authoritative](uint64_t id) { return Commands::newLookup(topic, id, authoritative); },
      [weak, topic, address, slot, redirects, cb = std::move(cb)](
          const Status& s, const proto::BaseCommand& cmd) mutable {
        auto self = weak.lock();
        if (!self) return;
        if (!s.isOk()) {
          cb(s);
          return;
        }
        const auto& resp = cmd.lookuptopicresponse();
        if (resp.proxy_through_service_url()) {
          cb(self->serviceAddress());
          return;
        }
        std::string target = address;
        // Over TLS, the broker's TLS address (as pulsar-client-cpp).
        const std::string& url = self->tlsCtx_ && !resp.brokerserviceurltls().empty()
                                     ? resp.brokerserviceurltls()
                                     : resp.brokerserviceurl();
        if (!url.empty()) {
          auto a = addressOfUrl(url);
          if (!a) {
            cb(a.status());
            return;
          }
          target = *a;
        }
        if (resp.response() == proto::CommandLookupTopicResponse::Redirect) {
          self->lookupAt(topic, target, slot, resp.authoritative(), redirects + 1, std::move(cb));
          return;
        }
        cb(target);
      });
}

void ClientImpl::requestOn(const std::string& address, int slot,
                           std::function<Buffer(uint64_t requestId)> build,
                           std::function<void(const Status&, const proto::BaseCommand&)> done) {
  std::weak_ptr<ClientImpl> weak = weak_from_this();
  getConnection(address, slot,
                [weak, build = std::move(build), done = std::move(done)](auto r) mutable {
                  auto self = weak.lock();
                  if (!self) return;
                  if (!r) {
                    done(r.status(), proto::BaseCommand{});
                    return;
                  }
                  uint64_t id = self->newRequestId();
                  (*r)->sendRequest(id, build(id), std::move(done));
                });
}

void ClientImpl::getPartitionedMetadata(const std::string& topic,
                                        std::function<void(Result<int>)> cb) {
  requestOn(
      serviceAddress(), 0,
      [topic](uint64_t id) { return Commands::newPartitionedMetadata(topic, id); },
      [cb = std::move(cb)](const Status& s, const proto::BaseCommand& cmd) {
        if (!s.isOk()) {
          cb(s);
          return;
        }
        cb(static_cast<int>(cmd.partitionmetadataresponse().partitions()));
      });
}

}  // namespace magnetar::client
