// MqttService: the MQTT listeners (mqttListeners) of one broker. Accepted connections are pinned
// to the broker's own `pulsar-io` loops (BrokerService::ioLoops()), round-robin, as binary-protocol
// connections are; with mqttNumIOThreads > 0 to a pool of MQTT's own instead (README.md says
// why the default shares).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "mqtt/codec.h"

namespace magnetar::broker {
class BrokerService;
}
namespace magnetar::net {
class EventLoopGroup;
class TcpServer;
class TlsContext;
}  // namespace magnetar::net

namespace magnetar::mqtt {

class MqttConnection;
class MqttState;

// The settings of the MQTT listeners, read from the broker's configuration (src/app).
struct MqttOptions {
  // mqttListeners: "mqtt://host:port" and "mqtt+ssl://host:port" entries (port 0 binds a free
  // port). Empty: no MQTT.
  std::vector<std::string> listeners;
  // The broker's TLS context (tlsCertificateFilePath, tlsKeyFilePath, tlsTrustCertsFilePath,
  // tlsRequireTrustedClientCertOnConnect, ...), shared with brokerServicePortTls; needed by
  // mqtt+ssl listeners, null without one.
  std::shared_ptr<net::TlsContext> tlsContext;
  // mqttMaxConnections: MQTT sessions open at once; the next CONNECT is refused (MQTT 5 CONNACK
  // 0x97 Quota exceeded, 3.1.1 0x03 Server unavailable). 0: no limit.
  int maxConnections = 0;
  // MoP's defaultTenant, defaultNamespace, defaultTopicDomain: where an MQTT topic name lands.
  std::string defaultTenant = "public";
  std::string defaultNamespace = "default";
  std::string defaultTopicDomain = "persistent";
  // MoP's maxFrameSize: the largest MQTT packet accepted, in bytes (MQTT 5 CONNACK's Maximum
  // Packet Size); a larger one disconnects with 0x95.
  size_t maxPacketSize = 4 * 1024 * 1024;
  // MoP's receiveMaximum: QoS 1 PUBLISHes a client may have unacknowledged (MQTT 5 CONNACK's
  // Receive Maximum); a connection over it stops being read. Also the delivery window of a
  // 3.1.1 client, whose CONNECT cannot say.
  uint16_t receiveMaximum = 1000;
  // mqttTopicAliasMaximum: the MQTT 5 Topic Alias Maximum told in CONNACK (0: no aliases).
  uint16_t topicAliasMaximum = 10;
  // Seconds a connection may stay without a CONNECT (Magnetar).
  int connectTimeoutSeconds = 10;
  // mqttNumIOThreads > 0: the started loops (`pulsar-ph-mqtt-<i>`, makeMqttLoops()) the
  // connections live on. Null: the broker's pulsar-io loops. The owner keeps the group alive
  // and running until after the BrokerService is destroyed (topics' tasks may still hold a
  // closed connection, whose socket belongs to its loop).
  std::shared_ptr<net::EventLoopGroup> ioLoops;
};

// The started loops of mqttNumIOThreads: `count` loops named `pulsar-ph-mqtt-<i>` (Pulsar's
// thread name for the protocol handler "mqtt" on a separate pool). Null when count <= 0.
// Thread: main.
std::shared_ptr<net::EventLoopGroup> makeMqttLoops(int count);

// Parses mqttListeners ("mqtt://0.0.0.0:1883,mqtt+ssl://127.0.0.1:8883", MoP's form): host,
// port and TLS of each. Errors: kInvalidArgument for another scheme, a missing or bad port.
struct ListenAddress {
  std::string host;
  int port = 0;
  bool tls = false;  // mqtt+ssl://
};
Result<std::vector<ListenAddress>> parseMqttListeners(const std::vector<std::string>& listeners);

// Thread: start/stop from main; the client-id registry from any loop (under mu_).
class MqttService {
 public:
  // `service` outlives this; its loops must be started before start().
  MqttService(broker::BrokerService& service, MqttOptions options);
  ~MqttService();
  MqttService(const MqttService&) = delete;
  MqttService& operator=(const MqttService&) = delete;

  // Loads the stored MQTT state (sessions, retained messages), then binds every listener.
  // Errors: kInvalidArgument (bad mqttListeners, an mqtt+ssl listener without
  // options().tlsContext), kIoError (bind), the record store's.
  Status start();
  // Stops accepting and closes every connection (no will is published: the broker goes, not
  // the clients; persistent sessions stay stored).
  void stop();
  // The bound port of each listener, in mqttListeners order, and whether it is mqtt+ssl.
  std::vector<int> boundPorts() const;
  std::vector<bool> boundTls() const;
  // The first plaintext / first mqtt+ssl listener's bound port, 0 when none (the ports file's
  // mqttPort / mqttPortTls).
  int firstPort(bool tls) const;

  broker::BrokerService& broker() { return service_; }
  // The loops the connections live on: options().ioLoops, else the broker's pulsar-io loops.
  net::EventLoopGroup& connectionLoops();
  const MqttOptions& options() const { return options_; }

  // Session registry (MQTT 3.1.1 3.1.4-2: a second connection with the same client id takes the
  // session over, the first is disconnected). Registers `c` under `clientId` and returns the
  // connection it replaces (null when none). Thread: any.
  std::shared_ptr<MqttConnection> registerClient(const std::string& clientId,
                                                 const std::shared_ptr<MqttConnection>& c)
      EXCLUDES(mu_);
  // Forgets `c` under `clientId` unless another connection took the id since; false then.
  // Thread: any.
  bool unregisterClient(const std::string& clientId, const MqttConnection* c) EXCLUDES(mu_);

  // Persistent sessions, retained messages, delayed wills (mqtt_state.h). Thread: any.
  MqttState& state() { return *state_; }
  // Connections open now (any thread).
  size_t connectionCount() const EXCLUDES(mu_);

  // mqttMaxConnections: takes a session slot for a connection whose CONNECT is being accepted;
  // false (nothing taken) when maxConnections are open. releaseSession() gives the slot back
  // when that connection closes. Thread: any.
  bool admitSession();
  void releaseSession();

 private:
  broker::BrokerService& service_;
  MqttOptions options_;
  std::vector<std::unique_ptr<net::TcpServer>> servers_;
  std::vector<bool> serverTls_;  // per servers_ entry
  std::atomic<int64_t> sessionsOpen_{0};
  std::unique_ptr<MqttState> state_;
  mutable Mutex mu_;
  std::map<std::string, std::weak_ptr<MqttConnection>> clients_ GUARDED_BY(mu_);
  std::vector<std::weak_ptr<MqttConnection>> all_ GUARDED_BY(mu_);
};

}  // namespace magnetar::mqtt
