// MqttConnection: one MQTT client's TCP connection, pinned to one `pulsar-io` loop for its life.
// It publishes into Pulsar topics as a producer of each topic it writes to, and subscribes as a
// consumer of a Pulsar subscription named by its client id (MoP's model), reaching the topics
// through the same ProducerSink/ConsumerSink interfaces a binary-protocol connection implements.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/common/topic_name.h"
#include "broker/topic/consumer.h"
#include "broker/topic/topic.h"
#include "mqtt/codec.h"
#include "mqtt/state_format.h"
#include "net/connection.h"
#include "storage/managed_ledger.h"

namespace magnetar::mqtt {

class MqttService;
class MqttSink;

// Thread: every member runs on loop() unless noted; the topics reach it through MqttSink, which
// hands over to the loop.
class MqttConnection final : public net::Connection {
 public:
  // tls: the mqtt+ssl listener's session (null on mqtt://).
  MqttConnection(MqttService& service, net::EventLoop& loop, boost::asio::ip::tcp::socket socket,
                 std::unique_ptr<net::TlsSession> tls = nullptr);
  ~MqttConnection() override;

  // Arms the CONNECT timeout and starts reading. Any thread.
  void begin();
  // Sends DISCONNECT with `reasonCode` (MQTT 5 only; 3.1.1 has none) and closes, so the client is
  // told why (session taken over, keep alive, malformed packet). Any thread (hops to the loop).
  void disconnect(uint8_t reasonCode, const std::string& why);
  const std::string& clientId() const { return clientId_; }

  // ---- From MqttSink, on the loop ------------------------------------------------------------
  // Pulsar frames the topics produced for this connection: SEND_RECEIPT/SEND_ERROR for its
  // producers, MESSAGE for its consumers.
  void onBrokerFrames(const std::string& frames);
  void onPublishCompleted(uint32_t n);
  void onProducerClosedByBroker(uint64_t producerId);
  void onConsumerClosedByBroker(uint64_t consumerId);

 protected:
  bool onData(const uint8_t* data, size_t len) override;
  void onClosed() override;

 private:
  // A Pulsar producer on one topic (created at the first PUBLISH to it).
  struct ProducerState {
    std::shared_ptr<broker::Producer> producer;  // set once the topic admitted it
    std::shared_ptr<broker::PersistentTopic> topic;
    std::vector<Publish> waiting;  // PUBLISHes that came while it was being created
    uint64_t nextSequenceId = 0;
  };
  // A PUBLISH handed to a topic and not answered yet, by sequence id.
  struct InFlight {
    uint16_t packetId = 0;      // 0 for QoS 0
    uint8_t waits = 1;          // the receipt, and the retained message's store write (retain 1)
    uint8_t qos = 0;            // 2: PUBREC (after the packet id is in the session) not PUBACK
    std::string error;          // the receipt's, when it failed
    std::string retainedError;  // the retained write's, when it failed
  };
  // One Pulsar subscription this connection consumes: named clientId_, or a shared
  // subscription's group ($share/{group}/{filter}, MoP's mapping).
  struct ConsumerState {
    std::shared_ptr<broker::Consumer> consumer;
    std::shared_ptr<broker::PersistentTopic> topic;
    std::string mqttTopic;          // the topic name PUBLISHes to the client carry
    std::set<std::string> filters;  // the filters that matched it
    uint8_t qos = 0;                // granted (max over the filters), 0..2
    std::string subscription;       // the Pulsar subscription's name
  };
  // A QoS 1/2 PUBLISH sent to the client and not completed yet, by packet id.
  struct Outstanding {
    uint64_t consumerId = 0;
    storage::Position position;
    bool released = false;  // QoS 2: PUBREC came, PUBREL sent, waiting for PUBCOMP
  };
  // An entry delivered with QoS 1 messages not all acknowledged yet (a batch holds several).
  struct EntryKey {
    uint64_t consumerId;
    storage::Position position;
    bool operator<(const EntryKey& o) const {
      return consumerId != o.consumerId ? consumerId < o.consumerId : position < o.position;
    }
  };

