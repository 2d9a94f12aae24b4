#include "websocket/ws_protocol.h"

#include <fmt/format.h>

#include <boost/json.hpp>
#include <charconv>
#include <ctime>

#include "admin/router.h"
#include "broker/common/base64.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::websocket {
namespace {

namespace json = boost::json;

std::vector<std::string_view> splitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

Status badArgument(std::string_view what) {
  return Status::invalidArgument("Invalid query params: " + std::string(what));
}

template <typename T>
Result<std::optional<T>> numberParam(const ParamLookup& lookup, std::string_view name) {
  auto v = lookup(name);
  if (!v) return std::optional<T>{};
  T out{};
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || ptr != v->data() + v->size() || v->empty()) {
    return badArgument(fmt::format("For input string: \"{}\"", *v));
  }
  return std::optional<T>{out};
}

// Java's Boolean.parseBoolean: "true" in any case, everything else false.
bool javaBoolean(const std::optional<std::string>& v) {
  if (!v || v->size() != 4) return false;
  std::string lower;
  for (char c : *v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "true";
}

Result<client::SubscriptionType> subscriptionTypeOf(const std::string& name) {
  if (name == "Exclusive") return client::SubscriptionType::kExclusive;
  if (name == "Shared") return client::SubscriptionType::kShared;
  if (name == "Failover") return client::SubscriptionType::kFailover;
  if (name == "Key_Shared") return client::SubscriptionType::kKeyShared;
  return badArgument("Invalid subscriptionType " + name);
}

std::optional<std::string> stringField(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return std::nullopt;
  if (it->value().is_string()) return std::string(it->value().as_string());
  return json::serialize(it->value());  // Jackson reads a scalar as its text
}

}  // namespace

Result<Endpoint> parseEndpoint(std::string_view path) {
  auto parts = splitPath(path);
  if (parts.size() < 3 || parts[1] != "ws" || parts[2] != "v2") {
    return Status::notFound("no WebSocket endpoint at " + std::string(path));
  }
  Endpoint e;
  if (parts.size() > 3 && parts[3] == "producer") {
    e.kind = EndpointKind::kProducer;
  } else if (parts.size() > 3 && parts[3] == "consumer") {
    e.kind = EndpointKind::kConsumer;
  } else if (parts.size() > 3 && parts[3] == "reader") {
    e.kind = EndpointKind::kReader;
  } else {
    return Status::notFound("no WebSocket endpoint at " + std::string(path));
  }
  const bool consumer = e.kind == EndpointKind::kConsumer;
  if (parts.size() < 8 || (consumer && parts.size() != 9)) {
    return Status::invalidArgument("Invalid topic name format");
  }
  if (parts[4] != "persistent" && parts[4] != "non-persistent") {
    return Status::invalidArgument("Invalid topic domain " + std::string(parts[4]));
  }
  std::string local(parts[7]);
  size_t end = consumer ? parts.size() - 1 : parts.size();
  for (size_t i = 8; i < end; ++i) {
    if (!parts[i].empty()) local += "/" + std::string(parts[i]);
  }
  auto decoded = admin::codecDecode(local);
  e.topic = fmt::format("{}://{}/{}/{}", parts[4], parts[5], parts[6], decoded.value_or(local));
  if (consumer) {
    if (parts[8].empty()) return Status::invalidArgument("Empty subscription name");
    e.subscription = admin::codecDecode(parts[8]).value_or(std::string(parts[8]));
  }
  return e;
}

