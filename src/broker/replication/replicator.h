// Replicator: copies one persistent topic to one remote cluster, as Pulsar's
// GeoPersistentReplicator (docs/geo-replication.md). It reads the local topic from the durable
// cursor "pulsar.repl.{remote}" and publishes each entry on the remote cluster's broker as the
// producer "pulsar.repl.{local}-->{remote}" (Pulsar's name), with `replicated_from` set to the
// local cluster and the original producer name and sequence ids kept (the remote's dedup keeps
// each message once).
// The cursor moves only over entries the remote acknowledged, in order; after a failure the
// replicator reconnects with backoff and resends from the cursor. Reads are paced by its
// replicatorDispatchRate limiter (Pulsar's DispatchRateLimiter of type REPLICATOR;
// docs/geo-replication.md).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_REPLICATION)
#error "broker/replication is not below this broker part (src/broker/README.md)"
#endif

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/token_bucket.h"
#include "broker/policies/rate_policies.h"
#include "broker/service/broker_peer.h"
#include "broker/topic/topic.h"
#include "broker/topic/topic_replicator.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

// Where and how a replicator reaches the remote cluster (Pulsar's replication client of it).
struct RemoteEndpoint {
  // Where lookups start: the ClusterData's brokerServiceUrl, or its brokerServiceUrlTls with TLS.
  std::string serviceUrl;
  bool tls = false;  // the owners' brokerServiceUrlTls are taken from lookup answers
  // Connections with the cluster's own TLS and authentication (ClusterData); null: the pool
  // given to attach (the broker's brokerClient* settings).
  std::shared_ptr<PeerPool> peers;
};

struct ReplicatorConfig {
  std::string localCluster;
  std::string remoteCluster;
  // The remote cluster's endpoint, read at each connect; nullopt: the cluster or its URL is
  // unknown now, or its settings are refused (retried with backoff).
  std::function<std::optional<RemoteEndpoint>()> remote;
  int producerQueueSize = 1000;  // replicationProducerQueueSize: entries sent, not acknowledged
  storage::InitialPosition startAt = storage::InitialPosition::kLatest;  // replicationStartAt
  std::chrono::milliseconds connectTimeout{10000};  // a LOOKUP's and PRODUCER's answer
  DispatchRate dispatchRate;  // replicatorDispatchRate in force at the start (no limit: <= 0)
  // Called on the topic's executor when a replicated subscription marker from the remote
  // arrives and the topic has no controller: starts one (Pulsar's
  // receivedReplicatedSubscriptionMarker forces it, so a cluster without the subscription
  // yet answers snapshots and takes the update that creates it).
  std::function<void(PersistentTopic&)> startReplicatedSubscriptions;
};

// Thread: the topic's executor for every member (the connection's frames are posted there).
class Replicator final : public TopicReplicator, public std::enable_shared_from_this<Replicator> {
 public:
  // Opens the cursor and attaches the replicator to `topic` (false: the topic is closing or
  // has one for this cluster; kept by the topic otherwise). The connection starts at once.
  static Status attach(PersistentTopic& topic, ReplicatorConfig config, PeerPool& peers);

  void entriesAdded() override;
  void close() override;
  ReplicatorStats stats() const override;
  // The replicatorDispatchRate in force (ReplicationService gives it every second): a changed
  // rate rebuilds the limiter (full, as Pulsar's) and ends a wait for tokens at once. With
  // relativeToPublishRate the topic's publish rate since the last call is added (PIP-52).
  void setDispatchRate(const DispatchRate& rate);
  bool isConnected() const override { return state_ == State::kReady; }

  Replicator(PersistentTopic& topic, storage::ManagedCursor& cursor, ReplicatorConfig config,
             PeerPool& peers);

 private:
  struct InFlight {
    storage::Position position;
    uint64_t sendId = 0;  // CommandSend sequence_id (this replicator's counter); 0: skipped
    int32_t messages = 0;
    size_t bytes = 0;
    int64_t publishTimeMs = 0;
    bool done = false;  // acknowledged by the remote, or an entry not to replicate
  };

