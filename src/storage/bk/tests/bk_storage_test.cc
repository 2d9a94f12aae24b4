// Managed ledgers on a real BookKeeper cluster: ZooKeeper and 3 bookies of BookKeeper 4.17
// (scripts/bookies.sh), started once for this binary (or MAGNETAR_BK_URI=zk://host:port/ledgers).
// The ledger contract (with and without the entry cache, so reads also come from the bookies),
// then what is BookKeeper's own: the znodes and ledgers in Pulsar's formats, fencing of a previous
// owner, cursor recovery from the cursor ledger after a crash, consumed ledgers deleted from
// BookKeeper, delete.
#include "storage/bk/bk_storage.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "metadata/zk_store.h"
#include "storage/bk/bk_managed_ledger.h"
#include "storage/tests/ledger_contract.h"
#include "storage/tests/ledger_test_util.h"

namespace magnetar::storage::testing {
namespace {

namespace fs = std::filesystem;
using bookkeeper::BkResult;
using bookkeeper::BookKeeperClient;
using HandlePtr = std::shared_ptr<bookkeeper::LedgerHandle>;

// The cluster for this binary: started by the first test that needs it, stopped at the end.
struct BkCluster : public ::testing::Environment {
  std::string dir;
  std::string uri;
  bool owned = false;
  std::unique_ptr<BookKeeperClient> bk;
  std::unique_ptr<metadata::Store> zk;

  static BkCluster& get() {
    if (!instance->bk) instance->start();
    return *instance;
  }

  void start() {
    if (const char* u = std::getenv("MAGNETAR_BK_URI"); u && *u) {
      uri = u;
    } else {
      char tmpl[] = "/tmp/magnetar-bk-XXXXXX";
      dir = ::mkdtemp(tmpl);
      owned = true;
      std::string cmd = "bash " MAGNETAR_SOURCE_DIR "/scripts/bookies.sh start -n 3 -d " + dir +
                        " --no-sync > " + dir + "/uri 2> " + dir + "/start.log";
      if (std::system(cmd.c_str()) != 0) {
        ADD_FAILURE() << "scripts/bookies.sh start failed (see " << dir << "/start.log)";
        return;
      }
      std::ifstream f(dir + "/uri");
      std::getline(f, uri);
    }
    bookkeeper::ClientConfig c;
    c.metadataServiceUri = uri;
    c.numIoThreads = 2;
    c.zkSessionTimeoutMs = 10000;
    auto client = BookKeeperClient::open(c);
    ASSERT_TRUE(client.isOk()) << client.status().toString();
    bk = std::move(*client);
    auto hosts = bookkeeper::parseMetadataServiceUri(uri);
    ASSERT_TRUE(hosts.isOk());
    metadata::ZkConfig z;
    z.url = hosts->first;
    z.sessionTimeoutMs = 10000;
    auto store = metadata::openZkStore(z);
    ASSERT_TRUE(store.isOk()) << store.status().toString();
    zk = std::move(*store);
  }

  void TearDown() override {
    if (bk) bk->close();
    if (zk) zk->close();
    if (!owned) return;
    std::string stop =
        "bash " MAGNETAR_SOURCE_DIR "/scripts/bookies.sh stop -d " + dir + " > /dev/null 2>&1";
    EXPECT_EQ(std::system(stop.c_str()), 0);
    std::string rm = "rm -rf " + dir;
    (void)std::system(rm.c_str());
  }

