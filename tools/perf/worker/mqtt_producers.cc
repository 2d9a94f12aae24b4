#include "mqtt_producers.h"

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace magnetar::perf {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// One gateway connection. Reads and `failed` run on its strand; `out`, `writing` and the
// packet ids are shared with publish() under `mu`.
struct Connection {
  explicit Connection(net::io_context& ioc) : socket(net::make_strand(ioc)) {}
  tcp::socket socket;
  std::mutex mu;
  std::string out;                             // GUARDED_BY(mu): bytes not yet handed to a write
  bool writing = false;                        // GUARDED_BY(mu)
  uint16_t lastId = 0;                         // GUARDED_BY(mu)
  std::unordered_map<uint16_t, uint32_t> ids;  // GUARDED_BY(mu): packet id -> context
  std::string inflight;                        // strand only: the bytes being written
  std::vector<uint8_t> in;                     // strand only: bytes read, not yet parsed
  std::array<uint8_t, 16384> buf{};
  bool failed = false;  // strand only
};

void appendVarInt(std::string& out, size_t n) {
  do {
    uint8_t b = n % 128;
    n /= 128;
    if (n > 0) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (n > 0);
}

void appendU16(std::string& out, size_t n) {
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
}

std::string connectPacket(const std::string& clientId) {
  std::string body;
  appendU16(body, 4);
  body += "MQTT";
  body.push_back(4);     // 3.1.1
  body.push_back(0x02);  // clean session
  appendU16(body, 0);    // keep alive off
  appendU16(body, clientId.size());
  body += clientId;
  std::string p(1, static_cast<char>(0x10));
  appendVarInt(p, body.size());
  return p + body;
}

}  // namespace

struct MqttProducers::Impl {
  explicit Impl(AckHandler h) : onAck(std::move(h)) {}

  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<Connection>> connections;  // grows in open() only
  AckHandler onAck;
  std::atomic<bool> closing{false};

  void readNext(const std::shared_ptr<Connection>& c) {
    c->socket.async_read_some(
        net::buffer(c->buf), [this, c](boost::system::error_code ec, size_t n) {
          if (ec) return fail(*c, ec.message());
          c->in.insert(c->in.end(), c->buf.begin(), c->buf.begin() + static_cast<ptrdiff_t>(n));
          if (!parse(*c)) return;
          readNext(c);
        });
  }

  // The whole packets in c.in: PUBACKs answered, PINGRESP ignored, anything else a failure.
  bool parse(Connection& c) {
    size_t at = 0;
    while (c.in.size() - at >= 2) {
      size_t len = 0, shift = 0, p = at + 1;
      for (; p < c.in.size() && p < at + 5; ++p) {
        len |= static_cast<size_t>(c.in[p] & 0x7f) << shift;
        shift += 7;
        if (!(c.in[p] & 0x80)) break;
      }
      if (p >= c.in.size() || c.in.size() - p - 1 < len) break;  // incomplete
      const uint8_t type = c.in[at] >> 4;
      const uint8_t* body = c.in.data() + p + 1;
      if (type == 4 && len >= 2) {  // PUBACK
        const uint16_t id = static_cast<uint16_t>(body[0] << 8 | body[1]);
        uint32_t context;
        {
          std::lock_guard<std::mutex> lock(c.mu);
          auto it = c.ids.find(id);
          context = it == c.ids.end() ? kNoContext : it->second;
          if (it != c.ids.end()) c.ids.erase(it);
        }
        if (context != kNoContext) onAck(context, true, {});
      } else if (type != 13) {  // not PINGRESP
        fail(c, fmt::format("unexpected MQTT packet type {}", type));
        return false;
      }
      at = p + 1 + len;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(at));
    return true;
  }

  // On the strand, with writing set.
  void writeNext(const std::shared_ptr<Connection>& c) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->inflight.clear();
      c->inflight.swap(c->out);
      if (c->inflight.empty()) {
        c->writing = false;
        return;
      }
    }
    net::async_write(c->socket, net::buffer(c->inflight),
                     [this, c](boost::system::error_code ec, size_t) {
                       if (ec) return fail(*c, ec.message());
                       writeNext(c);
                     });
  }

  void fail(Connection& c, const std::string& what) {
    if (closing.load() || c.failed) return;
    c.failed = true;
    onAck(kNoContext, false, "MQTT: " + what);
  }
};

