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

}  // namespace magnetar::broker