  // Each connection starts with a LOOKUP of the topic on the remote cluster (as Pulsar's
  // replicator's client): redirects followed (authoritative flag kept, at most 20), then
  // PRODUCER on the owner (through the service URL's proxy when the answer says
  // proxy_through_service_url). A reconnect (ServiceNotReady, the owner gone or closed the
  // producer) looks up again.
  void connect();
  void lookupAt(const std::string& url, bool authoritative, int hopsLeft);
  void onLookup(uint64_t epoch, int hopsLeft, Result<proto::BaseCommand> r);
  void openProducer(const std::string& owner, const std::string& proxyTo);
  void onConnection(uint64_t epoch, Result<std::shared_ptr<PeerConnection>> r);
  PeerPool& pool() { return remote_.peers ? *remote_.peers : peers_; }
  void onProducerAnswer(uint64_t epoch, Result<proto::BaseCommand> r);
  void onProducerFrame(uint64_t epoch, std::optional<proto::BaseCommand> cmd);
  void disconnected(const std::string& why);
  void scheduleReconnect();
  void readMore();
  void onEntries(uint64_t epoch, const Status& s, std::vector<storage::Entry> entries);
  // Sends one entry, or marks it done when it is not to be replicated.
  void forward(const storage::Entry& e);
  // A replicated subscription marker that this replicator's remote wrote: to the controller.
  void remoteMarker(storage::Position pos, const proto::MessageMetadata& md,
                    std::string_view payload);
  void onReceipt(uint64_t sendId, bool ok);
  // The replicator dispatch rate: false (and a read again once tokens are back, within 1 s)
  // when the limiter has none; else lowers *entries / *bytes to the tokens left.
  bool rateAllows(int* entries, size_t* bytes);
  void advanceCursor();

  PersistentTopic& topic_;
  storage::ManagedLedger& ledger_;
  storage::ManagedCursor& cursor_;
  const ReplicatorConfig config_;
  PeerPool& peers_;
  const std::string topicName_;
  const std::string producerName_;  // pulsar.repl.{local}-->{remote}

  enum class State { kDisconnected, kConnecting, kReady, kClosed };
  State state_ = State::kDisconnected;
  uint64_t epoch_ = 0;  // one per connection attempt: older callbacks are ignored
  std::shared_ptr<PeerConnection> cnx_;
  uint64_t producerId_ = 0;
  RemoteEndpoint remote_;  // this connection attempt's
  size_t nextHost_ = 0;    // the service URL's host the next attempt asks first
  std::string url_;        // the owner the producer is on (or being opened on)
  int64_t connectedSinceMs_ = 0;
  std::chrono::milliseconds backoff_{100};
  boost::asio::steady_timer timer_;
  // The dispatch rate: the limiter, the rate it was built from (with the publish rate added
  // when relative), and the topic's publish counters at the last setDispatchRate.
  MessageRateLimiter rate_;
  DispatchRate rateApplied_;
  uint64_t pubMsgs_ = 0;
  uint64_t pubBytes_ = 0;
  std::chrono::steady_clock::time_point pubAt_ = std::chrono::steady_clock::now();
  boost::asio::steady_timer throttleTimer_;
  bool throttled_ = false;  // throttleTimer_ runs: readMore waits for it

  storage::Position readPosition_;   // next entry to read
  storage::Position ackedPosition_;  // last entry the remote acknowledged in order
  storage::Position markRequested_;  // the last position given to asyncMarkDelete
  bool reading_ = false;
  bool markDeleting_ = false;
  std::deque<InFlight> inFlight_;
  uint64_t nextSendId_ = 1;

  int64_t msgOutCount_ = 0;
  int64_t bytesOutCount_ = 0;
  // Rates: counts at the last rate computation, at least 1 s apart.
  mutable int64_t rateMsgs_ = 0;
  mutable int64_t rateBytes_ = 0;
  mutable std::chrono::steady_clock::time_point rateAt_ = std::chrono::steady_clock::now();
  mutable double msgRateOut_ = 0;
  mutable double byteRateOut_ = 0;
};

}  // namespace magnetar::broker
