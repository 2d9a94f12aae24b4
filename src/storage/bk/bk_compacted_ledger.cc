// Compacted ledgers on BookKeeper as Pulsar writes them (TwoPhaseCompactor): a plain ledger, not a
// managed ledger, with the compacted-ledger custom metadata and one RawMessageImpl.serialize()
// per entry (docs/managed-ledger-bookkeeper-format.md, "Compacted ledgers").
#include <algorithm>

#include "base/logging.h"
#include "storage/bk/bk_managed_ledger.h"
#include "storage/bk/bk_storage.h"
#include "storage/bk/gate.h"
#include "storage/bk/ml_formats.h"
#include "storage/compacted_ledger.h"

namespace magnetar::storage::bk {

namespace {

// Thread: the executor it was made for (gated: nothing runs after the factory's shutdown). The
// handle is used on its bookkeeper-io loop only.
class BkCompactedLedger : public CompactedLedger,
                          public std::enable_shared_from_this<BkCompactedLedger> {
 public:
  BkCompactedLedger(bookkeeper::BookKeeperClient* bk, std::shared_ptr<Gate> gate,
                    net::Executor* executor, HandlePtr h, int64_t entries, int64_t size,
                    bool writer)
      : bk_(bk),
        gate_(std::move(gate)),
        exec_(gate_->wrap(executor)),
        h_(std::move(h)),
        id_(h_->id()),
        entries_(entries),
        size_(size),
        writer_(writer) {}

  int64_t ledgerId() const override { return id_; }
  int64_t numberOfEntries() const override { return entries_; }
  int64_t sizeBytes() const override { return size_; }

  void asyncAdd(Position original, Buffer entry, StatusCallback cb) override {
    if (!writer_) {
      exec_->execute([cb = std::move(cb)] { cb(Status::closed("compacted ledger is closed")); });
      return;
    }
    Buffer raw = encodeRawMessage(original, entry.view());
    entries_++;
    size_ += static_cast<int64_t>(raw.size());
    HandlePtr h = h_;
    auto* exec = exec_;
    int64_t id = id_;
    h->loop().execute([h, raw = std::move(raw), exec, id, cb = std::move(cb)]() mutable {
      h->addEntry(std::move(raw), [exec, id, cb = std::move(cb)](BkResult rc, int64_t) {
        exec->execute([rc, id, cb] {
          cb(rc == BkResult::kOk
                 ? Status::ok()
                 : bkStatus(rc, "adding to compacted ledger " + std::to_string(id)));
        });
      });
    });
  }

  void asyncRead(int64_t first, int maxEntries, size_t maxBytes,
                 ReadEntriesCallback cb) const override {
    if (first >= entries_ || maxEntries <= 0) {
      exec_->execute([cb = std::move(cb)] { cb(Status::ok(), {}); });
      return;
    }
    // Sized by the mean entry size: at least one entry, at most maxEntries.
    int64_t mean = std::max<int64_t>(1, size_ / std::max<int64_t>(1, entries_));
    int64_t n = std::clamp<int64_t>(static_cast<int64_t>(maxBytes) / mean, 1, maxEntries);
    int64_t last = std::min(entries_ - 1, first + n - 1);
    HandlePtr h = h_;
    auto* exec = exec_;
    int64_t id = id_;
    h->loop().execute([h, first, last, exec, id, cb = std::move(cb)]() mutable {
      h->readEntries(
          first, last,
          [exec, id, cb = std::move(cb)](BkResult rc,
                                         const std::vector<bookkeeper::LedgerEntry>& es) {
            Status s = Status::ok();
            std::vector<Entry> out;
            if (rc != BkResult::kOk) {
              s = bkStatus(rc, "reading compacted ledger " + std::to_string(id));
            } else {
              out.reserve(es.size());
              for (auto& e : es) {
                auto m = parseRawMessage(e.payload);
                if (!m.isOk()) {
                  s = Status::corruption("compacted ledger " + std::to_string(id) + " entry " +
                                         std::to_string(e.entryId) + ": " + m.status().message());
                  out.clear();
                  break;
                }
                out.push_back(std::move(m.value()));
              }
            }
            exec->execute([s, out = std::move(out), cb]() mutable { cb(s, std::move(out)); });
          });
    });
  }

  void asyncClose(StatusCallback cb) override {
    if (!writer_) {
      exec_->execute([cb = std::move(cb)] { cb(Status::ok()); });
      return;
    }
    writer_ = false;
    auto self = shared_from_this();
    HandlePtr h = h_;
    h->loop().execute([self, h, cb = std::move(cb)]() mutable {
      h->close([self, cb = std::move(cb)](BkResult rc) {
        if (rc != BkResult::kOk) {
          return self->exec_->execute([self, rc, cb] {
            cb(bkStatus(rc, "closing compacted ledger " + std::to_string(self->id_)));
          });
        }
        // Read through a reader's handle from now on, as a broker that opens it later does.
        self->bk_->openLedger(self->id_, [self, cb](BkResult rc2, const HandlePtr& reader) {
          self->exec_->execute([self, rc2, reader, cb] {
            if (rc2 != BkResult::kOk) {
              return cb(bkStatus(rc2, "opening compacted ledger " + std::to_string(self->id_)));
            }
            self->h_ = reader;
            cb(Status::ok());
          });
        });
      });
    });
  }

  void asyncDelete(StatusCallback cb) override {
    auto* exec = exec_;
    int64_t id = id_;
    auto gate = gate_;
    bk_->deleteLedger(id, [exec, id, gate, cb = std::move(cb)](BkResult rc) {
      exec->execute([rc, id, cb] {
        if (rc != BkResult::kOk && rc != BkResult::kNoSuchLedger) {
          MLOG_WARN("deleting compacted ledger {}: {}", id, bookkeeper::bkResultName(rc));
          return cb(bkStatus(rc, "deleting compacted ledger " + std::to_string(id)));
        }
        cb(Status::ok());
      });
    });
  }

  void describe(CursorProperties* properties) const override {
    (*properties)[kCompactedTopicLedgerProperty] = id_;
    properties->erase(kCompactedLedgerSeqProperty);
  }

 private:
  bookkeeper::BookKeeperClient* bk_;
  std::shared_ptr<Gate> gate_;
  GatedExecutor* exec_;
  HandlePtr h_;
  int64_t id_;
  int64_t entries_;
  int64_t size_;
  bool writer_;
};

class BkCompactedLedgerStore : public CompactedLedgerStore {
 public:
  BkCompactedLedgerStore(const BkStorageOptions& options, bookkeeper::BookKeeperClient* bk,
                         std::shared_ptr<Gate> gate)
      : options_(options), bk_(bk), gate_(std::move(gate)) {}

