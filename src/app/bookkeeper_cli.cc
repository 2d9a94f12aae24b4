#include "app/bookkeeper_cli.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "bookkeeper/bookie_recovery.h"
#include "bookkeeper/client.h"
#include "bookkeeper/sync_wait.h"

namespace magnetar::app {
namespace {

using bookkeeper::await;
using bookkeeper::awaitDone;
using bookkeeper::BkResult;
using bookkeeper::BookKeeperClient;
using bookkeeper::LedgerHandle;

struct BkOptions {
  std::string uri;
  int ioThreads = 1;
  int timeoutSec = 30;
  size_t maxRequestsPerBookie = bookkeeper::BookieClientOptions{}.maxInFlightRequestsPerBookie;
  // simpletest (SimpleTestCommand's flags and defaults)
  int ensemble = 3;
  int writeQuorum = 2;
  int ackQuorum = 2;
  int numEntries = 100;
  bool keep = false;
  // readledger / ledgermetadata
  int64_t ledgerId = -1;
  int64_t firstEntryId = 0;
  int64_t lastEntryId = -1;
  bool msg = false;
  bool forceRecovery = false;
  std::string dumpToFile;
  // recover (BookieShell.RecoverCmd's flags)
  std::vector<std::string> bookieSrc;
  bool query = false;
  bool dryRun = false;
  bool force = false;
  bool skipOpenLedgers = false;
  bool skipUnrecoverableLedgers = false;
  bool deleteCookie = false;
  int replicationRate = -1;
  // bench
  int entrySize = 1024;
  int outstanding = 100;
  int progressEvery = 0;
  bool noClose = false;
};

int fail(const std::string& what, BkResult rc) {
  std::cerr << "bookkeeper: " << what << ": " << bookkeeper::bkResultName(rc) << "\n";
  return 1;
}

// Bad -ensemble/-writeQuorum/-ackQuorum: IllegalOp (as the client answers) and why, before any
// connection is made. 0 when they are fine.
int badQuorums(const BkOptions& o) {
  auto q = bookkeeper::checkQuorums(o.ensemble, o.writeQuorum, o.ackQuorum);
  if (q.isOk()) return 0;
  std::cerr << "bookkeeper: create ledger: IllegalOp (" << q.message() << ")\n";
  return 1;
}

// A ledger or entry id flag: decimal digits only, within [min, INT64_MAX]. CLI11 2.1 parses
// integers with strtoll, which saturates out-of-range values (and reads "010" as octal); the
// shell's Long.parseLong rejects them, and so does this.
CLI::Option* addIdOption(CLI::App* app, const std::string& names, const std::string& flag,
                         int64_t& target, int64_t min, const std::string& desc) {
  return app->add_option_function<std::string>(
      names,
      [&target, flag, min](const std::string& v) {
        int64_t x = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec == std::errc::result_out_of_range || (ec == std::errc() && x < min)) {
          throw CLI::ValidationError(flag, "'" + v + "' is out of range (" + std::to_string(min) +
                                               " to 9223372036854775807)");
        }
        if (ec != std::errc() || p != v.data() + v.size()) {
          throw CLI::ValidationError(flag, "'" + v + "' is not a decimal number");
        }
        target = x;
      },
      desc);
}

std::unique_ptr<BookKeeperClient> connect(const BkOptions& o) {
  bookkeeper::ClientConfig c;
  c.metadataServiceUri = o.uri;
  c.numIoThreads = o.ioThreads;
  c.bookie.addTimeout = std::chrono::seconds(o.timeoutSec);
  c.bookie.readTimeout = std::chrono::seconds(o.timeoutSec);
  c.bookie.maxInFlightRequestsPerBookie = o.maxRequestsPerBookie;
  c.zkConnectTimeoutMs = o.timeoutSec * 1000;
  auto client = BookKeeperClient::open(c);
  if (!client.isOk()) {
    std::cerr << "bookkeeper: " << client.status().message() << "\n";
    return nullptr;
  }
  return std::move(*client);
}

// Runs fn on the handle's loop and waits for it.
template <typename T>
std::pair<BkResult, T> onLoop(const std::shared_ptr<LedgerHandle>& h,
                              std::function<void(std::function<void(BkResult, T)>)> start) {
  return await<T>(
      [&](std::function<void(BkResult, T)> cb) { h->loop().execute([start, cb] { start(cb); }); });
}

// SimpleTestCommand: creates a ledger (CRC32C, empty password, custom metadata Bookie=simpletest),
// appends numEntries entries of 100 bytes, reads them back, closes the ledger, reads them again
// and deletes the ledger (unless -keep, Magnetar's addition for interop checks).
int simpleTest(const BkOptions& o) {
  if (int q = badQuorums(o)) return q;
  auto bk = connect(o);
  if (!bk) return 1;
  std::string data(100, 'A');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('A' + (i * 7 + 3) % 26);
  auto res1 = await<std::shared_ptr<LedgerHandle>>([&](auto cb) {
    bk->createLedger(o.ensemble, o.writeQuorum, o.ackQuorum, {{"Bookie", "simpletest"}}, cb);
  });
  auto rc = res1.first;
  auto h = std::move(res1.second);
  if (rc != BkResult::kOk) return fail("create ledger", rc);
  int64_t id = h->id();
  std::cout << "Ledger ID: " << id << std::endl;
  Buffer payload = Buffer::copyOf(data);
  auto res2 = onLoop<int64_t>(h, [h, payload, n = o.numEntries](auto cb) {
    // All adds in flight at once; the last completion reports (completions are in order).
    if (n == 0) return cb(BkResult::kOk, -1);
    auto firstError = std::make_shared<BkResult>(BkResult::kOk);
    for (int i = 0; i < n; ++i) {
      h->addEntry(payload, [cb, firstError, i, n](BkResult r, int64_t entryId) {
        if (r != BkResult::kOk && *firstError == BkResult::kOk) *firstError = r;
        if (i == n - 1) cb(*firstError, entryId);
      });
    }
  });
  auto arc = res2.first;
  auto last = res2.second;
  if (arc != BkResult::kOk) return fail("add entry", arc);
  std::cout << o.numEntries << " entries written to ledger " << id << ". Last entry Id " << last
            << std::endl;
  if (last != o.numEntries - 1) {
    std::cerr << "bookkeeper: Last entry id doesn't match the expected value\n";
    return 1;
  }
  auto check = [&](const std::shared_ptr<LedgerHandle>& handle) -> int {
    if (last < 0) return 0;
    auto res3 = onLoop<std::vector<bookkeeper::LedgerEntry>>(
        handle, [handle, last](auto cb) { handle->readEntries(0, last, cb); });
    auto r = res3.first;
    auto entries = std::move(res3.second);
    if (r != BkResult::kOk) return fail("read entries", r);
    for (const auto& e : entries) {
      if (e.payload != data) {
        std::cerr << "bookkeeper: Read data doesn't match the data written.\n";
        return 1;
      }
    }
    return 0;
  };
  if (int c = check(h)) return c;
  BkResult crc = awaitDone([&](auto cb) { h->loop().execute([h, cb] { h->close(cb); }); });
  if (crc != BkResult::kOk) return fail("close ledger", crc);
  auto res4 = await<std::shared_ptr<LedgerHandle>>([&](auto cb) { bk->openLedger(id, cb); });
  auto orc = res4.first;
  auto reader = std::move(res4.second);
  if (orc != BkResult::kOk) return fail("open ledger", orc);
  if (int c = check(reader)) return c;
  std::cout << o.numEntries << " entries read back from ledger " << id << std::endl;
  if (!o.keep) {
    BkResult drc = awaitDone([&](auto cb) { bk->deleteLedger(id, cb); });
    if (drc != BkResult::kOk) return fail("delete ledger", drc);
  }
  bk->close();
  return 0;
}

// ReadLedgerCommand: "--------- Lid=L, Eid=E, EntrySize=S ---------" per entry (S is the
// entry's length field, the ledger's length up to it, as LedgerEntry.getLength()), then with
// -msg the payload as text (StringEntryFormatter).
int readLedger(const BkOptions& o) {
  auto bk = connect(o);
  if (!bk) return 1;
  auto res5 = await<std::shared_ptr<LedgerHandle>>(
      [&](auto cb) { bk->openLedger(o.ledgerId, cb, o.forceRecovery); });
  auto rc = res5.first;
  auto h = std::move(res5.second);
  if (rc != BkResult::kOk) return fail("open ledger " + std::to_string(o.ledgerId), rc);
  int64_t lac = h->lastAddConfirmed();
  int64_t last = o.lastEntryId < 0 || o.lastEntryId > lac ? lac : o.lastEntryId;
  if (last >= o.firstEntryId) {
    auto res6 = onLoop<std::vector<bookkeeper::LedgerEntry>>(
        h, [h, first = o.firstEntryId, last](auto cb) { h->readEntries(first, last, cb); });
    auto r = res6.first;
    auto entries = std::move(res6.second);
    if (r != BkResult::kOk) return fail("read ledger " + std::to_string(o.ledgerId), r);
    for (const auto& e : entries) {
      std::cout << "--------- Lid=" << o.ledgerId << ", Eid=" << e.entryId
                << ", EntrySize=" << e.length << " ---------\n";
      if (o.msg) std::cout << e.payload << "\n";
    }
  }
  std::cout.flush();
  bk->close();
  return 0;
}

// LedgerMetaDataCommand: "ledgerID: N" and LedgerMetadata.toString(); with -dumptofile the
// znode's bytes are written to the file instead.
int ledgerMetadata(const BkOptions& o) {
  auto bk = connect(o);
  if (!bk) return 1;
  auto res7 = await<bookkeeper::VersionedMetadata>(
      [&](auto cb) { bk->readLedgerMetadata(o.ledgerId, cb); });
  auto rc = res7.first;
  auto vm = std::move(res7.second);
  if (rc != BkResult::kOk) return fail("ledger " + std::to_string(o.ledgerId), rc);
  if (!o.dumpToFile.empty()) {
    std::ofstream f(o.dumpToFile, std::ios::binary | std::ios::trunc);
    f << bookkeeper::serializeLedgerMetadata(vm.metadata);
    if (!f) {
      std::cerr << "bookkeeper: cannot write " << o.dumpToFile << "\n";
      return 1;
    }
  } else {
    std::cout << "ledgerID: " << o.ledgerId << "\n"
              << bookkeeper::ledgerMetadataToString(vm.metadata) << std::endl;
  }
  bk->close();
  return 0;
}

// One bench run's state, on the ledger's loop until `done`.
struct BenchRun {
  std::vector<int64_t> latUs;
  std::vector<std::chrono::steady_clock::time_point> started;
  int64_t next = 0;
  int64_t acked = -1;
  BkResult error = BkResult::kOk;
  int64_t errorEntry = -1;
  std::promise<void> done;
};

// Adds o.numEntries entries with at most o.outstanding in flight, from the ledger's loop, and
// returns when `run` is done (at the last ack or the first error). REQUIRES: run->started sized.
void runAdds(const BkOptions& o, const std::shared_ptr<LedgerHandle>& h,
             const std::shared_ptr<BenchRun>& run) {
  if (o.numEntries == 0) return run->done.set_value();
  auto entry = [size = o.entrySize](int64_t i) {
    std::string s = "entry-" + std::to_string(i) + "-";
    s.resize(static_cast<size_t>(size), 'x');
    return Buffer::copyOf(s);
  };
  std::function<void()> pump;
  pump = [&, run, h]() {
    while (run->error == BkResult::kOk && run->next < o.numEntries &&
           run->next - run->acked - 1 < o.outstanding) {
      int64_t i = run->next++;
      run->started[static_cast<size_t>(i)] = std::chrono::steady_clock::now();
      h->addEntry(entry(i), [&, run, i](BkResult r, int64_t) {
        if (r != BkResult::kOk) {
          if (run->error == BkResult::kOk) {
            run->error = r;
            run->errorEntry = i;
            run->done.set_value();
          }
          return;
        }
        run->acked = i;
        run->latUs.push_back(
            std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - run->started[static_cast<size_t>(i)])
                .count());
        if (o.progressEvery > 0 && (i + 1) % o.progressEvery == 0) {
          std::cout << "acked " << i << std::endl;
        }
        if (i == o.numEntries - 1) return run->done.set_value();
        pump();
      });
    }
  };
  h->loop().execute(pump);
  run->done.get_future().wait();  // `pump` and `o` live until here
}

