#include "websocket/endpoints.h"

#include <variant>

#include "base/logging.h"
#include "websocket/ws_protocol.h"

namespace magnetar::websocket {
namespace {

// RFC 6455 1003 (unsupported data): Pulsar's FailedToDeserializeFromJSON is code 3, which is not
// a valid close code on the wire.
constexpr uint16_t kCloseUnsupportedData = 1003;

// Posts text to the channel's strand, if the session is still there.
void sendFromAnyThread(const std::weak_ptr<Channel>& weak, std::string text) {
  auto ch = weak.lock();
  if (!ch) return;
  ch->runOnStrand([weak, text = std::move(text)]() mutable {
    if (auto c = weak.lock()) c->sendText(std::move(text));
  });
}

class ProducerEndpoint final : public EndpointHandler {
 public:
  ProducerEndpoint(std::weak_ptr<Channel> channel, client::Producer producer)
      : channel_(std::move(channel)), producer_(std::move(producer)) {}

  void onText(std::string_view text) override {
    auto parsed = parseProducerMessage(text);
    if (auto* e = std::get_if<ProducerError>(&parsed)) {
      if (auto ch = channel_.lock()) ch->sendText(producerAckError(*e));
      return;
    }
    const ProducerMessage& m = std::get<ProducerMessage>(parsed);
    client::OutgoingMessage out;
    out.payload = m.payload;
    if (m.key) out.key = *m.key;
    out.properties = m.properties;
    out.eventTime = m.eventTime;
    producer_.sendAsync(
        out, [weak = channel_, context = m.context](const Status& s, const client::MessageId& id) {
          sendFromAnyThread(weak, s ? producerAckOk(id, context)
                                    : producerAckError({"send-error:8", s.message(), context}));
        });
  }

  void onClose() override {
    producer_.closeAsync([](const Status&) {});
  }

 private:
  std::weak_ptr<Channel> channel_;
  client::Producer producer_;
};

// Pulsar's ConsumerHandler/ReaderHandler delivery rule: `pending_` counts messages out and not
// acknowledged (minus permits in pullMode); another is asked for while it is below maxPending_.
class ConsumerEndpoint final : public EndpointHandler,
                               public std::enable_shared_from_this<ConsumerEndpoint> {
 public:
  ConsumerEndpoint(std::weak_ptr<Channel> channel, client::Consumer consumer, int maxPending,
                   bool pullMode, bool reader)
      : channel_(std::move(channel)),
        consumer_(std::move(consumer)),
        maxPending_(pullMode ? 0 : std::max(maxPending, 1)),
        pullMode_(pullMode),
        reader_(reader) {}

  void onOpen() override {
    if (!pullMode_) receiveNext();
  }

  void onText(std::string_view text) override {
    auto cmd = parseConsumerCommand(text);
    if (!cmd.isOk()) return refuse(cmd.status().message());
    if (cmd->type == "isEndOfTopic") {
      if (auto ch = channel_.lock()) ch->sendText(endOfTopicJson(consumer_.hasReachedEndOfTopic()));
      return;
    }
    if (reader_) return resume();  // a reader's frame is an "ack" of nothing: one more may go
    if (cmd->type == "permit") {
      if (!cmd->permitMessages) return refuse("Missing required permitMessages field");
      if (!pullMode_) return;
      int64_t before = pending_;
      pending_ -= *cmd->permitMessages;
      if (before >= 0) receiveNext();
      return;
    }
    if (cmd->type == "unsubscribe") {
      consumer_.unsubscribeAsync([](const Status&) {});
      return;
    }
    // "negativeAcknowledge" and anything else with a messageId (Pulsar treats an unknown type
    // as an ack).
    if (!cmd->messageId) return refuse("Missing required messageId field");
    client::MessageId id;
    if (auto it = delivered_.find(*cmd->messageId); it != delivered_.end()) {
      id = it->second;
      delivered_.erase(it);
    } else if (auto decoded = decodeMessageId(*cmd->messageId)) {
      id = *decoded;
    } else {
      return refuse("Invalid messageId " + *cmd->messageId);
    }
    if (cmd->type == "negativeAcknowledge") {
      consumer_.negativeAcknowledge(id);
    } else {
      (void)consumer_.acknowledge(id);
    }
    resume();
  }

  void onClose() override {
    closed_ = true;
    consumer_.closeAsync([](const Status&) {});
  }

 private:
  void refuse(const std::string& why) {
    MLOG_DEBUG("websocket consumer on {}: {}", consumer_.topic(), why);
    if (auto ch = channel_.lock()) {
      ch->closeSession(kCloseUnsupportedData, std::string(kCloseDeserializeReason) + ": " + why);
    }
  }

  // An ack (or a reader's frame): one fewer pending; asks again when delivery had stopped.
  void resume() {
    if (pullMode_) return;
    int64_t before = pending_--;
    if (before >= maxPending_) receiveNext();
  }

  void receiveNext() {
    if (receiving_ || closed_) return;
    receiving_ = true;
    std::weak_ptr<ConsumerEndpoint> weak = weak_from_this();
    consumer_.receiveAsync([weak, channel = channel_](Result<client::Message> m) {
      auto ch = channel.lock();
      if (!ch) return;
      ch->runOnStrand([weak, m = std::move(m)]() mutable {
        if (auto self = weak.lock()) self->onMessage(std::move(m));
      });
    });
  }

  void onMessage(Result<client::Message> m) {
    receiving_ = false;
    if (!m.isOk() || closed_) return;  // closed
    std::string id = encodeMessageId(m->messageId());
    if (!reader_) delivered_[id] = m->messageId();
    if (auto ch = channel_.lock()) ch->sendText(consumerMessageJson(*m));
    if (++pending_ < maxPending_) receiveNext();
  }

  std::weak_ptr<Channel> channel_;
  client::Consumer consumer_;
  const int64_t maxPending_;
  const bool pullMode_;
  const bool reader_;
  int64_t pending_ = 0;
  bool receiving_ = false;
  bool closed_ = false;
  // The ids of delivered, unacknowledged messages (base64 -> id with its batch size), so an
  // ack names the message as received (Pulsar's messageIdCache).
  std::unordered_map<std::string, client::MessageId> delivered_;
};

}  // namespace

std::shared_ptr<EndpointHandler> makeProducerEndpoint(std::weak_ptr<Channel> channel,
                                                      client::Producer producer) {
  return std::make_shared<ProducerEndpoint>(std::move(channel), std::move(producer));
}

std::shared_ptr<EndpointHandler> makeConsumerEndpoint(std::weak_ptr<Channel> channel,
                                                      client::Consumer consumer, int maxPending,
                                                      bool pullMode, bool reader) {
  return std::make_shared<ConsumerEndpoint>(std::move(channel), std::move(consumer), maxPending,
                                            pullMode, reader);
}

}  // namespace magnetar::websocket
