// MqttSink: how the topics reach an MqttConnection. The topics' producers and consumers hold it
// (ProducerSink, ConsumerSink); it holds the connection weakly, so a topic never keeps a closed
// connection alive, and hands every call over to the connection's loop.
#pragma once

#include <memory>
#include <string>

#include "broker/topic/consumer.h"

namespace magnetar::mqtt {

class MqttConnection;

// Thread: called on topic executors (ml-worker); hands over to the connection's loop, where a
// closed connection ignores it.
class MqttSink final : public broker::ProducerSink, public broker::ConsumerSink {
 public:
  explicit MqttSink(const std::shared_ptr<MqttConnection>& cnx);
  // Frames of SEND_RECEIPT/SEND_ERROR (producers) and MESSAGE (consumers), decoded on the loop.
  void send(net::FrameBatch&& frames) override;
  void sendFrame(const Buffer& frame) override;
  void publishCompleted(uint32_t n, uint64_t bytes) override;
  void closeProducerFromBroker(uint64_t producerId) override;
  void closeConsumerFromBroker(uint64_t consumerId) override;
  const std::string& peerAddress() const override { return peer_; }
  const std::string& clientVersion() const override { return version_; }

 private:
  const std::weak_ptr<MqttConnection> cnx_;
  const std::string peer_;
  const std::string version_ = "MQTT";
};

}  // namespace magnetar::mqtt
