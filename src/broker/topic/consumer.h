// Consumer and Producer: a client's endpoint on a topic. Immutable identity plus state owned by
// the topic's ml-worker executor.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_TOPIC)
#error "broker/topic is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/common/wall_clock.h"
#include "broker/topic/message_deduplication.h"
#include "broker/topic/pending_acks.h"
#include "net/frame_batch.h"
#include "protocol/pulsar_api.pb.h"
#include "storage/managed_ledger.h"

namespace magnetar::broker {

class Consumer;
class Subscription;
class PersistentTopic;

using SubType = proto::CommandSubscribe::SubType;

// Where a consumer's frames go: its connection (ServerCnx, service part) or, in benchmarks and
// unit tests, a sink without sockets. The topic part reaches a client only through this and
// ProducerSink. Thread: called on the topic's executor; an implementation hands over to its own
// thread (ServerCnx: its pulsar-io loop).
class ConsumerSink {
 public:
  virtual ~ConsumerSink() = default;
  // MESSAGE frames of one dispatch pass (headers plus the shared entry buffers).
  virtual void send(net::FrameBatch&& frames) = 0;
  // A single command frame (e.g. ACTIVE_CONSUMER_CHANGE).
  virtual void sendFrame(const Buffer& frame) = 0;
  // ACTIVE_CONSUMER_CHANGE for `consumer` (Failover). Default: sendFrame at once; a connection
  // holds it until the consumer's SUBSCRIBE is answered.
  virtual void sendActiveConsumerChange(const Consumer* consumer, bool isActive);
  // Whether the dispatcher bounds what it queues here (pulsarChannelWriteBufferHighWaterMark, and
  // dispatcherMaxReadSizeBytes per pass): true for a connection; a sink without one takes all.
  virtual bool limitsOutbound() const { return false; }
  // Asked only when limitsOutbound(): false when the queued bytes are over the high watermark
  // (the connection then calls Dispatcher::consumerWritable once they fall); notifyWhenWritable()
  // asks for that call after a pass held back by its own limit.
  virtual bool isWritable() { return true; }
  virtual void notifyWhenWritable() {}
  // The broker closed this consumer (topic deleted, seek, ...): CLOSE_CONSUMER to the client.
  virtual void closeConsumerFromBroker(uint64_t /*consumerId*/) {}
  // For stats ("" without a connection).
  virtual const std::string& peerAddress() const;
  virtual const std::string& clientVersion() const;
};

// The answers of one topic pass to one connection's SENDs, in order, as compact records: the
// connection builds the SEND_RECEIPT frames on its own loop (issue 47: off the topic's thread).
struct ReceiptBatch {
  // A SEND_RECEIPT (ledgerId >= -1), or frames[entryId] when ledgerId is kFrame (a SEND_ERROR, or
  // the SUCCESS answering a CLOSE_PRODUCER).
  struct Item {
    uint64_t producerId = 0;
    uint64_t sequenceId = 0;
    uint64_t highestSequenceId = 0;
    int64_t ledgerId = 0;
    int64_t entryId = 0;
  };
  static constexpr int64_t kFrame = INT64_MIN;
  std::vector<Item> items;
  std::vector<Buffer> frames;
  // SENDs answered (or released unanswered) and their entry bytes: ProducerSink::publishCompleted.
  uint32_t completed = 0;
  uint64_t completedBytes = 0;
  uint32_t nonPersistentCompleted = 0;  // ProducerSink::nonPersistentCompleted
  // Producers whose CLOSE_PRODUCER follows every answer above (their last one is among them).
  std::vector<uint64_t> closeAfter;

