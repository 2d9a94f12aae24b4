// ClientImpl: the shared core of a Client: I/O loops, connection pool, lookups, ids, and the
// registry of producers/consumers closed with the client. Internal to src/client.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "client/backoff.h"
#include "client/client_config.h"
#include "net/event_loop.h"
#include "net/tls.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

class ClientConnection;
class ProducerBase;
class ConsumerBase;
class TcClient;

using ConnectionCallback = std::function<void(Result<std::shared_ptr<ClientConnection>>)>;

// Parses "pulsar://host:port[,host:port...]" into "host:port" addresses (port 6650 when absent).
Result<std::vector<std::string>> parseServiceUrl(std::string_view url);

// Thread: any. Callbacks of getConnection/lookup run on the requested slot's loop.
class ClientImpl : public std::enable_shared_from_this<ClientImpl> {
 public:
  ClientImpl(std::string serviceUrl, ClientConfig config);
  ~ClientImpl();

  // Parses the service URL and starts the I/O loops. kInvalidArgument on a bad URL.
  Status start();
  // Closes every producer and consumer (waiting up to operationTimeout), then the connections,
  // then stops the loops. Idempotent. REQUIRES: not on a client I/O thread.
  Status close();
  bool closed() const { return closed_.load(); }

  const ClientConfig& config() const { return config_; }
  int connectionSlots() const { return slots_; }
  // The loop of connection slot `slot`; producers/consumers using that slot live on it.
  net::EventLoop& loopForSlot(int slot) { return loops_->at(slot % loops_->size()); }
  // Slot of producer/consumer id.
  int slotFor(uint64_t id) const { return static_cast<int>(id % static_cast<uint64_t>(slots_)); }

  // The pooled connection `slot` to broker `address` ("host:port"), connecting when needed.
  void getConnection(const std::string& address, int slot, ConnectionCallback cb);
  // Resolves the broker ("host:port") serving topic with LOOKUP (following redirects).
  void lookup(const std::string& topic, int slot, std::function<void(Result<std::string>)> cb);
  // lookup() then getConnection(): the pooled connection `slot` to the broker serving topic.
  void connectionForTopic(const std::string& topic, int slot, ConnectionCallback cb);
  // PARTITIONED_METADATA: number of partitions (0 = not partitioned).
  void getPartitionedMetadata(const std::string& topic, std::function<void(Result<int>)> cb);

  uint64_t newRequestId() { return requestId_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t newProducerId() { return producerId_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t newConsumerId() { return consumerId_.fetch_add(1, std::memory_order_relaxed); }

  void registerProducer(const std::shared_ptr<ProducerBase>& p);
  void registerConsumer(const std::shared_ptr<ConsumerBase>& c);

  // Connections currently pooled (for tests).
  size_t connectionCount();

  // The transaction coordinator client, created on first use (null once closed).
  std::shared_ptr<TcClient> tcClient();

 private:
  struct Slot {
    std::shared_ptr<ClientConnection> cnx;
    bool connecting = false;
    std::vector<ConnectionCallback> waiters;
  };
  using SlotKey = std::pair<std::string, int>;

  void connect(const std::string& address, int slot);
  void connectDone(const SlotKey& key, Result<std::shared_ptr<ClientConnection>> r);
  void connectionClosed(const SlotKey& key, ClientConnection* cnx);
  void lookupAt(const std::string& topic, const std::string& address, int slot, bool authoritative,
                int redirects, std::function<void(Result<std::string>)> cb);
  std::string serviceAddress();
  // Sends build(requestId) on the pooled connection `slot` to `address`; done() as
  // ClientConnection::sendRequest's callback, or with the failure to connect (and an empty
  // command). On that slot's loop.
  void requestOn(const std::string& address, int slot,
                 std::function<Buffer(uint64_t requestId)> build,
                 std::function<void(const Status&, const proto::BaseCommand&)> done);

  const std::string serviceUrl_;
  ClientConfig config_;
  std::shared_ptr<ssl_ctx_st> tlsCtx_;  // set by start() for pulsar+ssl:// URLs
  int slots_ = 1;
  std::vector<std::string> serviceAddresses_;
  std::atomic<uint32_t> serviceIndex_{0};
  std::unique_ptr<net::EventLoopGroup> loops_;
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> requestId_{1};
  std::atomic<uint64_t> producerId_{0};
  std::atomic<uint64_t> consumerId_{0};

  Mutex mu_;
  std::map<SlotKey, Slot> pool_ GUARDED_BY(mu_);
  std::vector<std::weak_ptr<ProducerBase>> producers_ GUARDED_BY(mu_);
  std::vector<std::weak_ptr<ConsumerBase>> consumers_ GUARDED_BY(mu_);
  // Holds this ClientImpl: reset by close() to break the cycle.
  std::shared_ptr<TcClient> tcClient_ GUARDED_BY(mu_);
};

}  // namespace magnetar::client
