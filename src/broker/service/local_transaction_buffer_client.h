// The broker's own TransactionBufferClient: ends a transaction on topics this broker serves by
// calling PersistentTopic::endTxn / endTxnOnSubscription on the topic's executor (where Pulsar's
// TransactionBufferClientImpl sends END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION to the
// owner).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <memory>

#include "broker/transaction/transaction_buffer_client.h"

namespace magnetar::broker {

class BrokerService;

// Thread: any; the topics' calls on their executors. `service` outlives the client.
std::unique_ptr<TransactionBufferClient> makeLocalTransactionBufferClient(BrokerService& service);

}  // namespace magnetar::broker
