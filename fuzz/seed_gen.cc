// fuzz_seed_gen <fuzz/corpus dir>: writes the seeds of fuzz_frames (client frame sequences built
// with protocol::Commands, each behind a flags byte, see fuzz_frames.cc) and fuzz_journal (disk
// images of a real DurableManagedLedgerFactory, see fuzz_util.h), fuzz_bk_codec (bookie reply
// streams from the BookKeeper codec) and fuzz_mqtt_codec (MQTT 3.1.1 and 5.0 client sessions from
// the MQTT codec). Deterministic except for the journal's timestamps. Run it again when the
// formats change; fuzz/README.md.
#include <span>

#include "bookkeeper/protocol.h"
#include "fuzz_util.h"
#include "manual_executor.h"
#include "mqtt/codec.h"
#include "protocol/commands.h"
#include "storage/durable_storage.h"
#include "storage/journal_format.h"
#include "storage/metadata_store.h"

using namespace magnetar;
using protocol::Commands;
using protocol::WireMessageId;

namespace {

// ---- fuzz_frames ------------------------------------------------------------------------------

struct Stream {
  std::string bytes;
  Stream& add(const Buffer& b) {
    bytes.append(b.view());
    return *this;
  }
  Stream& connect() { return add(Commands::newConnect("fuzz-seed")); }
  Stream& send(uint64_t producer, uint64_t seq, std::string_view payload, std::string key = "") {
    proto::MessageMetadata md;
    md.set_producer_name("p");
    md.set_sequence_id(seq);
    md.set_publish_time(1700000000000 + seq);
    if (!key.empty()) md.set_partition_key(key);
    return add(Commands::newSend(producer, seq, 1, md, payload));
  }
};

void framesSeeds(const std::string& dir) {
  const std::string t = "persistent://public/default/fuzz";
  std::vector<std::pair<std::string, std::pair<uint8_t, Stream>>> seeds;
  auto seed = [&](std::string name, uint8_t flags) -> Stream& {
    seeds.push_back({std::move(name), {flags, Stream{}}});
    return seeds.back().second.second;
  };

  seed("connect_ping", 0).connect().add(Commands::newPing()).add(Commands::newPong());
  seed("before_connect", 0).add(Commands::newProducer(t, 1, 1)).connect();
  seed("produce", 1)
      .connect()
      .add(Commands::newProducer(t, 1, 1, "p"))
      .send(1, 0, "hello")
      .send(1, 1, "world")
      .send(7, 2, "unknown producer");
  seed("produce_close", 0)
      .connect()
      .add(Commands::newProducer(t, 1, 1))
      .send(1, 0, "a")
      .add(Commands::newCloseProducer(1, 2))
      .add(Commands::newCloseProducer(1, 3));
  seed("produce_exclusive_dedup", 1 | 4)
      .connect()
      .add(Commands::newProducer(t, 1, 1, "p", proto::Exclusive))
      .add(Commands::newProducer(t, 2, 2, "q", proto::Exclusive))
      .send(1, 5, "x")
      .send(1, 5, "dup")
      .send(1, 4, "old");
  seed("produce_throttled", 1 | 0x10)
      .connect()
      .add(Commands::newProducer(t, 1, 1))
      .send(1, 0, "a")
      .send(1, 1, "b")
      .send(1, 2, "c")
      .send(1, 3, "d");
  {
    Stream& s = seed("consume", 1);
    s.connect()
        .add(Commands::newProducer(t, 1, 1))
        .send(1, 0, "m0")
        .send(1, 1, "m1")
        .send(1, 2, "m2")
        .send(1, 3, "m3")
        .add(Commands::newSubscribe(t, "sub", 1, 2, proto::CommandSubscribe::Exclusive, "c",
                                    proto::CommandSubscribe::Earliest))
        .add(Commands::newFlow(1, 10));
    WireMessageId m0{1, 0}, m1{1, 1}, m3{2, 0};
    s.add(Commands::newAck(1, proto::CommandAck::Individual, std::span(&m1, 1), 3))
        .add(Commands::newAck(1, proto::CommandAck::Cumulative, std::span(&m0, 1)))
        .add(Commands::newRedeliverUnacknowledgedMessages(1, std::span(&m3, 1)))
        .add(Commands::newRedeliverUnacknowledgedMessages(1))
        .add(Commands::newGetLastMessageId(1, 4))
        .add(Commands::newSeek(1, 5, m1))
        .add(Commands::newSeekByTimestamp(1, 6, 1700000000001))
        .add(Commands::newUnsubscribe(1, 7))
        .add(Commands::newCloseConsumer(1, 8));
  }
  {
    Stream& s = seed("shared_keyshared", 1);
    s.connect()
        .add(Commands::newSubscribe(t, "sh", 1, 1, proto::CommandSubscribe::Shared))
        .add(Commands::newSubscribe(t, "sh", 2, 2, proto::CommandSubscribe::Shared))
        .add(Commands::newSubscribe(t, "ks", 3, 3, proto::CommandSubscribe::Key_Shared))
        .add(Commands::newSubscribe(t, "fo", 4, 4, proto::CommandSubscribe::Failover))
        .add(Commands::newFlow(1, 1))
        .add(Commands::newFlow(2, 5))
        .add(Commands::newFlow(3, 5))
        .add(Commands::newFlow(4, 5))
        .add(Commands::newProducer(t, 1, 5))
        .send(1, 0, "k1", "key1")
        .send(1, 1, "k2", "key2")
        .send(1, 2, "k3", "key1")
        .add(Commands::newCloseConsumer(2, 6));
    proto::BaseCommand cmd;
    cmd.set_type(proto::BaseCommand::SUBSCRIBE);
    auto* sub = cmd.mutable_subscribe();
    sub->set_topic(t);
    sub->set_subscription("sticky");
    sub->set_subtype(proto::CommandSubscribe::Key_Shared);
    sub->set_consumer_id(9);
    sub->set_request_id(9);
    auto* ks = sub->mutable_keysharedmeta();
    ks->set_keysharedmode(proto::STICKY);
    auto* r = ks->add_hashranges();
    r->set_start(0);
    r->set_end(30000);
    s.add(Commands::serialize(cmd)).add(Commands::newFlow(9, 3));
  }
  seed("non_durable", 1)
      .connect()
      .add(Commands::newSubscribe(t, "reader", 1, 1, proto::CommandSubscribe::Exclusive, "r",
                                  proto::CommandSubscribe::Earliest, false, WireMessageId{1, 0}))
      .add(Commands::newFlow(1, 100))
      .add(Commands::newProducer(t, 1, 2))
      .send(1, 0, "r0");
  {
    Stream& s = seed("lookup_misc", 0);
    s.connect()
        .add(Commands::newLookup(t, 1))
        .add(Commands::newLookup("bad topic name://", 2))
        .add(Commands::newPartitionedMetadata(t, 3))
        .add(Commands::newPartitionedMetadata("persistent://other/ns/t", 4, false))
        .add(Commands::newGetTopicsOfNamespace("public/default", 5))
        .add(Commands::newGetSchema(t, 6))
        .add(Commands::newConsumerStats(1, 7));
    proto::BaseCommand cmd;
    cmd.set_type(proto::BaseCommand::GET_OR_CREATE_SCHEMA);
    auto* g = cmd.mutable_getorcreateschema();
    g->set_request_id(8);
    g->set_topic(t);
    auto* schema = g->mutable_schema();
    schema->set_name("s");
    schema->set_schema_data("{}");
    schema->set_type(proto::Schema::Json);
    s.add(Commands::serialize(cmd)).connect();
  }
  seed("partitioned", 1 | 8)
      .connect()
      .add(Commands::newPartitionedMetadata(t, 1))
      .add(Commands::newProducer(t + "-partition-1", 1, 2))
      .send(1, 0, "p1");
  seed("one_piece", 2)
      .connect()
      .add(Commands::newProducer(t, 1, 1))
      .send(1, 0, "fast")
      .add(Commands::newPing());

  std::string out = dir + "/fuzz_frames";
  for (auto& [name, fs] : seeds) {
    std::string bytes(1, static_cast<char>(fs.first));
    bytes += fs.second.bytes;
    fuzz::writeFile(out + "/" + name, bytes);
  }
}

// ---- fuzz_journal -----------------------------------------------------------------------------

std::string readFile(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) fuzz::fail("open " + path);
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  fclose(f);
  return s;
}

