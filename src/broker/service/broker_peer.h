// Broker-to-broker connections for the transaction coordinator's fan-out (what Pulsar's
// TransactionBufferClientImpl does through the broker's own PulsarClient): a PeerConnection
// speaks the client side of the binary protocol (CONNECT, LOOKUP, END_TXN_ON_PARTITION,
// END_TXN_ON_SUBSCRIPTION, PING/PONG) to another broker; a PeerPool keeps one per broker URL.
//
// Why not src/client: ARCHITECTURE.md puts the client library beside the broker (client ->
// net/protocol, used by tools and tests), not below it, and src/broker links no client code.
// The coordinator needs four request/response commands, so this is a minimal connection on the
// same net::Connection and protocol builders the client uses. TLS (pulsar+ssl URLs) and CONNECT's
// credentials come from the brokerClient* keys (broker_client_settings.h).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "broker/service/broker_client_settings.h"
#include "net/connection.h"
#include "net/event_loop.h"
#include "protocol/frame.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {

class PeerConnection final : public net::Connection {
 public:
  // The answer frame to a request (the command's response or an ERROR with its request id).
  using Reply = std::function<void(Result<proto::BaseCommand>)>;
  // tls: the session of a pulsar+ssl URL (null: plaintext).
  PeerConnection(net::EventLoop& loop, boost::asio::ip::tcp::socket socket, std::string url,
                 std::unique_ptr<net::TlsSession> tls = nullptr);

  // Starts reading and sends CONNECT with `credentials` (and proxy_to_broker_url when
  // `proxyTo`, "host:port", is set: the URL is a Pulsar proxy that forwards to that broker);
  // done(ok) on the loop when CONNECTED arrives, done(error) when the connection closes first,
  // the broker answers ERROR (kNotAllowed with its text, e.g. an authentication failure) or
  // nothing came within `timeout`.
  void handshake(std::chrono::milliseconds timeout, PeerCredentials credentials,
                 std::function<void(Status)> done, const std::string& proxyTo = {});
  // Sends build(requestId); reply runs once on the loop with the answer, or with kTimeout after
  // `timeout`, or kIoError when the connection closes. Thread: any.
  void request(const std::function<Buffer(uint64_t)>& build, std::chrono::milliseconds timeout,
               Reply reply);
  const std::string& url() const { return url_; }
  // A producer this connection carries (geo-replication, src/broker/replication): the frames the
  // broker sends for it unasked (SEND_RECEIPT, SEND_ERROR, CLOSE_PRODUCER) go to `handler`, on
  // the loop; handler(nullptr) once when the connection closed. Returns its new producer id
  // (for PRODUCER and SEND). Thread: any.
  using ProducerHandler = std::function<void(const proto::BaseCommand*)>;
  uint64_t addProducer(ProducerHandler handler);
  // Forgets the handler (it is not called again once this returns on the loop). Thread: any.
  void removeProducer(uint64_t producerId);
  // True once CONNECTED arrived and until the connection closed. Thread: any.
  bool ready() const { return ready_.load(); }

 protected:
  bool onData(const uint8_t* data, size_t len) override;
  void onClosed() override;

 private:
  Status onFrame(const proto::BaseCommand& cmd);
  // Removes and returns the reply of requestId (null when answered or timed out already).
  Reply take(uint64_t requestId);

  const std::string url_;
  protocol::FrameDecoder decoder_;
  std::atomic<bool> ready_{false};
  std::function<void(Status)> connected_;  // loop only: the handshake's callback until answered
  Mutex mu_;
  uint64_t nextRequestId_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Reply> pending_ GUARDED_BY(mu_);
  uint64_t nextProducerId_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, ProducerHandler> producers_ GUARDED_BY(mu_);
  ProducerHandler producerHandler(uint64_t producerId);
};

// One connection per broker URL (pulsar://host:port, or pulsar+ssl://host:port over TLS with the
// settings' context), opened on first use and again after it closed. Thread: any.
class PeerPool {
 public:
  using ConnectionCallback = std::function<void(Result<std::shared_ptr<PeerConnection>>)>;
  // Connections live on the loops of `loops` (the broker's pulsar-io group), which outlive the
  // pool. connectTimeout bounds the TCP connect plus the handshake (TLS and CONNECT).
  PeerPool(net::EventLoopGroup& loops, std::chrono::milliseconds connectTimeout,
           std::shared_ptr<const BrokerClientSettings> settings);
  ~PeerPool();
  // cb(connection) once it is ready, or cb(kIoError/kTimeout/kNotAllowed; kInvalidArgument for a
  // pulsar+ssl URL without brokerClientTlsEnabled); on any thread.
  void get(const std::string& url, ConnectionCallback cb) { get(url, {}, std::move(cb)); }
  // The same through the Pulsar proxy at `url` to the broker `proxyTo` ("host:port", CONNECT's
  // proxy_to_broker_url, as Pulsar's client for a lookup answered proxy_through_service_url);
  // proxyTo empty: the plain get above. One connection per (url, proxyTo).
  void get(const std::string& url, const std::string& proxyTo, ConnectionCallback cb);
  // Closes every connection (broker stop).
  void closeAll();

 private:
  // url: the pool's key, the broker URL or "URL PROXY_TO" (through a proxy).
  void connect(const std::string& url);
  // After the TCP connect: the TLS session (pulsar+ssl) and CONNECT with the credentials.
  void startSession(const std::string& url, const std::string& host, net::EventLoop& loop,
                    boost::asio::ip::tcp::socket socket);
  void connected(const std::string& url, Result<std::shared_ptr<PeerConnection>> r);

  net::EventLoopGroup& loops_;
  const std::chrono::milliseconds connectTimeout_;
  const std::shared_ptr<const BrokerClientSettings> settings_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<PeerConnection>> ready_ GUARDED_BY(mu_);
  std::map<std::string, std::vector<ConnectionCallback>> waiting_ GUARDED_BY(mu_);
};

}  // namespace magnetar::broker
