#include "broker/service/remote_transaction_buffer_client.h"

#include <utility>

#include "base/logging.h"
#include "broker/service/broker_client_settings.h"
#include "broker/service/broker_peer.h"
#include "broker/service/broker_service.h"
#include "protocol/commands.h"

namespace magnetar::broker {

using protocol::Commands;

namespace {

constexpr int kMaxLookupHops = 5;
constexpr std::chrono::seconds kConnectTimeout{10};

// Where a topic's END_TXN_* goes: here (url empty) or to the broker at url; or an error.
using RouteCallback = std::function<void(Result<std::string>)>;
// Sends the request on a connection; its answer frame or the failure.
using SendFn = std::function<Buffer(uint64_t requestId)>;

// The status of an END_TXN_ON_* answer (error, message); ok when it has no error, and when the
// owner says the topic is gone (TopicNotFound): nothing is left to end there, as the local
// client's kNotFound and the owner's own answer for a topic never created (Pulsar's
// handleEndTxnOnPartition), so the coordinator's end completes instead of retrying forever.
Status answerStatus(bool hasError, proto::ServerError error, const std::string& message) {
  if (!hasError || error == proto::TopicNotFound) return Status::ok();
  return Status::ioError(proto::ServerError_Name(error) + ": " + message);
}

class RemoteClient final : public RemoteTransactionBufferClient {
 public:
  RemoteClient(BrokerService& service, TransactionBufferClient& local,
               std::chrono::milliseconds timeout,
               std::shared_ptr<const BrokerClientSettings> settings)
      : service_(service),
        local_(local),
        timeout_(timeout),
        tls_(settings->tlsEnabled()),
        peers_(service.ioLoops(), kConnectTimeout, std::move(settings)) {}

  void endTxnOnTopic(const std::string& topic, const TxnID& txn, proto::TxnAction action,
                     int64_t lowWaterMark, Done done) override {
    route(topic, [=, this, done = std::move(done)](Result<std::string> r) mutable {
      if (!r.isOk()) return done(r.status());
      if (r->empty()) return local_.endTxnOnTopic(topic, txn, action, lowWaterMark, done);
      send(
          *r,
          [=](uint64_t id) {
            return Commands::newEndTxnOnPartition(id, topic, txn.mostBits, txn.leastBits, action,
                                                  static_cast<uint64_t>(lowWaterMark));
          },
          [done](Result<proto::BaseCommand> a) {
            if (!a.isOk()) return done(a.status());
            if (a->type() != proto::BaseCommand::END_TXN_ON_PARTITION_RESPONSE) {
              return done(Status::ioError("END_TXN_ON_PARTITION refused: " + a->error().message()));
            }
            const auto& resp = a->endtxnonpartitionresponse();
            done(answerStatus(resp.has_error(), resp.error(), resp.message()));
          });
    });
  }

  void endTxnOnSubscription(const std::string& topic, const std::string& subscription,
                            const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
                            Done done) override {
    route(topic, [=, this, done = std::move(done)](Result<std::string> r) mutable {
      if (!r.isOk()) return done(r.status());
      if (r->empty()) {
        return local_.endTxnOnSubscription(topic, subscription, txn, action, lowWaterMark, done);
      }
      send(
          *r,
          [=](uint64_t id) {
            return Commands::newEndTxnOnSubscription(id, txn.mostBits, txn.leastBits, topic,
                                                     subscription, action,
                                                     static_cast<uint64_t>(lowWaterMark));
          },
          [done, topic, subscription](Result<proto::BaseCommand> a) {
            if (!a.isOk()) return done(a.status());
            if (a->type() != proto::BaseCommand::END_TXN_ON_SUBSCRIPTION_RESPONSE) {
              return done(
                  Status::ioError("END_TXN_ON_SUBSCRIPTION refused: " + a->error().message()));
            }
            const auto& resp = a->endtxnonsubscriptionresponse();
            // A subscription deleted since the txn acked on it: nothing to end (the local client's
            // kNotFound), the owner's PendingAck text.
            if (resp.has_error() && resp.message() == "Topic " + topic + " subscription " +
                                                          subscription + " is not exist.") {
              return done(Status::ok());
            }
            done(answerStatus(resp.has_error(), resp.error(), resp.message()));
          });
    });
  }