std::string image(storage::MemoryMetadataStore& meta, const std::string& journalDir) {
  std::vector<fuzz::DiskItem> items;
  auto all = meta.scan("/");
  if (!all.isOk()) fuzz::fail("scan");
  for (auto& [k, v] : *all) items.push_back({fuzz::kItemMetadata, k, v});
  for (uint64_t seg = 0; seg < 64; seg++) {
    std::string path = journalDir + "/" + storage::segmentFileName(seg);
    if (access(path.c_str(), R_OK) != 0) continue;
    std::string id(8, '\0');
    for (int i = 0; i < 8; i++) id[i] = static_cast<char>((seg >> (8 * i)) & 0xff);
    items.push_back({fuzz::kItemSegment, id, readFile(path)});
  }
  return fuzz::encodeDiskImage(items);
}

// Writes entries to two ledgers with a cursor; saves images mid-run (journal replay needed) and
// after shutdown (all checkpointed).
void journalSeeds(const std::string& dir, const std::string& prefix, int64_t entriesPerLedger,
                  int64_t segmentBytes) {
  fuzz::TempDir tmp;
  storage::MemoryMetadataStore meta;
  storage::StorageOptions o;
  o.journalDirectory = tmp.path() + "/journal";
  o.metadataStore = &meta;
  o.checkpointIntervalMs = 600000;
  o.tickIntervalMs = 600000;
  o.journalMaxGroupWaitMSec = 0;
  o.managedLedgerMaxEntriesPerLedger = entriesPerLedger;
  o.journalSegmentSizeBytes = segmentBytes;
  auto f = storage::DurableManagedLedgerFactory::open(o);
  if (!f.isOk()) fuzz::fail("open: " + f.status().toString());
  fuzz::ManualExecutor ex;
  std::vector<std::shared_ptr<storage::ManagedLedger>> mls;
  for (const char* name : {"public/default/persistent/a", "public/default/persistent/b"}) {
    bool done = false;
    (*f)->asyncOpen(name, &ex, [&](Result<std::shared_ptr<storage::ManagedLedger>> r) {
      if (!r.isOk()) fuzz::fail("asyncOpen");
      mls.push_back(*r);
      done = true;
    });
    ex.runUntil([&] { return done; }, "open");
  }
  auto cursor = mls[0]->openCursor("sub", storage::InitialPosition::kEarliest);
  if (!cursor.isOk()) fuzz::fail("openCursor");
  std::vector<storage::Position> pos;
  for (int i = 0; i < 5; i++) {
    for (auto& ml : mls) {
      proto::MessageMetadata md;
      md.set_producer_name("p");
      md.set_sequence_id(i);
      md.set_publish_time(1700000000000 + i);
      bool done = false;
      ml->asyncAddEntry(Commands::newEntry(md, "payload-" + std::to_string(i)),
                        [&](Status s, storage::Position p) {
                          if (!s.isOk()) fuzz::fail("add");
                          if (ml == mls[0]) pos.push_back(p);
                          done = true;
                        });
      ex.runUntil([&] { return done; }, "add");
    }
  }
  bool acked = false;
  (*cursor)->asyncMarkDelete(
      pos[1], [&](Status) { (*cursor)->asyncDelete({pos[3]}, [&](Status) { acked = true; }); });
  ex.runUntil([&] { return acked; }, "ack");
  std::string out = dir + "/fuzz_journal/";
  fuzz::writeFile(out + prefix + "_replay", image(meta, o.journalDirectory));
  for (auto& ml : mls) {
    bool closed = false;
    ml->asyncClose([&](Status) { closed = true; });
    ex.runUntil([&] { return closed; }, "close");
  }
  (*f)->shutdown();
  fuzz::writeFile(out + prefix + "_checkpointed", image(meta, o.journalDirectory));
}

