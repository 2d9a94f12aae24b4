#include "broker/compaction/compaction.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "net/event_loop.h"
#include "protocol/byte_order.h"
#include "protocol/commands.h"
#include "protocol/frame.h"
#include "storage/memory_managed_ledger.h"

namespace magnetar::broker {
namespace {

using storage::Entry;
using storage::Position;

Entry message(Position pos, const char* key, std::string_view value) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(static_cast<uint64_t>(pos.entryId));
  md.set_publish_time(1);
  if (key) md.set_partition_key(key);
  return Entry{pos, protocol::Commands::newEntry(md, value)};
}

// An uncompressed batch of (key, value) messages.
Entry batch(Position pos, const std::vector<std::pair<const char*, std::string>>& msgs) {
  std::string payload;
  for (const auto& [key, value] : msgs) {
    proto::SingleMessageMetadata s;
    if (key) s.set_partition_key(key);
    s.set_payload_size(static_cast<int>(value.size()));
    std::string bytes = s.SerializeAsString();
    uint8_t size[4];
    protocol::wire::writeBE32(size, static_cast<uint32_t>(bytes.size()));
    payload.append(reinterpret_cast<const char*>(size), 4);
    payload += bytes;
    payload += value;
  }
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  md.set_num_messages_in_batch(static_cast<int>(msgs.size()));
  return Entry{pos, protocol::Commands::newEntry(md, payload)};
}

// The (key or "-" for compacted_out, value) pairs of a batch entry.
std::vector<std::pair<std::string, std::string>> batchContents(const Buffer& entry) {
  proto::MessageMetadata md;
  EXPECT_TRUE(protocol::parseMetadata(entry, &md).isOk());
  auto payload = protocol::payloadOf(entry);
  EXPECT_TRUE(payload.isOk());
  const auto* p = reinterpret_cast<const uint8_t*>(payload->data());
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < md.num_messages_in_batch(); ++i) {
    uint32_t n = protocol::wire::readBE32(p);
    proto::SingleMessageMetadata s;
    EXPECT_TRUE(s.ParseFromArray(p + 4, static_cast<int>(n)));
    p += 4 + n;
    std::string value(reinterpret_cast<const char*>(p), static_cast<size_t>(s.payload_size()));
    p += s.payload_size();
    out.emplace_back(s.compacted_out() ? "-" : s.partition_key(), value);
  }
  return out;
}

std::vector<Buffer> runKeyMap(CompactionKeyMap& km, const std::vector<Entry>& entries) {
  for (const auto& e : entries) km.observe(e);
  std::vector<Buffer> out;
  for (const auto& e : entries) {
    if (auto b = km.retain(e)) out.push_back(*b);
  }
  return out;
}

std::string payloadText(const Buffer& entry) {
  auto p = protocol::payloadOf(entry);
  return p.isOk() ? std::string(*p) : "?";
}

TEST(CompactionKeyMapTest, KeepsTheLatestPerKeyAndDropsKeylessAndTombstones) {
  CompactionKeyMap km;
  std::vector<Entry> entries = {
      message({1, 0}, "a", "a1"),        message({1, 1}, "b", "b1"), message({1, 2}, "a", "a2"),
      message({1, 3}, nullptr, "nokey"), message({1, 4}, "b", ""),   message({1, 5}, "c", "c1"),
  };
  auto kept = runKeyMap(km, entries);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(payloadText(kept[0]), "a2");
  EXPECT_EQ(payloadText(kept[1]), "c1");
  EXPECT_EQ(km.liveKeys(), 2u);
  EXPECT_EQ(km.messagesSeen(), 6);
  EXPECT_EQ(km.messagesKept(), 2);
  EXPECT_EQ(km.removedEvents(), 3);  // a1 replaced, the keyless message, b's tombstone
}

TEST(CompactionKeyMapTest, AKeyWrittenAgainAfterItsTombstoneComesBack) {
  CompactionKeyMap km;
  auto kept = runKeyMap(
      km, {message({1, 0}, "a", "1"), message({1, 1}, "a", ""), message({1, 2}, "a", "3")});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(payloadText(kept[0]), "3");
}

