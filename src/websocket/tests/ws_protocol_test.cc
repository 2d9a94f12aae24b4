#include "websocket/ws_protocol.h"

#include <gtest/gtest.h>

#include <map>

namespace magnetar::websocket {
namespace {

ParamLookup params(std::map<std::string, std::string> m) {
  return [m = std::move(m)](std::string_view name) -> std::optional<std::string> {
    auto it = m.find(std::string(name));
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(WsProtocol, ParsesEndpoints) {
  auto p = parseEndpoint("/ws/v2/producer/persistent/t/ns/a/b");
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(p->kind, EndpointKind::kProducer);
  EXPECT_EQ(p->topic, "persistent://t/ns/a/b");  // a topic may hold '/'
  auto c = parseEndpoint("/ws/v2/consumer/non-persistent/t/ns/x/my%20sub");
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c->topic, "non-persistent://t/ns/x");
  EXPECT_EQ(c->subscription, "my sub");
  EXPECT_EQ(parseEndpoint("/ws/pingpong").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parseEndpoint("/ws/v2/other/persistent/t/ns/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parseEndpoint("/ws/v2/producer/persistent/t/ns").status().message(),
            "Invalid topic name format");
  EXPECT_EQ(parseEndpoint("/ws/v2/consumer/persistent/t/ns/x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parseEndpoint("/ws/v2/producer/bogus/t/ns/x").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(WsProtocol, ConsumerParamsAsPulsarReadsThem) {
  auto p = consumerParams(params({{"subscriptionType", "Key_Shared"},
                                  {"receiverQueueSize", "5000"},
                                  {"pullMode", "TRUE"},
                                  {"negativeAckRedeliveryDelay", "250"}}),
                          false);
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(p->config.subscriptionType, client::SubscriptionType::kKeyShared);
  EXPECT_EQ(p->config.receiverQueueSize, 1000);  // at most 1000
  EXPECT_TRUE(p->pullMode);
  EXPECT_EQ(p->config.negativeAckRedeliveryDelay.count(), 250);
  EXPECT_EQ(consumerParams(params({{"subscriptionType", "Bogus"}}), false).status().message(),
            "Invalid query params: Invalid subscriptionType Bogus");
  EXPECT_FALSE(consumerParams(params({{"receiverQueueSize", "abc"}}), false).isOk());
  auto r = consumerParams(params({{"messageId", "earliest"}}), true);
  ASSERT_TRUE(r.isOk());
  EXPECT_FALSE(r->config.durable);
  EXPECT_EQ(*r->config.startMessageId, client::MessageId::earliest());
  EXPECT_EQ(*consumerParams(params({}), true)->config.startMessageId, client::MessageId::latest());
  EXPECT_FALSE(consumerParams(params({{"messageId", "zzz"}}), true).isOk());
}

TEST(WsProtocol, MessageIdsAreBase64OfMessageIdData) {
  // Pulsar 4.2.4 wrote "CAcQADAA" for ledger 7, entry 0 (batch_size 0 written).
  client::MessageId id{7, 0, -1, -1, 0};
  EXPECT_EQ(encodeMessageId(id), "CAcQADAA");
  auto back = decodeMessageId("CAcQADAA");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, id);
  client::MessageId batched{12, 3, 2, 4, 10};
  auto again = decodeMessageId(encodeMessageId(batched));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, batched);
  EXPECT_EQ(again->batchSize, 10);
  EXPECT_FALSE(decodeMessageId("!!!"));
  EXPECT_FALSE(decodeMessageId("aGk="));  // base64, but not a MessageIdData
}

TEST(WsProtocol, TimesAsDateFormatterWritesThem) {
  EXPECT_EQ(formatTime(1796512339590), "2026-12-05T23:12:19.59Z");
  EXPECT_EQ(formatTime(1796512339000), "2026-12-05T23:12:19Z");
  EXPECT_EQ(parseTime("2026-12-05T23:12:19.59Z"), 1796512339590u);
  EXPECT_FALSE(parseTime("yesterday"));
}

TEST(WsProtocol, ProducerMessagesAndErrors) {
  auto ok = parseProducerMessage(
      R"({"payload":"aGk=","properties":{"a":"1"},"context":"c","key":"k","x":1})");
  ASSERT_TRUE(std::holds_alternative<ProducerMessage>(ok));
  const auto& m = std::get<ProducerMessage>(ok);
  EXPECT_EQ(m.payload, "hi");
  EXPECT_EQ(m.properties.at(0), (client::Property{"a", "1"}));
  EXPECT_EQ(*m.context, "c");
  EXPECT_EQ(*m.key, "k");
  auto bad = [](std::string_view text) {
    return std::get<ProducerError>(parseProducerMessage(text));
  };
  EXPECT_EQ(bad("not json").result, "send-error:3");
  EXPECT_EQ(bad(R"({"payload":"!!!","context":"c"})").result, "send-error:7");
  EXPECT_EQ(*bad(R"({"payload":"!!!","context":"c"})").context, "c");
  EXPECT_EQ(bad(R"({"context":"c"})").result, "send-error:7");
  EXPECT_EQ(bad(R"({"payload":"aGk=","eventTime":"x"})").result, "send-error:7");
  EXPECT_EQ(
      producerAckOk({7, 0, -1, -1, 0}, std::string("c")),
      R"({"result":"ok","messageId":"CAcQADAA","context":"c","errorCode":0,"schemaVersion":0})");
}

TEST(WsProtocol, ConsumerCommands) {
  auto c = parseConsumerCommand(R"({"type":"permit","permitMessages":3})");
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c->type, "permit");
  EXPECT_EQ(*c->permitMessages, 3);
  auto ack = parseConsumerCommand(R"({"messageId":"CAcQADAA"})");
  ASSERT_TRUE(ack.isOk());
  EXPECT_EQ(ack->type, "");
  EXPECT_EQ(*ack->messageId, "CAcQADAA");
  EXPECT_FALSE(parseConsumerCommand("{not json").isOk());
  EXPECT_FALSE(parseConsumerCommand("[1]").isOk());
  EXPECT_EQ(endOfTopicJson(false), R"({"endOfTopic":false})");
}

}  // namespace
}  // namespace magnetar::websocket