// adds/s and latency percentiles, then the bookie request counters.
void printBench(const BkOptions& o, const BenchRun& run, double secs,
                const bookkeeper::BookieClientStats& st) {
  auto lat = run.latUs;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat.empty() ? 0 : lat[std::min(lat.size() - 1, static_cast<size_t>(p * lat.size()))];
  };
  std::cout << "entries " << o.numEntries << " size " << o.entrySize << " adds/s "
            << static_cast<int64_t>(o.numEntries / secs) << " p50_us " << pct(0.5) << " p99_us "
            << pct(0.99) << " max_us " << (lat.empty() ? 0 : lat.back()) << std::endl;
  // Bookie requests: frames written (retries included), requests that waited for room under
  // the per-bookie bounds, ETOOMANYREQUESTS replies (each retried), timeouts.
  std::cout << "bookie requests " << st.requestsSent << " waited " << st.waitedForRoom
            << " TooManyRequests " << st.tooManyRequests << " timeouts " << st.timeouts
            << std::endl;
}

// Writes numEntries entries of entrySize bytes ("entry-<i>-" then 'x's) with at most
// `outstanding` in flight; prints the ledger id, progress, then adds/s and latency percentiles
// and the bookie request counters; closes the ledger unless --no-close.
// On an add failure: "error at entry E: <Result>" and "last acked entry N", exit 1.
int benchAdds(const BkOptions& o) {
  if (int q = badQuorums(o)) return q;
  auto bk = connect(o);
  if (!bk) return 1;
  auto res8 = await<std::shared_ptr<LedgerHandle>>([&](auto cb) {
    bk->createLedger(o.ensemble, o.writeQuorum, o.ackQuorum, {{"application", "magnetar-bench"}},
                     cb);
  });
  auto rc = res8.first;
  auto h = std::move(res8.second);
  if (rc != BkResult::kOk) return fail("create ledger", rc);
  std::cout << "Ledger ID: " << h->id() << std::endl;
  auto run = std::make_shared<BenchRun>();
  run->started.resize(static_cast<size_t>(o.numEntries));
  auto t0 = std::chrono::steady_clock::now();
  runAdds(o, h, run);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (run->error != BkResult::kOk) {
    std::promise<int64_t> lac;
    h->loop().execute([h, &lac] { lac.set_value(h->lastAddConfirmed()); });
    std::cout << "error at entry " << run->errorEntry << ": "
              << bookkeeper::bkResultName(run->error) << "\nlast acked entry "
              << lac.get_future().get() << std::endl;
    return 1;
  }
  if (!o.noClose) {
    BkResult crc = awaitDone([&](auto cb) { h->loop().execute([h, cb] { h->close(cb); }); });
    if (crc != BkResult::kOk) return fail("close ledger", crc);
  }
  std::promise<bookkeeper::BookieClientStats> stats;
  h->loop().execute([&] { stats.set_value(bk->bookiesOn(h->loop()).stats()); });
  printBench(o, *run, secs, stats.get_future().get());
  bk->close();
  return 0;
}

