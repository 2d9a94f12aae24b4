#include "broker/service/local_transaction_buffer_client.h"

#include <utility>

#include "broker/service/broker_service.h"

namespace magnetar::broker {

namespace {

class LocalTransactionBufferClient final : public TransactionBufferClient {
 public:
  explicit LocalTransactionBufferClient(BrokerService& service) : service_(service) {}

  void endTxnOnTopic(const std::string& topic, const TxnID& txn, proto::TxnAction action,
                     int64_t lowWaterMark, Done done) override {
    withTopic(topic, std::move(done), [txn, action, lowWaterMark](PersistentTopic& t, Done d) {
      t.endTxn(txn, action, lowWaterMark, std::move(d));
    });
  }

  void endTxnOnSubscription(const std::string& topic, const std::string& subscription,
                            const TxnID& txn, proto::TxnAction action, int64_t lowWaterMark,
                            Done done) override {
    // A subscription deleted since the transaction acked on it has nothing left to end: Ok, so
    // the transaction ends (Pulsar's coordinator completes it; it does not retry forever).
    Done ok = [done = std::move(done)](const Status& s) {
      done(s.code() == StatusCode::kNotFound ? Status::ok() : s);
    };
    withTopic(topic, std::move(ok),
              [subscription, txn, action, lowWaterMark](PersistentTopic& t, Done d) {
                t.endTxnOnSubscription(subscription, txn, action, lowWaterMark, std::move(d));
              });
  }

 private:
  // Runs fn on the loaded (or stored) topic's executor. A topic that does not exist has
  // nothing to end: Ok, as Pulsar's handleEndTxnOnPartition answers for a topic never created;
  // so has a name no topic can have (ADD_PARTITION_TO_TXN does not check names), nor a name
  // that cannot be loaded as a topic (a partitioned topic's, a transaction-internal one).
  void withTopic(const std::string& topic, Done done,
                 std::function<void(PersistentTopic&, Done)> fn) {
    auto name = TopicName::parse(topic);
    if (!name.isOk()) return done(Status::ok());
    service_.getOrCreateTopic(
        *name, /*create=*/false,
        [done = std::move(done), fn = std::move(fn)](Result<std::shared_ptr<PersistentTopic>> r) {
          // kNotAllowed: a partitioned topic's own name or a transaction-internal name, which
          // no message is ever published to.
          if (!r.isOk()) {
            const StatusCode code = r.status().code();
            return done(code == StatusCode::kNotFound || code == StatusCode::kNotAllowed
                            ? Status::ok()
                            : r.status());
          }
          fn(**r, done);
        });
  }

  BrokerService& service_;
};

}  // namespace

std::unique_ptr<TransactionBufferClient> makeLocalTransactionBufferClient(BrokerService& service) {
  return std::make_unique<LocalTransactionBufferClient>(service);
}

}  // namespace magnetar::broker
