#include "broker/topic/entry_metadata.h"

#include <gtest/gtest.h>

#include "protocol/commands.h"

namespace magnetar::broker {

TEST(EntryMetadataTest, PeekMatchesProtobuf) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(42);
  md.set_publish_time(1700000000123ull);
  md.set_partition_key("device-7");
  md.set_num_messages_in_batch(5);
  md.set_ordering_key("ok");
  auto* kv = md.add_properties();
  kv->set_key("k");
  kv->set_value("v");
  Buffer entry = protocol::Commands::newEntry(md, "payload");
  EntryMetadataPeek peek;
  ASSERT_TRUE(peekEntryMetadata(entry.view(), &peek).isOk());
  EXPECT_EQ(peek.sequenceId, 42u);
  EXPECT_EQ(peek.publishTime, 1700000000123ull);
  EXPECT_TRUE(peek.hasPartitionKey);
  EXPECT_EQ(peek.partitionKey, "device-7");
  EXPECT_EQ(peek.numMessagesInBatch, 5);
  EXPECT_TRUE(peek.hasOrderingKey);
  EXPECT_EQ(peek.orderingKey, "ok");
}

TEST(EntryMetadataTest, DefaultsAndGarbage) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(1);
  md.set_publish_time(1);
  Buffer entry = protocol::Commands::newEntry(md, "x");
  EntryMetadataPeek peek;
  ASSERT_TRUE(peekEntryMetadata(entry.view(), &peek).isOk());
  EXPECT_EQ(peek.numMessagesInBatch, 1);
  EXPECT_FALSE(peek.hasPartitionKey);
  EntryMetadataPeek bad;
  EXPECT_FALSE(peekMetadata(std::string_view("\x32\x7f", 2), &bad).isOk());  // length past end
  EXPECT_FALSE(peekEntryMetadata("nonsense", &bad).isOk());
}

}  // namespace magnetar::broker