// BOOKIE_ID[,BOOKIE_ID...] of -bookieSrc into `out`; false (said on stderr) for a bad id.
bool parseBookieSrc(const BkOptions& o, std::set<bookkeeper::BookieId>* out) {
  if (o.bookieSrc.size() > 1) {
    std::cerr << "The provided bookie dest " << o.bookieSrc[1] << " will be ignored!\n";
  }
  const std::string& arg = o.bookieSrc.at(0);
  for (size_t start = 0;;) {
    size_t comma = arg.find(',', start);
    std::string b =
        arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto colon = b.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == b.size() ||
        b.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      std::cerr << "bookkeeper: BookieSrcs has invalid bookie id format: " << b << "\n";
      return false;
    }
    out->insert(b);
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

// The shell's question on stdin (IOUtils.confirmPrompt: y/yes or n/no, any case; anything else
// asks again; EOF: no). Prints "Give up!" on no.
bool confirmRecovery(const std::set<bookkeeper::BookieId>& bookies) {
  std::string list;
  for (const auto& b : bookies) list += (list.empty() ? "" : ", ") + b;
  std::cout << "Bookies : [" << list << "]\n";
  bool yes = false;
  for (;;) {
    std::cout << "Are you sure to recover them : (Y/N) (Y or N) " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer)) break;
    for (auto& c : answer) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (answer == "y" || answer == "yes") yes = true;
    if (yes || answer == "n" || answer == "no") break;
    std::cout << "Invalid input: " << answer << "\n";
  }
  if (!yes) std::cout << "Give up!" << std::endl;
  return yes;
}