Result<ConsumerParams> consumerParams(const ParamLookup& lookup, bool reader) {
  ConsumerParams p;
  client::ConsumerConfig& c = p.config;
  auto queue = numberParam<int>(lookup, "receiverQueueSize");
  if (!queue.isOk()) return queue.status();
  if (*queue) c.receiverQueueSize = std::max(1, std::min(**queue, 1000));
  if (reader) {
    c.durable = false;
    c.startMessageId = client::MessageId::latest();
    if (auto id = lookup("messageId"); id && !id->empty()) {
      if (*id == "earliest") {
        c.startMessageId = client::MessageId::earliest();
      } else if (*id != "latest") {
        c.startMessageId = decodeMessageId(*id);
        if (!c.startMessageId) return badArgument("Invalid messageId value");
      }
    }
    p.startMessageId = c.startMessageId;
    if (auto name = lookup("readerName")) c.consumerName = *name;
    return p;
  }
  if (auto type = lookup("subscriptionType")) {
    auto t = subscriptionTypeOf(*type);
    if (!t.isOk()) return t.status();
    c.subscriptionType = *t;
  }
  if (auto name = lookup("consumerName")) c.consumerName = *name;
  auto priority = numberParam<int>(lookup, "priorityLevel");
  if (!priority.isOk()) return priority.status();
  if (*priority) c.priorityLevel = **priority;
  auto nack = numberParam<int>(lookup, "negativeAckRedeliveryDelay");
  if (!nack.isOk()) return nack.status();
  if (*nack) c.negativeAckRedeliveryDelay = std::chrono::milliseconds(std::max(0, **nack));
  auto ackTimeout = numberParam<int>(lookup, "ackTimeoutMillis");
  if (!ackTimeout.isOk()) return ackTimeout.status();
  p.pullMode = javaBoolean(lookup("pullMode"));
  return p;
}

Result<client::ProducerConfig> producerParams(const ParamLookup& lookup) {
  client::ProducerConfig c;
  c.batchingEnabled = false;  // ProducerHandler: enableBatching(false) unless asked
  c.blockIfQueueFull = false;
  if (auto name = lookup("producerName")) c.producerName = *name;
  if (auto b = lookup("batchingEnabled")) c.batchingEnabled = javaBoolean(b);
  auto sendTimeout = numberParam<int>(lookup, "sendTimeoutMillis");
  if (!sendTimeout.isOk()) return sendTimeout.status();
  if (*sendTimeout) c.sendTimeout = std::chrono::milliseconds(std::max(0, **sendTimeout));
  auto maxMessages = numberParam<int>(lookup, "batchingMaxMessages");
  if (!maxMessages.isOk()) return maxMessages.status();
  if (*maxMessages) c.batchingMaxMessages = std::max(1, **maxMessages);
  auto pending = numberParam<int>(lookup, "maxPendingMessages");
  if (!pending.isOk()) return pending.status();
  if (*pending) c.maxPendingMessages = std::max(0, **pending);
  auto delay = numberParam<int>(lookup, "batchingMaxPublishDelay");
  if (!delay.isOk()) return delay.status();
  if (*delay) c.batchingMaxPublishDelay = std::chrono::milliseconds(std::max(0, **delay));
  if (auto mode = lookup("messageRoutingMode")) {
    if (*mode == "RoundRobinPartition") {
      c.routingMode = client::RoutingMode::kRoundRobin;
    } else if (*mode == "SinglePartition") {
      c.routingMode = client::RoutingMode::kSinglePartition;
    } else if (*mode != "CustomPartition") {
      return badArgument("Invalid messageRoutingMode " + *mode);
    }
  }
  return c;
}

std::string encodeMessageId(const client::MessageId& id) {
  proto::MessageIdData d;
  d.set_ledgerid(static_cast<uint64_t>(id.ledgerId));
  d.set_entryid(static_cast<uint64_t>(id.entryId));
  if (id.partition >= 0) d.set_partition(id.partition);
  if (id.batchIndex >= 0) d.set_batch_index(id.batchIndex);
  d.set_batch_size(std::max(id.batchSize, 0));  // written even when 0, as MessageIdImpl does
  return broker::base64Encode(d.SerializeAsString());
}

std::optional<client::MessageId> decodeMessageId(std::string_view base64) {
  auto bytes = broker::base64Decode(std::string(base64));
  if (!bytes) return std::nullopt;
  proto::MessageIdData d;
  if (!d.ParseFromString(*bytes) || !d.IsInitialized()) return std::nullopt;
  client::MessageId id;
  id.ledgerId = static_cast<int64_t>(d.ledgerid());
  id.entryId = static_cast<int64_t>(d.entryid());
  id.partition = d.has_partition() ? d.partition() : -1;
  id.batchIndex = d.has_batch_index() ? d.batch_index() : -1;
  id.batchSize = d.has_batch_size() ? d.batch_size() : 0;
  return id;
}