// ---- fuzz_bk_codec ----------------------------------------------------------------------------

void bkCodecSeeds(const std::string& dir) {
  using bookkeeper::EntryHeader;
  using bookkeeper::OpCode;
  auto entry = [](int64_t ledger, int64_t id, int64_t lac, std::string_view payload,
                  int64_t length) {
    EntryHeader h;
    h.ledgerId = ledger;
    h.entryId = id;
    h.lastAddConfirmed = lac;
    h.length = length;
    return bookkeeper::packEntry(h, payload);
  };
  std::string out = dir + "/fuzz_bk_codec/";
  // Replies a BookieClient sees: ADD acks, READs with entries, errors, the LAC read (entry -1).
  std::string replies;
  replies += bookkeeper::encodeResponse(OpCode::kAddEntry, 0, 7, 0);
  replies += bookkeeper::encodeResponse(OpCode::kAddEntry, 0, 7, 1);
  replies +=
      bookkeeper::encodeResponse(OpCode::kReadEntry, 0, 7, 0, entry(7, 0, -1, "hello bookie", 12));
  replies += bookkeeper::encodeResponse(OpCode::kReadEntry, 0, 7, 1,
                                        entry(7, 1, 0, std::string(100, 'A'), 112));
  replies += bookkeeper::encodeResponse(OpCode::kReadEntry, 2, 7, 5);   // NoSuchEntry
  replies += bookkeeper::encodeResponse(OpCode::kAddEntry, 104, 7, 2);  // fenced
  replies += bookkeeper::encodeResponse(OpCode::kReadEntry, 0, 7, -1,
                                        entry(7, 1, 1, std::string(100, 'A'), 112));
  fuzz::writeFile(out + "replies", std::string(1, '\x00') + replies);
  fuzz::writeFile(out + "replies_chunk3", std::string(1, '\x02') + replies);
  // A reply split in the middle of a frame, and an oversized length.
  std::string read =
      bookkeeper::encodeResponse(OpCode::kReadEntry, 0, 9, 4, entry(9, 4, 3, "partial", 40));
  fuzz::writeFile(out + "half_frame", std::string(1, '\x05') + read.substr(0, read.size() / 2));
  fuzz::writeFile(out + "too_large",
                  std::string(1, '\x10') + read + std::string("\x00\x01\x00\x01", 4) + "x");
}