// -query: the ledgers holding the bookies, each ensemble with them marked '*'.
int queryRecovery(bookkeeper::BookieRecovery& recovery,
                  const std::set<bookkeeper::BookieId>& bookies) {
  std::map<int64_t, bookkeeper::LedgerMetadata> ledgers;
  BkResult r = recovery.ledgersContaining(bookies, &ledgers);
  if (r != BkResult::kOk) return fail("list ledgers", r);
  std::cout << "NOTE: Bookies in inspection list are marked with '*'.\n";
  for (const auto& [id, md] : ledgers) {
    std::cout << "ledger " << id << " : " << bookkeeper::ledgerStateName(md.state) << "\n";
    std::vector<std::pair<int64_t, int>> summary;
    for (const auto& [first, ensemble] : md.ensembles) {
      std::cout << first << ":\t" << bookkeeper::formatEnsemble(ensemble, bookies) << "\n";
      int n = 0;
      for (const auto& b : ensemble) n += bookies.count(b) > 0 ? 1 : 0;
      summary.emplace_back(first, n);
    }
    std::cout << "summary: [";
    for (const auto& [first, n] : summary) std::cout << first << "=" << n << ", ";
    std::cout << "]\n\n";
  }
  std::cout << "Done" << std::endl;
  return 0;
}

