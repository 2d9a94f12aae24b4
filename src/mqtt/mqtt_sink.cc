#include "mqtt/mqtt_sink.h"

#include "mqtt/mqtt_connection.h"

namespace magnetar::mqtt {

MqttSink::MqttSink(const std::shared_ptr<MqttConnection>& cnx)
    : cnx_(cnx), peer_(cnx->peerAddress()) {}

void MqttSink::send(net::FrameBatch&& frames) {
  auto cnx = cnx_.lock();
  if (!cnx) return;
  // The frames as one byte string: receipts are small, MESSAGE entries are copied once here
  // (MQTT re-frames every message anyway).
  std::string bytes;
  bytes.reserve(frames.totalBytes());
  for (const auto& seg : frames.segments()) {
    if (seg.buffer) {
      bytes.append(seg.buffer.view());
    } else {
      bytes.append(frames.bytes(), seg.offset, seg.length);
    }
  }
  cnx->loop().execute([cnx, bytes = std::move(bytes)] { cnx->onBrokerFrames(bytes); });
}

void MqttSink::sendFrame(const Buffer& frame) {
  net::FrameBatch b;
  b.appendBuffer(frame);
  send(std::move(b));
}

void MqttSink::publishCompleted(uint32_t n, uint64_t /*bytes*/) {
  if (auto cnx = cnx_.lock()) cnx->loop().execute([cnx, n] { cnx->onPublishCompleted(n); });
}

void MqttSink::closeProducerFromBroker(uint64_t producerId) {
  if (auto cnx = cnx_.lock()) {
    cnx->loop().execute([cnx, producerId] { cnx->onProducerClosedByBroker(producerId); });
  }
}

void MqttSink::closeConsumerFromBroker(uint64_t consumerId) {
  if (auto cnx = cnx_.lock()) {
    cnx->loop().execute([cnx, consumerId] { cnx->onConsumerClosedByBroker(consumerId); });
  }
}

}  // namespace magnetar::mqtt