  void addReceipt(uint64_t producerId, uint64_t seq, uint64_t highestSeq, storage::Position pos) {
    items.push_back(Item{producerId, seq, highestSeq, pos.ledgerId, pos.entryId});
  }
  void addFrame(Buffer frame) {
    items.push_back(Item{0, 0, 0, kFrame, static_cast<int64_t>(frames.size())});
    frames.push_back(std::move(frame));
  }
  bool hasFrames() const { return !items.empty(); }
  // Appends the frames, in order, to `out` (SEND_RECEIPTs written in place). Any thread.
  void encode(net::FrameBatch& out) const;
  // Empties it, keeping the vectors' capacity.
  void clear();
};

// Where a producer's answers go: its connection (ServerCnx); null in unit tests without one.
// Thread: called on the topic's executor; the implementation hands over to its own thread.
class ProducerSink {
 public:
  virtual ~ProducerSink() = default;
  // The answers of one pass (PersistentTopic::flushPass): the frames in order, then the release
  // of the answered SENDs (publishCompleted, nonPersistentCompleted), then the CLOSE_PRODUCERs in
  // `closeAfter`. `batch` is left empty with storage for the next pass (possibly another's).
  // Default: all of it now, on the calling thread; ServerCnx hands it to its loop (one hand-over
  // per loop per pass) and builds the frames there.
  virtual void sendAnswers(ReceiptBatch& batch);
  // SEND_RECEIPTs (and SUCCESS answers) of one pass, in order.
  virtual void send(net::FrameBatch&& frames) = 0;
  // A single command frame (the SUCCESS answering a CLOSE_PRODUCER).
  virtual void sendFrame(const Buffer& frame) = 0;
  // `n` SENDs of `bytes` entry bytes were answered: releases them from the connection's pending
  // publish count and its loop's publish buffer share.
  virtual void publishCompleted(uint32_t n, uint64_t bytes) = 0;
  // `n` non-persistent SENDs that counted against maxConcurrentNonPersistentMessagePerConnection
  // (not dropped) were answered.
  virtual void nonPersistentCompleted(uint32_t /*n*/) {}
  // The broker closed this producer: CLOSE_PRODUCER, after whatever send() queued before.
  virtual void closeProducerFromBroker(uint64_t producerId) = 0;
  // For stats.
  virtual const std::string& peerAddress() const = 0;
  virtual const std::string& clientVersion() const = 0;
};

// Thread: identity fields are immutable; the rest belongs to the topic's executor.
class Consumer {
 public:
  // `sink`: the consumer's connection (owned with the connection).
  Consumer(uint64_t id, std::string name, std::shared_ptr<ConsumerSink> sink, SubType type,
           int priorityLevel)
      : id_(id),
        name_(std::move(name)),
        sink_(std::move(sink)),
        type_(type),
        priorityLevel_(priorityLevel) {}
  // A consumer whose frames go to a sink the caller keeps alive (benchmarks, tests).
  Consumer(uint64_t id, std::string name, ConsumerSink* sink, SubType type, int priorityLevel)
      : Consumer(id, std::move(name), std::shared_ptr<ConsumerSink>(std::shared_ptr<void>(), sink),
                 type, priorityLevel) {}

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  ConsumerSink* sink() const { return sink_.get(); }
  SubType subType() const { return type_; }
  int priorityLevel() const { return priorityLevel_; }