  void handlePacket(Packet&& p);
  void handleConnect(Connect&& c);
  bool connectAllowed(const Connect& c);
  // The broker's authentication providers on CONNECT's credentials; false: CONNACK refused sent.
  bool authenticate(const Connect& c);
  // The broker's authorization of role_ on a topic (produce, or consume on `subscription`, by
  // default the one named by the client id).
  bool authorized(const broker::TopicName& topic, bool produce,
                  const std::string& subscription = "");
  // Admission (mqtt_admission.cc): admit() takes a mqttMaxConnections slot, else sends the
  // refusing CONNACK and answers false; releaseAdmission() gives it back (on close).
  bool admit();
  void releaseAdmission();
  // The TLS client certificate's role (AuthenticationProviderTls) when that provider is on and
  // the client sent a certificate over mqtt+ssl; nullopt when it does not apply.
  std::optional<Result<std::string>> certificateRole();
  void sendConnack(bool sessionPresent);
  // The will's topic maps to a Pulsar topic this role may produce to; false: CONNACK refused.
  bool willAllowed(const Connect& c);
  // Restores or forgets the stored session at CONNECT; true when one is present.
  bool takeSession(const Connect& c, std::vector<SubscriptionRequest>* restored);
  // At the close: the will (unless a DISCONNECT cleared it or the broker stops) and the session.
  void endSession(bool current);
  void handlePing();
  // A persistent session's filters go to the service at each change, so a client that comes
  // back before this connection has seen its close still finds them.
  void saveSession();
  void handleDisconnect(const Disconnect& d);
  void armTimer(std::chrono::seconds after);
  void onTimer();
  void send(const Packet& p);
  void fail(const Status& st);  // a decode or protocol error: reason to the client, close

  // Publishing (mqtt_publish.cc).
  void handlePublish(Publish&& p);
  void publishTo(ProducerState& ps, Publish&& p);
  void createProducer(const std::string& pulsarTopic, int attempt);
  void producerReady(const std::string& pulsarTopic, const Status& st,
                     const std::shared_ptr<broker::PersistentTopic>& topic,
                     const std::shared_ptr<broker::Producer>& producer, int attempt,
                     int64_t nextSequenceId = 0);
  void onReceipt(uint64_t producerId, uint64_t sequenceId, bool ok, const std::string& error);
  // One of a PUBLISH's waits is over (the receipt, the retained write): PUBACK after the last.
  void completeInFlight(uint64_t producerId, uint64_t sequenceId, bool receipt, const Status& st);
  void answerInFlight(const InFlight& f);
  // QoS 2 (MQTT 4.3.3), receiver side: a stored PUBLISH's packet id joins the session (written
  // to its record for a persistent session) before its PUBREC; PUBREL releases it (PUBCOMP).
  void recordQos2(const PubAck& rec);
  // At the close: QoS 2 PUBLISHes still waiting for their producer are dropped (never
  // PUBRECed, so the client resends them; stored now they would be stored twice).
  void dropWaitingQos2();
  void handlePubrel(const PubAck& a);
  // Sender side: PUBREC acknowledges the entry and is answered PUBREL; PUBCOMP frees the id.
  void handlePubrec(const PubAck& a);
  void handlePubcomp(const PubAck& a);
  // The StoredSession of this connection's state (filters, expiry, QoS 2 ids).
  StoredSession sessionRecord() const;
  void updateReading();
  // Resumes after a pause: the packets reader_ kept are handled first; the socket is read again
  // only once they are (a pause that ends again leaves reading paused), so reader_ holds at most
  // one read's worth beyond a partial packet.
  void resumeAfterBuffered();
  void flushSends();
  // PUBLISHes handled and not done: waiting for their producer, or handed to a topic and not
  // answered yet. After a DISCONNECT the close waits for none to be left (or kDrainTimeout).
  bool publishesLeft() const;
  // After DISCONNECT: closes once publishesLeft() is false.
  void maybeFinishDisconnect();
  // The bounded wait for the PUBLISHes received before a DISCONNECT or a close (drainDeadline_).
  void armDrainDeadline();
  void onDrainDeadline();

  // Subscribing and delivery (mqtt_subscribe.cc).
  void handleSubscribe(Subscribe&& s);
  void handleUnsubscribe(Unsubscribe&& u);
  // `initial`: where a Pulsar subscription this creates starts: Latest for a SUBSCRIBE; Earliest
  // for a restored session, whose filters' topics without a subscription yet were created while
  // the client was away (MoP subscribes a topic created after the filter from its start).
  void subscribeFilters(const std::vector<SubscriptionRequest>& subs,
                        std::function<void(std::vector<uint8_t>)> done,
                        storage::InitialPosition initial = storage::InitialPosition::kLatest);
  // `subscription`: the Pulsar subscription (the client id, or a shared subscription's group).
  void subscribeTopic(const std::string& pulsarTopic, const std::string& mqttTopic,
                      const SubscriptionRequest& req, const std::string& subscription,
                      storage::InitialPosition initial, const std::function<void(uint8_t)>& done);
  void watchNamespace();
  void onTopicCreated(const std::string& pulsarTopic);
  void onMessage(uint64_t consumerId, storage::Position pos, const Buffer& entry);
  void handlePuback(const PubAck& a);
  // A delivered message is acknowledged by the client (PUBACK, PUBREC): its entry is acked
  // once every message of the entry is.
  void deliveryAcked(const Outstanding& o);
  // Outbound topic aliases (MQTT 5 3.3.2.3.4): binds p's topic to an alias while fewer than
  // the client's Topic Alias Maximum are bound and sends the bound alias with an empty topic
  // after that. Returns the alias newly bound (0: none), for send() to undo if not sent.
  uint16_t applyOutboundAlias(Publish* p);
  // The retained messages `req` matches, with the retain flag (at most `granted` QoS).
  void sendRetained(const SubscriptionRequest& req, uint8_t granted);
  void sendQueued();
  void ackEntry(uint64_t consumerId, storage::Position pos, uint32_t messages);
  void dropConsumers(bool deleteSubscriptions);
  uint16_t nextPacketId();