  static BkCluster* instance;
};
BkCluster* BkCluster::instance =
    static_cast<BkCluster*>(::testing::AddGlobalTestEnvironment(new BkCluster()));

// Each factory of a test gets the root of that test (the contract's fresh directory's name).
std::string rootFor(const std::string& dir) {
  return "/mlbk-test/" + fs::path(dir).filename().string() + "/managed-ledgers";
}

bk::BkStorageOptions options(const std::string& dir, int64_t cacheMB) {
  bk::BkStorageOptions o;
  o.managedLedgerDefaultEnsembleSize = 3;
  o.managedLedgerDefaultWriteQuorum = 2;
  o.managedLedgerDefaultAckQuorum = 2;
  o.managedLedgerMaxEntriesPerLedger = 10;
  o.managedLedgerMinLedgerRolloverTimeMinutes = 0;
  o.defaultRetentionTimeInMinutes = 0;
  o.defaultRetentionSizeInMB = 0;
  o.managedLedgerCacheSizeMB = cacheMB;
  o.tickIntervalMs = 200;
  o.root = rootFor(dir);
  return o;
}

std::unique_ptr<ManagedLedgerFactory> makeBk(const std::string& dir) {
  auto& c = BkCluster::get();
  return std::make_unique<bk::BkManagedLedgerFactory>(options(dir, 64), c.bk.get(), c.zk.get());
}

// No entry cache: every read goes to the bookies.
std::unique_ptr<ManagedLedgerFactory> makeBkNoCache(const std::string& dir) {
  auto& c = BkCluster::get();
  return std::make_unique<bk::BkManagedLedgerFactory>(options(dir, 0), c.bk.get(), c.zk.get());
}

INSTANTIATE_TEST_SUITE_P(BookKeeper, LedgerContractTest, ::testing::Values(FactoryMaker(makeBk)));
INSTANTIATE_TEST_SUITE_P(BookKeeperNoCache, LedgerContractTest,
                         ::testing::Values(FactoryMaker(makeBkNoCache)));

// Runs each task on the thread that hands it over (ZooKeeper's): for blocking checks.
class InlineExecutor : public net::Executor {
 public:
  void execute(net::Task t) override { t(); }
  bool inExecutorThread() const override { return true; }
};

std::optional<std::string> znode(const std::string& path) {
  InlineExecutor ex;
  std::promise<std::optional<std::string>> p;
  BkCluster::get().zk->get(path, &ex, [&p](Result<std::optional<metadata::GetResult>> r) {
    p.set_value(r.isOk() && *r ? std::optional<std::string>((*r)->value) : std::nullopt);
  });
  return p.get_future().get();
}

std::pair<BkResult, bookkeeper::LedgerMetadata> ledgerMetadata(int64_t id) {
  std::promise<std::pair<BkResult, bookkeeper::LedgerMetadata>> p;
  BkCluster::get().bk->readLedgerMetadata(id, [&p](BkResult rc, bookkeeper::VersionedMetadata m) {
    p.set_value({rc, m.metadata});
  });
  return p.get_future().get();
}

// Entries [first, last] of a ledger, read directly (no recovery).
std::vector<std::string> readLedger(int64_t id, int64_t first, int64_t last) {
  std::promise<std::vector<std::string>> p;
  BkCluster::get().bk->openLedger(id, [&p, first, last](BkResult rc, HandlePtr h) {
    if (rc != BkResult::kOk) return p.set_value({});
    h->readEntries(first, last, [&p, h](BkResult rc2, std::vector<bookkeeper::LedgerEntry> es) {
      std::vector<std::string> out;
      if (rc2 == BkResult::kOk) {
        for (auto& e : es) out.push_back(e.payload);
      }
      p.set_value(out);
    });
  });
  return p.get_future().get();
}

// The last PositionInfo of a cursor ledger (read without recovery, up to its last confirmed
// entry): kNotFound when it has none, kCorruption when it does not parse.
Result<mledger::PositionInfo> lastPositionInfo(int64_t ledgerId) {
  std::promise<int64_t> lacP;
  BkCluster::get().bk->openLedger(ledgerId, [&lacP](BkResult r, HandlePtr h) {
    lacP.set_value(r == BkResult::kOk ? h->lastAddConfirmed() : -2);
  });
  const int64_t lac = lacP.get_future().get();
  auto last = lac >= 0 ? readLedger(ledgerId, lac, lac) : std::vector<std::string>{};
  if (last.size() != 1) {
    return Status::notFound("no last entry in cursor ledger " + std::to_string(ledgerId));
  }
  return bk::parsePositionInfo(last[0]);
}

// A client of its own for the test's cluster (a test that stalls bookies or adds a dead one).
std::unique_ptr<BookKeeperClient> ownClient(std::chrono::milliseconds addTimeout = {}) {
  bookkeeper::ClientConfig cc;
  cc.metadataServiceUri = BkCluster::get().uri;
  cc.zkSessionTimeoutMs = 10000;
  if (addTimeout.count() > 0) cc.bookie.addTimeout = addTimeout;
  auto client = BookKeeperClient::open(cc);
  EXPECT_TRUE(client.isOk()) << client.status().toString();
  return client.isOk() ? std::move(*client) : nullptr;
}

// Whether every thread of `pid` is stopped (state T in /proc/pid/task/*/stat; an ending thread
// counts), as tests/harness/util.py's stop_process. kill(SIGSTOP) returns before the threads
// stop: on a loaded machine a bookie still answered the first adds sent after it.
bool allThreadsStopped(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return false;
  for (const auto& t : tasks) {
    std::ifstream f(t.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos || close + 2 >= stat.size()) return false;
    char state = stat[close + 2];
    if (state != 'T' && state != 't' && state != 'Z' && state != 'X') return false;
  }
  return true;
}

// SIGSTOP to pid, then waits (up to 10 s) until every thread of it has stopped.
bool stopProcess(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!allThreadsStopped(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// "ensembles {first entry: [bookies]}" of the ledger of `p` (a failure message's detail).
std::string ledgerEnsembles(BookKeeperClient& client, const Position& p) {
  std::promise<std::string> out;
  client.readLedgerMetadata(p.ledgerId, [&out](BkResult rc,
                                               const bookkeeper::VersionedMetadata& vm) {
    std::string s = "ensembles of the ledger (" + std::string(bookkeeper::bkResultName(rc)) + "):";
    for (const auto& [entry, bookies] : vm.metadata.ensembles) {
      s += " " + std::to_string(entry) + ": [";
      for (const auto& b : bookies) s += b + " ";
      s += "]";
    }
    out.set_value(s);
  });
  return out.get_future().get();
}

std::string bookiePort(int i) {
  std::ifstream f(BkCluster::get().dir + "/bookie-" + std::to_string(i) + "/port");
  std::string port;
  f >> port;
  return port;
}

// Every add on every bookie of a ledger's ensemble of n: E = Qw = Qa = n.
void allBookiesAck(bk::BkStorageOptions& o, int n) {
  o.managedLedgerDefaultEnsembleSize = n;
  o.managedLedgerDefaultWriteQuorum = n;
  o.managedLedgerDefaultAckQuorum = n;
}

class BkStorageTest : public LedgerContractTest {
 protected:
  std::unique_ptr<ManagedLedgerFactory> secondFactory() { return makeBk(dir_); }
  std::shared_ptr<ManagedLedger> openWith(ManagedLedgerFactory& f, const std::string& name) {
    return openLedger(f, ex_, name);
  }
  // Starts op with a callback and runs tasks until the callback got its answer.
  template <class T>
  Result<T> await(const std::function<void(std::function<void(Result<T>)>)>& op) {
    std::optional<Result<T>> answer;
    op([&](Result<T> r) { answer.emplace(std::move(r)); });
    runUntil([&] { return answer.has_value(); });
    return answer ? std::move(*answer) : Result<T>(Status::internal("no answer"));
  }
  Result<bool> existsIn(ManagedLedgerFactory& f, const std::string& name) {
    return await<bool>(
        [&](std::function<void(Result<bool>)> cb) { f.asyncExists(name, &ex_, std::move(cb)); });
  }
  // A crash: the factory goes without closing anything (ledgers stay open in BookKeeper), a new
  // one takes over.
  void crashAndRestart() {
    factory_->shutdown();
    ex_.runPending();
    factory_ = makeBk(dir_);
  }
  // The znode of a cursor of ledger `name` (a local name without spaces), parsed.
  Result<mledger::ManagedCursorInfo> cursorInfo(const std::string& name,
                                                const std::string& cursor) {
    auto v = znode(rootFor(dir_) + "/" + name + "/" + cursor);
    if (!v) return Status::notFound(name + "/" + cursor);
    return bk::parseManagedCursorInfo(*v);
  }
  // What a cursor's znode points at: the last PositionInfo of its cursor ledger (kNotFound when
  // the znode names none).
  Result<mledger::PositionInfo> cursorLedgerState(const std::string& name,
                                                  const std::string& cursor) {
    auto ci = cursorInfo(name, cursor);
    if (!ci.isOk()) return ci.status();
    if (ci->cursorsledgerid() < 0) return Status::notFound(name + "/" + cursor + ": no ledger");
    return lastPositionInfo(ci->cursorsledgerid());
  }
  // The cursor's ledger ends with mark-delete `mark` and one ack set, at `batch`; the state read.
  mledger::PositionInfo expectBatchAckInLedger(const std::string& name, const std::string& cursor,
                                               Position mark, Position batch) {
    auto p = cursorLedgerState(name, cursor);
    EXPECT_TRUE(p.isOk()) << p.status().toString();
    if (!p.isOk()) return {};
    EXPECT_EQ(p->entryid(), mark.entryId);
    EXPECT_EQ(p->batchedentrydeletionindexinfo_size(), 1);
    if (p->batchedentrydeletionindexinfo_size() > 0) {
      EXPECT_EQ(p->batchedentrydeletionindexinfo(0).position().entryid(), batch.entryId);
    }
    return *p;
  }
  Result<mledger::ManagedLedgerInfo> info(const std::string& pulsarName) {
    auto v = znode(rootFor(dir_) + "/" + pulsarName);
    if (!v) return Status::notFound(pulsarName);
    return bk::parseManagedLedgerInfo(*v);
  }
  // Waits (up to 10 s) until the bookies no longer know the ledger.
  bool ledgerGone(int64_t id) {
    for (int i = 0; i < 100; ++i) {
      if (ledgerMetadata(id).first == BkResult::kNoSuchLedger) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

INSTANTIATE_TEST_SUITE_P(BookKeeper, BkStorageTest, ::testing::Values(FactoryMaker(makeBk)));

TEST_P(BkStorageTest, ZnodesAndLedgersAreInPulsarsFormats) {
  auto ml = open("public/default/persistent/roll over");
  ASSERT_TRUE(ml->openCursor("sub", InitialPosition::kEarliest).isOk());
  auto pos = add(*ml, 25);
  // The znode at Pulsar's path (local name URL-encoded): two closed ledgers and the current one.
  auto mi = info("public/default/persistent/roll+over");
  ASSERT_TRUE(mi.isOk()) << mi.status().toString();
  ASSERT_EQ(mi->ledgerinfo_size(), 3);
  EXPECT_EQ(mi->ledgerinfo(0).ledgerid(), pos[0].ledgerId);
  EXPECT_EQ(mi->ledgerinfo(0).entries(), 10);
  EXPECT_EQ(mi->ledgerinfo(0).size(), 20);  // "m0".."m9"
  EXPECT_GT(mi->ledgerinfo(0).timestamp(), 0);
  EXPECT_EQ(mi->ledgerinfo(1).ledgerid(), pos[10].ledgerId);
  EXPECT_EQ(mi->ledgerinfo(1).size(), 30);  // "m10".."m19"
  EXPECT_EQ(mi->ledgerinfo(2).ledgerid(), pos[24].ledgerId);
  EXPECT_FALSE(mi->ledgerinfo(2).has_entries());  // the ledger being written
  EXPECT_EQ(mi->ledgerinfo(2).timestamp(), 0);

  // The first ledger: CLOSED at entry 9 by the rollover, E/Qw/Qa from the options, CRC32C,
  // Pulsar's custom metadata, and the entries as they were added.
  auto [rc, md] = ledgerMetadata(pos[0].ledgerId);
  ASSERT_EQ(rc, BkResult::kOk);
  EXPECT_EQ(md.state, bookkeeper::LedgerState::kClosed);
  EXPECT_EQ(md.lastEntryId, 9);
  EXPECT_EQ(md.length, 20);
  EXPECT_EQ(md.ensembleSize, 3);
  EXPECT_EQ(md.writeQuorumSize, 2);
  EXPECT_EQ(md.ackQuorumSize, 2);
  EXPECT_EQ(md.digestType, bookkeeper::DigestType::kCrc32c);
  EXPECT_EQ(md.customMetadata,
            (std::map<std::string, std::string>{
                {"application", "pulsar"},
                {"component", "managed-ledger"},
                {"pulsar/managed-ledger", "public/default/persistent/roll+over"}}));
  EXPECT_EQ(readLedger(pos[0].ledgerId, 0, 2), (std::vector<std::string>{"m0", "m1", "m2"}));

  // The cursor: a znode under the ledger's; after an ack it points at a cursor ledger whose last
  // entry is the PositionInfo.
  EXPECT_TRUE(wait([&](StatusCallback cb) {
    (*ml->openCursor("sub", InitialPosition::kEarliest))->asyncDelete({pos[3]}, cb);
  }));
  EXPECT_TRUE(wait([&](StatusCallback cb) {
    (*ml->openCursor("sub", InitialPosition::kEarliest))->asyncMarkDelete(pos[1], cb);
  }));
  // A third write, so that the entry before it (mark-delete pos[1], (L:2, L:3] acked) is what a
  // reader sees as the ledger's last confirmed entry (the writer's LAC rides on the next entry).
  EXPECT_TRUE(wait([&](StatusCallback cb) {
    (*ml->openCursor("sub", InitialPosition::kEarliest))->asyncDelete({pos[20]}, cb);
  }));
  auto ci = cursorInfo("public/default/persistent/roll+over", "sub");
  ASSERT_TRUE(ci.isOk()) << ci.status().toString();
  ASSERT_GE(ci->cursorsledgerid(), 0);
  auto [crc, cmd] = ledgerMetadata(ci->cursorsledgerid());
  ASSERT_EQ(crc, BkResult::kOk);
  EXPECT_EQ(cmd.customMetadata.at("pulsar/cursor"), "sub");
  EXPECT_EQ(cmd.customMetadata.at("pulsar/managed-ledger"), "public/default/persistent/roll+over");
  auto pi = lastPositionInfo(ci->cursorsledgerid());
  ASSERT_TRUE(pi.isOk()) << pi.status().toString();
  EXPECT_EQ(pi->ledgerid(), pos[0].ledgerId);
  EXPECT_EQ(pi->entryid(), 1);
  ASSERT_EQ(pi->individualdeletedmessages_size(), 1);
  EXPECT_EQ(pi->individualdeletedmessages(0).lowerendpoint().entryid(), 2);  // (L:2, L:3]
  EXPECT_EQ(pi->individualdeletedmessages(0).upperendpoint().entryid(), 3);
}

TEST_P(BkStorageTest, SecondOwnerFencesTheFirst) {
  auto a = open("t/fence");
  auto posA = add(*a, 3);
  auto fb = secondFactory();
  auto b = openWith(*fb, "t/fence");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->numberOfEntries(), 3);
  EXPECT_GT(b->lastConfirmedEntry().ledgerId, posA[2].ledgerId);
  // The first owner's next add fails with the named error, and it refuses adds from then on.
  Status st;
  bool done = false;
  a->asyncAddEntry(Buffer::copyOf("late"), [&](Status s, Position) {
    st = s;
    done = true;
  });
  runUntil([&] { return done; });
  EXPECT_EQ(st.code(), StatusCode::kFenced) << st.toString();
  EXPECT_EQ(a->writeRefusal().code(), StatusCode::kFenced);
  // The second owner has every entry the first one acknowledged, and writes on.
  auto r = read(*b, posA[0], 10, 1 << 20);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].data.view(), "m2");
  auto posB = add(*b, 2, 3);
  EXPECT_EQ(b->numberOfEntries(), 5);
  EXPECT_EQ(read(*b, posA[0], 10, 1 << 20).back().data.view(), "m4");
  EXPECT_TRUE(wait([&](StatusCallback cb) { b->asyncClose(cb); }));
  fb->shutdown();
  ex_.runPending();
}

TEST_P(BkStorageTest, CursorIsRecoveredFromItsLedgerAfterACrash) {
  std::vector<Position> pos;
  {
    auto ml = open("t/crash");
    auto c = ml->openCursor("s", InitialPosition::kEarliest);
    ASSERT_TRUE(c.isOk());
    pos = add(*ml, 12);  // ledgers of 10 and 2
    EXPECT_TRUE(wait([&](StatusCallback cb) {
      (*c)->asyncMarkDelete(pos[1], CursorProperties{{"dedup", 7}}, cb);
    }));
    EXPECT_TRUE(wait([&](StatusCallback cb) { (*c)->asyncDelete({pos[5], pos[6], pos[11]}, cb); }));
    EXPECT_TRUE(wait([&](StatusCallback cb) {
      (*c)->asyncDeleteBatchIndexes({{pos[8], AckSet{0b1010}}}, cb);
    }));
    // The state is in the cursor ledger (not only in the znode).
    auto ci = cursorInfo("t/crash", "s");
    ASSERT_TRUE(ci.isOk()) << ci.status().toString();
    EXPECT_GE(ci->cursorsledgerid(), 0);
    EXPECT_EQ(ci->individualdeletedmessages_size(), 0);
    crashAndRestart();
  }
  auto ml = open("t/crash");
  EXPECT_EQ(ml->numberOfEntries(), 12);
  auto c = ml->openCursor("s", InitialPosition::kLatest);
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ((*c)->markDeletedPosition(), pos[1]);
  EXPECT_EQ((*c)->properties().at("dedup"), 7);
  EXPECT_TRUE((*c)->isAcknowledged(pos[5]));
  EXPECT_TRUE((*c)->isAcknowledged(pos[6]));
  EXPECT_TRUE((*c)->isAcknowledged(pos[11]));
  EXPECT_FALSE((*c)->isAcknowledged(pos[7]));
  ASSERT_NE((*c)->batchDeletedIndexes(pos[8]), nullptr);
  EXPECT_EQ(*(*c)->batchDeletedIndexes(pos[8]), AckSet{0b1010});
  EXPECT_EQ((*c)->numberOfEntriesInBacklog(), 12 - 2 - 3);
}

// managedLedgerDefaultMarkDeleteRateLimit (1/s here): acks nobody waits for are written at most
// once a second per cursor, the last state on the tick after the interval; an ack that waits is
// written at once.
TEST_P(BkStorageTest, CursorWritesWithoutWaitersKeepTheMarkDeleteRateLimit) {
  auto opened = openWithCursor("t/ratelimit", 30);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  auto runFor = [&](std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    runUntil([&] { return std::chrono::steady_clock::now() >= until; });
  };
  // Two waited acks: the second starts the cursor ledger (the first writes the znode).
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[0]}, cb); }));
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[1]}, cb); }));
  const auto [ledger, entry] = c->cursorLedger();
  ASSERT_GE(ledger, 0);
  const int64_t lastEntry = entry;  // a plain variable: lambdas below capture it
  // 20 acks 25 ms apart, each long enough for a write to land: one write at most per started
  // second (one in the nominal 0.5 s; a loaded machine may take longer, never 20 writes).
  const auto loopStart = std::chrono::steady_clock::now();
  for (int i = 2; i < 22; ++i) {
    c->asyncDelete({pos[i]}, nullptr);
    runFor(std::chrono::milliseconds(25));
  }
  const auto loopSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - loopStart)
          .count();
  EXPECT_LE(c->cursorLedger().second - lastEntry, 1 + loopSeconds);
  // The held-back state goes out on a tick after the interval.
  runUntil([&] { return c->cursorLedger().second > lastEntry; });
  runFor(std::chrono::milliseconds(1500));
  const int64_t afterTick = c->cursorLedger().second;
  EXPECT_LE(afterTick - lastEntry, 3 + loopSeconds);
  // A waited ack is not held back, however recent the last write.
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[22]}, cb); }));
  EXPECT_EQ(c->cursorLedger().second, afterTick + 1);
  // Crash (nothing closed): the next owner finds every ack of that state.
  crashAndRestart();
  auto again = open("t/ratelimit");
  auto c2 = again->openCursor("s", InitialPosition::kLatest);
  ASSERT_TRUE(c2.isOk());
  EXPECT_EQ((*c2)->markDeletedPosition(), pos[22]);
}

