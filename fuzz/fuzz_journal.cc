// fuzz_journal: recovery of the durable storage (src/storage: journal segments, index runs,
// ledger lists, cursors, checkpoint) from arbitrary bytes on disk. The input is a disk image
// (fuzz_util.h: metadata-store records + journal segment files). Recovery must fail with a Status
// or succeed; after success every recovered ledger must be self-consistent (its entries read back
// in order and as many as it claims, cursor backlogs within the ledger), must accept a new entry
// and read it back, and a second recovery of what the first left behind must succeed.
#include <sys/stat.h>

#include "fuzz_util.h"
#include "manual_executor.h"
#include "storage/durable_storage.h"
#include "storage/journal_format.h"
#include "storage/metadata_store.h"

using namespace magnetar;
using namespace magnetar::storage;

namespace {

using fuzz::ManualExecutor;

StorageOptions optionsFor(const std::string& dir, MetadataStore* meta) {
  StorageOptions o;
  o.journalDirectory = dir + "/journal";
  o.metadataStore = meta;
  o.journalMaxGroupWaitMSec = 0;
  o.checkpointIntervalMs = 60000;
  o.tickIntervalMs = 60000;
  o.numReadThreads = 1;
  o.managedLedgerCacheSizeMB = 1;  // small: reads of recovered data go to disk
  o.readBatchBytes = 64 << 10;
  return o;
}

// Reads every entry of ml from its first position; checks order and count. Returns the count, or
// -1 when a read failed (allowed only as kCorruption/kIoError: an index that points at damaged
// journal bytes is refused, not returned).
int64_t readAll(ManagedLedger& ml, ManualExecutor& ex) {
  Position from = ml.firstPosition();
  Position last = ml.lastConfirmedEntry();
  int64_t n = 0;
  Position prev{-1, -1};
  for (int rounds = 0; rounds < 10000; rounds++) {
    bool done = false;
    Status st;
    std::vector<Entry> got;
    ml.asyncReadEntries(from, 64, 1 << 20, [&](Status s, std::vector<Entry> e) {
      st = s;
      got = std::move(e);
      done = true;
    });
    ex.runUntil([&] { return done; }, "asyncReadEntries");
    if (!st) {
      fuzz::check(st.code() == StatusCode::kCorruption || st.code() == StatusCode::kIoError,
                  "read failed with " + st.toString());
      return -1;
    }
    if (got.empty()) return n;
    for (const Entry& e : got) {
      auto at = [](Position p) {
        return std::to_string(p.ledgerId) + ":" + std::to_string(p.entryId);
      };
      fuzz::check(e.position > prev, "entries out of order: " + at(e.position) + " after " +
                                         at(prev) + " (read from " + at(from) + ")");
      fuzz::check(e.position <= last, "entry " + at(e.position) + " past lastConfirmedEntry " +
                                          at(last));
      prev = e.position;
      n++;
    }
    from = ml.nextValidPosition(prev);
  }
  fuzz::fail("reading the ledger does not end");
}

void checkLedger(DurableManagedLedgerFactory& f, const std::string& name, ManualExecutor& ex) {
  bool opened = false;
  Result<std::shared_ptr<ManagedLedger>> r = Status::internal("unset");
  f.asyncOpen(name, &ex, [&](Result<std::shared_ptr<ManagedLedger>> x) {
    r = std::move(x);
    opened = true;
  });
  ex.runUntil([&] { return opened; }, "asyncOpen");
  if (!r.isOk()) return;  // refusing a damaged ledger is fine
  ManagedLedger& ml = **r;
  int64_t claimed = ml.numberOfEntries();
  fuzz::check(claimed >= 0, "negative entry count");
  int64_t read = readAll(ml, ex);
  if (read >= 0) {
    fuzz::check(read == claimed, name + ": ledger claims " + std::to_string(claimed) +
                                     " entries, reads " + std::to_string(read));
  }
  for (ManagedCursor* c : ml.cursors()) {
    int64_t backlog = c->numberOfEntriesInBacklog();
    fuzz::check(backlog >= 0 && backlog <= claimed,
                "cursor " + c->name() + " backlog " + std::to_string(backlog) + " of " +
                    std::to_string(claimed));
  }
  // The recovered ledger takes a new entry and returns it.
  bool added = false;
  Status addStatus;
  Position pos;
  ml.asyncAddEntry(Buffer::copyOf("fuzz-entry", 10), [&](Status s, Position p) {
    addStatus = s;
    pos = p;
    added = true;
  });
  ex.runUntil([&] { return added; }, "asyncAddEntry");
  fuzz::check(addStatus.isOk(), "append after recovery failed: " + addStatus.toString());
  bool readDone = false;
  std::vector<Entry> back;
  ml.asyncReadEntries(pos, 1, 1 << 20, [&](Status s, std::vector<Entry> e) {
    fuzz::check(s.isOk(), "reading the new entry failed: " + s.toString());
    back = std::move(e);
    readDone = true;
  });
  ex.runUntil([&] { return readDone; }, "read new entry");
  fuzz::check(back.size() == 1 && back[0].position == pos && back[0].data.view() == "fuzz-entry",
              "the new entry does not read back");
  bool closed = false;
  ml.asyncClose([&](Status) { closed = true; });
  ex.runUntil([&] { return closed; }, "asyncClose");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::quietLogs();
  fuzz::TempDir dir;
  MemoryMetadataStore meta;
  std::string journalDir = dir.path() + "/journal";
  if (mkdir(journalDir.c_str(), 0755) != 0) fuzz::fail("mkdir");
  int segments = 0;
  for (const auto& item : fuzz::decodeDiskImage(data, size)) {
    if (item.kind == fuzz::kItemMetadata) {
      (void)meta.put(item.name, item.value);
    } else if (item.kind == fuzz::kItemSegment && segments < 8) {
      uint64_t seg = 0;
      for (size_t i = 0; i < item.name.size() && i < 8; i++) {
        seg |= uint64_t{static_cast<uint8_t>(item.name[i])} << (8 * i);
      }
      fuzz::writeFile(journalDir + "/" + segmentFileName(seg % 1000), item.value);
      segments++;
    }
  }

  ManualExecutor ex;
  for (int round = 0; round < 2; round++) {
    auto f = DurableManagedLedgerFactory::open(optionsFor(dir.path(), &meta));
    if (!f.isOk()) {
      // Only the first recovery may refuse: the second one reads what the first one left.
      fuzz::check(round == 0, "second recovery failed: " + f.status().toString());
      return 0;
    }
    auto names = (*f)->ledgerNames();
    for (size_t i = 0; i < names.size() && i < 4; i++) checkLedger(**f, names[i], ex);
    (*f)->shutdown();
  }
  return 0;
}