  MqttService& service_;
  std::shared_ptr<MqttSink> sink_;
  PacketReader reader_;
  bool connected_ = false;
  bool closing_ = false;
  ProtocolVersion version_ = ProtocolVersion::kV311;
  std::string clientId_;
  bool assignedId_ = false;  // the client sent an empty id (MQTT 5: told in the CONNACK)
  std::string role_;         // the authenticated role ("" without authentication)
  bool persistentSession_ = false;
  uint32_t sessionExpiry_ = 0;  // seconds (kSessionNeverExpires: never), persistent sessions
  std::optional<Will> will_;    // published at a close without DISCONNECT (0x04 keeps it)
  bool willCleared_ = false;
  std::map<uint16_t, std::string> topicAliases_;     // MQTT 5, client -> broker
  uint16_t clientTopicAliasMaximum_ = 0;             // MQTT 5 CONNECT: aliases the client takes
  std::map<std::string, uint16_t> outboundAliases_;  // broker -> client, topic -> alias
  // QoS 2 packet ids stored and PUBRECed, waiting for PUBREL (kept in the session record).
  std::set<uint16_t> qos2Received_;
  // QoS 2 packet ids handed to a topic and not PUBRECed yet (a duplicate meanwhile waits).
  std::set<uint16_t> qos2InFlight_;
  std::chrono::seconds keepAlive_{0};
  std::chrono::steady_clock::time_point lastPacket_;
  boost::asio::steady_timer timer_;
  // The client's limits (MQTT 5 CONNECT): messages it takes unacknowledged, largest packet.
  uint16_t clientReceiveMaximum_ = 0;
  size_t clientMaxPacketSize_ = SIZE_MAX;

  // Publishing: producers by Pulsar topic, producer ids to topics, PUBLISHes in flight.
  std::map<std::string, ProducerState> producers_;
  std::map<uint64_t, std::string> producerTopics_;
  std::map<uint64_t, std::map<uint64_t, InFlight>> inFlight_;  // producer id -> seq -> packet
  std::vector<std::pair<std::shared_ptr<broker::PersistentTopic>, std::vector<broker::PendingSend>>>
      sendBatch_;
  size_t pendingPublishes_ = 0;  // handed to topics, not yet answered
  size_t pendingQos1_ = 0;       // of those, QoS 1 (not PUBACKed yet)
  size_t waitingPublishes_ = 0;  // in ProducerState::waiting (their producer being made)
  bool readPausedForPublishes_ = false;
  // DISCONNECT handled: reading stopped, the close waits for the PUBLISHes before it.
  bool disconnecting_ = false;
  std::optional<std::chrono::steady_clock::time_point> drainDeadline_;
  uint64_t nextProducerId_ = 0;

  // Subscribing.
  std::map<uint64_t, ConsumerState> consumers_;
  std::map<std::string, uint64_t> consumerByTopic_;     // subscription \n topic -> consumer id
  std::map<std::string, SubscriptionRequest> filters_;  // filter -> request
  std::map<uint16_t, Outstanding> outstanding_;         // packet id -> delivered message
  // QoS 1 messages waiting for room in the in-flight window (sendQueued).
  struct Queued {
    Publish publish;
    uint64_t consumerId = 0;
    storage::Position position;
  };
  std::deque<Queued> queued_;
  // Queued::consumerId of a retained message sent at SUBSCRIBE (no Pulsar entry to acknowledge).
  static constexpr uint64_t kRetainedDelivery = UINT64_MAX;
  std::map<EntryKey, std::pair<uint32_t, uint32_t>> entryLeft_;  // messages left, in entry
  uint16_t lastPacketId_ = 0;
  uint64_t nextConsumerId_ = 0;
  uint64_t topicWatch_ = 0;  // TopicEventListeners id for wildcard filters, 0: none
  bool admitted_ = false;    // holds a mqttMaxConnections slot (admit())
};

}  // namespace magnetar::mqtt