// Pulsar restores batch-index acks only from a cursor ledger, never from the znode: a clean close
// with a partly acknowledged batch leaves the last state in the cursor ledger; a cursor without
// one closes into its znode (cursorsLedgerId -1).
TEST_P(BkStorageTest, CloseKeepsBatchIndexAcksInTheCursorLedger) {
  auto ml = open("t/closebatch");
  auto batch = ml->openCursor("batch", InitialPosition::kEarliest);
  auto plain = ml->openCursor("plain", InitialPosition::kEarliest);
  ASSERT_TRUE(batch.isOk() && plain.isOk());
  auto pos = add(*ml, 5);
  for (auto* c : {&*batch, &*plain}) {
    EXPECT_TRUE(wait([&](StatusCallback cb) { (*c)->asyncMarkDelete(pos[0], cb); }));
    EXPECT_TRUE(wait([&](StatusCallback cb) { (*c)->asyncDelete({pos[3]}, cb); }));
  }
  EXPECT_TRUE(wait([&](StatusCallback cb) {
    (*batch)->asyncDeleteBatchIndexes({{pos[2], AckSet{0b1010}}}, cb);
  }));
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));

  auto pi = cursorInfo("t/closebatch", "plain");
  ASSERT_TRUE(pi.isOk()) << pi.status().toString();
  EXPECT_EQ(pi->cursorsledgerid(), -1);
  EXPECT_EQ(pi->individualdeletedmessages_size(), 1);

  auto p = expectBatchAckInLedger("t/closebatch", "batch", pos[0], pos[2]);
  EXPECT_EQ(p.individualdeletedmessages_size(), 1);
}