  void close() override { peers_.closeAll(); }

 private:
  // Served here (or no such name: the local client answers it): "". Else the owner's URL, from
  // this broker's lookup and then, while it redirects, from the named brokers'. A redirect back
  // here is this broker's own authoritative lookup (it takes the bundle).
  void route(const std::string& topic, RouteCallback cb, bool authoritative = false,
             int hops = kMaxLookupHops) {
    auto name = TopicName::parse(topic);
    TopicOwnership* ownership = service_.topicOwnership();
    if (!name.isOk() || !ownership || ownership->owns(*name)) return cb(std::string());
    ownership->lookup(*name, authoritative, "", &service_.metadataExecutor(),
                      [this, topic, hops, cb = std::move(cb)](const LookupAnswer& a) {
                        if (!a.error.isOk()) return cb(a.error);
                        const std::string& url = tls_ ? a.urlTls : a.url;
                        if (url.empty()) return cb(noTlsUrl(topic));
                        if (!a.redirect) return cb(peerOrHere(url));
                        lookupAt(url, topic, a.authoritative, hops - 1, cb);
                      });
  }

  // A broker's URL as this client connects to it: its pulsar+ssl one with TLS (Pulsar's
  // TransactionBufferHandlerImpl takes the owner's nativeUrlTls then).
  bool isHere(const std::string& url) const {
    return url == (tls_ ? service_.brokerServiceUrlTls() : service_.brokerServiceUrl());
  }
  std::string peerOrHere(const std::string& url) const { return isHere(url) ? std::string() : url; }
  static Status noTlsUrl(const std::string& topic) {
    return Status::ioError("the owner of " + topic +
                           " has no pulsar+ssl URL (brokerClientTlsEnabled is set)");
  }

  void lookupAt(const std::string& url, const std::string& topic, bool authoritative, int hops,
                const RouteCallback& cb) {
    if (hops <= 0) return cb(Status::ioError("too many lookup redirects for " + topic));
    if (isHere(url)) return route(topic, cb, authoritative, hops);
    send(
        url, [=](uint64_t id) { return Commands::newLookup(topic, id, authoritative); },
        [=, this](Result<proto::BaseCommand> a) {
          if (!a.isOk()) return cb(a.status());
          if (a->type() != proto::BaseCommand::LOOKUP_RESPONSE) {
            return cb(Status::ioError("lookup of " + topic + " failed: " + a->error().message()));
          }
          const auto& r = a->lookuptopicresponse();
          const std::string& next = tls_ ? r.brokerserviceurltls() : r.brokerserviceurl();
          const bool found = r.response() == proto::CommandLookupTopicResponse::Connect ||
                             r.response() == proto::CommandLookupTopicResponse::Redirect;
          if (found && next.empty()) return cb(noTlsUrl(topic));
          if (r.response() == proto::CommandLookupTopicResponse::Connect) {
            return cb(peerOrHere(next));
          }
          if (r.response() == proto::CommandLookupTopicResponse::Redirect) {
            return lookupAt(next, topic, r.authoritative(), hops - 1, cb);
          }
          cb(Status::ioError("lookup of " + topic + " failed: " + r.message()));
        });
  }

  void send(const std::string& url, SendFn build, PeerConnection::Reply reply) {
    peers_.get(url, [this, build = std::move(build),
                     reply = std::move(reply)](Result<std::shared_ptr<PeerConnection>> c) {
      if (!c.isOk()) return reply(c.status());
      (*c)->request(build, timeout_, reply);
    });
  }

  BrokerService& service_;
  TransactionBufferClient& local_;
  const std::chrono::milliseconds timeout_;
  const bool tls_;  // brokerClientTlsEnabled: owners' pulsar+ssl URLs
  PeerPool peers_;
};

}  // namespace

std::unique_ptr<RemoteTransactionBufferClient> makeRemoteTransactionBufferClient(
    BrokerService& service, TransactionBufferClient& local, std::chrono::milliseconds timeout,
    std::shared_ptr<const BrokerClientSettings> settings) {
  return std::make_unique<RemoteClient>(service, local, timeout, std::move(settings));
}

}  // namespace magnetar::broker
