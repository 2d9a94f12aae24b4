#include "mqtt/mqtt_service.h"

#include <charconv>

#include "base/logging.h"
#include "broker/service/broker_service.h"
#include "mqtt/mqtt_connection.h"
#include "mqtt/mqtt_state.h"
#include "mqtt/mqtt_stats.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "net/tls.h"

namespace magnetar::mqtt {

Result<std::vector<ListenAddress>> parseMqttListeners(const std::vector<std::string>& listeners) {
  std::vector<ListenAddress> out;
  for (const std::string& l : listeners) {
    if (l.empty()) continue;
    constexpr std::string_view kScheme = "mqtt://";
    constexpr std::string_view kTlsScheme = "mqtt+ssl://";
    const bool tls = l.rfind(kTlsScheme, 0) == 0;
    if (!tls && l.rfind(kScheme, 0) != 0) {
      return Status::invalidArgument("mqttListeners: '" + l +
                                     "' is not mqtt://host:port or mqtt+ssl://host:port");
    }
    std::string_view rest = std::string_view(l).substr(tls ? kTlsScheme.size() : kScheme.size());
    const size_t colon = rest.rfind(':');
    int port = -1;
    if (colon != std::string_view::npos) {
      auto [p, ec] = std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port);
      if (ec != std::errc() || p != rest.data() + rest.size()) port = -1;
    }
    if (colon == std::string_view::npos || colon == 0 || port < 0 || port > 65535) {
      return Status::invalidArgument("mqttListeners: '" + l + "' has no valid host:port");
    }
    std::string host(rest.substr(0, colon));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    out.push_back(ListenAddress{std::move(host), port, tls});
  }
  return out;
}

std::shared_ptr<net::EventLoopGroup> makeMqttLoops(int count) {
  if (count <= 0) return nullptr;
  auto loops = std::make_shared<net::EventLoopGroup>("pulsar-ph-mqtt", count);
  loops->start();
  return loops;
}

MqttService::MqttService(broker::BrokerService& service, MqttOptions options)
    : service_(service), options_(std::move(options)), state_(std::make_unique<MqttState>(*this)) {}

MqttService::~MqttService() { stop(); }

Status MqttService::start() {
  auto addresses = parseMqttListeners(options_.listeners);
  if (!addresses.isOk()) return addresses.status();
  if (Status s = state_->start(); !s.isOk()) return s;
  for (const ListenAddress& a : *addresses) {
    if (a.tls && !options_.tlsContext) {
      return Status::invalidArgument(
          "mqttListeners: an mqtt+ssl listener needs tlsCertificateFilePath and tlsKeyFilePath");
    }
    // The broker's TLS context: the certificates current at accept time (refreshed as for
    // brokerServicePortTls), the same client-certificate rules.
    std::shared_ptr<net::TlsContext> tls = a.tls ? options_.tlsContext : nullptr;
    auto server = std::make_unique<net::TcpServer>(
        connectionLoops(), [this, tls](net::EventLoop& loop, boost::asio::ip::tcp::socket socket) {
          auto session = tls ? std::make_unique<net::TlsSession>(tls->current()) : nullptr;
          auto c =
              std::make_shared<MqttConnection>(*this, loop, std::move(socket), std::move(session));
          {
            MutexLock lock(mu_);
            std::erase_if(all_, [](const auto& w) { return w.expired(); });
            all_.push_back(c);
          }
          c->begin();
          return std::static_pointer_cast<net::Connection>(c);
        });
    if (Status s = server->start(a.host, a.port); !s.isOk()) return s;
    MLOG_INFO("MQTT listening on {}{}:{} ({} loops: {})", a.tls ? "mqtt+ssl://" : "mqtt://", a.host,
              server->boundPort(), options_.ioLoops ? "pulsar-ph-mqtt" : "pulsar-io",
              connectionLoops().size());
    servers_.push_back(std::move(server));
    serverTls_.push_back(a.tls);
  }
  return Status::ok();
}

void MqttService::stop() {
  state_->stop();
  for (auto& s : servers_) s->stop();
  std::vector<std::shared_ptr<MqttConnection>> open;
  {
    MutexLock lock(mu_);
    for (auto& w : all_) {
      if (auto c = w.lock()) open.push_back(std::move(c));
    }
    all_.clear();
  }
  for (auto& c : open) c->close();
  servers_.clear();
  serverTls_.clear();
}

net::EventLoopGroup& MqttService::connectionLoops() {
  return options_.ioLoops ? *options_.ioLoops : service_.ioLoops();
}

std::vector<int> MqttService::boundPorts() const {
  std::vector<int> ports;
  for (const auto& s : servers_) ports.push_back(s->boundPort());
  return ports;
}

std::vector<bool> MqttService::boundTls() const { return serverTls_; }

int MqttService::firstPort(bool tls) const {
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (serverTls_[i] == tls) return servers_[i]->boundPort();
  }
  return 0;
}

bool MqttService::admitSession() {
  const int64_t max = options_.maxConnections;
  int64_t open = sessionsOpen_.load();
  do {
    if (max > 0 && open >= max) return false;
  } while (!sessionsOpen_.compare_exchange_weak(open, open + 1));
  MqttStats::clientConnected();
  return true;
}

void MqttService::releaseSession() {
  sessionsOpen_.fetch_sub(1);
  MqttStats::clientClosed();
}

std::shared_ptr<MqttConnection> MqttService::registerClient(
    const std::string& clientId, const std::shared_ptr<MqttConnection>& c) {
  MutexLock lock(mu_);
  auto& slot = clients_[clientId];
  auto old = slot.lock();
  slot = c;
  return old == c ? nullptr : old;
}

bool MqttService::unregisterClient(const std::string& clientId, const MqttConnection* c) {
  MutexLock lock(mu_);
  auto it = clients_.find(clientId);
  if (it == clients_.end()) return true;
  auto cur = it->second.lock();
  if (cur && cur.get() != c) return false;
  clients_.erase(it);
  return true;
}

size_t MqttService::connectionCount() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& w : all_) n += w.expired() ? 0 : 1;
  return n;
}

}  // namespace magnetar::mqtt