// Every ack held back by the rate limit (no cursor ledger yet) when the ledger closes: the close
// makes the cursor ledger, so that batch-index acks still reach a Pulsar broker taking over.
TEST_P(BkStorageTest, CloseMakesTheCursorLedgerForHeldBackBatchIndexAcks) {
  auto opened = openWithCursor("t/heldbatch", 5);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  // The znode's write (at open) was just now: these wait for the next allowed write.
  c->asyncDelete({pos[0]}, nullptr);
  c->asyncDeleteBatchIndexes({{pos[2], AckSet{0b0110}}}, nullptr);
  ex_.runPending();
  EXPECT_EQ(c->cursorLedger().first, -1);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));
  expectBatchAckInLedger("t/heldbatch", "s", pos[0], pos[2]);
}

TEST_P(BkStorageTest, ConsumedLedgersAreDeletedFromBookKeeper) {
  auto opened = openWithCursor("t/trimbk", 25);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncMarkDelete(pos[14], cb); }));
  runUntil([&] { return ml->numberOfEntries() == 15; });
  EXPECT_TRUE(ledgerGone(pos[0].ledgerId));
  EXPECT_EQ(ledgerMetadata(pos[10].ledgerId).first, BkResult::kOk);
  auto mi = info("t/trimbk");
  ASSERT_TRUE(mi.isOk());
  ASSERT_EQ(mi->ledgerinfo_size(), 2);
  EXPECT_EQ(mi->ledgerinfo(0).ledgerid(), pos[10].ledgerId);
}