// ---- fuzz_mqtt_codec ---------------------------------------------------------------------------

void mqttSeeds(const std::string& dir) {
  using namespace mqtt;
  auto session = [](ProtocolVersion v) {
    std::string s;
    Connect c;
    c.version = v;
    c.clientId = "seed";
    c.keepAliveSeconds = 30;
    c.username = "u";
    c.password = "token";
    c.will = Will{"will/t", "bye", 1, true, {}};
    Properties props;
    if (v == ProtocolVersion::kV5) {
      c.properties.ints[PropertyId::kSessionExpiryInterval] = 60;
      c.properties.ints[PropertyId::kReceiveMaximum] = 16;
      props.ints[PropertyId::kMessageExpiryInterval] = 30;
      props.strings[PropertyId::kContentType] = "text/plain";
      props.userProperties = {{"k", "v"}};
    }
    encodePacket(c, v, &s);
    encodePacket(Publish{0, false, false, "a/b", 0, props, "qos0"}, v, &s);
    encodePacket(Publish{1, false, true, "a/c", 1, props, "qos1"}, v, &s);
    encodePacket(Subscribe{2, {}, {{"a/+", 1, false, false, 0}, {"x/#", 0, false, false, 0}}}, v,
                 &s);
    encodePacket(PubAck{PacketType::kPuback, 3, 0, {}}, v, &s);
    // QoS 2 both ways, a duplicate, a shared subscription.
    encodePacket(Publish{2, false, false, "a/q2", 5, props, "qos2"}, v, &s);
    encodePacket(Publish{2, true, false, "a/q2", 5, props, "qos2"}, v, &s);
    encodePacket(PubAck{PacketType::kPubrel, 5, 0, {}}, v, &s);
    encodePacket(PubAck{PacketType::kPubrec, 6, 0, {}}, v, &s);
    encodePacket(PubAck{PacketType::kPubcomp, 6, 0, {}}, v, &s);
    encodePacket(Subscribe{7, {}, {{"$share/g/a/#", 2, false, false, 0}}}, v, &s);
    encodePacket(Unsubscribe{4, {}, {"a/+"}}, v, &s);
    encodePacket(Ping{}, v, &s);
    encodePacket(Disconnect{}, v, &s);
    return s;
  };
  std::string out = dir + "/fuzz_mqtt_codec/";
  fuzz::writeFile(out + "session_311", std::string(1, '\x00') + session(ProtocolVersion::kV311));
  fuzz::writeFile(out + "session_5", std::string(1, '\x00') + session(ProtocolVersion::kV5));
  fuzz::writeFile(out + "session_5_chunk4", std::string(1, '\x03') + session(ProtocolVersion::kV5));
  std::string body = session(ProtocolVersion::kV5);
  fuzz::writeFile(out + "after_connect5", std::string(1, '\x20') + body.substr(body.find('\x30')));
  fuzz::writeFile(out + "too_large", std::string(1, '\x10') + session(ProtocolVersion::kV311));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <fuzz/corpus directory>\n", argv[0]);
    return 2;
  }
  fuzz::quietLogs();
  std::string dir = argv[1];
  framesSeeds(dir);
  journalSeeds(dir, "simple", 50000, 256ll << 20);
  journalSeeds(dir, "rolled", 2, 600);
  bkCodecSeeds(dir);
  mqttSeeds(dir);
  return 0;
}
