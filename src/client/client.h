// Client: Magnetar's asynchronous C++ client for the Pulsar binary protocol. Entry point of the
// library: creates producers and consumers. See README.md.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "client/client_config.h"
#include "client/consumer.h"
#include "client/message.h"
#include "client/producer.h"
#include "client/transaction.h"

namespace magnetar::client {

class ClientImpl;

// Owns the I/O threads (`client-io-<i>`) and the connection pool. Thread: any; destroy (or close)
// it on a thread that is not one of its I/O threads. Producers and consumers stop working once
// their client is closed.
class Client {
 public:
  // serviceUrl: "pulsar://host:port" (several hosts: "pulsar://h1:6650,h2:6650"). A bad URL makes
  // every call fail with kInvalidArgument (see status()).
  explicit Client(const std::string& serviceUrl, ClientConfig config = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // OK, or why the client could not start (bad service URL).
  const Status& status() const { return status_; }

  // Creates a producer on topic ("x", "tenant/ns/x" or "persistent://tenant/ns/x"). Partitioned
  // topics get one producer per partition, routed by key. Retries lookups/connects until
  // operationTimeout; kBusy when the name is in use or an Exclusive producer exists.
  Result<Producer> createProducer(const std::string& topic, const ProducerConfig& config = {});
  void createProducerAsync(const std::string& topic, const ProducerConfig& config,
                           std::function<void(Result<Producer>)> cb);

  // Subscribes to topic (every partition of a partitioned one). kBusy when an Exclusive
  // subscription already has a consumer.
  Result<Consumer> subscribe(const std::string& topic, const std::string& subscription,
                             const ConsumerConfig& config = {});
  void subscribeAsync(const std::string& topic, const std::string& subscription,
                      const ConsumerConfig& config, std::function<void(Result<Consumer>)> cb);

  // Opens a transaction on the next coordinator (NEW_TXN; Pulsar's newTransaction().build()).
  // timeout: the coordinator aborts the transaction when it is not ended by then (Pulsar's
  // transactionTimeout, default 1 min). kNotAllowed unless ClientConfig::enableTransaction;
  // the coordinator's errors (e.g. kNotAllowed "NotAllowedError..." when the broker has
  // transactionCoordinatorEnabled=false, kNotFound when pulsar/system is missing).
  Result<Transaction> newTransaction(std::chrono::milliseconds timeout = std::chrono::minutes(1));
  void newTransactionAsync(std::chrono::milliseconds timeout,
                           std::function<void(Result<Transaction>)> cb);

  // Partitions of topic from PARTITIONED_METADATA (0: not partitioned).
  Result<int> getNumberOfPartitions(const std::string& topic);

  // Closes producers (after their pending messages), consumers and connections, then stops the
  // I/O threads. Idempotent.
  Status close();

  // Open broker connections (for tests and diagnostics).
  size_t connectionCount() const;

  // Calls fn on the I/O thread of connection slot `slot` (thread slot mod ioThreads: the one
  // that writes the connections of that slot and runs their producers' callbacks) every
  // `period`, the first call one period from now, until fn returns false or the client closes.
  // For a caller pacing its sends on the thread that writes them (no hand-over per send).
  // kClosed when the client is closed, status() when it did not start. Thread: any; fn runs on
  // that I/O thread and must not block. Magnetar's own API (Pulsar's clients have none).
  Status runEvery(int slot, std::chrono::microseconds period, std::function<bool()> fn);

 private:
  std::shared_ptr<ClientImpl> impl_;
  Status status_;
};

}  // namespace magnetar::client