TEST_P(BkStorageTest, DeleteRemovesZnodesAndLedgers) {
  auto opened = openWithCursor("t/gone", 12);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[3]}, cb); }));
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[4]}, cb); }));
  auto ci = cursorInfo("t/gone", "s");
  ASSERT_TRUE(ci.isOk()) << ci.status().toString();
  const int64_t cursorLedger = ci->cursorsledgerid();
  ASSERT_GE(cursorLedger, 0);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncDelete(cb); }));
  EXPECT_FALSE(znode(rootFor(dir_) + "/t/gone/s").has_value());
  EXPECT_FALSE(znode(rootFor(dir_) + "/t/gone").has_value());
  EXPECT_TRUE(ledgerGone(pos[0].ledgerId));
  EXPECT_TRUE(ledgerGone(pos[11].ledgerId));
  EXPECT_TRUE(ledgerGone(cursorLedger));
}

// Pulsar's compacted ledger: a plain ledger with the compacted-ledger metadata and RawMessage
// entries, found again through the cursor property; closed, deleted on request.
TEST_P(BkStorageTest, CompactedLedgersAreInPulsarsFormat) {
  auto store = factory_->compactedLedgerStore();
  ASSERT_TRUE(store);
  using LedgerCb = std::function<void(Result<std::shared_ptr<CompactedLedger>>)>;
  auto created = await<std::shared_ptr<CompactedLedger>>([&](LedgerCb cb) {
    store->asyncCreate("public/default/persistent/ct", {7, 3}, &ex_, std::move(cb));
  });
  ASSERT_TRUE(created.isOk()) << created.status().toString();
  std::shared_ptr<CompactedLedger> written = *created;
  ASSERT_TRUE(written);
  EXPECT_TRUE(wait([&](StatusCallback cb) {
    written->asyncAdd({5, 1}, Buffer::copyOf("one"), [](const Status& s) { EXPECT_TRUE(s); });
    written->asyncAdd({7, 3}, Buffer::copyOf("three"), cb);
  }));
  EXPECT_TRUE(wait([&](StatusCallback cb) { written->asyncClose(cb); }));
  const int64_t id = written->ledgerId();
  CursorProperties props{{kCompactedLedgerSeqProperty, 9}};
  written->describe(&props);
  EXPECT_EQ(props, (CursorProperties{{kCompactedTopicLedgerProperty, id}}));

  auto [rc, md] = ledgerMetadata(id);
  ASSERT_EQ(rc, BkResult::kOk);
  EXPECT_EQ(md.state, bookkeeper::LedgerState::kClosed);
  EXPECT_EQ(md.lastEntryId, 1);
  EXPECT_EQ(md.customMetadata, (std::map<std::string, std::string>{
                                   {"application", "pulsar"},
                                   {"component", "compacted-ledger"},
                                   {"pulsar/compactedTopic", "persistent://public/default/ct"},
                                   {"pulsar/compactedTo", bk::messageIdDataBytes({7, 3})}}));
  EXPECT_EQ(readLedger(id, 0, 1),
            (std::vector<std::string>{std::string(bk::encodeRawMessage({5, 1}, "one").view()),
                                      std::string(bk::encodeRawMessage({7, 3}, "three").view())}));

  // Opened again from the cursor's properties (as at topic load), read by index.
  auto openFrom = [&](const CursorProperties& p) {
    return await<std::shared_ptr<CompactedLedger>>([&](LedgerCb cb) {
      store->asyncOpen("public/default/persistent/ct", p, &ex_, std::move(cb));
    });
  };
  auto reopened = openFrom(props);
  ASSERT_TRUE(reopened.isOk()) << reopened.status().toString();
  std::shared_ptr<CompactedLedger> opened = *reopened;
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->numberOfEntries(), 2);
  std::vector<Entry> got;
  bool done = false;
  opened->asyncRead(1, 10, 1 << 20, [&](const Status& s, std::vector<Entry> es) {
    EXPECT_TRUE(s) << s.toString();
    got = std::move(es);
    done = true;
  });
  runUntil([&] { return done; });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].position, (Position{7, 3}));
  EXPECT_EQ(got[0].data.view(), "three");

  // Properties that name no compacted ledger, or the embedded format's view: no ledger.
  for (const CursorProperties& p :
       {CursorProperties{},
        CursorProperties{{kCompactedTopicLedgerProperty, id}, {kCompactedLedgerSeqProperty, 9}}}) {
    auto r = openFrom(p);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_FALSE(r.isOk() && *r);
  }

  EXPECT_TRUE(wait([&](StatusCallback cb) { opened->asyncDelete(cb); }));
  EXPECT_TRUE(ledgerGone(id));
}

