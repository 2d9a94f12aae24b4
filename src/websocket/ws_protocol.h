// The WebSocket API's request paths, query parameters and JSON messages, as Pulsar's
// pulsar-websocket module reads and writes them (ProducerMessage, ProducerAck, ConsumerMessage,
// ConsumerCommand, EndOfTopicResponse). Pure functions: no I/O; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "client/client_config.h"
#include "client/message.h"

namespace magnetar::websocket {

// What a request path asks for.
enum class EndpointKind { kProducer, kConsumer, kReader };

// A parsed /ws/v2/{producer|consumer|reader}/{domain}/{tenant}/{ns}/{topic}[/{subscription}]
// path. /ws/pingpong is not one: Pulsar's broker registers no ping-pong servlet (404).
struct Endpoint {
  EndpointKind kind = EndpointKind::kProducer;
  std::string topic;         // "persistent://tenant/ns/topic" (topic Codec-decoded)
  std::string subscription;  // consumers only, Codec-decoded
};

// Parses a request path as Pulsar's AbstractWebSocketHandler.extractTopicName and
// ConsumerHandler.extractSubscription do (v2 only; a topic may hold '/'). kInvalidArgument
// ("Invalid topic name format", ...) when it is not one; kNotFound for a path under /ws/ that
// names no endpoint.
Result<Endpoint> parseEndpoint(std::string_view path);

// The query parameters Pulsar's ConsumerHandler and ReaderHandler read, with Pulsar's
// defaults and bounds (receiverQueueSize at most 1000). kInvalidArgument with Pulsar's message
// ("Invalid subscriptionType X", a number that does not parse) for a bad one.
struct ConsumerParams {
  client::ConsumerConfig config;
  bool pullMode = false;
  std::optional<client::MessageId> startMessageId;  // reader: messageId=earliest|latest|base64
};
// lookup(name): the decoded query parameter, nullopt when absent.
using ParamLookup = std::function<std::optional<std::string>(std::string_view)>;
Result<ConsumerParams> consumerParams(const ParamLookup& lookup, bool reader);

// The producer query parameters Pulsar's ProducerHandler reads (producerName,
// initialSequenceId, sendTimeoutMillis, batchingEnabled, batchingMaxMessages,
// maxPendingMessages, batchingMaxPublishDelay, messageRoutingMode); batching is off unless
// asked for, as there.
Result<client::ProducerConfig> producerParams(const ParamLookup& lookup);

// A message id as the API writes it: base64 of Pulsar's MessageIdData protobuf (ledgerId,
// entryId, partition, batch_index), as MessageId.toByteArray. decode: nullopt on bad base64 or
// bytes that are not a MessageIdData.
std::string encodeMessageId(const client::MessageId& id);
std::optional<client::MessageId> decodeMessageId(std::string_view base64);

// Milliseconds since the epoch as Pulsar's DateFormatter writes them (ISO-8601 with offset, UTC:
// "2026-12-05T23:10:00.123Z"), and back (nullopt when it does not parse).
std::string formatTime(uint64_t epochMillis);
std::optional<uint64_t> parseTime(std::string_view text);

// A producer's JSON message (ProducerMessage): payload (base64), properties, context, key,
// eventTime.
struct ProducerMessage {
  std::string payload;  // decoded
  std::vector<client::Property> properties;
  std::optional<std::string> context;
  std::optional<std::string> key;
  uint64_t eventTime = 0;
};
// An error that Pulsar answers with a ProducerAck result (WebSocketError's names):
// "FailedToDeserializeFromJSON" or "PayloadEncodingError", with its message.
struct ProducerError {
  std::string result;
  std::string message;
  std::optional<std::string> context;
};
// Parses one producer text frame; the error when Pulsar would answer one.
std::variant<ProducerMessage, ProducerError> parseProducerMessage(std::string_view text);

// ProducerAck JSON: {"result":"ok","messageId":...,"context":...} or
// {"result":"send-error:<code>","errorMsg":...,"context":...}.
std::string producerAckOk(const client::MessageId& id, const std::optional<std::string>& context);
std::string producerAckError(const ProducerError& e);

// ConsumerMessage JSON of a received message (messageId, payload, properties, publishTime,
// redeliveryCount, eventTime and key when set).
std::string consumerMessageJson(const client::Message& m);
// EndOfTopicResponse JSON: {"endOfTopic":b}.
std::string endOfTopicJson(bool reached);

// A consumer's or reader's command (ConsumerCommand): type ("" = ack, "negativeAcknowledge",
// "permit", "unsubscribe", "isEndOfTopic"), messageId (base64), permitMessages.
struct ConsumerCommand {
  std::string type;
  std::optional<std::string> messageId;
  std::optional<int64_t> permitMessages;
};
// kInvalidArgument when the text is not a JSON object of that shape (Pulsar then closes the
// session, WebSocketError.FailedToDeserializeFromJSON).
Result<ConsumerCommand> parseConsumerCommand(std::string_view text);

// Pulsar's WebSocketError codes (close status codes of a session it ends).
inline constexpr uint16_t kCloseDeserialize = 3;  // FailedToDeserializeFromJSON
inline constexpr const char* kCloseDeserializeReason = "Failed to de-serialize from JSON";

}  // namespace magnetar::websocket