  // --- topic executor state ---
  int64_t permits = 0;  // messages the client can still take
  // Dispatched, not acked (see PendingAcks).
  using PendingAck = broker::PendingAck;
  PendingAcks pendingAcks;
  int64_t unackedMessages = 0;
  bool blockedOnUnacked = false;
  // Dispatch holds back: the consumer was given dispatcherMaxReadSizeBytes since its connection
  // was last seen under pulsarChannelWriteBufferHighWaterMark, or in this pass. The
  // connection's onWritable() resumes it.
  bool outboundBlocked = false;
  // Entry bytes dispatched to it since its connection was last seen under the high watermark
  // (Dispatcher::refreshOutbound, at the start of each pass).
  size_t bytesSinceWritable = 0;
  bool closed = false;
  // Key_Shared: new entries of hashes it owns, read while it had no permits, oldest first, with
  // their hashes (Dispatcher::park; dispatched again from here once it has permits).
  std::deque<std::pair<storage::Entry, int32_t>> parked;
  // Key_Shared: explicit hash ranges (STICKY mode); empty for AUTO_SPLIT.
  std::vector<std::pair<int32_t, int32_t>> stickyRanges;
  bool allowOutOfOrderDelivery = false;
  // Subscribed with an AUTO_CONSUME schema (does not keep a topic from taking a new schema).
  bool autoConsumeSchema = false;
  // SUBSCRIBE read_compacted: reads the topic's compacted view first (Exclusive/Failover).
  bool readCompacted = false;
  // TopicOwnership::ownershipEpoch() before this consumer's topic was found owned here.
  uint64_t ownershipEpoch = 0;
  // Stats.
  uint64_t msgOutCounter = 0;
  uint64_t bytesOutCounter = 0;
  const int64_t connectedSinceMs = wallClockMs();  // creation time, for stats
  uint64_t drainingHashesClearedTotal = 0;  // Key_Shared: draining hashes of this consumer done
  // CommandSubscribe.metadata (the client's consumer properties), shown in stats as Pulsar's
  // ConsumerStats.metadata. Set before the consumer is added, then read-only.
  std::map<std::string, std::string> metadata;
  // The connection sent the SUBSCRIBE's SUCCESS (and any event held for it): set once on the
  // connection's loop, read by the topic executor, so later frames for this consumer may be
  // queued straight from there, in the order they are made.
  std::atomic<bool> subscribeAnswered{false};

 private:
  const uint64_t id_;
  const std::string name_;
  const std::shared_ptr<ConsumerSink> sink_;
  const SubType type_;
  const int priorityLevel_;
};

// Thread: identity immutable; counters belong to the topic's executor.
class Producer {
 public:
  // topicEpoch: the epoch a reconnecting exclusive producer had (CommandProducer.topic_epoch).
  // sink: the producer's connection (null in unit tests without one).
  Producer(uint64_t id, std::string name, std::shared_ptr<ProducerSink> sink,
           proto::ProducerAccessMode accessMode = proto::Shared,
           std::optional<uint64_t> topicEpoch = std::nullopt)
      : id_(id),
        name_(std::move(name)),
        sink_(std::move(sink)),
        accessMode_(accessMode),
        topicEpoch_(topicEpoch) {}
  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::shared_ptr<ProducerSink>& sink() const { return sink_; }
  proto::ProducerAccessMode accessMode() const { return accessMode_; }
  bool exclusive() const { return accessMode_ != proto::Shared; }
  const std::optional<uint64_t>& topicEpoch() const { return topicEpoch_; }

  uint64_t msgInCounter = 0;
  uint64_t bytesInCounter = 0;
  // Non-persistent messages dropped at the publisher side (PendingSend::dropped; Pulsar's
  // Producer.recordMessageDrop), topic executor.
  uint64_t msgDropCounter = 0;
  bool closed = false;
  // SENDs taken by PersistentTopic::publish and not answered yet (topic executor).
  int64_t inFlight = 0;
  // Closed by the broker with publishes in flight: CLOSE_PRODUCER after their answers.
  bool closeWhenAnswered = false;
  // Closed by its client with publishes in flight: the request_id whose SUCCESS follows their
  // answers.
  std::optional<uint64_t> successWhenAnswered;
  // Fenced out by an ExclusiveWithFencing producer (topic executor writes, the connection's loop
  // reads): as Pulsar, the client is not told; its next SEND closes the connection.
  std::atomic<bool> fenced{false};
  const int64_t connectedSinceMs = wallClockMs();  // creation time, for stats
  // CommandProducer.metadata (the client's producer properties), shown in stats as Pulsar's
  // PublisherStats.metadata. Set before the producer is added, then read-only.
  std::map<std::string, std::string> metadata;
  // TopicOwnership::ownershipEpoch() before this producer's topic was found owned here.
  uint64_t ownershipEpoch = 0;
  // Its place in the topic's dedup table (topic executor only).
  MessageDeduplication::ProducerSlot dedupSlot;

 private:
  const uint64_t id_;
  const std::string name_;
  const std::shared_ptr<ProducerSink> sink_;
  const proto::ProducerAccessMode accessMode_;
  const std::optional<uint64_t> topicEpoch_;
};

}  // namespace magnetar::broker