TEST_P(BkStorageTest, OpenDuringCloseWaitsForTheClose) {
  auto opened = openWithCursor("t/reclose", 3);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[1]}, cb); }));
  bool closed = false;
  ml->asyncClose([&](Status s) { closed = s.isOk(); });
  // Asked before the close finished: answered with a new instance once the old one closed.
  std::shared_ptr<ManagedLedger> again;
  bool done = false;
  factory_->asyncOpen("t/reclose", &ex_, [&](Result<std::shared_ptr<ManagedLedger>> r) {
    EXPECT_TRUE(closed);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    again = *r;
    done = true;
  });
  runUntil([&] { return done; });
  ASSERT_NE(again, nullptr);
  EXPECT_NE(again, ml);
  EXPECT_EQ(again->numberOfEntries(), 3);
  auto c2 = again->openCursor("s", InitialPosition::kLatest);
  ASSERT_TRUE(c2.isOk());
  EXPECT_TRUE((*c2)->isAcknowledged(pos[1]));
  EXPECT_FALSE((*c2)->isAcknowledged(pos[0]));
}

TEST_P(BkStorageTest, RolloverBySize) {
  auto o = options(dir_, 0);
  o.managedLedgerMaxEntriesPerLedger = 1000;
  o.managedLedgerMaxSizePerLedgerMbytes = 1;
  factory_->shutdown();
  ex_.runPending();
  factory_ = std::make_unique<bk::BkManagedLedgerFactory>(o, BkCluster::get().bk.get(),
                                                          BkCluster::get().zk.get());
  auto ml = open("t/bysize");
  ASSERT_TRUE(ml->openCursor("keep", InitialPosition::kEarliest).isOk());  // no trimming
  std::vector<Position> pos;
  for (int i = 0; i < 3; i++) {
    ml->asyncAddEntry(Buffer::copyOf(std::string(600 << 10, static_cast<char>('a' + i))),
                      [&](Status s, Position p) {
                        EXPECT_TRUE(s.isOk()) << s.toString();
                        pos.push_back(p);
                      });
  }
  runUntil([&] { return pos.size() == 3; });
  // 600 KiB + 600 KiB reach 1 MiB: the third entry starts a new ledger.
  EXPECT_EQ(pos[1].ledgerId, pos[0].ledgerId);
  EXPECT_GT(pos[2].ledgerId, pos[1].ledgerId);
  EXPECT_EQ(pos[2].entryId, 0);
  auto r = read(*ml, pos[0], 3, 4 << 20);  // from the bookies (no cache)
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].data.size(), 600u << 10);
  EXPECT_EQ(r[2].data.view()[0], 'c');
}

TEST_P(BkStorageTest, ReleaseWritesNothingAndTheNextOwnerRecovers) {
  auto opened = openWithCursor("t/release", 5);
  [[maybe_unused]] auto& ml = opened.ml;
  [[maybe_unused]] ManagedCursor* c = opened.cursor;
  [[maybe_unused]] auto& pos = opened.pos;
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(wait([&](StatusCallback cb) { c->asyncDelete({pos[0], pos[2]}, cb); }));
  const int64_t current = ml->ledgerStats().back().ledgerId;
  auto cursorBefore = znode(rootFor(dir_) + "/t/release/s");
  ASSERT_TRUE(cursorBefore.has_value());
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncRelease(cb); }));
  EXPECT_FALSE(ml->writeRefusal().isOk());
  // Nothing written: the ledger is still OPEN in BookKeeper, the cursor's znode as it was.
  auto [rc, md] = ledgerMetadata(current);
  ASSERT_EQ(rc, BkResult::kOk);
  EXPECT_EQ(md.state, bookkeeper::LedgerState::kOpen);
  EXPECT_EQ(znode(rootFor(dir_) + "/t/release/s"), cursorBefore);
  // The next owner recovers the ledger and the cursor from its ledger.
  auto again = open("t/release");
  ASSERT_NE(again, ml);
  EXPECT_EQ(again->numberOfEntries(), 5);
  auto c2 = again->openCursor("s", InitialPosition::kLatest);
  ASSERT_TRUE(c2.isOk());
  EXPECT_EQ((*c2)->markDeletedPosition(), pos[0]);
  EXPECT_TRUE((*c2)->isAcknowledged(pos[2]));
  EXPECT_EQ((*c2)->numberOfEntriesInBacklog(), 3);
}

