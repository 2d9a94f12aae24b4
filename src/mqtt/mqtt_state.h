// MqttState: what MQTT keeps beyond a connection, for one broker: persistent sessions (their
// filters and expiry), retained messages, and wills waiting for their delay. Sessions and
// retained messages live in the broker's record store (BrokerService::recordStore: standalone's
// persistent local store, the configuration store in cluster mode; docs/mqtt-format.md), with a
// copy in memory that is loaded at start; a will waiting for its delay is kept in its session's
// record, so it is published after a broker restart too.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "mqtt/codec.h"
#include "mqtt/state_format.h"

namespace magnetar::net {
class EventLoop;
class Executor;
}  // namespace magnetar::net
namespace magnetar::mqtt {

class MqttService;

// Thread: any unless noted; the maps are under mu_, store callbacks run on the caller's executor.
class MqttState {
 public:
  explicit MqttState(MqttService& service);
  ~MqttState();

  // Reads the stored sessions and retained messages (blocks, at most 30 s), starts the
  // one-second sweep (session expiry, delayed wills) on one pulsar-io loop and watches the
  // default namespace for new topics (onTopicCreated). Thread: main.
  // Errors: the store's (a record that does not decode is logged and skipped).
  Status start();
  // Stops the sweep; connections closing from now on publish no will (the broker is stopping,
  // not the client going). Thread: main.
  void stop();
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // ---- Sessions ----------------------------------------------------------------------------
  // The stored session of `clientId`, if any.
  std::optional<StoredSession> session(const std::string& clientId) const EXCLUDES(mu_);
  // Stores (replaces) the session; the write is asynchronous (logged when it fails). `done`
  // (optional) runs on `ex` once the store has it, with the store's status.
  void saveSession(const std::string& clientId, StoredSession s, net::Executor* ex = nullptr,
                   const std::function<void(Status)>& done = nullptr) EXCLUDES(mu_);
  // A QoS 2 PUBLISH of `clientId`'s ended connection was stored after its close: its packet id
  // goes into the stored session (written), so a resend on the next connection is answered
  // without a second copy. No stored session (clean, or expiry 0): nothing. A connection that
  // took the session over before this runs has loaded the record already (documented gap).
  void addQos2Received(const std::string& clientId, uint16_t packetId) EXCLUDES(mu_);
  // The session's connection ended now: its expiry starts (removed at once when expiry is 0).
  void sessionDisconnected(const std::string& clientId) EXCLUDES(mu_);
  // Drops the session (a clean start, an expiry). With deleteSubscriptions, the Pulsar
  // subscriptions its filters select (named by the client id) are deleted too.
  void removeSession(const std::string& clientId, bool deleteSubscriptions) EXCLUDES(mu_);

  // ---- Retained messages -------------------------------------------------------------------
  // Stores `p` as its topic's retained message (an empty payload deletes it). `done` runs on
  // `ex` once the store has it (kTooLarge past the store's 1 MiB value; the store's errors).
  void setRetained(const Publish& p, net::Executor* ex, const std::function<void(Status)>& done)
      EXCLUDES(mu_);
  // The retained messages whose topic `filter` matches (expired ones left out).
  std::vector<RetainedMessage> retainedMatching(const std::string& filter) const EXCLUDES(mu_);

  // ---- Wills -------------------------------------------------------------------------------
  // Publishes `will` as `clientId`'s will after `delaySeconds` (0: now), as a retained message
  // too when its retain flag says so. `role`: the connection's, already authorized to publish.
  // A delayed will goes into the client's session (written by sessionDisconnected, which the
  // connection calls next), so a restarted broker publishes it when due.
  void scheduleWill(const std::string& clientId, const Will& will, uint32_t delaySeconds)
      EXCLUDES(mu_);
  // A new connection of `clientId`: its will waiting for a delay is not published (3.1.3.2.2);
  // the session record loses it at the connection's next saveSession.
  void cancelWill(const std::string& clientId) EXCLUDES(mu_);
  // Publishes one message to an MQTT topic as producer `producerName` (not a connection's);
  // `done` on any thread with the receipt's status.
  void publish(const Publish& p, const std::string& producerName,
               const std::function<void(Status)>& done);

 private:
  Status loadRoot(std::string_view root, bool sessions);
  // A topic of the default namespace was created: every stored session whose wildcard filter
  // selects it gets its Pulsar subscription there now, at the topic's start (the one a
  // connection makes for a topic created after its filter), so an offline session keeps what
  // comes until it is back, whichever session comes back first and across a restart. Thread:
  // the one that created the topic; the subscriptions are made on the topic's executor.
  void onTopicCreated(const std::string& pulsarTopic) EXCLUDES(mu_);
  void sweep();
  void armSweep();
  void deleteSubscriptions(const std::string& clientId,
                           const std::vector<SubscriptionRequest>& filters);
  void putRecord(const std::string& path, const std::optional<std::string>& value,
                 net::Executor* ex, const std::function<void(Status)>& done);

  MqttService& service_;
  std::atomic<bool> stopping_{false};
  net::EventLoop* sweepLoop_ = nullptr;
  std::unique_ptr<boost::asio::steady_timer> sweepTimer_;  // on sweepLoop_
  uint64_t topicWatch_ = 0;  // BrokerService::topicListeners() id; set and cleared on main
  // The topic watch's way back here: a notification can still run after remove() (listeners
  // are called outside their registry's lock), so it goes through this, which stop() clears.
  struct WatchGuard {
    Mutex mu;
    MqttState* self GUARDED_BY(mu) = nullptr;
  };
  std::shared_ptr<WatchGuard> watchGuard_ = std::make_shared<WatchGuard>();
  mutable Mutex mu_;
  std::map<std::string, StoredSession> sessions_ GUARDED_BY(mu_);
  std::map<std::string, RetainedMessage> retained_ GUARDED_BY(mu_);  // by MQTT topic
  std::map<std::string, PendingWill> wills_ GUARDED_BY(mu_);         // by client id
};

}  // namespace magnetar::mqtt