  void asyncCreate(const std::string& topic, Position horizon, net::Executor* executor,
                   CompactedLedgerCallback cb) override {
    auto* bk = bk_;
    auto gate = gate_;
    auto* exec = gate_->wrap(executor);
    bk_->createLedger(
        options_.managedLedgerDefaultEnsembleSize, options_.managedLedgerDefaultWriteQuorum,
        options_.managedLedgerDefaultAckQuorum,
        compactedLedgerMetadata(pulsarTopicName(topic), horizon),
        [bk, gate, exec, executor, topic, cb = std::move(cb)](BkResult rc, const HandlePtr& h) {
          if (rc != BkResult::kOk) {
            return exec->execute(
                [rc, topic, cb] { cb(bkStatus(rc, topic + ": creating a compacted ledger")); });
          }
          std::shared_ptr<CompactedLedger> l =
              std::make_shared<BkCompactedLedger>(bk, gate, executor, h, 0, 0, true);
          exec->execute([l, cb] { cb(l); });
        });
  }

  void asyncOpen(const std::string& topic, const CursorProperties& properties,
                 net::Executor* executor, CompactedLedgerCallback cb) override {
    auto* exec = gate_->wrap(executor);
    auto it = properties.find(kCompactedTopicLedgerProperty);
    if (it == properties.end()) {
      exec->execute([cb = std::move(cb)] { cb(std::shared_ptr<CompactedLedger>()); });
      return;
    }
    if (properties.count(kCompactedLedgerSeqProperty) != 0) {
      // A view an earlier Magnetar kept in a managed ledger: not a compacted ledger Pulsar (or
      // this store) can read. The next compaction writes one.
      MLOG_WARN(
          "{}: compacted view in Magnetar's old managed-ledger format ignored; it is "
          "rewritten by the next compaction",
          topic);
      exec->execute([cb = std::move(cb)] { cb(std::shared_ptr<CompactedLedger>()); });
      return;
    }
    int64_t id = it->second;
    auto* bk = bk_;
    auto gate = gate_;
    // Closed by its writer (TwoPhaseCompactor closes it before the cursor names it): no recovery.
    bk_->openLedger(id, [bk, gate, exec, executor, id, topic, cb = std::move(cb)](
                            BkResult rc, const HandlePtr& h) {
      if (rc != BkResult::kOk) {
        return exec->execute([rc, id, topic, cb] {
          cb(bkStatus(rc, topic + ": opening compacted ledger " + std::to_string(id)));
        });
      }
      // On the ledger's loop: its metadata may be read here.
      int64_t entries = h->lastAddConfirmed() + 1;
      int64_t size = h->metadata().length;
      std::shared_ptr<CompactedLedger> l =
          std::make_shared<BkCompactedLedger>(bk, gate, executor, h, entries, size, false);
      exec->execute([l, cb] { cb(l); });
    });
  }

 private:
  BkStorageOptions options_;
  bookkeeper::BookKeeperClient* bk_;
  std::shared_ptr<Gate> gate_;
};

}  // namespace

std::shared_ptr<CompactedLedgerStore> BkManagedLedgerFactory::compactedLedgerStore() {
  MutexLock lock(mu_);
  if (!compacted_) compacted_ = std::make_shared<BkCompactedLedgerStore>(options_, bk_, gate_);
  return compacted_;
}

}  // namespace magnetar::storage::bk
