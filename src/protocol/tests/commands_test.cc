// Round trip of every Commands builder: encode -> FrameDecoder -> compare fields.
#include "protocol/commands.h"

#include <gtest/gtest.h>

#include "protocol/tests/test_util.h"

namespace magnetar::protocol {
namespace {

using testing::decodeOne;
using BC = proto::BaseCommand;

TEST(CommandsTest, FrameSizesAreConsistent) {
  Buffer f = Commands::newSuccess(77);
  ASSERT_GE(f.size(), 8u);
  const uint8_t* p = f.data();
  uint32_t total = (uint32_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
  uint32_t cmd = (uint32_t{p[4]} << 24) | (p[5] << 16) | (p[6] << 8) | p[7];
  EXPECT_EQ(total, f.size() - 4);
  EXPECT_EQ(cmd, f.size() - 8);
  proto::BaseCommand parsed;
  ASSERT_TRUE(parsed.ParseFromArray(p + 8, static_cast<int>(cmd)));
  EXPECT_EQ(parsed.type(), BC::SUCCESS);
  EXPECT_EQ(parsed.success().request_id(), 77u);
}

TEST(CommandsTest, ConnectAndConnected) {
  proto::FeatureFlags flags;
  flags.set_supports_auth_refresh(true);
  flags.set_supports_broker_entry_metadata(true);
  auto c = decodeOne(Commands::newConnect("magnetar-client 0.1", "token", "secret", 19, &flags,
                                          "pulsar://b:6650"));
  EXPECT_TRUE(c.entry.empty());
  ASSERT_EQ(c.cmd.type(), BC::CONNECT);
  EXPECT_EQ(c.cmd.connect().client_version(), "magnetar-client 0.1");
  EXPECT_EQ(c.cmd.connect().auth_method_name(), "token");
  EXPECT_EQ(c.cmd.connect().auth_data(), "secret");
  EXPECT_EQ(c.cmd.connect().protocol_version(), 19);
  EXPECT_EQ(c.cmd.connect().proxy_to_broker_url(), "pulsar://b:6650");
  EXPECT_TRUE(c.cmd.connect().feature_flags().supports_broker_entry_metadata());
  EXPECT_FALSE(c.cmd.connect().feature_flags().supports_topic_watchers());

  auto plain = decodeOne(Commands::newConnect("x"));
  EXPECT_FALSE(plain.cmd.connect().has_auth_method_name());
  EXPECT_EQ(plain.cmd.connect().protocol_version(), kMaxProtocolVersion);

  auto d = decodeOne(Commands::newConnected("magnetar 0.1", 21, 5 * 1024 * 1024));
  ASSERT_EQ(d.cmd.type(), BC::CONNECTED);
  EXPECT_EQ(d.cmd.connected().server_version(), "magnetar 0.1");
  EXPECT_EQ(d.cmd.connected().protocol_version(), 21);
  EXPECT_EQ(d.cmd.connected().max_message_size(), 5 * 1024 * 1024);
  EXPECT_FALSE(d.cmd.connected().has_feature_flags());
  auto d2 = decodeOne(Commands::newConnected("m", 15, 100, &flags));
  EXPECT_TRUE(d2.cmd.connected().feature_flags().supports_auth_refresh());
}

TEST(CommandsTest, PingPongSuccessError) {
  EXPECT_EQ(decodeOne(Commands::newPing()).cmd.type(), BC::PING);
  EXPECT_EQ(decodeOne(Commands::newPong()).cmd.type(), BC::PONG);
  auto s = decodeOne(Commands::newSuccess(12345678901ULL));
  ASSERT_EQ(s.cmd.type(), BC::SUCCESS);
  EXPECT_EQ(s.cmd.success().request_id(), 12345678901ULL);
  auto e = decodeOne(Commands::newError(9, proto::TopicNotFound, "no such topic"));
  ASSERT_EQ(e.cmd.type(), BC::ERROR);
  EXPECT_EQ(e.cmd.error().request_id(), 9u);
  EXPECT_EQ(e.cmd.error().error(), proto::TopicNotFound);
  EXPECT_EQ(e.cmd.error().message(), "no such topic");
}

TEST(CommandsTest, ProducerSuccessAndSendError) {
  auto p = decodeOne(Commands::newProducerSuccess(3, "standalone-0-1", 41, "v1", false, 7));
  ASSERT_EQ(p.cmd.type(), BC::PRODUCER_SUCCESS);
  const auto& ps = p.cmd.producer_success();
  EXPECT_EQ(ps.request_id(), 3u);
  EXPECT_EQ(ps.producer_name(), "standalone-0-1");
  EXPECT_EQ(ps.last_sequence_id(), 41);
  EXPECT_EQ(ps.schema_version(), "v1");
  EXPECT_FALSE(ps.producer_ready());
  EXPECT_EQ(ps.topic_epoch(), 7u);
  auto p2 = decodeOne(Commands::newProducerSuccess(4, "p"));
  EXPECT_EQ(p2.cmd.producer_success().last_sequence_id(), -1);
  // Always present (empty without a schema): the Java client reads it unconditionally.
  EXPECT_TRUE(p2.cmd.producer_success().has_schema_version());
  EXPECT_EQ(p2.cmd.producer_success().schema_version(), "");
  EXPECT_TRUE(p2.cmd.producer_success().producer_ready());

  auto se = decodeOne(Commands::newSendError(5, 6, proto::ChecksumError, "bad crc"));
  ASSERT_EQ(se.cmd.type(), BC::SEND_ERROR);
  EXPECT_EQ(se.cmd.send_error().producer_id(), 5u);
  EXPECT_EQ(se.cmd.send_error().sequence_id(), 6u);
  EXPECT_EQ(se.cmd.send_error().error(), proto::ChecksumError);
  EXPECT_EQ(se.cmd.send_error().message(), "bad crc");
}

TEST(CommandsTest, EndTxnOnPartitionResponse) {
  auto ok = decodeOne(Commands::newEndTxnOnPartitionResponse(7, 42, 3));
  ASSERT_EQ(ok.cmd.type(), BC::END_TXN_ON_PARTITION_RESPONSE);
  const auto& r = ok.cmd.endtxnonpartitionresponse();
  EXPECT_EQ(r.request_id(), 7u);
  EXPECT_EQ(r.txnid_least_bits(), 42u);
  EXPECT_EQ(r.txnid_most_bits(), 3u);
  EXPECT_FALSE(r.has_error());
  auto err = decodeOne(Commands::newEndTxnOnPartitionResponse(8, 1, 0, proto::NotAllowedError,
                                                              "Transaction buffer disable!"));
  EXPECT_EQ(err.cmd.endtxnonpartitionresponse().error(), proto::NotAllowedError);
  EXPECT_EQ(err.cmd.endtxnonpartitionresponse().message(), "Transaction buffer disable!");
}

TEST(CommandsTest, LookupAndPartitionMetadata) {
  auto l =
      decodeOne(Commands::newLookupResponse(8, "pulsar://h:6650", "pulsar+ssl://h:6651", true));
  ASSERT_EQ(l.cmd.type(), BC::LOOKUP_RESPONSE);
  const auto& lr = l.cmd.lookuptopicresponse();
  EXPECT_EQ(lr.request_id(), 8u);
  EXPECT_EQ(lr.brokerserviceurl(), "pulsar://h:6650");
  EXPECT_EQ(lr.brokerserviceurltls(), "pulsar+ssl://h:6651");
  EXPECT_EQ(lr.response(), proto::CommandLookupTopicResponse::Connect);
  EXPECT_TRUE(lr.authoritative());
  EXPECT_FALSE(lr.has_error());

  auto le = decodeOne(Commands::newLookupErrorResponse(9, proto::ServiceNotReady, "later"));
  EXPECT_EQ(le.cmd.lookuptopicresponse().response(), proto::CommandLookupTopicResponse::Failed);
  EXPECT_EQ(le.cmd.lookuptopicresponse().error(), proto::ServiceNotReady);
  EXPECT_EQ(le.cmd.lookuptopicresponse().message(), "later");

  auto pm = decodeOne(Commands::newPartitionMetadataResponse(10, 16));
  ASSERT_EQ(pm.cmd.type(), BC::PARTITIONED_METADATA_RESPONSE);
  EXPECT_EQ(pm.cmd.partitionmetadataresponse().partitions(), 16u);
  EXPECT_EQ(pm.cmd.partitionmetadataresponse().response(),
            proto::CommandPartitionedTopicMetadataResponse::Success);
  auto pe = decodeOne(Commands::newPartitionMetadataErrorResponse(11, proto::MetadataError, "x"));
  EXPECT_EQ(pe.cmd.partitionmetadataresponse().response(),
            proto::CommandPartitionedTopicMetadataResponse::Failed);
  EXPECT_EQ(pe.cmd.partitionmetadataresponse().error(), proto::MetadataError);
  EXPECT_EQ(pe.cmd.partitionmetadataresponse().request_id(), 11u);

  auto lk = decodeOne(Commands::newLookup("persistent://public/default/t", 12, true, "internal"));
  ASSERT_EQ(lk.cmd.type(), BC::LOOKUP);
  EXPECT_EQ(lk.cmd.lookuptopic().topic(), "persistent://public/default/t");
  EXPECT_EQ(lk.cmd.lookuptopic().request_id(), 12u);
  EXPECT_TRUE(lk.cmd.lookuptopic().authoritative());
  EXPECT_EQ(lk.cmd.lookuptopic().advertised_listener_name(), "internal");

  auto pq = decodeOne(Commands::newPartitionedMetadata("t", 13, false));
  ASSERT_EQ(pq.cmd.type(), BC::PARTITIONED_METADATA);
  EXPECT_EQ(pq.cmd.partitionmetadata().topic(), "t");
  EXPECT_FALSE(pq.cmd.partitionmetadata().metadata_auto_creation_enabled());
  EXPECT_TRUE(
      decodeOne(Commands::newPartitionedMetadata("t", 14)).cmd.partitionmetadata()
          .metadata_auto_creation_enabled());
}

TEST(CommandsTest, ConsumerNotifications) {
  auto a = decodeOne(Commands::newActiveConsumerChange(21, true));
  ASSERT_EQ(a.cmd.type(), BC::ACTIVE_CONSUMER_CHANGE);
  EXPECT_EQ(a.cmd.active_consumer_change().consumer_id(), 21u);
  EXPECT_TRUE(a.cmd.active_consumer_change().is_active());

  auto cp = decodeOne(Commands::newCloseProducer(1, 2, "pulsar://other:6650"));
  ASSERT_EQ(cp.cmd.type(), BC::CLOSE_PRODUCER);
  EXPECT_EQ(cp.cmd.close_producer().producer_id(), 1u);
  EXPECT_EQ(cp.cmd.close_producer().request_id(), 2u);
  EXPECT_EQ(cp.cmd.close_producer().assignedbrokerserviceurl(), "pulsar://other:6650");
  EXPECT_FALSE(cp.cmd.close_producer().has_assignedbrokerserviceurltls());

  auto cc = decodeOne(Commands::newCloseConsumer(3, 4));
  ASSERT_EQ(cc.cmd.type(), BC::CLOSE_CONSUMER);
  EXPECT_EQ(cc.cmd.close_consumer().consumer_id(), 3u);
  EXPECT_EQ(cc.cmd.close_consumer().request_id(), 4u);

  auto r = decodeOne(Commands::newReachedEndOfTopic(5));
  ASSERT_EQ(r.cmd.type(), BC::REACHED_END_OF_TOPIC);
  EXPECT_EQ(r.cmd.reachedendoftopic().consumer_id(), 5u);

  auto m = decodeOne(Commands::newTopicMigrated(proto::CommandTopicMigrated::Consumer, 6,
                                                "pulsar://new:6650", ""));
  ASSERT_EQ(m.cmd.type(), BC::TOPIC_MIGRATED);
  EXPECT_EQ(m.cmd.topicmigrated().resource_id(), 6u);
  EXPECT_EQ(m.cmd.topicmigrated().resource_type(), proto::CommandTopicMigrated::Consumer);
  EXPECT_EQ(m.cmd.topicmigrated().brokerserviceurl(), "pulsar://new:6650");
}

TEST(CommandsTest, QueryResponses) {
  auto g = decodeOne(Commands::newGetLastMessageIdResponse(7, WireMessageId{10, 20, 3, -1},
                                                           WireMessageId{10, 15}));
  ASSERT_EQ(g.cmd.type(), BC::GET_LAST_MESSAGE_ID_RESPONSE);
  const auto& gr = g.cmd.getlastmessageidresponse();
  EXPECT_EQ(gr.request_id(), 7u);
  EXPECT_EQ(gr.last_message_id().ledgerid(), 10u);
  EXPECT_EQ(gr.last_message_id().entryid(), 20u);
  EXPECT_EQ(gr.last_message_id().partition(), 3);
  EXPECT_FALSE(gr.last_message_id().has_batch_index());
  EXPECT_EQ(gr.consumer_mark_delete_position().entryid(), 15u);

  auto t = decodeOne(Commands::newGetTopicsOfNamespaceResponse(8, {"a", "b", "c"}, true, "h1"));
  ASSERT_EQ(t.cmd.type(), BC::GET_TOPICS_OF_NAMESPACE_RESPONSE);
  const auto& tr = t.cmd.gettopicsofnamespaceresponse();
  ASSERT_EQ(tr.topics_size(), 3);
  EXPECT_EQ(tr.topics(2), "c");
  EXPECT_TRUE(tr.filtered());
  EXPECT_EQ(tr.topics_hash(), "h1");
  EXPECT_TRUE(tr.changed());

  proto::Schema schema;
  schema.set_name("s");
  schema.set_schema_data("{}");
  schema.set_type(proto::Schema::Json);
  auto gs = decodeOne(Commands::newGetSchemaResponse(9, schema, "\x00\x01"));
  ASSERT_EQ(gs.cmd.type(), BC::GET_SCHEMA_RESPONSE);
  EXPECT_EQ(gs.cmd.getschemaresponse().schema().type(), proto::Schema::Json);
  auto ge = decodeOne(Commands::newGetSchemaErrorResponse(10, proto::TopicNotFound, "none"));
  EXPECT_EQ(ge.cmd.getschemaresponse().error_code(), proto::TopicNotFound);
  EXPECT_EQ(ge.cmd.getschemaresponse().error_message(), "none");
  EXPECT_FALSE(ge.cmd.getschemaresponse().has_schema());

  auto gc = decodeOne(Commands::newGetOrCreateSchemaResponse(11, "ver"));
  ASSERT_EQ(gc.cmd.type(), BC::GET_OR_CREATE_SCHEMA_RESPONSE);
  EXPECT_EQ(gc.cmd.getorcreateschemaresponse().schema_version(), "ver");
  auto gce = decodeOne(
      Commands::newGetOrCreateSchemaErrorResponse(12, proto::IncompatibleSchema, "incompatible"));
  EXPECT_EQ(gce.cmd.getorcreateschemaresponse().error_code(), proto::IncompatibleSchema);

  auto ar = decodeOne(Commands::newAckResponse(13, 14));
  ASSERT_EQ(ar.cmd.type(), BC::ACK_RESPONSE);
  EXPECT_EQ(ar.cmd.ackresponse().consumer_id(), 13u);
  EXPECT_EQ(ar.cmd.ackresponse().request_id(), 14u);
  EXPECT_FALSE(ar.cmd.ackresponse().has_error());
  auto are = decodeOne(Commands::newAckResponse(13, 15, proto::NotAllowedError, "no"));
  EXPECT_EQ(are.cmd.ackresponse().error(), proto::NotAllowedError);
  EXPECT_EQ(are.cmd.ackresponse().message(), "no");

  auto et = decodeOne(Commands::newEndTxnOnSubscriptionResponse(17, 5, 2));
  ASSERT_EQ(et.cmd.type(), BC::END_TXN_ON_SUBSCRIPTION_RESPONSE);
  EXPECT_EQ(et.cmd.endtxnonsubscriptionresponse().request_id(), 17u);
  EXPECT_EQ(et.cmd.endtxnonsubscriptionresponse().txnid_least_bits(), 5u);
  EXPECT_EQ(et.cmd.endtxnonsubscriptionresponse().txnid_most_bits(), 2u);
  EXPECT_FALSE(et.cmd.endtxnonsubscriptionresponse().has_error());
  auto ete =
      decodeOne(Commands::newEndTxnOnSubscriptionResponse(18, 5, 2, proto::UnknownError, "gone"));
  EXPECT_EQ(ete.cmd.endtxnonsubscriptionresponse().error(), proto::UnknownError);
  EXPECT_EQ(ete.cmd.endtxnonsubscriptionresponse().message(), "gone");

  auto cs = decodeOne(Commands::newConsumerStatsErrorResponse(16, proto::ConsumerNotFound, "?"));
  ASSERT_EQ(cs.cmd.type(), BC::CONSUMER_STATS_RESPONSE);
  EXPECT_EQ(cs.cmd.consumerstatsresponse().error_code(), proto::ConsumerNotFound);
}

TEST(CommandsTest, ClientProducerAndSubscribe) {
  auto p =
      decodeOne(Commands::newProducer("persistent://t/n/x", 1, 2, "prod", proto::Exclusive, 3));
  ASSERT_EQ(p.cmd.type(), BC::PRODUCER);
  const auto& cp = p.cmd.producer();
  EXPECT_EQ(cp.topic(), "persistent://t/n/x");
  EXPECT_EQ(cp.producer_id(), 1u);
  EXPECT_EQ(cp.request_id(), 2u);
  EXPECT_EQ(cp.producer_name(), "prod");
  EXPECT_TRUE(cp.user_provided_producer_name());
  EXPECT_EQ(cp.producer_access_mode(), proto::Exclusive);
  EXPECT_EQ(cp.epoch(), 3u);
  auto anon = decodeOne(Commands::newProducer("t", 1, 2));
  EXPECT_FALSE(anon.cmd.producer().has_producer_name());
  EXPECT_FALSE(anon.cmd.producer().user_provided_producer_name());

  auto s = decodeOne(Commands::newSubscribe("t", "sub", 4, 5, proto::CommandSubscribe::Key_Shared,
                                            "c1", proto::CommandSubscribe::Earliest, false,
                                            WireMessageId{1, 2}));
  ASSERT_EQ(s.cmd.type(), BC::SUBSCRIBE);
  const auto& cs = s.cmd.subscribe();
  EXPECT_EQ(cs.topic(), "t");
  EXPECT_EQ(cs.subscription(), "sub");
  EXPECT_EQ(cs.consumer_id(), 4u);
  EXPECT_EQ(cs.request_id(), 5u);
  EXPECT_EQ(cs.subtype(), proto::CommandSubscribe::Key_Shared);
  EXPECT_EQ(cs.consumer_name(), "c1");
  EXPECT_EQ(cs.initialposition(), proto::CommandSubscribe::Earliest);
  EXPECT_FALSE(cs.durable());
  EXPECT_EQ(cs.start_message_id().entryid(), 2u);

  proto::CommandSubscribe full;
  full.set_topic("t");
  full.set_subscription("s");
  full.set_subtype(proto::CommandSubscribe::Key_Shared);
  full.set_consumer_id(1);
  full.set_request_id(2);
  full.mutable_keysharedmeta()->set_keysharedmode(proto::STICKY);
  auto* r = full.mutable_keysharedmeta()->add_hashranges();
  r->set_start(0);
  r->set_end(32767);
  full.set_consumer_epoch(9);
  full.set_replicate_subscription_state(true);
  auto f = decodeOne(Commands::newSubscribe(full));
  EXPECT_EQ(f.cmd.subscribe().keysharedmeta().keysharedmode(), proto::STICKY);
  EXPECT_EQ(f.cmd.subscribe().keysharedmeta().hashranges(0).end(), 32767);
  EXPECT_EQ(f.cmd.subscribe().consumer_epoch(), 9u);
  EXPECT_TRUE(f.cmd.subscribe().force_topic_creation());  // Pulsar's default
}

TEST(CommandsTest, ClientConsumerCommands) {
  auto f = decodeOne(Commands::newFlow(1, 1000));
  ASSERT_EQ(f.cmd.type(), BC::FLOW);
  EXPECT_EQ(f.cmd.flow().consumer_id(), 1u);
  EXPECT_EQ(f.cmd.flow().messagepermits(), 1000u);

  WireMessageId ids[] = {{1, 2}, {1, 3, -1, 4}};
  auto a = decodeOne(Commands::newAck(2, proto::CommandAck::Individual, ids, 99));
  ASSERT_EQ(a.cmd.type(), BC::ACK);
  ASSERT_EQ(a.cmd.ack().message_id_size(), 2);
  EXPECT_EQ(a.cmd.ack().message_id(1).entryid(), 3u);
  EXPECT_EQ(a.cmd.ack().message_id(1).batch_index(), 4);
  EXPECT_EQ(a.cmd.ack().request_id(), 99u);
  auto ac = decodeOne(Commands::newAck(2, proto::CommandAck::Cumulative, {ids, 1}));
  EXPECT_EQ(ac.cmd.ack().ack_type(), proto::CommandAck::Cumulative);
  EXPECT_FALSE(ac.cmd.ack().has_request_id());

  auto r = decodeOne(Commands::newRedeliverUnacknowledgedMessages(3, ids, 5));
  ASSERT_EQ(r.cmd.type(), BC::REDELIVER_UNACKNOWLEDGED_MESSAGES);
  EXPECT_EQ(r.cmd.redeliverunacknowledgedmessages().message_ids_size(), 2);
  EXPECT_EQ(r.cmd.redeliverunacknowledgedmessages().consumer_epoch(), 5u);
  auto rAll = decodeOne(Commands::newRedeliverUnacknowledgedMessages(3));
  EXPECT_EQ(rAll.cmd.redeliverunacknowledgedmessages().message_ids_size(), 0);

  auto s = decodeOne(Commands::newSeek(4, 5, WireMessageId{7, 8}));
  ASSERT_EQ(s.cmd.type(), BC::SEEK);
  EXPECT_EQ(s.cmd.seek().message_id().ledgerid(), 7u);
  auto st = decodeOne(Commands::newSeekByTimestamp(4, 6, 1700000000000ULL));
  EXPECT_EQ(st.cmd.seek().message_publish_time(), 1700000000000ULL);
  EXPECT_FALSE(st.cmd.seek().has_message_id());

  auto u = decodeOne(Commands::newUnsubscribe(6, 7, true));
  ASSERT_EQ(u.cmd.type(), BC::UNSUBSCRIBE);
  EXPECT_TRUE(u.cmd.unsubscribe().force());
  auto g = decodeOne(Commands::newGetLastMessageId(8, 9));
  ASSERT_EQ(g.cmd.type(), BC::GET_LAST_MESSAGE_ID);
  EXPECT_EQ(g.cmd.getlastmessageid().consumer_id(), 8u);
  auto cs = decodeOne(Commands::newConsumerStats(10, 11));
  ASSERT_EQ(cs.cmd.type(), BC::CONSUMER_STATS);
  EXPECT_EQ(cs.cmd.consumerstats().consumer_id(), 10u);
  EXPECT_EQ(cs.cmd.consumerstats().request_id(), 11u);
  auto tn = decodeOne(Commands::newGetTopicsOfNamespace("public/default", 12,
                                                        proto::CommandGetTopicsOfNamespace::ALL));
  ASSERT_EQ(tn.cmd.type(), BC::GET_TOPICS_OF_NAMESPACE);
  EXPECT_EQ(tn.cmd.gettopicsofnamespace().namespace_(), "public/default");
  EXPECT_EQ(tn.cmd.gettopicsofnamespace().mode(), proto::CommandGetTopicsOfNamespace::ALL);
  auto gs = decodeOne(Commands::newGetSchema("t", 13));
  ASSERT_EQ(gs.cmd.type(), BC::GET_SCHEMA);
  EXPECT_FALSE(gs.cmd.getschema().has_schema_version());
}

proto::MessageMetadata sampleMetadata() {
  proto::MessageMetadata md;
  md.set_producer_name("prod-1");
  md.set_sequence_id(42);
  md.set_publish_time(1700000000123ULL);
  md.set_partition_key("key-7");
  md.set_ordering_key("ok");
  md.set_num_messages_in_batch(3);
  md.set_compression(proto::LZ4);
  md.set_uncompressed_size(999);
  auto* kv = md.add_properties();
  kv->set_key("a");
  kv->set_value("b");
  return md;
}

TEST(CommandsTest, SendFrameRoundTrip) {
  proto::MessageMetadata md = sampleMetadata();
  std::string payload = "hello, pulsar";
  auto d = decodeOne(Commands::newSend(5, 42, 3, md, payload));
  ASSERT_EQ(d.cmd.type(), BC::SEND);
  EXPECT_EQ(d.cmd.send().producer_id(), 5u);
  EXPECT_EQ(d.cmd.send().sequence_id(), 42u);
  EXPECT_EQ(d.cmd.send().num_messages(), 3);
  EXPECT_TRUE(verifyChecksum(d.entry).isOk());
  proto::MessageMetadata back;
  ASSERT_TRUE(parseMetadata(d.entry, &back).isOk());
  EXPECT_EQ(back.SerializeAsString(), md.SerializeAsString());
  EXPECT_EQ(back.partition_key(), "key-7");
  auto pl = payloadOf(d.entry);
  ASSERT_TRUE(pl.isOk());
  EXPECT_EQ(*pl, payload);

  // The entry is exactly what newEntry builds.
  EXPECT_EQ(d.entry, std::string(Commands::newEntry(md, payload).view()));

  // Caller-filled CommandSend and appendSend produce identical frames.
  proto::CommandSend send;
  send.set_producer_id(5);
  send.set_sequence_id(42);
  send.set_num_messages(3);
  send.set_highest_sequence_id(44);
  send.set_txnid_most_bits(1);
  Buffer viaBuffer = Commands::newSend(send, md, payload);
  std::string appended = "prefix";
  Commands::appendSend(send, md, payload, &appended);
  EXPECT_EQ(appended.substr(6), std::string(viaBuffer.view()));
  auto d2 = decodeOne(viaBuffer);
  EXPECT_EQ(d2.cmd.send().highest_sequence_id(), 44u);
  EXPECT_EQ(d2.cmd.send().txnid_most_bits(), 1u);
}

TEST(CommandsTest, EmptyPayloadSend) {
  proto::MessageMetadata md = sampleMetadata();
  md.set_null_value(true);
  auto d = decodeOne(Commands::newSend(1, 2, 1, md, ""));
  EXPECT_TRUE(verifyChecksum(d.entry).isOk());
  auto pl = payloadOf(d.entry);
  ASSERT_TRUE(pl.isOk());
  EXPECT_TRUE(pl->empty());
}

TEST(CommandsTest, BrokerEntryMetadataPrefix) {
  proto::MessageMetadata md = sampleMetadata();
  proto::BrokerEntryMetadata bem;
  bem.set_broker_timestamp(123456);
  bem.set_index(77);
  std::string entry;
  Commands::appendBrokerEntryMetadata(bem, &entry);
  size_t prefix = entry.size();
  entry += Commands::newEntry(md, "data").view();

  auto l = parseEntryLayout(entry);
  ASSERT_TRUE(l.isOk()) << l.status().toString();
  EXPECT_TRUE(l->hasBrokerEntryMetadata);
  EXPECT_EQ(l->magicOffset, prefix);
  proto::BrokerEntryMetadata back;
  ASSERT_TRUE(parseBrokerEntryMetadata(entry, &back).isOk());
  EXPECT_EQ(back.broker_timestamp(), 123456u);
  EXPECT_EQ(back.index(), 77u);
  EXPECT_TRUE(verifyChecksum(entry).isOk());
  proto::MessageMetadata mdBack;
  ASSERT_TRUE(parseMetadata(entry, &mdBack).isOk());
  EXPECT_EQ(mdBack.sequence_id(), 42u);
  EXPECT_EQ(*payloadOf(entry), "data");

  std::string plain(Commands::newEntry(md, "data").view());
  EXPECT_EQ(parseBrokerEntryMetadata(plain, &back).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace magnetar::protocol