// A broken ledger (E=Qw=Qa=3 on 3 bookies, one stalled: its adds time out and no bookie can
// replace it, NotEnoughBookies) is closed and the adds in flight are resent, in order, to the next
// ledger (Pulsar's ledgerClosed / createLedgerAfterClosed): once the bookie is back every add
// succeeds, and the log holds each entry once, in the order added, also for the next owner.
TEST_P(BkStorageTest, AddsOnABrokenLedgerAreResentInTheNextLedger) {
  auto& cluster = BkCluster::get();
  if (!cluster.owned) GTEST_SKIP() << "needs the bookies this test started (pids)";
  std::ifstream pidFile(cluster.dir + "/bookie-0/pid");
  pid_t bookie = 0;
  pidFile >> bookie;
  ASSERT_GT(bookie, 0);
  auto client = ownClient(std::chrono::milliseconds(800));
  ASSERT_NE(client, nullptr);
  auto o = options(dir_, 64);
  allBookiesAck(o, 3);
  o.managedLedgerMaxEntriesPerLedger = 1000;
  auto f = std::make_unique<bk::BkManagedLedgerFactory>(o, client.get(), cluster.zk.get());
  auto ml = openWith(*f, "t/resend");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE(ml->openCursor("keep", InitialPosition::kEarliest).isOk());
  auto before = add(*ml, 5);
  const int64_t first = before[0].ledgerId;

  ASSERT_TRUE(stopProcess(bookie)) << "bookie-0 (pid " << bookie << ") did not stop";
  std::vector<std::pair<Status, Position>> got;
  const int n = 20;
  for (int i = 0; i < n; i++) {
    ml->asyncAddEntry(Buffer::copyOf("m" + std::to_string(5 + i)),
                      [&](Status s, Position p) { got.emplace_back(s, p); });
  }
  auto resumeAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  runUntil([&] { return std::chrono::steady_clock::now() >= resumeAt; });
  ::kill(bookie, SIGCONT);
  EXPECT_TRUE(got.empty()) << "an add completed while a bookie of its write set was stopped: "
                           << (got.empty() ? ""
                                           : got.front().first.toString() + " at " +
                                                 std::to_string(got.front().second.ledgerId) + ":" +
                                                 std::to_string(got.front().second.entryId) + ", " +
                                                 ledgerEnsembles(*client, got.front().second))
                           << "; the stopped bookie is bookie-0 (port " << bookiePort(0) << ")";
  runUntil([&] { return static_cast<int>(got.size()) == n; });

  auto* bml = dynamic_cast<bk::BkManagedLedger*>(ml.get());
  ASSERT_NE(bml, nullptr);
  EXPECT_GE(bml->resentLedgers(), 1);  // the adds were taken back at least once
  Position prev = before.back();
  for (const auto& [s, p] : got) {
    EXPECT_TRUE(s.isOk()) << s.toString();
    EXPECT_GT(p.ledgerId, first);  // not in the broken ledger
    EXPECT_GT(p, prev);            // in the order added
    prev = p;
  }
  EXPECT_EQ(ml->numberOfEntries(), 5 + n);
  auto expectLog = [&](ManagedLedger& l) {
    auto r = read(l, before[0], 100, 1 << 20);
    ASSERT_EQ(static_cast<int>(r.size()), 5 + n);
    for (int i = 0; i < 5 + n; i++) EXPECT_EQ(r[i].data.view(), "m" + std::to_string(i));
  };
  expectLog(*ml);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));
  // The next owner (a fresh open, ledgers read from the bookies): the same log, once each.
  auto again = openWith(*f, "t/resend");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->numberOfEntries(), 5 + n);
  expectLog(*again);
  EXPECT_TRUE(wait([&](StatusCallback cb) { again->asyncClose(cb); }));
  f->shutdown();
  ex_.runPending();
  client->close();
}

TEST(BkRolloverBackoff, NoneForTheFirstBrokenLedgerThenDoublingTo5s) {
  using std::chrono::milliseconds;
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(0), milliseconds(0));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(1), milliseconds(0));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(2), milliseconds(100));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(3), milliseconds(200));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(7), milliseconds(3200));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(8), milliseconds(5000));
  EXPECT_EQ(bk::BkManagedLedger::rolloverBackoff(1000), milliseconds(5000));
}