std::string formatTime(uint64_t epochMillis) {
  std::time_t secs = static_cast<std::time_t>(epochMillis / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  // ISO_OFFSET_DATE_TIME writes the fraction without trailing zeros (".59", none for ".000").
  std::string fraction = fmt::format(".{:03}", epochMillis % 1000);
  while (fraction.back() == '0') fraction.pop_back();
  if (fraction == ".") fraction.clear();
  return fmt::format("{}{}Z", buf, fraction);
}

std::optional<uint64_t> parseTime(std::string_view text) {
  std::tm tm{};
  std::string s(text);
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return std::nullopt;
  uint64_t millis = 0;
  if (*rest == '.') {
    int digits = 0;
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits) {
      if (digits < 3) millis = millis * 10 + static_cast<uint64_t>(*rest - '0');
    }
    for (; digits < 3; ++digits) millis *= 10;
  }
  if (std::string_view(rest) != "Z" && std::string_view(rest) != "+00:00") return std::nullopt;
  std::time_t secs = timegm(&tm);
  if (secs < 0) return std::nullopt;
  return static_cast<uint64_t>(secs) * 1000 + millis;
}

std::variant<ProducerMessage, ProducerError> parseProducerMessage(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return ProducerError{"send-error:3", ec ? ec.message() : "not a JSON object", std::nullopt};
  }
  const json::object& o = v.as_object();
  ProducerMessage m;
  m.context = stringField(o, "context");
  auto payload = stringField(o, "payload");
  if (!payload) return ProducerError{"send-error:7", "payload is missing", m.context};
  auto bytes = broker::base64Decode(*payload);
  if (!bytes) {
    return ProducerError{"send-error:7", "Invalid Base64 message-payload error=not base64",
                         m.context};
  }
  m.payload = std::move(*bytes);
  m.key = stringField(o, "key");
  if (auto it = o.find("properties"); it != o.end() && it->value().is_object()) {
    for (const auto& [k, val] : it->value().as_object()) {
      m.properties.emplace_back(
          std::string(k), val.is_string() ? std::string(val.as_string()) : json::serialize(val));
    }
  }
  if (auto t = stringField(o, "eventTime")) {
    auto ms = parseTime(*t);
    if (!ms) return ProducerError{"send-error:7", "Invalid eventTime " + *t, m.context};
    m.eventTime = *ms;
  }
  return m;
}

std::string producerAckOk(const client::MessageId& id, const std::optional<std::string>& context) {
  json::object o;
  o["result"] = "ok";
  o["messageId"] = encodeMessageId(id);
  if (context) o["context"] = *context;
  o["errorCode"] = 0;
  o["schemaVersion"] = 0;
  return json::serialize(o);
}

std::string producerAckError(const ProducerError& e) {
  json::object o;
  o["result"] = e.result;
  o["errorMsg"] = e.message;
  if (e.context) o["context"] = *e.context;
  o["errorCode"] = 0;
  o["schemaVersion"] = 0;
  return json::serialize(o);
}

std::string consumerMessageJson(const client::Message& m) {
  json::object o;
  o["messageId"] = encodeMessageId(m.messageId());
  o["payload"] = broker::base64Encode(std::string(m.payload()));
  json::object props;
  for (const auto& [k, v] : m.properties()) props[k] = v;
  o["properties"] = std::move(props);
  o["publishTime"] = formatTime(m.publishTime());
  o["redeliveryCount"] = m.redeliveryCount();
  if (m.eventTime() != 0) o["eventTime"] = formatTime(m.eventTime());
  if (m.hasKey()) o["key"] = m.key();
  return json::serialize(o);
}

std::string endOfTopicJson(bool reached) {
  json::object o;
  o["endOfTopic"] = reached;
  return json::serialize(o);
}

Result<ConsumerCommand> parseConsumerCommand(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return Status::invalidArgument(ec ? ec.message() : "not a JSON object");
  }
  const json::object& o = v.as_object();
  ConsumerCommand c;
  c.type = stringField(o, "type").value_or("");
  c.messageId = stringField(o, "messageId");
  if (auto it = o.find("permitMessages"); it != o.end() && !it->value().is_null()) {
    if (!it->value().is_int64()) return Status::invalidArgument("permitMessages is not a number");
    c.permitMessages = it->value().as_int64();
  }
  return c;
}

}  // namespace magnetar::websocket