MqttProducers::MqttProducers(int ioThreads, AckHandler onAck)
    : impl_(std::make_unique<Impl>(std::move(onAck))) {
  for (int i = 0; i < ioThreads; ++i) {
    impl_->threads.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), fmt::format("gw-mqtt-{}", i).c_str());
      impl_->ioc.run();
    });
  }
}

MqttProducers::~MqttProducers() { close(); }

Result<size_t> MqttProducers::open(const std::string& mqttUrl, const std::string& clientId) {
  std::string_view rest = mqttUrl;
  constexpr std::string_view kScheme = "mqtt://";
  if (rest.substr(0, kScheme.size()) != kScheme) {
    return Status::invalidArgument("mqttUrl must be mqtt://host:port: " + mqttUrl);
  }
  rest.remove_prefix(kScheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return Status::invalidArgument("no port: " + mqttUrl);
  boost::system::error_code ec;
  const auto address = net::ip::make_address(std::string(rest.substr(0, colon)), ec);
  const int port = std::atoi(std::string(rest.substr(colon + 1)).c_str());
  if (ec || port <= 0 || port > 65535) {
    return Status::invalidArgument("mqttUrl needs a numeric host and port: " + mqttUrl);
  }
  auto c = std::make_shared<Connection>(impl_->ioc);
  c->socket.connect(tcp::endpoint(address, static_cast<uint16_t>(port)), ec);
  if (!ec) c->socket.set_option(tcp::no_delay(true), ec);
  if (!ec) net::write(c->socket, net::buffer(connectPacket(clientId)), ec);
  std::array<uint8_t, 4> connack{};
  if (!ec) net::read(c->socket, net::buffer(connack), ec);
  if (ec) return Status::ioError(fmt::format("MQTT {} ({}): {}", mqttUrl, clientId, ec.message()));
  if (connack[0] != 0x20 || connack[1] != 2 || connack[3] != 0) {
    return Status::ioError(fmt::format("MQTT {} ({}): CONNACK {:02x} {:02x} {:02x} {:02x}", mqttUrl,
                                       clientId, connack[0], connack[1], connack[2], connack[3]));
  }
  impl_->connections.push_back(c);
  net::post(c->socket.get_executor(), [impl = impl_.get(), c] { impl->readNext(c); });
  return impl_->connections.size() - 1;
}

void MqttProducers::publish(size_t connection, std::string_view topic, std::string_view payload,
                            uint32_t context) {
  const std::shared_ptr<Connection>& c = impl_->connections[connection];
  bool start;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    uint16_t id = c->lastId;
    do {
      id = static_cast<uint16_t>(id + 1);
    } while (id == 0 || c->ids.count(id));
    c->lastId = id;
    c->ids[id] = context;
    std::string& out = c->out;
    out.push_back(static_cast<char>(0x32));  // PUBLISH, QoS 1
    appendVarInt(out, 2 + topic.size() + 2 + payload.size());
    appendU16(out, topic.size());
    out.append(topic);
    appendU16(out, id);
    out.append(payload);
    start = !c->writing;
    c->writing = true;
  }
  if (start) net::post(c->socket.get_executor(), [impl = impl_.get(), c] { impl->writeNext(c); });
}

void MqttProducers::close() {
  if (!impl_ || impl_->closing.exchange(true)) return;
  for (auto& c : impl_->connections) {
    net::post(c->socket.get_executor(), [c] {
      boost::system::error_code ignored;
      c->socket.shutdown(tcp::socket::shutdown_both, ignored);
      c->socket.close(ignored);
    });
  }
  impl_->work.reset();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace magnetar::perf
