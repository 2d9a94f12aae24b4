// ProducerImpl: one producer on one (partition) topic; PartitionedProducer routes over several.
// Internal to src/client.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/ring_queue.h"
#include "base/thread_annotations.h"
#include "client/batch.h"
#include "client/client_config.h"
#include "client/handler_base.h"
#include "client/message.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

class ClientImpl;
class ClientConnection;

// One SEND_RECEIPT, as the connection hands them over (several per call).
struct Receipt {
  uint64_t sequenceId;
  uint64_t highestSequenceId;
  int64_t ledgerId;
  int64_t entryId;
};

// What the public Producer handle drives. Thread: any.
class ProducerBase {
 public:
  virtual ~ProducerBase() = default;
  virtual void sendAsync(const OutgoingMessage& m, SendCallback cb) = 0;
  // Sends what is batched and calls cb once every message sent before has its result.
  virtual void flushAsync(StatusCallback cb) = 0;
  // Flushes, then closes the producer on the broker.
  virtual void closeAsync(StatusCallback cb) = 0;
  virtual const std::string& topic() const = 0;
  virtual std::string producerName() const = 0;
  // Highest sequence id receipted so far (-1 when none).
  virtual int64_t lastSequenceId() const = 0;
  virtual bool isConnected() const = 0;
  // Messages sent and not yet receipted (batched ones included).
  virtual size_t pendingMessages() const = 0;
};

// Thread: sendAsync/flushAsync/closeAsync from any thread; receipts, reconnects and timers on the
// loop of its connection slot (home loop). State under mu_.
//
// Frames: every SEND frame is encoded once into log_, a byte log holding, in order, the frames of
// all messages not yet receipted. A flush (one per loop pass) copies the new tail into the
// connection's pending FrameBatch; a reconnect re-sends the log from its head, so unreceipted
// messages go out again in order. Receipts pop the head (pending_) and the log is compacted when
// its dead prefix grows large.
class ProducerImpl final : public ProducerBase,
                           public HandlerBase,
                           public std::enable_shared_from_this<ProducerImpl> {
 public:
  ProducerImpl(const std::shared_ptr<ClientImpl>& client, std::string topic, int partition,
               ProducerConfig config);
  ~ProducerImpl() override;

  // Creates the producer on the broker (lookup, connect, PRODUCER), retrying retriable failures
  // until operationTimeout; cb(OK) once ready, else the error.
  void start(StatusCallback cb);

  void sendAsync(const OutgoingMessage& m, SendCallback cb) override;
  void flushAsync(StatusCallback cb) override;
  void closeAsync(StatusCallback cb) override;
  const std::string& topic() const override { return topic_; }
  std::string producerName() const override;
  int64_t lastSequenceId() const override;
  bool isConnected() const override;
  size_t pendingMessages() const override;
  uint64_t producerId() const { return producerId_; }

  // From the connection, on the home loop.
  // Receipts of one read batch, in arrival order (one lock for all of them).
  void receiptsReceived(std::span<const Receipt> receipts);
  void sendErrorReceived(const proto::CommandSendError& e, ClientConnection* cnx);
  void connectionClosed(ClientConnection* cnx);
  void closedByBroker(ClientConnection* cnx);

 private:
  struct PendingSend {
    uint64_t sequenceId;
    uint64_t frameEnd;    // absolute offset in the log of the frame's end
    int32_t numMessages;  // callbacks it owns at the front of callbacks_
    bool batch;
    std::chrono::steady_clock::time_point sentAt;
  };
  struct FlushWaiter {
    uint64_t target;  // completed_ value that satisfies it
    StatusCallback cb;
  };

  void connectionReady(std::shared_ptr<ClientConnection> cnx) override;
  std::function<void()> gaveUpLocked(const Status& s) override REQUIRES(mu_);
  void unregisterFrom(ClientConnection& cnx, bool closeOnBroker) override;
  std::weak_ptr<HandlerBase> weakHandler() override { return weak_from_this(); }
  void lostConnection(ClientConnection* cnx, bool byBroker);
  // Encodes and queues m (txn: its transaction, already registered for this partition).
  void enqueue(const OutgoingMessage& m, const TxnID* txn, SendCallback cb);
  void encodeSingleLocked(const OutgoingMessage& m, uint64_t seq, const TxnID* txn, SendCallback cb)
      REQUIRES(mu_);
  void encodeBatchLocked() REQUIRES(mu_);
  bool needFlushLocked() REQUIRES(mu_);
  void postFlush();
  void flush();
  void armTimer();
  void onTimer();
  using Completion = std::vector<std::pair<StatusCallback, Status>>;
  void failAllLocked(const Status& s, std::vector<SendCallback>* out, Completion* done)
      REQUIRES(mu_);
  void compactLocked() REQUIRES(mu_);
  void completeLocked(uint64_t n, const Status& s, Completion* done) REQUIRES(mu_);
  void finishClose(const Status& s);
  std::chrono::microseconds timerPeriod() const;

  const int partition_;
  const ProducerConfig config_;
  const uint64_t producerId_;
  boost::asio::steady_timer timer_;  // home loop: batch flush + send timeout

  std::condition_variable notFull_;
  std::string producerName_ GUARDED_BY(mu_);
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  std::vector<StatusCallback> closeCbs_ GUARDED_BY(mu_);
  uint64_t nextSequenceId_ GUARDED_BY(mu_) = 0;
  int64_t lastSequenceReceipted_ GUARDED_BY(mu_) = -1;
  proto::MessageMetadata md_ GUARDED_BY(mu_);  // reused per frame
  proto::CommandSend send_ GUARDED_BY(mu_);
  BatchContainer batch_ GUARDED_BY(mu_);
  std::optional<TxnID> batchTxn_ GUARDED_BY(mu_);  // transaction of the open batch
  std::string log_ GUARDED_BY(mu_);
  uint64_t logBase_ = 0;     // absolute offset of log_[0]
  uint64_t flushedTo_ = 0;   // absolute offset written to the connection
  uint64_t headOffset_ = 0;  // absolute offset where the oldest pending frame starts
  // RingQueues: one reused array each, no deque node allocated every few sends.
  RingQueue<PendingSend> pending_ GUARDED_BY(mu_);
  RingQueue<SendCallback> callbacks_ GUARDED_BY(mu_);
  size_t pendingMessages_ GUARDED_BY(mu_) = 0;  // incl. batched
  uint64_t enqueued_ GUARDED_BY(mu_) = 0;       // messages accepted
  uint64_t completed_ GUARDED_BY(mu_) = 0;      // messages with a result
  std::deque<FlushWaiter> flushWaiters_ GUARDED_BY(mu_);
  bool flushScheduled_ GUARDED_BY(mu_) = false;
  bool timerArmed_ GUARDED_BY(mu_) = false;
  int blockedSenders_ GUARDED_BY(mu_) = 0;
  size_t notifyBelow_ = 0;  // wake blocked senders once pendingMessages_ is at most this
  // Home loop only: callbacks collected under the lock, run after it.
  std::vector<std::pair<SendCallback, MessageId>> completions_;
};

}  // namespace magnetar::client
