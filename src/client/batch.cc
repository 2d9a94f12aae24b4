#include "client/batch.h"

#include <algorithm>
#include <limits>

#include "protocol/commands.h"

namespace magnetar::client {

namespace {

void appendBE32(std::string* out, uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
               static_cast<char>(v)};
  out->append(b, 4);
}

uint32_t readBE32(const char* p) {
  auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

}  // namespace

void BatchBuilder::add(const OutgoingMessage& m, uint64_t seq, SendCallback cb) {
  if (callbacks_.empty()) {
    firstSeq_ = seq;
    key_.assign(m.key);
    orderingKey_.assign(m.orderingKey);
  }
  lastSeq_ = seq;
  smm_.Clear();
  if (!m.key.empty()) smm_.set_partition_key(std::string(m.key));
  if (!m.orderingKey.empty()) smm_.set_ordering_key(std::string(m.orderingKey));
  for (const auto& [k, v] : m.properties) {
    auto* kv = smm_.add_properties();
    kv->set_key(k);
    kv->set_value(v);
  }
  if (m.eventTime != 0) smm_.set_event_time(m.eventTime);
  smm_.set_sequence_id(seq);
  smm_.set_payload_size(static_cast<int32_t>(m.payload.size()));
  size_t size = smm_.ByteSizeLong();
  appendBE32(&payload_, static_cast<uint32_t>(size));
  size_t off = payload_.size();
  payload_.resize(off + size);
  smm_.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(payload_.data() + off));
  payload_.append(m.payload);
  callbacks_.push_back(std::move(cb));
}

void setTxnFields(const TxnID* txn, proto::MessageMetadata& md, proto::CommandSend& send) {
  if (txn == nullptr) {
    md.clear_txnid_most_bits();
    md.clear_txnid_least_bits();
    return;  // send: cleared by its caller
  }
  md.set_txnid_most_bits(txn->mostBits);
  md.set_txnid_least_bits(txn->leastBits);
  send.set_txnid_most_bits(txn->mostBits);
  send.set_txnid_least_bits(txn->leastBits);
}

void BatchBuilder::encode(uint64_t producerId, uint64_t publishTime, proto::MessageMetadata& md,
                          proto::CommandSend& send, std::string* out,
                          RingQueue<SendCallback>* callbacks, const TxnID* txn) {
  md.set_sequence_id(firstSeq_);
  md.set_publish_time(publishTime);
  md.set_num_messages_in_batch(numMessages());
  md.set_highest_sequence_id(lastSeq_);
  if (key_.empty()) {
    md.clear_partition_key();
  } else {
    md.set_partition_key(key_);
  }
  if (orderingKey_.empty()) {
    md.clear_ordering_key();
  } else {
    md.set_ordering_key(orderingKey_);
  }
  md.clear_properties();
  md.clear_event_time();
  send.Clear();
  send.set_producer_id(producerId);
  send.set_sequence_id(firstSeq_);
  send.set_num_messages(numMessages());
  send.set_highest_sequence_id(lastSeq_);
  setTxnFields(txn, md, send);
  protocol::Commands::appendSend(send, md, payload_, out);
  for (auto& cb : callbacks_) callbacks->push_back(std::move(cb));
  callbacks_.clear();
  payload_.clear();
  md.clear_num_messages_in_batch();
  md.clear_highest_sequence_id();
}

bool BatchContainer::add(const OutgoingMessage& m, uint64_t seq, SendCallback cb) {
  BatchBuilder* b = groupByKey_ ? last_ : &single_;
  // A grouping builder is only ever used for the key it is stored under, so its key() names it.
  if (groupByKey_ && (b == nullptr || b->key() != m.key)) {
    auto [it, inserted] = batches_.try_emplace(std::string(m.key));
    if (inserted) it->second = std::make_unique<BatchBuilder>();
    b = it->second.get();
    last_ = b;
  }
  size_t before = b->payloadBytes();
  b->add(m, seq, std::move(cb));
  bytes_ += b->payloadBytes() - before;
  ++numMessages_;
  return numMessages_ >= maxMessages_ || bytes_ >= maxBytes_;
}

void BatchContainer::sortOrder() {
  if (order_.size() < 2) return;
  std::sort(order_.begin(), order_.end(), [](const BatchBuilder* a, const BatchBuilder* b) {
    return a->firstSequenceId() < b->firstSequenceId();
  });
}

Status splitBatch(std::string_view payload, int numMessages, std::vector<BatchedMessage>* out) {
  out->clear();
  if (numMessages <= 0) return Status::corruption("batch with no messages");
  out->reserve(static_cast<size_t>(numMessages));
  size_t pos = 0;
  for (int i = 0; i < numMessages; ++i) {
    if (payload.size() - pos < 4) return Status::corruption("batch truncated at a size field");
    uint32_t mdSize = readBE32(payload.data() + pos);
    pos += 4;
    if (mdSize > payload.size() - pos) return Status::corruption("batch metadata past the end");
    BatchedMessage bm;
    if (!bm.metadata.ParseFromArray(payload.data() + pos, static_cast<int>(mdSize))) {
      return Status::corruption("bad SingleMessageMetadata in batch");
    }
    pos += mdSize;
    int32_t size = bm.metadata.payload_size();
    if (size < 0 || static_cast<size_t>(size) > payload.size() - pos) {
      return Status::corruption("batch payload past the end");
    }
    bm.payloadOffset = static_cast<uint32_t>(pos);
    bm.payloadSize = static_cast<uint32_t>(size);
    pos += static_cast<size_t>(size);
    out->push_back(std::move(bm));
  }
  return Status::ok();
}

}  // namespace magnetar::client