// BookKeeperAdmin.recoverBookieData (of -ledger only, when given), or its plan with -dryrun.
int runRecovery(bookkeeper::BookieRecovery& recovery, const std::set<bookkeeper::BookieId>& bookies,
                const BkOptions& o) {
  bookkeeper::RecoverOptions ro;
  ro.dryRun = o.dryRun;
  ro.skipOpenLedgers = o.skipOpenLedgers;
  ro.skipUnrecoverableLedgers = o.skipUnrecoverableLedgers;
  BkResult r = o.ledgerId >= 0 ? recovery.recoverLedger(o.ledgerId, bookies, ro)
                               : recovery.recoverBookies(bookies, ro);
  if (o.ledgerId >= 0) {
    std::cout << "Recover bookie for " << o.ledgerId
              << " completed with rc : " << bookkeeper::bkResultName(r) << "\n";
  } else {
    std::cout << "Recover bookie operation completed with rc: " << bookkeeper::bkResultName(r)
              << "\n";
  }
  if (!o.dryRun) {
    std::cout << "ledgers recovered " << recovery.ledgersRecovered() << ", fragments replaced "
              << recovery.fragmentsReplaced() << ", entries copied " << recovery.entriesCopied()
              << "\n";
  }
  std::cout.flush();
  return r == BkResult::kOk ? 0 : 1;
}

// BookieShell "recover" (RecoverCommand): BOOKIE_ID[,BOOKIE_ID...]; without -force the shell asks
// "Are you sure to recover them : (Y/N)" on stdin. -query lists the ledgers holding the bookies
// (marked '*'); -dryrun prints the plan; otherwise BookKeeperAdmin.recoverBookieData (of -ledger
// only, when given). Prints the lines the shell logs; exit 1 when the recovery failed.
int recover(const BkOptions& o) {
  std::set<bookkeeper::BookieId> bookies;
  if (!parseBookieSrc(o, &bookies)) return 1;
  if (o.deleteCookie || o.replicationRate > 0) {
    std::cerr << "bookkeeper: -deleteCookie and -replicationRate are not supported by Magnetar\n";
    return 1;
  }
  if (!o.force && !confirmRecovery(bookies)) return 1;
  auto bk = connect(o);
  if (!bk) return 1;
  bookkeeper::BookieRecovery recovery(
      *bk, [](const std::string& line) { std::cout << line << std::endl; });
  int rc = o.query ? queryRecovery(recovery, bookies) : runRecovery(recovery, bookies, o);
  bk->close();
  return rc;
}

}  // namespace

void rewriteBookKeeperShellFlags(std::vector<std::string>& args) {
  bool inBk = false;
  for (auto& a : args) {
    if (a == "bookkeeper") inBk = true;
    if (inBk && a.size() > 2 && a[0] == '-' && a[1] != '-' && !std::isdigit(a[1])) {
      a.insert(0, "-");
    }
  }
}

