// The cluster-mode TransactionBufferClient (Pulsar's TransactionBufferClientImpl): a topic this
// broker serves is ended in place (the local client); any other is looked up and its owner gets
// END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION over a broker-to-broker connection
// (broker_peer.h). A LOOKUP that redirects is followed (as a client does, at most 5 hops).
// Every failure (lookup, connection, timeout, the owner's error) is answered as an error, which
// the coordinator retries on its next tick (1 s), as Pulsar's retry timer does; an owner's
// TopicNotFound or "subscription ... is not exist." answers Ok (nothing left to end, as the
// local client). With brokerClientTlsEnabled the owners' pulsar+ssl URLs are used.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <chrono>
#include <memory>

#include "broker/transaction/transaction_buffer_client.h"

namespace magnetar::broker {

class BrokerService;
class BrokerClientSettings;

// `local` ends a txn on topics served here; both it and `service` outlive the client. Requests
// time out after `timeout` (transactionBufferClientOperationTimeoutInMills). Connections live on
// the service's pulsar-io loops; call close() before they stop. `settings`: TLS and CONNECT's
// credentials (brokerClient*). Thread: any.
class RemoteTransactionBufferClient : public TransactionBufferClient {
 public:
  virtual void close() = 0;
};

std::unique_ptr<RemoteTransactionBufferClient> makeRemoteTransactionBufferClient(
    BrokerService& service, TransactionBufferClient& local, std::chrono::milliseconds timeout,
    std::shared_ptr<const BrokerClientSettings> settings);

}  // namespace magnetar::broker