// A bookie registered in /ledgers/available but down (nothing listens on its port) in every
// ensemble (E = 4 of 3 real bookies and it): each new ledger breaks at its first add. The topic
// waits longer and longer between ledgers instead of churning through them; a close during the
// wait ends it and fails the adds waiting for a ledger.
TEST_P(BkStorageTest, LedgersBrokenInARowAreCreatedWithGrowingWaits) {
  auto& cluster = BkCluster::get();
  auto client = ownClient();
  ASSERT_NE(client, nullptr);
  auto o = options(dir_, 64);
  allBookiesAck(o, 3);
  auto f = std::make_unique<bk::BkManagedLedgerFactory>(o, client.get(), cluster.zk.get());
  auto ml = openWith(*f, "t/broken");
  ASSERT_NE(ml, nullptr);
  add(*ml, 2);  // the first ledger works (3 real bookies)
  auto* bml = dynamic_cast<bk::BkManagedLedger*>(ml.get());
  ASSERT_NE(bml, nullptr);

  // The dead bookie: a ledger of another topic with an ensemble of 4 takes it.
  const std::string dead =
      bookkeeper::parseMetadataServiceUri(cluster.uri)->second + "/available/127.0.0.1:1";
  InlineExecutor inl;
  std::promise<bool> put;
  metadata::PutOptions po;
  po.ephemeral = true;
  cluster.zk->put(dead, "", po, &inl,
                  [&put](const Result<metadata::Stat>& r) { put.set_value(r.isOk()); });
  ASSERT_TRUE(put.get_future().get());
  auto o4 = o;
  allBookiesAck(o4, 4);
  auto f4 = std::make_unique<bk::BkManagedLedgerFactory>(o4, client.get(), cluster.zk.get());
  auto broken = openWith(*f4, "t/broken4");
  ASSERT_NE(broken, nullptr);
  auto* b4 = dynamic_cast<bk::BkManagedLedger*>(broken.get());
  ASSERT_NE(b4, nullptr);
  std::vector<Status> got;
  for (int i = 0; i < 5; i++) {
    broken->asyncAddEntry(Buffer::copyOf("x" + std::to_string(i)),
                          [&](Status s, Position) { got.push_back(s); });
  }
  // Waits of 0, 100, 200, 400, 800, 1600 ms before the 2nd to 7th ledgers: 5 ledgers broken take
  // at least 700 ms (without the waits: hundreds a second), however slow ZooKeeper is.
  const auto start = std::chrono::steady_clock::now();
  runUntil([&] { return b4->resentLedgers() >= 5; });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(b4->resentLedgers(), 5);
  EXPECT_GE(took, std::chrono::milliseconds(700)) << "ledgers broken in a row without waits";
  // The next two waits (800 + 1600 ms): at most 2 more ledgers in the next 2 s.
  const int64_t atFive = b4->resentLedgers();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  runUntil([&] { return std::chrono::steady_clock::now() >= until; });
  EXPECT_LE(b4->resentLedgers() - atFive, 2);
  EXPECT_TRUE(got.empty()) << "adds waiting for a working ledger must not fail meanwhile";

  Status closed = Status::ok();
  bool closeDone = false;
  broken->asyncClose([&](Status s) {
    closed = s;
    closeDone = true;
  });
  runUntil([&] { return closeDone; });
  ASSERT_EQ(static_cast<int>(got.size()), 5);
  for (const auto& s : got) EXPECT_FALSE(s.isOk());  // failed, never confirmed

  std::promise<bool> removed;
  cluster.zk->remove(dead, std::nullopt, &inl,
                     [&removed](const Status& s) { removed.set_value(s.isOk()); });
  EXPECT_TRUE(removed.get_future().get());
  // The other topic, whose ledger has 3 real bookies, is untouched.
  auto more = add(*ml, 2, 2);
  EXPECT_EQ(more.size(), 2u);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncClose(cb); }));
  f4->shutdown();
  f->shutdown();
  ex_.runPending();
  client->close();
}

// What a broker that did not open a topic learns from the znodes (Pulsar's
// persistentTopicExists and listPersistentTopicsAsync): another factory sees the ledgers, local
// names URL-decoded, and asking creates nothing.
TEST_P(BkStorageTest, AnotherFactorySeesLedgersItDidNotOpen) {
  ASSERT_NE(open("public/default/persistent/roll over"), nullptr);
  ASSERT_NE(open("public/default/persistent/a"), nullptr);
  auto other = secondFactory();
  ASSERT_TRUE(other->sharedBetweenBrokers());
  auto exists = [&](const std::string& name) {
    auto answer = existsIn(*other, name);
    EXPECT_TRUE(answer.isOk()) << answer.status().toString();
    return answer.isOk() && *answer;
  };
  EXPECT_TRUE(exists("public/default/persistent/roll over"));
  EXPECT_TRUE(exists("public/default/persistent/a"));
  EXPECT_FALSE(exists("public/default/persistent/nope"));
  EXPECT_FALSE(znode(rootFor(dir_) + "/public/default/persistent/nope").has_value());

  auto namesUnder = [&](const std::string& prefix) {
    using Names = std::vector<std::string>;
    auto answer = await<Names>([&](std::function<void(Result<Names>)> cb) {
      other->asyncLedgerNamesUnder(prefix, &ex_, std::move(cb));
    });
    EXPECT_TRUE(answer.isOk()) << answer.status().toString();
    return answer.isOk() ? *answer : Names{};
  };
  EXPECT_EQ(namesUnder("public/default/persistent"),
            (std::vector<std::string>{"public/default/persistent/a",
                                      "public/default/persistent/roll over"}));
  EXPECT_TRUE(namesUnder("public/default/non-persistent").empty());
  EXPECT_TRUE(namesUnder("public/nothing/persistent").empty());
  other->shutdown();
  ex_.runPending();
}

// Pulsar's getTopicIfExists opens with createIfMissing=false: a ledger deleted through another
// broker after an existence check is not created again by the open that follows.
TEST_P(BkStorageTest, OpenExistingDoesNotCreateADeletedLedger) {
  auto openExisting = [&](ManagedLedgerFactory& f, const std::string& name) {
    using Ml = std::shared_ptr<ManagedLedger>;
    return await<Ml>([&](std::function<void(Result<Ml>)> cb) {
      f.asyncOpenExisting(name, &ex_, std::move(cb));
    });
  };
  const std::string path = rootFor(dir_) + "/public/default/persistent/gone";
  // Never created: kNotFound, no znode written.
  auto none = openExisting(*factory_, "public/default/persistent/nope");
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound) << none.status().toString();
  EXPECT_FALSE(znode(rootFor(dir_) + "/public/default/persistent/nope").has_value());

  // Created and written by one broker; another sees it, then the first deletes it: the second's
  // open finds nothing and leaves nothing.
  auto ml = open("public/default/persistent/gone");
  ASSERT_NE(ml, nullptr);
  add(*ml, 3);
  auto other = secondFactory();
  auto exists = existsIn(*other, "public/default/persistent/gone");
  ASSERT_TRUE(exists.isOk() && *exists);
  EXPECT_TRUE(wait([&](StatusCallback cb) { ml->asyncDelete(cb); }));
  ASSERT_FALSE(znode(path).has_value());
  auto late = openExisting(*other, "public/default/persistent/gone");
  ASSERT_FALSE(late.isOk());
  EXPECT_EQ(late.status().code(), StatusCode::kNotFound) << late.status().toString();
  EXPECT_FALSE(znode(path).has_value());

  // An existing ledger opens as with asyncOpen (its entries there), and a plain asyncOpen that
  // joins nothing creates as before.
  auto again = open("public/default/persistent/again");
  ASSERT_NE(again, nullptr);
  add(*again, 2);
  auto opened = openExisting(*other, "public/default/persistent/again");
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  EXPECT_EQ((*opened)->numberOfEntries(), 2);
  other->shutdown();
  ex_.runPending();
}

}  // namespace
}  // namespace magnetar::storage::testing
