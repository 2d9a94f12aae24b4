// Batch entries: building them on the producer side (key-based batching) and splitting them on the
// consumer side. A batch payload is, per message, [u32 BE size][SingleMessageMetadata][payload]
// (Pulsar's Commands.serializeSingleMessageInBatchWithPayload); the entry's MessageMetadata has
// num_messages_in_batch = n.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/ring_queue.h"
#include "base/status.h"
#include "client/message.h"
#include "client/transaction.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

// One batch under construction: messages sharing one key. Thread: owned by one producer, used
// under its lock.
class BatchBuilder {
 public:
  // Appends m with sequence id seq; cb reports its result.
  void add(const OutgoingMessage& m, uint64_t seq, SendCallback cb);

  int numMessages() const { return static_cast<int>(callbacks_.size()); }
  bool empty() const { return callbacks_.empty(); }
  // Bytes of the batch payload so far.
  size_t payloadBytes() const { return payload_.size(); }
  uint64_t firstSequenceId() const { return firstSeq_; }
  uint64_t lastSequenceId() const { return lastSeq_; }
  const std::string& key() const { return key_; }
  const std::string& orderingKey() const { return orderingKey_; }

  // Appends the batch as one SEND frame to *out and moves the callbacks (in message order) to the
  // back of *callbacks, then resets. `md` must carry producer_name; sequence_id, publish_time,
  // num_messages_in_batch, highest_sequence_id, partition_key and ordering_key are set here
  // (partition_key/ordering_key = the batch's key/ordering key of its first message).
  // txn: the batch's transaction (txnid fields of both), null for none.
  void encode(uint64_t producerId, uint64_t publishTime, proto::MessageMetadata& md,
              proto::CommandSend& send, std::string* out, RingQueue<SendCallback>* callbacks,
              const TxnID* txn = nullptr);

 private:
  std::string payload_;
  std::vector<SendCallback> callbacks_;
  std::string key_;
  std::string orderingKey_;
  uint64_t firstSeq_ = 0;
  uint64_t lastSeq_ = 0;
  proto::SingleMessageMetadata smm_;  // reused
};

// Batches of one producer, each holding messages of one key. Two policies:
// - ordered (groupByKey=false): one open batch; a message with another key must go in a new batch
//   (acceptsKey() is false: the owner drains first), so batches keep the producer's order;
// - groupByKey (Pulsar's KeyBasedBatchMessageContainer): one open batch per key, all flushed
//   together in order of their first sequence id; messages of different keys are reordered.
// Thread: one producer, under its lock.
class BatchContainer {
 public:
  BatchContainer(int maxMessages, size_t maxBytes, bool groupByKey = false)
      : maxMessages_(maxMessages), maxBytes_(maxBytes), groupByKey_(groupByKey) {}

  // False when m cannot join the open batch (ordered policy, another key or ordering key): drain
  // first.
  bool accepts(const OutgoingMessage& m) const {
    return groupByKey_ || single_.empty() ||
           (single_.key() == m.key && single_.orderingKey() == m.orderingKey);
  }
  // Adds a message; returns true when the container reached maxMessages or maxBytes and must be
  // flushed now. REQUIRES: accepts(m).
  bool add(const OutgoingMessage& m, uint64_t seq, SendCallback cb);
  bool empty() const { return numMessages_ == 0; }
  int numMessages() const { return numMessages_; }
  size_t bytes() const { return bytes_; }

  // Calls f(BatchBuilder&) for each non-empty batch in first-sequence-id order; f must encode()
  // it (which empties it). Then the container is empty.
  template <typename F>
  void drain(F&& f) {
    if (!groupByKey_) {
      if (!single_.empty()) f(single_);
      numMessages_ = 0;
      bytes_ = 0;
      return;
    }
    order_.clear();
    for (auto& [k, b] : batches_) {
      if (!b->empty()) order_.push_back(b.get());
    }
    sortOrder();
    for (BatchBuilder* b : order_) f(*b);
    numMessages_ = 0;
    bytes_ = 0;
    if (batches_.size() > kMaxIdleBuilders) {
      batches_.clear();
      last_ = nullptr;
    }
  }

 private:
  static constexpr size_t kMaxIdleBuilders = 64;
  void sortOrder();

  int maxMessages_;
  size_t maxBytes_;
  bool groupByKey_;
  BatchBuilder single_;  // the open batch of the ordered policy
  int numMessages_ = 0;
  size_t bytes_ = 0;
  std::unordered_map<std::string, std::unique_ptr<BatchBuilder>> batches_;
  BatchBuilder* last_ = nullptr;  // builder of the previous add (fast path for one key)
  std::vector<BatchBuilder*> order_;
};

// One message inside a received batch: its metadata and where its payload lies in the batch
// payload (offsets relative to the payload's first byte).
struct BatchedMessage {
  proto::SingleMessageMetadata metadata;
  uint32_t payloadOffset = 0;
  uint32_t payloadSize = 0;
};

// Sets (txn) or clears (null) the txnid fields of a SEND's metadata and command.
void setTxnFields(const TxnID* txn, proto::MessageMetadata& md, proto::CommandSend& send);

// Splits a batch payload holding numMessages messages into *out (cleared first). kCorruption when
// a size points past the end or a SingleMessageMetadata does not parse.
Status splitBatch(std::string_view payload, int numMessages, std::vector<BatchedMessage>* out);

}  // namespace magnetar::client
