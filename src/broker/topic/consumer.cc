#include "broker/topic/consumer.h"

#include "protocol/commands.h"

namespace magnetar::broker {

namespace {
const std::string kNone;
}  // namespace

void ConsumerSink::sendActiveConsumerChange(const Consumer* consumer, bool isActive) {
  sendFrame(protocol::Commands::newActiveConsumerChange(consumer->id(), isActive));
}

const std::string& ConsumerSink::peerAddress() const { return kNone; }
const std::string& ConsumerSink::clientVersion() const { return kNone; }

void ReceiptBatch::encode(net::FrameBatch& out) const {
  for (const Item& it : items) {
    if (it.ledgerId == kFrame) {
      out.appendBuffer(frames[static_cast<size_t>(it.entryId)]);
      continue;
    }
    uint8_t* dst = out.appendSpace(protocol::kMaxSendReceiptSize);
    size_t used = protocol::Commands::writeSendReceipt(
        dst, it.producerId, it.sequenceId, static_cast<uint64_t>(it.ledgerId),
        static_cast<uint64_t>(it.entryId), it.highestSequenceId);
    out.trimBytes(protocol::kMaxSendReceiptSize - used);
  }
}

void ReceiptBatch::clear() {
  items.clear();
  frames.clear();
  completed = 0;
  completedBytes = 0;
  nonPersistentCompleted = 0;
  closeAfter.clear();
}

void ProducerSink::sendAnswers(ReceiptBatch& batch) {
  if (batch.hasFrames()) {
    net::FrameBatch frames;
    batch.encode(frames);
    send(std::move(frames));
  }
  if (batch.completed > 0) publishCompleted(batch.completed, batch.completedBytes);
  if (batch.nonPersistentCompleted > 0) nonPersistentCompleted(batch.nonPersistentCompleted);
  for (uint64_t id : batch.closeAfter) closeProducerFromBroker(id);
  batch.clear();
}

}  // namespace magnetar::broker
