// The producer, consumer and reader ends of a WebSocket session (Pulsar's ProducerHandler,
// ConsumerHandler, ReaderHandler): what a text frame does and what goes back. Internal to
// src/websocket.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "client/consumer.h"
#include "client/producer.h"

namespace magnetar::websocket {

// What an endpoint sees of its session. Thread: sendText/closeSession on the session's strand;
// runOnStrand from any thread.
class Channel {
 public:
  virtual ~Channel() = default;
  // Queues a text message to the peer, in order.
  virtual void sendText(std::string text) = 0;
  // Sends a close frame (RFC 6455 code and reason) after what is queued, then ends.
  virtual void closeSession(uint16_t code, std::string reason) = 0;
  // Runs fn on the session's strand, if the session is still there.
  virtual void runOnStrand(std::function<void()> fn) = 0;
};

// One session's end. Thread: the session's strand.
class EndpointHandler {
 public:
  virtual ~EndpointHandler() = default;
  // After the WebSocket handshake.
  virtual void onOpen() {}
  virtual void onText(std::string_view text) = 0;
  // The session ended: closes the client producer or consumer (without waiting).
  virtual void onClose() = 0;
};

// Publishes each text frame's ProducerMessage; answers each with a ProducerAck, in order of the
// receipts (send-error:3 bad JSON, :7 bad payload or eventTime, :8 the send failed).
std::shared_ptr<EndpointHandler> makeProducerEndpoint(std::weak_ptr<Channel> channel,
                                                      client::Producer producer);

// Delivers messages as ConsumerMessage frames. Consumer (reader == false): up to
// receiverQueueSize unacknowledged, or in pullMode as many as "permit" commands granted; text
// frames ack ({"messageId"}), negatively ack, grant permits, ask isEndOfTopic. Reader: a text
// frame (any) lets one more message out; isEndOfTopic as above. A frame that is not JSON closes
// the session with 1003 "Failed to de-serialize from JSON".
std::shared_ptr<EndpointHandler> makeConsumerEndpoint(std::weak_ptr<Channel> channel,
                                                      client::Consumer consumer, int maxPending,
                                                      bool pullMode, bool reader);

}  // namespace magnetar::websocket