std::function<int()> addBookKeeperCommand(CLI::App& app) {
  auto o = std::make_shared<BkOptions>();
  auto* bk =
      app.add_subcommand("bookkeeper", "BookKeeper shell commands on Magnetar's BookKeeper client");
  bk->require_subcommand(1);
  bk->add_option("--metadata-service-uri", o->uri,
                 "BookKeeper metadataServiceUri, e.g. zk://127.0.0.1:2181/ledgers")
      ->required();
  bk->add_option("--num-io-threads", o->ioThreads, "bookkeeper-io threads")
      ->check(CLI::Range(1, 64));
  bk->add_option("--timeout-seconds", o->timeoutSec,
                 "per-request timeout, also for connecting to ZooKeeper (default 30)")
      ->check(CLI::Range(1, 3600));
  bk->add_option("--max-requests-per-bookie", o->maxRequestsPerBookie,
                 "requests in flight per bookie at most; more wait (default 5000, below a "
                 "bookie's maxPendingAddRequestsPerThread of 10000)")
      ->check(CLI::Range(1, 1000000));

  auto* simple = bk->add_subcommand(
      "simpletest", "Create a ledger, write entries to it, read them back, delete it");
  auto quorumFlags = [&](CLI::App* c) {
    c->add_option("-e,--ensemble", o->ensemble, "Ensemble size (default 3)");
    c->add_option("-w,--writeQuorum", o->writeQuorum, "Write quorum size (default 2)");
    c->add_option("-a,--ackQuorum", o->ackQuorum, "Ack quorum size (default 2)");
    c->add_option("-n,--numEntries", o->numEntries, "Entries to write (default 100)")
        ->check(CLI::Range(0, 100000000));
  };
  quorumFlags(simple);
  simple->add_flag("--keep", o->keep, "Keep the ledger (Magnetar's addition)");

  auto* read = bk->add_subcommand("readledger", "Read a range of entries from a ledger");
  addIdOption(read, "-l,--ledgerid", "-ledgerid", o->ledgerId, 0, "Ledger ID")->required();
  addIdOption(read, "--firstentryid,--fe", "-firstentryid", o->firstEntryId, 0, "First entry ID");
  addIdOption(read, "--lastentryid,--le", "-lastentryid", o->lastEntryId, -1,
              "Last entry ID (-1: the last one)");
  read->add_flag("-m,--msg", o->msg, "Print message body");
  read->add_flag("-r,--force-recovery", o->forceRecovery,
                 "Open the ledger with recovery first (fences its writer, closes it)");

  auto* bench = bk->add_subcommand(
      "bench", "Write entries to a new ledger and report adds/s and latency (Magnetar's)");
  quorumFlags(bench);
  bench->add_option("-s,--entrySize", o->entrySize, "Entry size in bytes (default 1024)")
      ->check(CLI::Range(16, static_cast<int>(bookkeeper::kMaxEntryPayload)));
  bench->add_option("--outstanding", o->outstanding, "Adds in flight at most (default 100)")
      ->check(CLI::Range(1, 100000));
  bench->add_option("--progress", o->progressEvery,
                    "Print \"acked N\" every N completions (0: never)");
  bench->add_flag("--no-close", o->noClose,
                  "Leave the ledger OPEN, as a writer that crashed (to measure recovery)");

  auto* meta = bk->add_subcommand("ledgermetadata", "Print the metadata of a ledger");
  addIdOption(meta, "-l,--ledgerid", "-ledgerid", o->ledgerId, 0, "Ledger ID")->required();
  meta->add_option("--dumptofile", o->dumpToFile, "Dump the metadata bytes to a file");

  auto* rec = bk->add_subcommand("recover", "Recover the ledger data for failed bookie");
  rec->add_option("bookieSrc", o->bookieSrc, "Bookie id(s) to recover, host:port[,host:port]")
      ->required();
  rec->add_flag("-q,--query", o->query, "Query the ledgers that contain given bookies");
  rec->add_flag("--dr,--dryrun", o->dryRun, "Printing the recovery plan w/o doing actual recovery");
  rec->add_flag("-f,--force", o->force, "Force recovery without confirmation");
  addIdOption(rec, "-l,--ledger", "-ledger", o->ledgerId, 0, "Recover a specific ledger");
  rec->add_flag("--sk,--skipOpenLedgers", o->skipOpenLedgers, "Skip recovering open ledgers");
  rec->add_flag("-d,--deleteCookie", o->deleteCookie,
                "Delete cookie node for the bookie (not supported)");
  rec->add_flag("--sku,--skipUnrecoverableLedgers", o->skipUnrecoverableLedgers,
                "Skip unrecoverable ledgers.");
  rec->add_option("--rate,--replicationRate", o->replicationRate,
                  "Replication rate by bytes (not supported)");

  return [=]() -> int {
    if (!bk->parsed()) return -1;
    if (simple->parsed()) return simpleTest(*o);
    if (read->parsed()) return readLedger(*o);
    if (meta->parsed()) return ledgerMetadata(*o);
    if (bench->parsed()) return benchAdds(*o);
    if (rec->parsed()) return recover(*o);
    return 1;
  };
}

}  // namespace magnetar::app