TEST(CompactionKeyMapTest, BatchesAreCompactedMessageByMessage) {
  CompactionKeyMap km;
  std::vector<Entry> entries = {
      batch({2, 0}, {{"a", "a1"}, {"b", "b1"}, {nullptr, "x"}, {"c", "c1"}}),
      batch({2, 1}, {{"a", "a2"}, {"c", ""}}),
      batch({2, 2}, {{"d", "d1"}}),
  };
  auto kept = runKeyMap(km, entries);
  ASSERT_EQ(kept.size(), 3u);
  // The first batch keeps its shape: losers (and the keyless message) become compacted_out.
  using V = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(batchContents(kept[0]), (V{{"-", ""}, {"b", "b1"}, {"-", ""}, {"-", ""}}));
  EXPECT_EQ(batchContents(kept[1]), (V{{"a", "a2"}, {"-", ""}}));
  // A batch whose messages all win is written as it was.
  EXPECT_EQ(kept[2].view(), entries[2].data.view());
  EXPECT_EQ(km.messagesKept(), 3);
  EXPECT_EQ(km.messagesSeen(), 7);
  EXPECT_EQ(km.removedEvents(), 3);  // a1 replaced, keyless x, c's tombstone
  // The re-batched entry carries a valid checksum.
  EXPECT_TRUE(protocol::verifyChecksum(kept[0]).isOk());
}

TEST(CompactionKeyMapTest, UnparsableEntriesAreDropped) {
  CompactionKeyMap km;
  Entry bad{{1, 0}, Buffer::copyOf("garbage")};
  km.observe(bad);
  EXPECT_FALSE(km.retain(bad).has_value());
  EXPECT_EQ(km.messagesSeen(), 0);
}

TEST(CompactionFormatTest, CompactedEntryRoundTrip) {
  Entry e = message({7, 9}, "k", "v");
  Buffer enc = encodeCompactedEntry({7, 9}, e.data.view());
  auto dec = decodeCompactedEntry(enc);
  ASSERT_TRUE(dec.isOk());
  EXPECT_EQ(dec->position, (Position{7, 9}));
  EXPECT_EQ(dec->data.view(), e.data.view());
  EXPECT_FALSE(decodeCompactedEntry(Buffer::copyOf("MGCX0123456789012345")).isOk());
  EXPECT_FALSE(decodeCompactedEntry(Buffer::copyOf("MGCE")).isOk());
}

TEST(CompactionFormatTest, CompactedLedgerNames) {
  std::string name = compactedLedgerName("public/default/persistent/t", 42);
  EXPECT_EQ(name, "__compacted/public/default/persistent/t/42");
  std::string topic;
  int64_t seq = 0;
  ASSERT_TRUE(isCompactedLedgerName(name, &topic, &seq));
  EXPECT_EQ(topic, "public/default/persistent/t");
  EXPECT_EQ(seq, 42);
  EXPECT_FALSE(isCompactedLedgerName("public/default/persistent/t"));
}

// The whole compactor on the in-memory storage: two compactions, the view, the cursor.
class TopicCompactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_.start();
    runSync([&](auto done) {
      factory_.asyncOpen("public/default/persistent/t", &loop_, [&, done](auto r) {
        ASSERT_TRUE(r.isOk());
        ledger_ = *r;
        done();
      });
    });
    compactor_ = std::make_shared<TopicCompactor>(
        ledger_,
        [this](const std::string& name, auto cb) { factory_.asyncOpen(name, &loop_, cb); });
  }
  void TearDown() override { loop_.stop(); }

  // Runs f on the loop and waits until it calls done().
  void runSync(const std::function<void(std::function<void()>)>& f) {
    std::promise<void> p;
    loop_.execute([&] { f([&] { p.set_value(); }); });
    p.get_future().wait();
  }
  void add(const Entry& e) {
    runSync([&](auto done) {
      ledger_->asyncAddEntry(e.data, [done](Status s, Position) {
        ASSERT_TRUE(s.isOk());
        done();
      });
    });
  }
  Status compact() {
    Status out;
    runSync([&](auto done) {
      Status s = compactor_->trigger([&, done](Status r) {
        out = r;
        done();
      });
      if (!s.isOk()) {
        out = s;
        done();
      }
    });
    return out;
  }
  std::vector<std::string> readView() {
    std::vector<std::string> out;
    runSync([&](auto done) {
      auto view = compactor_->view();
      ASSERT_TRUE(view);
      view->asyncReadEntries({-1, -1}, 100, 1 << 20, [&, done](Status s, std::vector<Entry> es) {
        ASSERT_TRUE(s.isOk());
        for (auto& e : es) out.push_back(payloadText(e.data));
        done();
      });
    });
    return out;
  }

  net::EventLoop loop_{"test-topic"};
  storage::MemoryManagedLedgerFactory factory_;
  std::shared_ptr<storage::ManagedLedger> ledger_;
  std::shared_ptr<TopicCompactor> compactor_;
};

