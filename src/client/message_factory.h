// MessageFactory: builds received Messages from a MESSAGE frame's parts (internal).
#pragma once

#include <memory>
#include <string>

#include "base/buffer.h"
#include "client/batch.h"
#include "client/message.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::client {

// Thread: stateless.
class MessageFactory {
 public:
  // A non-batched message: payload at [payloadOffset, +payloadSize) of entry.
  static Message single(const Buffer& entry, size_t payloadOffset, size_t payloadSize,
                        const proto::MessageMetadata& md, const MessageId& id,
                        uint32_t redeliveryCount, const std::shared_ptr<const std::string>& topic);
  // Message `index` of a batch whose payload starts at batchPayloadOffset in entry.
  static Message batched(const Buffer& entry, size_t batchPayloadOffset, const BatchedMessage& bm,
                         const proto::MessageMetadata& md, const MessageId& id,
                         uint32_t redeliveryCount, const std::shared_ptr<const std::string>& topic);

 private:
  // The fields single and batched messages fill alike: the entry's from md, the key and
  // properties from `own` (md itself, or a batched message's SingleMessageMetadata).
  template <class Own>
  static Message make(const Buffer& entry, size_t payloadOffset, size_t payloadSize,
                      const proto::MessageMetadata& md, const Own& own, const MessageId& id,
                      uint32_t redeliveryCount, const std::shared_ptr<const std::string>& topic);
};

}  // namespace magnetar::client