TEST_F(TopicCompactorTest, CompactsTwiceAndRecordsTheHorizonOnTheCursor) {
  Position horizon;
  for (int i = 0; i < 10; ++i) add(message({0, i}, i % 2 ? "odd" : "even", std::to_string(i)));
  ASSERT_TRUE(compact().isOk());
  EXPECT_EQ(readView(), (std::vector<std::string>{"8", "9"}));
  EXPECT_EQ(compactor_->status(), CompactionStatus::kSuccess);
  EXPECT_EQ(compactor_->record().lastCompactionRemovedEventCount, 8);
  auto seqNow = [&] {
    int64_t seq = -1;
    runSync([&](auto done) {
      for (auto* c : ledger_->cursors()) {
        if (c->name() == kCompactionCursorName)
          seq = c->properties().at(kCompactedLedgerSeqProperty);
      }
      done();
    });
    return seq;
  };
  int64_t firstSeq = seqNow();
  ASSERT_GT(firstSeq, 0);

  add(message({0, 10}, "odd", ""));
  add(message({0, 11}, "new", "n"));
  ASSERT_TRUE(compact().isOk());
  EXPECT_EQ(readView(), (std::vector<std::string>{"8", "n"}));
  runSync([&](auto done) {
    storage::ManagedCursor* cursor = nullptr;
    for (auto* c : ledger_->cursors()) {
      if (c->name() == kCompactionCursorName) cursor = c;
    }
    ASSERT_NE(cursor, nullptr);
    horizon = cursor->markDeletedPosition();
    EXPECT_EQ(horizon, ledger_->lastConfirmedEntry());
    EXPECT_EQ(cursor->properties().at(kCompactedTopicLedgerProperty),
              compactor_->view()->ledgerId());
    done();
  });
  EXPECT_GT(seqNow(), firstSeq);
  // The first view's ledger is gone once the second committed.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto names = factory_.ledgerNames();
  EXPECT_EQ(std::count(names.begin(), names.end(), compactedLedgerName(ledger_->name(), firstSeq)),
            0);

  // A second compactor over the same storage (a restart) loads the view from the cursor.
  auto reloaded = std::make_shared<TopicCompactor>(
      ledger_, [this](const std::string& name, auto cb) { factory_.asyncOpen(name, &loop_, cb); });
  runSync([&](auto done) {
    reloaded->initialize({}, [&, done](Status s) {
      EXPECT_TRUE(s.isOk());
      ASSERT_TRUE(reloaded->view());
      EXPECT_EQ(reloaded->view()->entries(), 2u);
      EXPECT_EQ(reloaded->view()->horizon(), horizon);
      done();
    });
  });
}

// Transactions: the horizon stops at the max read position (an open txn's entries and what
// follows stay out) and hidden entries (txn markers, aborted txns) are left out of the view.
TEST_F(TopicCompactorTest, TxnFilterStopsAtTheMaxReadPositionAndDropsHiddenEntries) {
  add(message({0, 0}, "a", "1"));
  add(message({0, 1}, "b", "aborted"));
  add(message({0, 2}, "c", "3"));
  Position maxRead;
  runSync([&](auto done) {
    maxRead = ledger_->lastConfirmedEntry();
    done();
  });
  add(message({0, 3}, "a", "open-txn"));
  compactor_->setTxnFilter([&] { return std::optional<Position>(maxRead); },
                           [](const Entry& e) { return payloadText(e.data) == "aborted"; });
  ASSERT_TRUE(compact().isOk());
  EXPECT_EQ(readView(), (std::vector<std::string>{"1", "3"}));
}

TEST_F(TopicCompactorTest, ASecondTriggerWhileRunningIsBusy) {
  for (int i = 0; i < 50; ++i) add(message({0, i}, "k", "v"));
  Status first;
  Status second;
  runSync([&](auto done) {
    first = compactor_->trigger([done](Status) { done(); });
    second = compactor_->trigger();
    EXPECT_EQ(compactor_->status(), CompactionStatus::kRunning);
  });
  EXPECT_TRUE(first.isOk());
  EXPECT_EQ(second.code(), StatusCode::kBusy);
  EXPECT_EQ(second.message(), "Compaction already in progress");
}

TEST(CompactionKeyMapTest, RemovedEventsCountAsPulsar) {
  CompactionKeyMap km;
  runKeyMap(km, {message({1, 0}, "a", "a1"), message({1, 1}, "b", "b1"), message({1, 2}, "a", "a2"),
                 message({1, 3}, "c", "c1"), message({1, 4}, "b", ""), message({1, 5}, "a", "a3"),
                 message({1, 6}, nullptr, "nokey")});
  EXPECT_EQ(km.removedEvents(), 4);
}

}  // namespace
}  // namespace magnetar::broker
